"""Run a grid of tasks x attention families x seeds: ``python -m lra.sweep``.

    python -m lra.sweep --task listops,pathfinder --attn all --seeds 0,1,2 --preset small
    python -m lra.sweep ... --dry-run          # what would run, be skipped, resume
    python -m lra.sweep ... --list             # the lra.run commands, one per line
    python -m lra.sweep ... --shard 3/8        # the 4th of 8 disjoint slices (indices from 0)

Each cell runs as ``python -m lra.run`` in its own process (memory returns between runs), with
lra.run's work-directory naming (``<workdirs>/<task>-<attn>-<preset>-seed<N>``), resume and result
files. Before anything starts, every cell's config is resolved by lra.run's own parser and
``lra.run.resolve_config`` (a bad ``--set`` is a one-line error at once), and each cell is decided:

* ``skip``: a result file under ``<results-dir>/runs/`` holds the same resolved config. The
  configs are compared, not the file names: a name says task, family, preset and seed but not the
  overrides.
* ``resume``: the work directory holds a checkpoint of that config; lra.run continues from it.
* ``conflict``: the work directory holds a checkpoint of another config (other ``--set`` values
  under the same name); lra.run would refuse it, so the cell is recorded as failed without running.
  Give each set of overrides its own ``--workdirs``.
* ``run``: otherwise.

A cell that exits non-zero is recorded (exit status and the last error line of its log,
``<workdir>/sweep.log``) and the sweep goes on; failures are listed at the end and the exit status
is 1 (2 for a bad command line, 1 for a --workdirs/--results-dir of the wrong kind). Each cell runs
in its own session and dies with the sweep (Linux: PR_SET_PDEATHSIG, also on kill -9). SIGTERM,
SIGUSR2 and SIGINT (Ctrl-C) are passed on to the running cell, which saves a checkpoint and exits
with status 75; the sweep then stops and exits 75 (130 for Ctrl-C), and the same command resumes
it. A cell counts as done only with its result file under ``--results-dir``; a result made on
other data than the data present now (its fingerprint, ``lra.data_fingerprint``) is a conflict,
not done. A grid of more than 1000 cells needs ``--allow-large-grid``. At the end the leaderboard
is rebuilt (``--no-leaderboard`` for shards that share one
results directory: rebuild once after they finish).

Hyperparameter axes: ``--grid train.lr=1e-3,3e-3 --grid train.warmup_steps=100,1000`` runs every
cell once per combination (passed as ``--set``; each point has its own work directory, suffixed
``__train.lr=0.001,...``, and result file); at the end ``lra.selection`` chooses per task and family
the values with the best mean validation accuracy over seeds and reports their test accuracy only.
``--select`` prints that choice from the results already there, running nothing. A choice is made
over the whole grid, never a slice of it: a (task, family) is chosen (and kept under
``selections/``) only when every one of its grid points and seeds has a result; a shard, once its
own cells are done, looks at the whole grid, so the shard that finishes the grid last keeps the
choice (every shard that sees it whole makes the same one) and the others name the ``--select``
command to run. ``--select --shard`` is refused.

Sharding: the grid is sorted by (task, family, grid point, seed) and shard I of N takes every N-th
cell from the I-th, so the N shards are disjoint, cover the grid, do not depend on the order the
flags list names in, and mix tasks (a shard gets a share of the long Pathfinder runs, not all of them).

This module holds the command and each cell's plan; the pieces it calls are one subject each:
``lra.grid`` (the cells and the shards), ``lra.skip_check`` (skip, resume, conflict or run),
``lra.subprocess_executor`` (the cells in this machine), ``lra.cluster`` (through submitit),
``lra.dry_run`` (``--dry-run``) and ``lra.sweep_selection`` (the grid's choice, ``--select``).
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path

import lra._guard  # noqa: F401  (first: one line where lra was found only in part)
from lra import cluster, stop_signals
from lra import run as run_cli
from lra.grid import (  # the grid (lra/grid.py); its names are lra.sweep's too
    Cell,
    SweepError,
    expand,
    parse_grid,
    parse_seeds,
    parse_shard,
    shard,
    workdir_for,
)
from lra.registry import UnknownNameError
from lra.results import RESULTS_DIR_HELP, default_results_dir
from lra.skip_check import canonical, decide, finished_configs
from lra.subprocess_executor import sweep
from lra.sweep_selection import SELECTION_UNWRITABLE, print_selection, select_command

# The families, the tasks, the configs and JAX are imported inside the functions (each of the
# modules above imports none of them): ``main`` installs the stop-signal handler first, so that a
# signal while they load sets a flag instead of killing the sweep.

MAX_CELLS = 1000  # a larger grid needs --allow-large-grid (a typo like --seeds 0-100000)


class SweepPathError(SweepError):
    """A path the sweep needs is of the wrong kind or cannot be used (exit status 1)."""


@dataclass(frozen=True)
class Plan:
    """What the sweep does with one cell: ``action`` in run | resume | skip | conflict | invalid
    (its config cannot be resolved: recorded as failed, with the reason in ``detail``)."""

    cell: Cell
    argv: list[str]  # lra.run's flags
    workdir: Path
    action: str
    detail: str = ""
    config_key: str = ""  # the canonical resolved config (``lra.skip_check.canonical``)
    result_file: str = ""  # for ``skip``: the result file (under ``<results-dir>/runs``) it counts


# ----------------------------------------------------------------------------------------------
# The plan: each cell's lra.run flags, its resolved config and what to do with it.


def run_argv(cell: Cell, args: argparse.Namespace, workdir: Path) -> list[str]:
    """lra.run's flags for one cell.

    Every flag that changes the config (``--preset``, ``--protocol``, ``--set``) is passed here; the
    skip check compares it with no further code, since each cell's config is resolved by lra.run's
    own parser and ``resolve_config`` from exactly these flags.
    """
    _fill_from_config(args)
    argv = ["--task", cell.task, "--attn", cell.attention, "--preset", args.preset,
            "--protocol", args.protocol,
            "--seed", str(cell.seed), "--workdir", str(workdir), "--results-dir", str(args.results_dir)]
    if args.data_dir is not None:
        argv += ["--data-dir", str(args.data_dir)]
    if args.config is not None:
        argv += ["--config", str(Path(args.config).absolute())]
    for pair in args.overrides:
        argv += ["--set", pair]
    for key, value in cell.grid:
        argv += ["--set", f"{key}={value}"]
    if args.wandb:
        argv += ["--wandb", args.wandb]
    for flag in ("entity", "group", "tags"):
        value = getattr(args, f"wandb_{flag}", None)
        if value is not None:
            argv += [f"--wandb-{flag}", value]
    return argv


def plan(cells: list[Cell], args: argparse.Namespace, *, decide_actions: bool = True,
         quiet: bool = False) -> list[Plan]:
    """Resolve every cell's config (through lra.run's parser) and decide what to do with it
    (without ``decide_actions``, every action is ``run`` and no result file is read). ``quiet``:
    no line for skipped result files or repeated grid points (a second plan of the same cells)."""
    from lra import config as config_lib
    from lra.data import default_data_dir

    _fill_from_config(args)
    finished = (finished_configs(args.results_dir, None if quiet else sys.stderr)
                if decide_actions else {})
    parser = run_cli.parser()
    plans, errors = [], []
    seen: dict[str, Cell] = {}  # canonical config -> the first cell of it
    for cell in cells:
        # The work directory is named from the resolved config, so resolve once without it.
        probe = run_argv(cell, args, Path("."))
        try:
            config = run_cli.resolve_config(parser.parse_args(probe))
        except (config_lib.ConfigError, ValueError) as err:
            # One cell's config cannot be built (e.g. a family whose build raises): that cell is
            # recorded as failed and the others run. A problem of every cell (a bad --set) stops
            # the sweep before anything runs.
            errors.append(f"{cell}: {err}")
            protocol = "" if args.protocol == "lra" else f"-{args.protocol}"
            workdir = Path(args.workdirs) / workdir_for(
                cell, f"{cell.task}-{cell.attention}-{args.preset}{protocol}-seed{cell.seed}")
            plans.append(Plan(cell, run_argv(cell, args, workdir), workdir, "invalid", str(err)))
            continue
        key = canonical(config.to_dict())
        if key in seen:  # --grid train.lr=1e-3,0.001: two spellings of one value are one point
            if not quiet:
                print(f"note: {cell} is the same config as {seen[key]} (their --grid values are "
                      f"equal once resolved): it runs and counts once", file=sys.stderr)
            continue
        seen[key] = cell
        workdir = Path(args.workdirs) / workdir_for(cell, run_cli.workdir_name(config))
        data_dir = args.data_dir or default_data_dir()
        action, detail, result = (decide(config, workdir, finished, data_dir) if decide_actions
                                  else ("run", "", ""))
        plans.append(Plan(cell, run_argv(cell, args, workdir), workdir, action, detail, key,
                          result))
    if errors and len(errors) == len(cells):
        raise SweepError(errors[0] + (f" (and {len(errors) - 1} more cells)" if len(errors) > 1 else ""))
    return plans


# ----------------------------------------------------------------------------------------------
# Command line.


def parser() -> argparse.ArgumentParser:
    from lra import attention, tasks
    from lra import config as config_lib

    p = argparse.ArgumentParser(
        prog="python -m lra.sweep",
        description="Run every (task, attention family, seed) of a grid with lra.run, skipping "
                    "finished cells and resuming unfinished ones.",
        epilog=f"tasks: {', '.join(tasks.available())}\nattentions: {', '.join(attention.available())}",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--task", metavar="TASKS",
                   help="comma-separated task names, or all (LRA's six; mqar only by name; required "
                        "unless --config names one)")
    p.add_argument("--attn", metavar="ATTNS",
                   help="comma-separated attention families, or all (every registered family, "
                        "including those from the lra.attention entry-point group; required "
                        "unless --config names one)")
    p.add_argument("--config", type=Path, default=None, metavar="FILE",
                   help="passed on to every run (lra.run --config: a JSON or TOML config file in "
                        "the form --print-config prints, read before --set); the task, family, "
                        "preset and protocol it names are used where these flags are not given")
    p.add_argument("--seeds", default="0", help="e.g. 0,1,2 or 0-4 (default: 0)")
    p.add_argument("--preset", default=None, choices=config_lib.PRESETS,
                   help="default: paper, unless --config names another")
    p.add_argument("--protocol", default=None, choices=config_lib.PROTOCOLS,
                   help="lra (default) or modern: passed to every lra.run "
                        "(docs/families-and-protocols.md 'Two protocols')")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="passed on to every run (lra.run --set)")
    p.add_argument("--grid", action="append", default=[], metavar="KEY=V1,V2",
                   help="an axis of the grid: every cell runs once per value (repeatable: the "
                        "axes multiply); at the end the values with the best mean validation "
                        "accuracy over seeds are chosen per task and family (lra/selection.py)")
    p.add_argument("--wandb", default=None, metavar="PROJECT",
                   help="passed on to every run (lra.run --wandb: also log to Weights & Biases)")
    p.add_argument("--wandb-entity", default=None, metavar="ENTITY",
                   help="passed on to every run (lra.run --wandb-entity)")
    p.add_argument("--wandb-group", default=None, metavar="GROUP",
                   help="passed on to every run (lra.run --wandb-group; e.g. one per sweep)")
    p.add_argument("--wandb-tags", default=None, metavar="TAG,TAG",
                   help="passed on to every run (lra.run --wandb-tags)")
    p.add_argument("--select", action="store_true",
                   help="with --grid: run nothing, print and keep the selection from the result "
                        "files already under --results-dir (e.g. after the shards of a grid "
                        "finished); over the whole grid, so never with --shard")
    p.add_argument("--results-dir", type=Path, default=default_results_dir(),
                   help="result files go under its runs/; finished cells are found there; "
                        + RESULTS_DIR_HELP)
    p.add_argument("--workdirs", type=Path, default=Path("workdirs"),
                   help="parent of the runs' work directories (default: workdirs, as lra.run)")
    p.add_argument("--data-dir", type=Path, default=None,
                   help="passed on to lra.run (default: $LRA_DATA_DIR, else ~/.cache/lra)")
    p.add_argument("--shard", default=None, metavar="I/N",
                   help="run only the I-th of N disjoint slices of the grid, 0 <= I < N "
                        "(e.g. --shard $SLURM_ARRAY_TASK_ID/$SLURM_ARRAY_TASK_COUNT)")
    what = p.add_mutually_exclusive_group()
    what.add_argument("--list", action="store_true",
                      help="print the lra.run command of every cell (of the shard), one per line")
    what.add_argument("--dry-run", action="store_true",
                      help="print what would run, be skipped and resume; run nothing")
    p.add_argument("--no-leaderboard", action="store_true",
                   help="do not rebuild <results-dir>/LEADERBOARD.md at the end")
    p.add_argument("--allow-large-grid", action="store_true",
                   help=f"allow a grid of more than {MAX_CELLS} cells (without it such a grid, "
                        f"e.g. the typo --seeds 0-100000, is refused at once)")
    cluster.add_flags(p)  # --executor and the SLURM flags (lra/cluster.py)
    return p


def check_paths(args: argparse.Namespace) -> None:
    """--workdirs and --results-dir must be folders (or not exist yet) that this user can write;
    --data-dir a folder if it exists. Raises ``SweepPathError`` naming the path."""
    for flag, path, write in (("--workdirs", args.workdirs, True),
                              ("--results-dir", args.results_dir, True),
                              ("--data-dir", args.data_dir, False)):
        if path is None:
            continue
        for p in (Path(path), *Path(path).parents):
            if p.exists():
                if not p.is_dir():
                    raise SweepPathError(f"{flag} {path}: {p} is a file, not a folder")
                if write and not os.access(p, os.W_OK | os.X_OK):
                    raise SweepPathError(f"{flag} {path}: permission denied (cannot write in {p})")
                break
    runs = Path(args.results_dir) / "runs"
    if runs.exists() and not runs.is_dir():
        raise SweepPathError(f"--results-dir {args.results_dir}: {runs} is a file, not a folder")
    if runs.is_dir() and not os.access(runs, os.R_OK | os.X_OK):
        raise SweepPathError(f"--results-dir {args.results_dir}: permission denied (cannot read "
                             f"{runs})")


def main(argv: list[str] | None = None) -> int:
    """Exit status: 0 every cell done or skipped; 1 a cell failed, or a path of the wrong kind;
    2 bad command line; 75 stopped by SIGTERM or SIGUSR2 (the running cell checkpointed; the same
    command goes on); 130 stopped by Ctrl-C (likewise). A stop signal while the modules load
    (before any cell started) exits 75 or 130 too, after one line."""
    # Before the heavy imports (``parser`` loads JAX and every family): a stop signal from here on
    # only sets a flag. Its own flag, not ``stop_signals.handling``'s: that one is cleared when
    # the handlers are restored, and a signal just before would be lost.
    # It stays installed while the cells are planned (resolving every cell's config, reading the
    # result files) and is taken off just before the first cell starts (``_main``).
    starting = stop_signals.StopSignals().install()
    try:
        stop_signals.test_hook("import")
        p = parser()
        return _stopped_while_starting(starting) or _main(p, argv, starting)
    except KeyboardInterrupt:  # Ctrl-C after planning, before the cells' handler is installed
        print("interrupted (SIGINT) before any cell started; nothing to resume", file=sys.stderr)
        return stop_signals.EXIT_INTERRUPTED
    finally:
        starting.uninstall()


def _stopped_while_starting(starting: stop_signals.StopSignals) -> int:
    """0 if no stop signal came before the first cell; else its one line and exit status."""
    if not starting.requested:
        return 0
    print(f"{starting.requested}: sweep stopped while starting, before any cell started; "
          f"re-run the same command", file=sys.stderr)
    return (stop_signals.EXIT_INTERRUPTED if starting.requested == "SIGINT"
            else stop_signals.EXIT_RESUMABLE)


def _cells(args: argparse.Namespace) -> tuple[list[Cell], list[Cell]]:
    """The cells of the whole grid the command line names, and of its shard (all of them without
    ``--shard``); SweepError for a bad one."""
    from lra import config as config_lib

    _fill_from_config(args)
    if any(key == "seed" for key, _ in config_lib.parse_overrides(args.overrides)):
        raise SweepError("--set seed=... would give every cell one seed; use --seeds")
    try:
        run_cli.wandb_options(args)  # the flags every run gets, checked once here
        cluster.check_device_flags(args)
    except ValueError as err:
        raise SweepError(str(err)) from None
    limit = None if args.allow_large_grid else MAX_CELLS
    grid = parse_grid(args.grid, args.overrides)
    if args.select and not grid:
        raise SweepError("--select chooses among --grid values: give the grid's --grid flags")
    if args.select and args.shard is not None:
        raise SweepError("--select chooses over the whole grid, never a shard of it: drop --shard "
                         "(run it once, after every shard finished)")
    cells = expand(args.task, args.attn, parse_seeds(args.seeds, limit), grid)
    _note_left_out(args, cells)
    if limit is not None and len(cells) > limit:
        raise SweepError(f"the grid has {len(cells)} cells, more than {limit}; pass "
                         f"--allow-large-grid if that is meant")
    return cells, shard(cells, *parse_shard(args.shard)) if args.shard is not None else cells


def _fill_from_config(args: argparse.Namespace) -> None:
    """``--task``, ``--attn``, ``--preset`` and ``--protocol`` from the ``--config`` file where the
    command line leaves them out, else their defaults (a missing --task or --attn: SweepError)."""
    from lra import config_file

    flags = (("task", "task"), ("attn", "attention"), ("preset", "preset"), ("protocol", "protocol"))
    if all(getattr(args, flag) is not None for flag, _ in flags):
        return
    named = config_file.read(args.config).identity if args.config is not None else {}
    for flag, key in flags:
        if getattr(args, flag) is None:
            setattr(args, flag, named.get(key, run_cli.DEFAULTS.get(key)))
        if getattr(args, flag) is None:
            raise SweepError(f"--{flag} is required (or a --config file that names its {key})")


def _note_left_out(args: argparse.Namespace, cells: list[Cell]) -> None:
    """One line when the --config file's attn or data table does not apply to some cells."""
    from lra import config_file

    if args.config is None:
        return
    read = config_file.read(args.config)
    left = sorted({note for c in cells if (note := read.left_out(c.task, c.attention))})
    if left:
        print(f"note: --config {args.config}: {'; '.join(left[:3])}"
              + (f" (and {len(left) - 3} more)" if len(left) > 3 else ""), file=sys.stderr)


