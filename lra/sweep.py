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
"""

from __future__ import annotations

import argparse
import ctypes
import hashlib
import itertools
import json
import os
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from lra import cluster, data_fingerprint, stop_signals
from lra import run as run_cli
from lra.cluster import last_error_line
from lra.registry import UnknownNameError
from lra.results import RESULTS_DIR_HELP, default_results_dir

if TYPE_CHECKING:
    from lra import config as config_lib

# The families, the tasks, the configs and JAX are imported inside the functions (each of the
# modules above imports none of them): ``main`` installs the stop-signal handler first, so that a
# signal while they load sets a flag instead of killing the sweep.

MAX_CELLS = 1000  # a larger grid needs --allow-large-grid (a typo like --seeds 0-100000)


class SweepError(ValueError):
    """A sweep the user asked for cannot be set up; the message says why (exit status 2)."""


class SweepPathError(SweepError):
    """A path the sweep needs is of the wrong kind or cannot be used (exit status 1)."""


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
    return ", ".join(f"{k}={v}" for k, v in grid)


@dataclass(frozen=True)
class Plan:
    """What the sweep does with one cell: ``action`` in run | resume | skip | conflict | invalid
    (its config cannot be resolved: recorded as failed, with the reason in ``detail``)."""

    cell: Cell
    argv: list[str]  # lra.run's flags
    workdir: Path
    action: str
    detail: str = ""
    config_key: str = ""  # the canonical resolved config (``_canonical``)
    result_file: str = ""  # for ``skip``: the result file (under ``<results-dir>/runs``) it counts


# ----------------------------------------------------------------------------------------------
# The grid: expansion, sharding, each cell's lra.run flags.


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
    import attention
    import tasks

    task_names = _names(task_arg, tasks.available(), "task")
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


def run_argv(cell: Cell, args: argparse.Namespace, workdir: Path) -> list[str]:
    """lra.run's flags for one cell.

    Every flag that changes the config (``--preset``, ``--protocol``, ``--set``) is passed here; the
    skip check compares it with no further code, since each cell's config is resolved by lra.run's
    own parser and ``resolve_config`` from exactly these flags.
    """
    argv = ["--task", cell.task, "--attn", cell.attention, "--preset", args.preset,
            "--protocol", args.protocol,
            "--seed", str(cell.seed), "--workdir", str(workdir), "--results-dir", str(args.results_dir)]
    if args.data_dir is not None:
        argv += ["--data-dir", str(args.data_dir)]
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


# ----------------------------------------------------------------------------------------------
# Decisions: skip, resume, conflict or run, from the result files and the work directories.


def _canonical(config: dict[str, Any]) -> str:
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
    import tasks

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
    if _canonical(current) in finished:
        found = finished[_canonical(current)]
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


def plan(cells: list[Cell], args: argparse.Namespace, *, decide_actions: bool = True,
         quiet: bool = False) -> list[Plan]:
    """Resolve every cell's config (through lra.run's parser) and decide what to do with it
    (without ``decide_actions``, every action is ``run`` and no result file is read). ``quiet``:
    no line for skipped result files or repeated grid points (a second plan of the same cells)."""
    from lra import config as config_lib
    from lra.data import default_data_dir

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
        key = _canonical(config.to_dict())
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
# Running: one process per cell, one line per run, an overall bar.


def _clock(seconds: float) -> str:
    s = round(seconds)
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


@dataclass
class Tally:
    """Counts of the sweep so far and what the overall bar shows."""

    total: int
    skipped: int = 0
    done: int = 0
    failed: int = 0
    run_seconds: float = 0.0  # wall time of the runs finished so far (done or failed)

    def bar(self, width: int = 24) -> str:
        """``[#####-----] 7/20 | done 3 | failed 1 | skipped 3 | ETA 0:41:10``. The ETA is the mean
        wall time of this sweep's finished runs times the runs left (unknown before the first)."""
        finished = self.skipped + self.done + self.failed
        filled = width * finished // self.total if self.total else width
        ran = self.done + self.failed
        left = self.total - finished
        eta = _clock(self.run_seconds / ran * left) if ran else ("0:00:00" if not left else "?")
        return (f"[{'#' * filled}{'-' * (width - filled)}] {finished}/{self.total} | done {self.done} "
                f"| failed {self.failed} | skipped {self.skipped} | ETA {eta}")


class Progress:
    """Per-run lines, each followed by the overall bar. On a terminal the bar is one line redrawn in
    place (with the running cell's elapsed time); in a log file it is printed after each run."""

    def __init__(self, tally: Tally, stream: TextIO):
        self.tally, self.stream = tally, stream
        self.live = stream.isatty()

    def line(self, text: str) -> None:
        self.stream.write(("\r\033[K" if self.live else "") + text + "\n")
        self.show()

    def show(self, running: str = "") -> None:
        if self.live:
            self.stream.write("\r\033[K" + self.tally.bar() + (f" | {running}" if running else ""))
        elif not running:
            self.stream.write(self.tally.bar() + "\n")
        self.stream.flush()


# A traceback's exception line: "RuntimeError: ...", "jax.errors.JaxRuntimeError: ...", "KeyboardInterrupt".
_PR_SET_PDEATHSIG = 1


def _cell_preexec() -> None:
    """In the cell's process, before lra.run starts: its own session (a signal to the sweep's
    terminal group does not reach it twice; the sweep forwards signals itself), and on Linux the
    kernel's parent-death signal: a SIGKILLed sweep takes its cell with it (SIGTERM, so that the
    cell checkpoints)."""
    os.setsid()
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)
        except (OSError, AttributeError):
            pass


