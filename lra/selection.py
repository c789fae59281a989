"""Choosing hyperparameters on validation: ``lra.sweep --grid ... [--select]``.

How every LRA recipe was found: for each (task, family, protocol, preset), run a grid of values over
seeds, keep the values with the best mean VALIDATION accuracy over seeds (``best_val_accuracy`` of
each run), and report the test accuracy of those values only. Test accuracy is never read to
choose; it is read after the choice, for the chosen values alone (tests/core/test_selection.py checks a
grid where validation and test disagree). Ties in mean validation accuracy go to the first values
in text order (``repr``), so the choice does not depend on file order.

On Text, validation is the test split (IMDB has none, as in LRA): selecting on it is selecting on
test, and the table says so.

A grid run with values fixed beside it (``lra.sweep --set data.form=bidirectional --grid ...``,
or a ``--config`` file) is another experiment than the preset's grid: its runs differ from the
preset in keys that are not the grid's (the reader's ``_diff``), and those keys and values, the
selection's ``overrides``, are part of what it is chosen over and kept as. The choice is kept:
``write`` puts one file per (task, family, preset, protocol, overrides) under
``<results-dir>/selections/`` (the grid's keys, the chosen values, the overrides where there are
any, and the result files behind every grid point), and ``lra.leaderboard`` shows the chosen points
as their own table ("tuned on validation"), never mixed with the preset's cells. A later selection
of the same (task, family, preset, protocol, overrides) replaces the file. ``lra.sweep`` hands
``select`` only whole grids (every grid point and seed of a (task, family) done): a shard's slice
or a grid with a cell missing is never chosen over. The tuned table trusts a kept file only as
far as the runs it names agree with it (``lra.leaderboard.tuned``).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import statistics
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lra import atomic
from lra import config as config_lib
from lra.results import HEADLINE

VALIDATION_IS_TEST = ("text",)


SELECTIONS_DIR = "selections"
FORMAT = "lra.selection/1"


@dataclass(frozen=True)
class Candidate:
    values: tuple[tuple[str, Any], ...]  # the grid keys' values, in the grid's key order
    val: list[float]  # best validation accuracy of each seed
    files: tuple[str, ...] = ()  # the result files (names under runs/) of its seeds


@dataclass(frozen=True)
class Selection:
    task: str
    attention: str
    protocol: str
    preset: str
    candidates: list[Candidate]  # every grid point seen, sorted
    chosen: Candidate
    test: list[float]  # the chosen values' headline test accuracy, one per seed
    # Config keys (not the grid's) where the runs differ from their preset, with their values.
    overrides: tuple[tuple[str, Any], ...] = ()


def _label(values: tuple[tuple[str, Any], ...]) -> str:
    return ", ".join(f"{k}={v}" for k, v in values)


def _finite(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _overrides(record: dict[str, Any], keys: list[str]) -> tuple[tuple[str, Any], ...]:
    """The run's differences from its preset (the reader's ``_diff``: dotted config keys) outside
    the grid's ``keys``, sorted; () for a run of the preset's config or a record without them."""
    diff = record.get("_diff") or {}
    return tuple(sorted((k, v) for k, v in diff.items() if "." in k and k not in keys))


def select(records: list[dict[str, Any]], keys: list[str]) -> list[Selection]:
    """Per (task, family, protocol, preset, overrides) of ``records`` (result files' contents, as
    the one reader ``lra.leaderboard.reader`` validated them), the grid point (values of ``keys``
    in each run's resolved config: typed values, so 1e-3 and 0.001 are one point) with the best
    mean validation accuracy. A run without a finite validation accuracy or headline never enters
    a mean or the choice."""
    groups: dict[tuple, dict[tuple, list[dict]]] = defaultdict(lambda: defaultdict(list))
    for record in records:
        metrics = record["metrics"]
        headline = HEADLINE.get(record.get("protocol") or "lra", HEADLINE["lra"])
        if not (_finite(metrics.get("best_val_accuracy")) and _finite(metrics.get(headline))):
            continue
        cfg = config_lib.flatten(config_lib.with_protocol(record["config"]))
        group = (record["task"], record["attention"], cfg["protocol"], record["preset"],
                 _overrides(record, keys))
        groups[group][tuple((k, cfg.get(k)) for k in keys)].append(record)
    out = []
    # In key order, a preset grid before those with overrides (repr: values of any type compare).
    order = sorted(groups.items(), key=lambda kv: (kv[0][:4], len(kv[0][4]), repr(kv[0][4])))
    for (task, attn, protocol, preset, overrides), points in order:
        candidates = [Candidate(values, [float(r["metrics"]["best_val_accuracy"]) for r in runs],
                                tuple(r["_file"] for r in runs if "_file" in r))
                      for values, runs in sorted(points.items(), key=lambda kv: repr(kv[0]))]
        chosen = max(candidates, key=lambda c: statistics.fmean(c.val))  # first of equals wins
        test = [float(r["metrics"][HEADLINE.get(protocol, HEADLINE["lra"])])
                for r in points[chosen.values]]
        out.append(Selection(task, attn, protocol, preset, candidates, chosen, test, overrides))
    return out


def _mean_std(values: list[float]) -> str:
    mean = 100 * statistics.fmean(values)
    std = 100 * statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{mean:.2f} ± {std:.2f} ({len(values)})"


def render(selections: list[Selection]) -> str:
    """The selection and the grid, as lines to print beside the tables."""
    lines = ["Selection on validation (mean best validation accuracy over seeds; test read only "
             "for the chosen values):"]
    for s in selections:
        head = f"{s.task}/{s.attention} ({s.preset}, {s.protocol} protocol)"
        if s.overrides:
            head += f" with {_label(s.overrides)}"
        lines.append(f"  {head}: chosen {_label(s.chosen.values)}: test {_mean_std(s.test)}")
        if s.task in VALIDATION_IS_TEST:
            lines.append(f"    note: {s.task}'s validation split is its test split (as in LRA): this "
                         f"selection was made on test")
        for c in s.candidates:
            mark = "*" if c == s.chosen else " "
            lines.append(f"   {mark} {_label(c.values)}: val {_mean_std(c.val)}")
    return "\n".join(lines)


def record(s: Selection, keys: list[str]) -> dict[str, Any]:
    """The file ``write`` keeps for one selection (no date: the same choice gives the same bytes;
    ``overrides`` only where there are any, so a preset grid's file is what it always was)."""
    extra = {"overrides": dict(s.overrides)} if s.overrides else {}
    return {**extra, "format": FORMAT, "task": s.task, "attention": s.attention, "preset": s.preset,
            "protocol": s.protocol, "keys": list(keys),
            "chosen": {"values": dict(s.chosen.values), "files": list(s.chosen.files)},
            "candidates": [{"values": dict(c.values), "val_mean": statistics.fmean(c.val),
                            "files": list(c.files)} for c in s.candidates]}


def path(results_dir: Path, s: Selection) -> Path:
    """``<task>__<family>__<preset>__<protocol>.json``, and ``__<key=value,...>`` before the
    suffix where the selection has overrides (characters other than letters, digits and ``._=,+-``
    become ``_``; a name over 120 characters gives way to a digest of the overrides)."""
    stem = f"{s.task}__{s.attention}__{s.preset}__{s.protocol}"
    if s.overrides:
        label = re.sub(r"[^A-Za-z0-9._=,+-]", "_", ",".join(f"{k}={v}" for k, v in s.overrides))
        if len(label) > 120:
            label = hashlib.sha256(repr(s.overrides).encode()).hexdigest()[:12]
        stem += f"__{label}"
    return Path(results_dir) / SELECTIONS_DIR / f"{stem}.json"


def write(results_dir: Path, selections: list[Selection], keys: list[str]) -> list[Path]:
    """Keep each selection under ``<results_dir>/selections/`` (whole or not at all)."""
    out = []
    for s in selections:
        target = path(results_dir, s)
        atomic.replace(target, (json.dumps(record(s, keys), indent=2, sort_keys=True) + "\n").encode())
        out.append(target)
    return out
