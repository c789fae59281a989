"""The sweep's skip check: what to do with one cell of the grid, from the result files and its
work directory (``lra.sweep`` plans every cell with ``decide`` before anything runs).

* ``skip``: a valid result file under ``<results-dir>/runs/`` holds the same resolved config, made
  on the data present now. The configs are compared (``canonical``), not the file names: a name
  says task, family, preset and seed but not the overrides.
* ``conflict``: a result of that config made on other data, or a checkpoint of another config in
  the work directory.
* ``resume``: the work directory holds a checkpoint of that config.
* ``run``: otherwise.

The result files are read by the one reader, ``lra.leaderboard.reader`` (imported where it is
used, as a command that hands over to the reporting package: lra/__init__.py).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from lra import data_fingerprint

if TYPE_CHECKING:
    from lra import config as config_lib


def canonical(config: dict[str, Any]) -> str:
    """A resolved config as the text the skip check compares (keys sorted)."""
    return json.dumps(config, sort_keys=True)


def finished_configs(results_dir: Path, stream: TextIO | None = None
                     ) -> dict[str, list[tuple[str, Any]]]:
    """{canonical resolved config: [(result file name, its data fingerprint or None)], oldest
    first} of the valid result files in ``<results_dir>/runs``, read by the one reader
    (``lra.leaderboard.reader``): a file the leaderboard skips (a NaN, an accuracy out of range, a
    failed status, not a JSON object) is no finished cell either, and its one line goes to
    ``stream`` (none where ``stream`` is None)."""
    from lra.leaderboard import reader

    result_set = reader.read(results_dir)
    if stream is not None:
        result_set.warn(stream)
    return {config: [(r["_file"], (r.get("data") or {}).get("fingerprint")) for r in runs]
            for config, runs in result_set.by_config().items()}


def data_now(config: config_lib.Config, data_dir: Path) -> dict[str, Any] | None:
    """The fingerprint of the data the cell would read now (None where it cannot be told without
    preparing the data)."""
    from lra import tasks

    try:
        task = tasks.build(config.task, data_dir, **config.data)
        return data_fingerprint.fingerprint(task.provenance(), data_dir)
    except Exception:  # a task whose data is not there yet: lra.run prepares and checks it
        return None


def decide(config: config_lib.Config, workdir: Path, finished: dict[str, list[tuple[str, Any]]],
           data_dir: Path | None = None) -> tuple[str, str, str]:
    """(action, detail, result file) for the cell whose resolved config is ``config`` and work dir
    ``workdir``; the result file (``skip`` only) is the newest valid one of that config and data.

    A result of the same config counts as done only if it was made on the data present now (its
    data fingerprint, where it has one): one made on other data is a ``conflict`` naming the
    difference (lra.run would refuse to resume on other data too)."""
    from lra import config as config_lib
    from lra.checkpoint import peek_last

    current = json.loads(json.dumps(config.to_dict()))  # as a result file holds it (lists, not tuples)
    if canonical(current) in finished:
        found = finished[canonical(current)]
        now = data_now(config, data_dir) if data_dir is not None and any(f for _, f in found) \
            else None
        differs = []
        for name, saved in reversed(found):  # the newest first
            why = (data_fingerprint.difference(saved, now, absent_ok_if_generated=True)
                   if now is not None else None)
            if why is None:
                return "skip", f"result {name}", name
            differs.append(f"result {name} was made on other data ({why})")
        return "conflict", (f"{differs[0]}; not counted as done: move that result file away or "
                            f"point --data-dir at its data"), ""
    saved = peek_last(workdir)
    if saved is None:
        return "run", "", ""
    step, saved_config = saved
    if saved_config is None:  # lra.run checks it when it starts
        return "resume", f"from step {step} (config not readable here)", ""
    differ = list(config_lib.config_diff(config_lib.with_protocol(saved_config), current))
    if differ:
        return "conflict", (f"{workdir} holds a checkpoint of another config ({', '.join(differ)}); "
                            f"use another --workdirs or delete its checkpoints/"), ""
    return "resume", f"from step {step} of {config.train.num_steps}", ""

