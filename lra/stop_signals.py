"""The signals that stop a run early and resumably: SIGTERM (a scheduler's time limit, preemption),
SIGINT (Ctrl-C) and SIGUSR2 (what ``sbatch --signal`` and submitit send before a time limit).

The handler only records the signal. Raising from a signal handler can unwind through code that
must not be interrupted (XLA compiling the first step: that ended in a segmentation fault), so the
trainer looks at ``requested`` at safe points (between steps, after set-up, after compilation) and
stops there: with a checkpoint saved once training has started, at once before. Either way the
work directory is resumable and ``lra.run`` exits with ``EXIT_RESUMABLE`` (75, EX_TEMPFAIL from
BSD's sysexits.h: "try again later").

This module imports nothing heavy: ``lra.run`` installs the handler before it imports JAX.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Iterator
from typing import Any

EXIT_RESUMABLE = 75  # EX_TEMPFAIL
EXIT_INTERRUPTED = 130  # 128 + SIGINT: a second Ctrl-C, or a sweep stopped by Ctrl-C
SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGUSR2)
TEST_HOOK = "LRA_TEST_SIGNAL_AT"  # "<stage>[:<SIGNAL>]": tests send a signal to the run at a stage


class Stopped(BaseException):
    """A stop signal, raised at a safe point (``check``), or by the handler itself under
    ``raising``; ``args[0]`` is the signal's name. A BaseException: no ``except Exception`` on
    the way swallows it."""


class StopSignals:
    """A flag set by SIGTERM, SIGINT or SIGUSR2; one per process (``install`` returns it).

    A second SIGINT (Ctrl-C pressed twice) restores Python's default handler, so that a third one
    interrupts at once (KeyboardInterrupt) wherever the program is. With ``raise_at_once`` (set by
    ``raising``) the first signal also raises ``Stopped`` where the program is.
    """

    def __init__(self):
        self.requested: str | None = None
        self.raise_at_once = False
        self._previous: dict[int, Any] = {}

    def _handle(self, signum, frame):
        name = signal.Signals(signum).name
        if self.requested == "SIGINT" and name == "SIGINT":
            signal.signal(signal.SIGINT, signal.default_int_handler)
        first = self.requested is None
        self.requested = self.requested or name
        if first and self.raise_at_once:
            raise Stopped(name)

    def install(self) -> StopSignals:
        if threading.current_thread() is not threading.main_thread():
            return self
        for signum in SIGNALS:
            if signum not in self._previous:
                self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def uninstall(self) -> None:
        for signum, previous in self._previous.items():
            signal.signal(signum, previous)
        self._previous.clear()


_CURRENT = StopSignals()


@contextlib.contextmanager
def handling() -> Iterator[StopSignals]:
    """The process's flag with its handlers installed. Nested uses share one flag (``lra.run``
    installs it before importing JAX, the trainer again): the outermost one restores the previous
    handlers and clears the flag on exit."""
    outermost = not _CURRENT._previous
    _CURRENT.install()
    try:
        yield _CURRENT
    finally:
        if outermost:
            _CURRENT.uninstall()
            _CURRENT.requested = None
            _FIRED.clear()


@contextlib.contextmanager
def raising() -> Iterator[StopSignals]:
    """``handling``, but the first stop signal raises ``Stopped`` wherever the program is: for
    commands that hold no state a raise could corrupt (``lra.data``: pure Python, and every file
    is written under a temporary name and renamed once complete). Never around XLA: a raise out of
    compilation can end in a segmentation fault."""
    with handling() as stops:
        stops.raise_at_once = True
        try:
            yield stops
        finally:
            stops.raise_at_once = False


def poll() -> None:
    """Under ``raising``, a safe point for loops: raise ``Stopped`` if a stop signal came but its
    raise was lost. Python drops an exception raised where nothing can catch it (a weakref
    callback such as the import system's module-lock cleanup, ``__del__``, a garbage-collector
    callback: "Exception ignored in ..."); a handler that ran there set the flag and nothing else.
    Outside ``raising`` it does nothing: there the caller looks at the flag at its own safe points
    (the trainer makes data under ``handling`` and stops after it)."""
    if _CURRENT.raise_at_once and _CURRENT.requested:
        raise Stopped(_CURRENT.requested)


def check(stops: StopSignals, stage: str) -> None:
    """A safe point: raise ``Stopped`` if a stop signal came (after ``test_hook(stage)``)."""
    test_hook(stage)
    if stops.requested:
        raise Stopped(stops.requested)


_FIRED: set[str] = set()


LATER = ("compile", "import", "generate")  # stages whose signal comes from a thread, 50 ms later


def test_hook(stage: str) -> None:
    """Send the signal named in ``$LRA_TEST_SIGNAL_AT`` to this process when ``stage`` matches
    (``compile``, ``import`` and ``generate`` send it from a thread 50 ms later, while the step
    compiles, the modules load or the data is made). For tests only."""
    spec = os.environ.get(TEST_HOOK, "")
    want, _, name = spec.partition(":")
    if not want or want != stage or stage in _FIRED:
        return
    _FIRED.add(stage)
    signum = getattr(signal, name or "SIGTERM")
    if stage in LATER:
        threading.Timer(0.05, os.kill, (os.getpid(), signum)).start()
    else:
        os.kill(os.getpid(), signum)
