"""The sweep's choice over a ``--grid`` (``lra.sweep --grid ...`` at its end, or ``--select``):
which (task, family) grids are whole, their choice (``lra.selection.select``) printed and kept under
``<results-dir>/selections/`` (``lra.selection.write``), and the ``--select`` command a shard names
when the grid is not whole yet. The result files are read by the one reader,
``lra.leaderboard.reader`` (imported where it is used).
"""

from __future__ import annotations

import argparse
import shlex
from typing import TYPE_CHECKING, Any, TextIO

from lra.grid import parse_grid

if TYPE_CHECKING:
    from lra.sweep import Plan


SELECTION_UNWRITABLE = 3  # print_selection's status: the choice could not be kept


def select_command(args: argparse.Namespace) -> str:
    """The command that makes the grid's choice from the results there (no --shard)."""
    argv = ["python", "-m", "lra.sweep", "--task", args.task, "--attn", args.attn, "--seeds",
            args.seeds, "--preset", args.preset, "--protocol", args.protocol]
    argv += ["--config", str(args.config)] if args.config is not None else []
    argv += [x for pair in args.overrides for x in ("--set", pair)]
    argv += [x for axis in args.grid for x in ("--grid", axis)]
    if args.data_dir is not None:
        argv += ["--data-dir", str(args.data_dir)]
    return shlex.join([*argv, "--results-dir", str(args.results_dir), "--select"])


def print_selection(plans: list[Plan], args: argparse.Namespace, stream: TextIO) -> int:
    """Print and keep ``lra.selection``'s choice for each (task, family) whose whole grid is done
    (every grid point and seed), exactly as the dry run decides it (``plan``): a cell counts with
    the result file its ``skip`` names (valid, of its config, made on the data present now); a cell
    whose result was made on other data is a conflict. A (task, family) with a cell not done is
    never chosen over the rest of its grid (a shard's slice, a failed cell): its cells are named
    instead, and its kept choice, if any, stays as it is. Returns 0 with every choice made, 1
    (the cells named) when some (task, family) waits for a cell, ``SELECTION_UNWRITABLE`` when a
    choice cannot be written."""
    from lra.leaderboard import reader

    by_name = {r["_file"]: r for r in reader.read(args.results_dir).valid}
    groups: dict[tuple[str, str], list[Plan]] = {}
    for p in plans:
        groups.setdefault((p.cell.task, p.cell.attention), []).append(p)
    records, waiting = [], []
    for cell_plans in groups.values():
        missing = [p for p in cell_plans if p.action != "skip" or p.result_file not in by_name]
        if missing:
            waiting.append((cell_plans, missing))
        else:
            records += [by_name[p.result_file] for p in cell_plans]
    if records and _keep_selection(records, args, stream) != 0:
        return SELECTION_UNWRITABLE
    for cell_plans, missing in waiting:
        cell = cell_plans[0].cell
        print(f"{cell.task}/{cell.attention}: not chosen: {len(missing)} of {len(cell_plans)} "
              f"cells of its grid have no result of their config on the data present now under "
              f"{args.results_dir} (a choice is made over every grid point and seed, never part "
              f"of them): " + "; ".join(f"{p.cell} ({p.action}{': ' + p.detail if p.detail else ''})"
                                        for p in missing[:5])
              + (" ..." if len(missing) > 5 else ""), file=stream)
    return 1 if waiting else 0


def _keep_selection(records: list[dict[str, Any]], args: argparse.Namespace,
                    stream: TextIO) -> int:
    """Choose over ``records`` (whole grids), print the choice and keep it under selections/."""
    from lra import selection

    keys = [k for k, _ in parse_grid(args.grid)]
    chosen = selection.select(records, keys)
    print(selection.render(chosen), file=stream)
    try:
        written = selection.write(args.results_dir, chosen, keys)
    except OSError as err:
        print(f"error: cannot keep the selection under {args.results_dir}: "
              f"{err.strerror or err} ({err.filename or args.results_dir})", file=stream)
        return 1
    print(f"selection kept in {', '.join(str(p) for p in written)} (python -m lra.leaderboard "
          f"shows it as a table of its own)", file=stream)
    return 0

