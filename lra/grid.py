"""The sweep's grid: tasks x attention families x ``--grid`` points x seeds, cut into shards.

``expand`` turns the command line's names into ``Cell``s in canonical order, (task, family, grid
point, seed); ``shard`` I of N takes every N-th cell of that order from the I-th, so the N shards are
disjoint, cover the grid, do not depend on the order the flags list names in, and mix tasks (a shard
gets a share of the long Pathfinder runs, not all of them). ``workdir_for`` gives each grid point its
own work directory. Nothing here reads a result file or starts a run (``lra.sweep`` plans and runs
the cells).
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Iterable
from dataclasses import dataclass

# The families and the tasks are imported inside ``expand``: ``lra.sweep.main`` installs the
# stop-signal handler before they load.


class SweepError(ValueError):
    """A sweep the user asked for cannot be set up; the message says why (exit status 2)."""


@dataclass(frozen=True, order=True)
class Cell:
    """One run of the grid. The field order is the canonical order that shards are cut from."""

    task: str
    attention: str
    grid: tuple[tuple[str, str], ...]  # (key, value) of each --grid axis, in the flags' order
    seed: int

    def __str__(self) -> str:
        values = f" [{grid_label(self.grid)}]" if self.grid else ""
        return f"{self.task}/{self.attention}{values} seed {self.seed}"


def grid_label(grid: tuple[tuple[str, str], ...]) -> str:
    """A grid point as ``key=value, key=value`` (in the flags' order)."""
    return ", ".join(f"{k}={v}" for k, v in grid)


def _names(text: str, known: list[str], kind: str) -> list[str]:
    """A comma-separated list of registered names, or ``all`` for every one (sorted, no repeats)."""
    if text.strip() == "all":
        return list(known)
    names = [n.strip() for n in text.split(",") if n.strip()]
    if not names:
        raise SweepError(f"--{kind} is empty; give names separated by commas, or all")
    for n in names:
        if n not in known:
            raise SweepError(f"unknown {kind} {n!r}; choose from: all, {', '.join(known)}")
    return sorted(set(names))


def parse_seeds(text: str, limit: int | None = None) -> list[int]:
    """``"0,1,2"`` -> [0, 1, 2]; a range ``"0-4"`` is 0..4 inclusive. More than ``limit`` seeds
    is refused before any is listed (``--allow-large-grid`` lifts the limit)."""
    seeds: set[int] = set()
    for part in (p.strip() for p in text.split(",")):
        lo, dash, hi = part.partition("-")
        try:
            first, last = (int(lo), int(hi)) if dash and lo else (int(part), int(part))
        except ValueError:
            raise SweepError(f"--seeds: expected integers like 0,1,2 or 0-4, got {part!r}") from None
        if limit is not None and last - first + 1 + len(seeds) > limit:
            raise SweepError(f"--seeds {text}: more than {limit} seeds; pass --allow-large-grid "
                             f"if that is meant")
        seeds.update(range(first, last + 1))
    if not seeds or min(seeds) < 0:
        raise SweepError(f"--seeds: expected non-negative integers like 0,1,2 or 0-4, got {text!r}")
    return sorted(seeds)


def parse_grid(items: list[str], overrides: list[str] = ()) -> list[tuple[str, list[str]]]:
    """``--grid KEY=V1,V2`` flags -> [(key, [values])]; each value is checked as ``--set KEY=V`` is,
    when the cells are resolved. A key given twice, also given to ``--set``, or ``seed`` (use
    ``--seeds``) is a SweepError."""
    axes: list[tuple[str, list[str]]] = []
    fixed = {pair.partition("=")[0].strip() for pair in overrides}
    for item in items:
        key, eq, values = item.partition("=")
        key = key.strip()
        vals = [v.strip() for v in values.split(",")]
        if not eq or not key or not all(vals):
            raise SweepError(f"--grid {item!r}: expected KEY=V1,V2,... (e.g. train.lr=1e-3,3e-3)")
        if key == "seed":
            raise SweepError("--grid seed=...: use --seeds")
        if key in fixed:
            raise SweepError(f"--grid {key}: also given to --set; give it to one of them")
        if key in (k for k, _ in axes):
            raise SweepError(f"--grid {key} is given twice; list all its values in one flag")
        if len(set(vals)) != len(vals):
            raise SweepError(f"--grid {item!r}: a value is listed twice")
        axes.append((key, vals))
    return axes


def expand(task_arg: str, attn_arg: str, seeds: Iterable[int],
           grid: list[tuple[str, list[str]]] = ()) -> list[Cell]:
    """Every (task, family, grid point, seed) named, in canonical order. ``all`` families includes
    those that packages outside this tree register through the ``lra.attention`` entry-point
    group."""
    from lra import attention, tasks

    # "all" is LRA's six tasks (tasks.in_track); another track's task (mqar) runs when named
    task_names = _names(task_arg, tasks.available(), "task")
    if task_arg.strip() == "all":
        task_names = tasks.in_track("lra")
    attn_names = _names(attn_arg, attention.available(), "attn")
    points = [tuple(zip([k for k, _ in grid], combo)) for combo in
              itertools.product(*[values for _, values in grid])]
    return sorted(Cell(t, a, g, s) for t in task_names for a in attn_names for g in points
                  for s in set(seeds))


def parse_shard(text: str) -> tuple[int, int]:
    """``"I/N"`` -> (I, N) with 0 <= I < N."""
    index, slash, count = text.partition("/")
    try:
        i, n = int(index), int(count)
    except ValueError:
        i, n = -1, 0
    if not slash or n < 1 or not 0 <= i < n:
        raise SweepError(f"--shard: expected I/N with 0 <= I < N (e.g. 0/4 .. 3/4), got {text!r}")
    return i, n


def shard(cells: Iterable[Cell], index: int, count: int) -> list[Cell]:
    """The ``index``-th of ``count`` disjoint slices: every ``count``-th cell of the sorted grid."""
    return sorted(cells)[index::count]


WORKDIR_SUFFIX_MAX = 96  # longer grid values (or ones with a "/") get a short stable suffix


def workdir_for(cell: Cell, name: str) -> str:
    """lra.run's work directory name, with the cell's grid values appended so that the grid's
    points never share a work directory (``listops-softmax-small-seed0__train.lr=0.001``). Values
    that would make the name too long for a file system (255 bytes) or hold a "/" are replaced by
    the first 12 hex digits of their SHA-256 (``...-seed0__grid-3f2a9c01b7de``): short, and the
    same on every machine and every re-run, so a resume finds its directory."""
    if not cell.grid:
        return name
    values = ",".join(f"{k}={v}" for k, v in cell.grid)
    if len(values.encode()) > WORKDIR_SUFFIX_MAX or "/" in values or "\0" in values:
        values = "grid-" + hashlib.sha256(values.encode()).hexdigest()[:12]
    return f"{name}__{values}"

