"""The one reader of run files: every command that prints a number or makes a choice from
``<results-dir>/runs/*.json`` reads them here, so that each sees the same seeds in the same cells.

    result_set = reader.read(results_dir)
    result_set.warn()                       # "warning: skipped <file>: <field>: <what>", once each
    for key, runs in result_set.cells().items(): ...

Readers: the leaderboard (Markdown, CSV, LaTeX, figures, the web page, and the tuned table, whose
selections must name current runs), ``lra.reproduce``, ``lra.sweep``'s skip check, ``--dry-run``
and ``--select``, and ``lra.cluster``'s result lookup.

What it does, in order:

1. **Validate** each file whole (``load.check_run``: types, ranges, finite numbers, agreement of the
   fields with the config). A file that fails is skipped with one line naming the file and the
   field (``skip_line``), the same line in every command. Files of ``lra.evaluate`` are
   evaluations of a checkpoint, never a seed: listed apart.
2. **Identify**: a run's cell is ``CellKey`` (protocol, preset, device, task, row). The row is the
   family, plus the keys where its resolved config is not the preset's and the data's fingerprint
   where it is not the column's (``identity``): runs on other data or with overrides are never
   averaged with the preset's runs.
3. **One run per seed**: a seed measured twice in one cell counts once, the newest (by date, then
   file name); the older files are ``superseded``.

Nothing here imports JAX: the leaderboard must run where JAX does not.
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from lra import config as lra_config
from lra import results
from lra.leaderboard import identity, load

HEADLINE = results.HEADLINE  # the protocol's headline metric (a fact of the format: lra/results.py)


@dataclass(frozen=True, order=True)
class CellKey:
    """Where a run is counted: one cell of one table."""

    protocol: str
    preset: str
    device: str
    task: str
    row: str  # the family, plus ``[key=value, ..., data 1a2b3c4d]`` where it is not the preset's

    @property
    def family(self) -> str:
        return self.row.split(" ", 1)[0]

    @property
    def variant(self) -> str:
        """The bracketed label of a row that is not the preset's ('' for the preset's row)."""
        return self.row.partition(" ")[2]


skip_line = load.skip_line


def canonical(config: dict[str, Any]) -> str:
    """A resolved config as comparable text (a result file's ``config`` with its protocol)."""
    return json.dumps(lra_config.with_protocol(config), sort_keys=True)


def cell_key(record: dict[str, Any]) -> CellKey:
    return CellKey(load.protocol(record), record["preset"], load.device_label(record),
                   record["task"], record["_row"])


@dataclass
class ResultSet:
    """The valid run files of one results folder, identified and grouped (``read``)."""

    results_dir: Path
    valid: list[dict[str, Any]] = field(default_factory=list)  # every valid run file
    runs: list[dict[str, Any]] = field(default_factory=list)  # one per seed and cell: the counted
    superseded: list[str] = field(default_factory=list)  # file names of older runs of a seed
    evaluations: list[str] = field(default_factory=list)  # lra.evaluate's files: not seeds
    skipped: list[str] = field(default_factory=list)  # ``skip_line`` of each unusable file

    def cells(self) -> dict[CellKey, list[dict[str, Any]]]:
        """{cell: its counted runs, by seed}, in key order."""
        out: dict[CellKey, list[dict[str, Any]]] = defaultdict(list)
        for r in self.runs:
            out[r["_cell"]].append(r)
        return {k: sorted(out[k], key=lambda r: r["seed"]) for k in sorted(out)}

    def by_config(self) -> dict[str, list[dict[str, Any]]]:
        """{``canonical`` resolved config: its valid runs, oldest first}: what a sweep has done."""
        out: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for r in sorted(self.valid, key=_age):
            out[canonical(r["config"])].append(r)
        return dict(out)

    def warn(self, stream: TextIO | None = None, *, prefix: str = "warning: skipped ") -> None:
        """Print each skipped file's line (the same wording in every command)."""
        for line in self.skipped:
            print(f"{prefix}{line}", file=stream or sys.stderr)


def _age(record: dict[str, Any]) -> tuple[str, str]:
    return record.get("date", ""), record["_file"]


def read(results_dir: Path | str, *, strict: bool = False) -> ResultSet:
    """Read ``<results_dir>/runs``. ``strict``: the first unusable file raises
    ``load.ResultFileError`` (naming it) instead of being skipped. A missing folder reads as empty."""
    out = ResultSet(Path(results_dir))
    skipped = None if strict else out.skipped
    out.valid = load.load_runs(out.results_dir, skipped, out.evaluations)
    out.runs, out.superseded = load.newest_per_seed(out.valid)
    for r in out.valid:
        r["_cell"] = cell_key(r)
    return out


def expected_variant(config: dict[str, Any]) -> dict[str, Any] | None:
    """The ``_diff`` (``identity.differences``) a run of the resolved ``config`` gets, without the
    data's part: ``{}`` for the preset's config; None where its preset cannot be resolved here."""
    return identity.differences({"config": config})


def same_variant(run: dict[str, Any], diff: dict[str, Any]) -> bool:
    """Whether ``run``'s config differs from its preset exactly as ``diff`` says (its data aside)."""
    mine = {k: v for k, v in (run["_diff"] or {}).items() if k != identity.DATA}
    return mine.keys() == diff.keys() and all(identity.same(mine[k], diff[k]) for k in diff)
