"""Which cell a run belongs to: its resolved config against the preset's, computed without JAX.

A cell holds only runs whose resolved config is the preset's resolved config (seed and the keys
that change no number aside, ``NON_SEMANTIC``). ``preset_config`` resolves the preset the way
``lra.config.load`` does (dataclass defaults < ``configs/<task>.py`` layers, in the protocol's order),
from the config files alone, through ``lra.config.layers`` (the same layer order ``load`` applies):
``load`` itself imports every attention family (and so JAX) to check ``attn.*`` keys, which the
leaderboard must not. The one rule that needs a family's options (CLS
pooling sets ``attn.global_tokens = 1`` where the family has that option and no layer set it) is
checked from the record: there, 1 or absent is the preset's value. ``tests/leaderboard/test_inputs.py``
checks this resolution against ``lra.config.load`` for every task, family, preset and protocol.

A run whose config differs (a ``--set`` override, or a preset changed since the run) goes to its
own row, labelled with the keys that differ: ``softmax [train.num_steps=2]``.

The data is part of a run's identity too (``mark_other_data``): per task and data options, the
column's data is the fingerprint (``data.fingerprint.sha256``) most of the preset's own runs read
(all runs only where the column has no preset run: ``column_data``); a run on other data
goes to its own row, ``softmax [data 1a2b3c4d]`` (the first 8 hex digits of its fingerprint), and
is never averaged with the runs of the column's data. Runs of format 1 record no fingerprint and
stay where their config puts them.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
from collections import Counter, defaultdict
from typing import Any

from lra import config as lra_config

# Keys that change how a run logs and saves, never a number it reports.
NON_SEMANTIC = ("seed", "train.log_every", "train.checkpoint_every", "train.chance_patience")


def _layers(task: str, attention: str, preset: str, protocol: str) -> list[dict[str, Any]] | None:
    """``lra.config.layers`` of the run; None where ``configs/<task>.py`` (or its MODERN) is missing."""
    try:
        module = importlib.import_module(f"lra.configs.{task}")
        return lra_config.layers(module, attention, preset, protocol)
    except (ImportError, lra_config.ConfigError):
        return None


def preset_config(task: str, attention: str, preset: str, protocol: str) -> dict[str, Any] | None:
    """The flat ({dotted key: value}) resolved config of a preset run, without ``attn.global_tokens``'s
    CLS rule (``differences`` handles it); None if the task's config file is missing."""
    if preset not in lra_config.PRESETS or protocol not in lra_config.PROTOCOLS:
        return None
    layers = _layers(task, attention, preset, protocol)
    if layers is None:
        return None
    flat = {"task": task, "attention": attention, "preset": preset, "protocol": protocol,
            **{f"model.{k}": v for k, v in dataclasses.asdict(lra_config.ModelConfig()).items()},
            **{f"train.{k}": v for k, v in dataclasses.asdict(lra_config.TrainConfig()).items()}}
    for layer in layers:
        flat.update(layer)
    return flat


def same(a: Any, b: Any) -> bool:
    # JSON has no tuples; an int default and a float value (1 vs 1.0) are the same number.
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    return a == b


def differences(record: dict[str, Any]) -> dict[str, Any] | None:
    """{dotted key: the run's value} where the run's resolved config is not its preset's (a key the run
    lacks maps to ``None``); ``{}`` for a preset run; None if the preset cannot be resolved here."""
    cfg = lra_config.with_protocol(record["config"])
    expected = preset_config(cfg["task"], cfg["attention"], cfg["preset"], cfg["protocol"])
    if expected is None:
        return None
    got = lra_config.flatten(cfg)
    cls_rule = (expected.get("model.pooling") == "cls" and "attn.global_tokens" not in expected)
    out = {}
    for key in sorted(set(expected) | set(got)):
        if key in NON_SEMANTIC:
            continue
        if key == "attn.global_tokens" and cls_rule and got.get(key, 1) == 1:
            continue
        if key not in got:
            # A field added to the dataclasses after the run: the run had its default behaviour
            # (a new field's default keeps the old behaviour), unless the preset sets it.
            default = _dataclass_default(key)
            if default is not _MISSING and same(default, expected[key]):
                continue
            out[key] = None
        elif key not in expected or not same(got[key], expected[key]):
            out[key] = got[key]
    return out