class _Terminate:
    """SIGTERM, SIGINT or SIGUSR2: pass it on to the running cell (which checkpoints and exits
    with status 75) and start no more. ``requested`` holds the signal's name."""

    def __init__(self):
        self.requested: str | None = None
        self.child: subprocess.Popen | None = None
        self._previous: dict[int, Any] = {}

    def __enter__(self):
        for signum in stop_signals.SIGNALS:
            try:
                self._previous[signum] = signal.signal(signum, self._handle)
            except ValueError:  # not the main thread
                pass
        return self

    def _handle(self, signum, frame):
        self.requested = self.requested or signal.Signals(signum).name
        if self.child is not None and self.child.poll() is None:
            try:
                os.killpg(self.child.pid, signum)
            except OSError:
                self.child.send_signal(signum)

    def __exit__(self, *exc):
        for signum, previous in self._previous.items():
            signal.signal(signum, previous)


def execute(p: Plan, progress: Progress, term: _Terminate) -> tuple[int, str, float]:
    """Run one cell's lra.run with its output appended to ``<workdir>/sweep.log``.

    Returns (exit status, what it wrote to the log, seconds).
    """
    command = [sys.executable, "-m", "lra.run", *p.argv, "--no-progress"]
    p.workdir.mkdir(parents=True, exist_ok=True)
    log_path = p.workdir / "sweep.log"
    started = time.monotonic()
    with open(log_path, "a") as log:
        log.write(f"== lra.sweep {time.strftime('%Y-%m-%dT%H:%M:%S%z')}: {shlex.join(command)}\n")
        log.flush()
        offset = log.tell()
        term.child = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT,
                                      preexec_fn=_cell_preexec)
        while True:
            try:
                code = term.child.wait(timeout=1.0)
                break
            except subprocess.TimeoutExpired:
                progress.show(f"{p.cell}: {p.action} {_clock(time.monotonic() - started)}")
        term.child = None
    seconds = time.monotonic() - started
    with open(log_path) as log:
        log.seek(offset)
        text = log.read()
    return code, text, seconds


def _headline(result_file: Path) -> str:
    try:
        accuracy = json.loads(result_file.read_text())["metrics"]["test_accuracy_at_last"]
    except (OSError, ValueError, KeyError, TypeError) as err:
        return f"result file unreadable ({err!r})"
    return f"test accuracy {100 * accuracy:.2f}% at the last step"


