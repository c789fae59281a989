"""Every resolved config, pinned: what ``lra.config.load`` gives for each (task, family, preset,
protocol) is compared with ``tests/core/data/resolved_configs.json``.

A refactor of how configs are layered (configs/<task>.py, lra/config.py) must not move a single value
by accident. A change made on purpose is recorded by regenerating the file
(``LRA_UPDATE_RESOLVED=1 python -m pytest tests/core/test_resolved_configs.py``) and reviewing its diff,
which names each cell and key that moved.

The file stores, per (task, preset, protocol), softmax's whole flattened config and, for every other
family of this tree (``attention.builtin()``: an installed plugin is its distribution's to pin, never
this fixture's), only the keys where it differs from softmax's (``null`` where softmax has the key
and the family has none), so the fixture stays small and its diffs stay readable.
"""

from __future__ import annotations

import importlib
import json
import os
from pathlib import Path

import pytest
from helpers import README_FAMILY, installed_readme_family

from lra import attention, tasks
from lra import config as C

FIXTURE = Path(__file__).parent / "data" / "resolved_configs.json"
ANCHOR = "softmax"


REFUSED = "<refused>"  # a cell lra.config refuses (mqar's causal form for a family without a
# causal mode, a protocol a task does not define) pins its one-line error under this key


def _resolve(task: str, family: str, preset: str, protocol: str) -> dict:
    try:
        cfg = C.flatten(C.load(task, family, preset=preset, protocol=protocol).to_dict())
    except C.ConfigError as err:
        return {REFUSED: str(err)}
    cfg.pop("attention")
    return cfg


def resolved_table(task_names=None, presets=C.PRESETS, protocols=C.PROTOCOLS) -> dict[str, dict]:
    table: dict[str, dict] = {}
    for task in task_names or tasks.available():
        for preset in presets:
            for protocol in protocols:
                anchor = _resolve(task, ANCHOR, preset, protocol)
                table[f"{task}/{preset}/{protocol}"] = anchor
                for family in attention.builtin():
                    if family == ANCHOR or REFUSED in anchor:
                        continue
                    cfg = _resolve(task, family, preset, protocol)
                    if REFUSED in cfg:
                        table[f"{task}/{preset}/{protocol}/{family}"] = cfg
                        continue
                    delta = {k: v for k, v in cfg.items() if anchor.get(k, object()) != v}
                    delta.update({k: None for k in anchor if k not in cfg})
                    table[f"{task}/{preset}/{protocol}/{family}"] = delta
    return table


@pytest.mark.slow
def test_resolved_configs_are_pinned():
    table = resolved_table()
    if os.environ.get("LRA_UPDATE_RESOLVED"):
        FIXTURE.write_text(json.dumps(table, indent=1, sort_keys=True) + "\n")
    pinned = json.loads(FIXTURE.read_text())
    moved = []
    for cell in sorted(set(table) | set(pinned)):
        now, then = table.get(cell), pinned.get(cell)
        if now == then:
            continue
        if now is None or then is None:
            moved.append(f"{cell}: {'added' if then is None else 'removed'}")
            continue
        for key in sorted(set(now) | set(then)):
            if now.get(key, "<absent>") != then.get(key, "<absent>"):
                moved.append(f"{cell} {key}: {then.get(key, '<absent>')!r} -> {now.get(key, '<absent>')!r}")
    assert not moved, ("resolved configs moved (regenerate the fixture if on purpose):\n"
                       + "\n".join(moved[:40]))


def test_an_installed_plugin_is_never_pinned(tmp_path):
    """Installing a family from another distribution leaves the fixture green, and regenerating
    the fixture does not pin it (issue 53: it reported 36 cells "added")."""
    with installed_readme_family(tmp_path / "site"):
        assert README_FAMILY in attention.available()
        table = resolved_table(["listops"], ["tiny"], ["lra"])
    assert "listops/tiny/lra/local" in table
    assert not [cell for cell in table if README_FAMILY in cell]


@pytest.mark.slow
def test_the_preset_is_applied_after_the_family():
    """Under the LRA protocol every key a preset sets is what the run gets, whatever the family's
    delta says (lra.config: defaults < BASE < ATTENTION < PRESETS < --set)."""
    for task in tasks.available():
        module = importlib.import_module(f"lra.configs.{task}")
        for preset in ("tiny", "small"):
            for family in attention.available():
                cfg = _resolve(task, family, preset, "lra")
                if REFUSED in cfg:
                    continue
                wrong = {k: (cfg[k], v) for k, v in module.PRESETS[preset].items() if cfg[k] != v}
                assert not wrong, f"{task}/{family}/{preset}: family delta beat the preset: {wrong}"