_MISSING = object()


def _dataclass_default(key: str) -> Any:
    section, _, name = key.partition(".")
    cls = {"model": lra_config.ModelConfig, "train": lra_config.TrainConfig}.get(section)
    if cls is None:
        return _MISSING
    fields = {f.name: f for f in dataclasses.fields(cls)}
    return fields[name].default if name in fields else _MISSING


DATA = "data"  # the ``_diff`` key of a run on other data than its column's (``mark_other_data``)


def variant_label(diff: dict[str, Any]) -> str:
    """``[key=value, ..., data 1a2b3c4d]`` of a run's differences from its preset and its column's
    data ('' for a preset run on the column's data)."""
    if not diff:
        return ""
    keys = [f"{k}={'(absent)' if v is None else v}" for k, v in sorted(diff.items()) if k != DATA]
    return "[" + ", ".join(keys + ([f"data {diff[DATA]}"] if DATA in diff else [])) + "]"


def data_sha256(record: dict[str, Any]) -> str | None:
    """The run's data fingerprint (None for a file of format 1, written before fingerprints)."""
    fp = (record.get("data") or {}).get("fingerprint")
    return fp.get("sha256") if isinstance(fp, dict) else None


def column_data(runs: list[dict[str, Any]]) -> dict[tuple[str, str], str]:
    """{(task, its data options as JSON): the column's data}: the fingerprint most of the preset's
    own runs (``_diff == {}``) read; on a tie, the one of the newest such run (by date, then file
    name): data re-made for every seed replaces the old data. Runs with overrides (a grid, ``--set``)
    never choose it where the column has a preset run with a fingerprint: however many grid points
    ran on other data, they are the variants, not the preset's runs. Only in a column without one
    do all its runs choose, by the same rule."""
    preset_keys = {_data_key(r) for r in runs if r.get("_diff") == {} and data_sha256(r)}
    counts: dict[tuple[str, str], Counter] = defaultdict(Counter)
    newest: dict[tuple[str, str, str], tuple[str, str]] = {}
    for r in runs:
        sha, key = data_sha256(r), _data_key(r)
        if sha is None or (key in preset_keys and r.get("_diff") != {}):
            continue
        counts[key][sha] += 1
        newest[(*key, sha)] = max(newest.get((*key, sha), ("", "")),
                                  (r.get("date", ""), r.get("_file", "")))
    return {key: max(c, key=lambda sha: (c[sha], newest[(*key, sha)])) for key, c in counts.items()}


def _data_key(record: dict[str, Any]) -> tuple[str, str]:
    return record["task"], json.dumps(record["config"].get("data") or {}, sort_keys=True)


def mark_other_data(runs: list[dict[str, Any]]) -> None:
    """Add ``DATA`` (8 hex digits of its fingerprint) to the ``_diff`` of every run whose data is not
    its column's (``column_data``), so that it gets its own row."""
    column = column_data(runs)
    for r in runs:
        sha = data_sha256(r)
        if sha is not None and r.get("_diff") is not None and sha != column[_data_key(r)]:
            r["_diff"] = {**r["_diff"], DATA: sha[:8]}


def nested(flat: dict[str, Any], seed: int = 0) -> dict[str, Any]:
    """``preset_config``'s flat dict as a result file's nested ``config`` (with ``seed``)."""
    cfg: dict[str, Any] = {"model": {}, "train": {}, "data": {}, "attn": {}}
    for key, value in flat.items():
        section, _, name = key.partition(".")
        if name:
            cfg[section][name] = value
        else:
            cfg[key] = value
    return {**cfg, "seed": seed}