def sweep(plans: list[Plan], stream: TextIO, results_dir: Path | None = None
          ) -> tuple[Tally, list[tuple[Plan, str]], str | None]:
    """Run the plans in order. Returns the tally, the failures (plan, reason) and the signal that
    stopped the sweep early (None if none did). A cell counts as done only when its result file
    lies under ``results_dir`` (where given)."""
    tally = Tally(total=len(plans))
    progress = Progress(tally, stream)
    failures: list[tuple[Plan, str]] = []
    position = 0
    with _Terminate() as term:
        for p in plans:
            position += 1
            head = f"[{position}/{len(plans)}] {p.cell}:"
            if p.action == "skip":
                tally.skipped += 1
                progress.line(f"{head} skipped ({p.detail})")
                continue
            if p.action in ("conflict", "invalid"):
                tally.failed += 1
                failures.append((p, p.detail))
                progress.line(f"{head} FAILED: {p.detail}")
                continue
            if term.requested:
                break
            code, text, seconds = execute(p, progress, term)
            tally.run_seconds += seconds
            said = [ln.split("result: ", 1)[1].strip() for ln in text.splitlines()
                    if ln.startswith("result: ")]
            said = said[-1] if said else ""
            if code == stop_signals.EXIT_RESUMABLE and not term.requested:
                term.requested = "SIGTERM"  # the run alone was told to stop (the machine is going away)
            elsewhere = (code == 0 and said and results_dir is not None
                         and not Path(said).absolute().is_relative_to(Path(results_dir).absolute()))
            if code == 0 and said and not elsewhere:
                tally.done += 1
                progress.line(f"{head} done in {_clock(seconds)}"
                              + (f" (resumed {p.detail})" if p.action == "resume" else "")
                              + f": {_headline(Path(said))}, result {Path(said).name}")
            elif code == stop_signals.EXIT_RESUMABLE:
                progress.line(f"{head} stopped by {term.requested} after {_clock(seconds)} "
                              f"(checkpointed, exit status 75); re-run to go on")
            else:
                reason = (f"its result file {said} is not under --results-dir {results_dir}"
                          if elsewhere else
                          f"exit status {code}: {last_error_line(text)}" if code > 0 else
                          f"killed by signal {-code}" if code < 0 else
                          "exit status 0 but no result file was written")
                tally.failed += 1
                failures.append((p, reason))
                progress.line(f"{head} FAILED after {_clock(seconds)} ({reason}; log "
                              f"{p.workdir / 'sweep.log'})")
            if term.requested:
                break
    return tally, failures, term.requested


# ----------------------------------------------------------------------------------------------
# Command line.


def parser() -> argparse.ArgumentParser:
    import attention
    import tasks
    from lra import config as config_lib

    p = argparse.ArgumentParser(
        prog="python -m lra.sweep",
        description="Run every (task, attention family, seed) of a grid with lra.run, skipping "
                    "finished cells and resuming unfinished ones.",
        epilog=f"tasks: {', '.join(tasks.available())}\nattentions: {', '.join(attention.available())}",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--task", required=True, metavar="TASKS",
                   help="comma-separated task names, or all")
    p.add_argument("--attn", required=True, metavar="ATTNS",
                   help="comma-separated attention families, or all (every registered family, "
                        "including those from the lra.attention entry-point group)")
    p.add_argument("--seeds", default="0", help="e.g. 0,1,2 or 0-4 (default: 0)")
    p.add_argument("--preset", default="paper", choices=config_lib.PRESETS)
    p.add_argument("--protocol", default="lra", choices=config_lib.PROTOCOLS,
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

    if any(key == "seed" for key, _ in config_lib.parse_overrides(args.overrides)):
        raise SweepError("--set seed=... would give every cell one seed; use --seeds")
    try:
        run_cli.wandb_options(args)  # the flags every run gets, checked once here
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
    if limit is not None and len(cells) > limit:
        raise SweepError(f"the grid has {len(cells)} cells, more than {limit}; pass "
                         f"--allow-large-grid if that is meant")
    return cells, shard(cells, *parse_shard(args.shard)) if args.shard is not None else cells


def _print_dry_run(plans: list[Plan]) -> None:
    for p in plans:
        print(f"{p.action:8} {p.cell}" + (f": {p.detail}" if p.detail else f" in {p.workdir}"))
    counts = {a: sum(p.action == a for p in plans) for a in ("run", "resume", "skip", "conflict",
                                                            "invalid")}
    print(", ".join(f"{n} {a}" for a, n in counts.items() if n or a != "invalid")
          + f" ({len(plans)} cells)")


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
    if args.dry_run:
        _print_dry_run(plans)
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


SELECTION_UNWRITABLE = 3  # print_selection's status: the choice could not be kept


def select_command(args: argparse.Namespace) -> str:
    """The command that makes the grid's choice from the results there (no --shard)."""
    argv = ["python", "-m", "lra.sweep", "--task", args.task, "--attn", args.attn, "--seeds",
            args.seeds, "--preset", args.preset, "--protocol", args.protocol]
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


if __name__ == "__main__":
    sys.exit(main())