def _main(p: argparse.ArgumentParser, argv: list[str] | None,
          starting: stop_signals.StopSignals) -> int:
    from lra import config as config_lib

    args = p.parse_args(argv)
    try:
        check_paths(args)
        grid_cells, cells = _cells(args)
        if not cells:  # an array of more tasks than cells: this shard has nothing to do
            print(f"lra.sweep: shard {args.shard} holds no cell of this grid; nothing to do",
                  file=sys.stderr)
            return 0
        stop_signals.test_hook("plan")
        plans = plan(cells, args, decide_actions=not args.list)
    except SweepPathError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    except (SweepError, UnknownNameError, config_lib.ConfigError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if args.list:
        for p in plans:
            print(shlex.join(["python", "-m", "lra.run", *p.argv]))
        return 0
    if code := _stopped_while_starting(starting):
        return code
    starting.uninstall()  # from here the cells' own handling (``sweep``, ``cluster.submit``)
    if args.dry_run:  # with each cell's data and expected time (lra/dry_run.py)
        from lra import dry_run
        from lra.data import default_data_dir
        from lra.leaderboard import reader

        runs = [r for folder in dry_run.folders(args.results_dir) for r in reader.read(folder).valid]
        dry_run.print_dry_run(plans, args, args.data_dir or default_data_dir(), runs, sys.stdout)
        return 0
    if args.select:
        return 1 if print_selection(plans, args, sys.stdout) else 0
    if args.executor != "subprocess":  # submitit: the planned cells go to lra.cluster
        return cluster.submit(plans, args)
    return _run_here(plans, args, grid_cells)


def _run_here(plans: list[Plan], args: argparse.Namespace, grid_cells: list[Cell]) -> int:
    """Run the plans one after the other in this machine, then the leaderboard and the grid's
    selection (over ``grid_cells``, the whole grid: a shard's cells are a slice of it); the
    command's exit status."""
    stream = sys.stderr
    print(f"lra.sweep: {len(plans)} cells; logs in each work directory's sweep.log", file=stream)
    tally, failures, stopped = sweep(plans, stream, args.results_dir)
    if stopped:
        left = tally.total - tally.done - tally.failed - tally.skipped
        print(f"{stopped}: sweep stopped with {left} cells unfinished; re-run the same command to "
              f"continue", file=stream)
        return (stop_signals.EXIT_INTERRUPTED if stopped == "SIGINT"
                else stop_signals.EXIT_RESUMABLE)
    if failures:
        print(f"{len(failures)} of {len(plans)} cells failed:", file=stream)
        for p, reason in failures:
            print(f"  {p.cell}: {reason}", file=stream)
    if not args.no_leaderboard:
        from lra import leaderboard  # matplotlib: only when needed

        if leaderboard.main(["--results-dir", str(args.results_dir)]) != 0:
            return 1
    if not args.grid:
        return 1 if failures else 0
    # Decided again now that the cells ran, over the whole grid (the other shards' cells too): the
    # selection counts what a dry run would now skip.
    code = print_selection(plan(grid_cells, args, quiet=True), args, stream)
    if code == SELECTION_UNWRITABLE:
        return 1
    if code and args.shard is not None and not failures:
        print(f"shard {args.shard}: its cells are done; the grid's choice waits for the cells "
              f"above (other shards'): the shard that finishes the grid last keeps it, or run "
              f"once every shard finished:\n  {select_command(args)}", file=stream)
        return 0
    return 1 if failures or code else 0



if __name__ == "__main__":
    sys.exit(main())
