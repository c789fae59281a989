"""The sweep's default executor (``--executor subprocess``): the planned cells one after the other
in this machine, each as ``python -m lra.run`` in its own process and session, its output appended
to ``<workdir>/sweep.log``; one line per cell and an overall bar with an ETA (``Tally``,
``Progress``); SIGTERM, SIGUSR2 and SIGINT passed on to the running cell, which checkpoints and exits
75, after which no other cell starts. The other executors are ``lra.cluster``'s (submitit).
"""

from __future__ import annotations

import ctypes
import json
import os
import shlex
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from lra import stop_signals
from lra.cluster import last_error_line
from lra.dry_run import clock

if TYPE_CHECKING:
    from lra.sweep import Plan


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
        eta = clock(self.run_seconds / ran * left) if ran else ("0:00:00" if not left else "?")
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
                progress.show(f"{p.cell}: {p.action} {clock(time.monotonic() - started)}")
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
                progress.line(f"{head} done in {clock(seconds)}"
                              + (f" (resumed {p.detail})" if p.action == "resume" else "")
                              + f": {_headline(Path(said))}, result {Path(said).name}")
            elif code == stop_signals.EXIT_RESUMABLE:
                progress.line(f"{head} stopped by {term.requested} after {clock(seconds)} "
                              f"(checkpointed, exit status 75); re-run to go on")
            else:
                reason = (f"its result file {said} is not under --results-dir {results_dir}"
                          if elsewhere else
                          f"exit status {code}: {last_error_line(text)}" if code > 0 else
                          f"killed by signal {-code}" if code < 0 else
                          "exit status 0 but no result file was written")
                tally.failed += 1
                failures.append((p, reason))
                progress.line(f"{head} FAILED after {clock(seconds)} ({reason}; log "
                              f"{p.workdir / 'sweep.log'})")
            if term.requested:
                break
    return tally, failures, term.requested

