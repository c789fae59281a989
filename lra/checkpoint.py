"""Orbax checkpoints of a run: the last state (for resuming) and the best-validation state.

Layout: ``<workdir>/checkpoints/last/<step>/`` (the two newest kept) and
``<workdir>/checkpoints/best/<step>/`` (one kept). Each holds ``state`` (step, parameters, BatchNorm's
running statistics, optimizer state) and ``meta`` (JSON: the resolved config, the metric history
needed to finish the run, the data position = the step). Saves are asynchronous; the RNG needs no
saving because every step's randomness is derived from (seed, step).

Verification: once a save has completed (orbax has renamed it into place), the SHA-256 of its files
(relative paths and bytes, in sorted order) is written to ``checkpoints/checksums/<which>-<step>
.sha256``. Only a checkpoint whose files still give that digest is restored: a flipped byte, a
truncated or deleted file, or a save whose checksum was never written (the process killed, or the
disk full, before that) is skipped in favour of the newest one that verifies (the skipped ones are moved to
``checkpoints/rejected/``), and with none left the run refuses to start, naming the folder to
delete. Two ``last`` checkpoints are kept so that one verified checkpoint survives a crash during the
next save.
"""

from __future__ import annotations

import errno
import hashlib
import json
import logging
import os
import sys
import threading
from pathlib import Path
from typing import Any

import jax
import orbax.checkpoint as ocp

from lra import atomic
from lra.config import config_diff, with_protocol

_FULL = {errno.ENOSPC: "no space left on device", errno.EDQUOT: "disk quota exceeded",
         errno.EFBIG: "file too large"}


def disk_full(err: BaseException) -> str:
    """What filled up ("" if nothing did), from the exception chain (``__cause__``,
    ``__context__``, an ``ExceptionGroup``'s members) or the messages: orbax and tensorstore
    wrap the OSError, sometimes into text only."""
    seen, todo = set(), [err]
    while todo:
        e = todo.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        if isinstance(e, OSError) and e.errno in _FULL:
            return _FULL[e.errno]
        text = str(e)
        for code, what in _FULL.items():
            if os.strerror(code) in text or f"errno {code}" in text.lower() \
                    or f"[Errno {code}]" in text:
                return what
        todo += [e.__cause__, e.__context__, *getattr(e, "exceptions", ())]
    return ""


class _QuietDiskFull(logging.Filter):
    """Drops the error records of orbax's background writers (logged through absl, each with a
    traceback: more than a thousand lines on a real full disk) whose exception is a full disk. The
    save's error still reaches the main thread (``wait``, the next ``save``), where ``lra.run``
    reports it in one line naming the full disk and the checkpoint kept."""

    everything = False  # set by ``quiet_background_errors``

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.ERROR:
            return True
        if self.everything:
            return False
        err = record.exc_info[1] if record.exc_info else None
        return not disk_full(err if err is not None else RuntimeError(record.getMessage()))


_QUIET = _QuietDiskFull()
_LOGGERS = ("absl", "asyncio")  # orbax logs through absl; its writers' coroutines through asyncio


def quiet_background_errors() -> None:
    """Once a failed save is being reported (``lra.run``'s one line, ``lra.train`` ending its
    checkpoints after the failure): also drop what the writer threads say as the process ends (a
    write that fails at interpreter shutdown, a closed handle, any error record of orbax)."""
    _QUIET.everything = True


def _writers_failing(err: BaseException | None) -> bool:
    """An exception of orbax's or tensorstore's writer threads and callbacks after a full disk
    (or, after ``quiet_background_errors``, after any reported failure)."""
    text = str(err)
    if disk_full(err) or "Event loop is closed" in text:  # tensorstore's callback, loop gone
        return True
    return _QUIET.everything and ("after interpreter shutdown" in text
                                  or "handle is closed" in text)


def _install_hooks() -> None:
    """Tracebacks of the writers' exceptions bypass logging: tensorstore's callbacks print through
    ``sys.excepthook``, threads through ``threading.excepthook``, tensorboardX's exit-time close
    through ``sys.unraisablehook``. Those that ``_writers_failing`` names are dropped (the save's
    error reaches the main thread, which reports it once); any other still prints."""
    if getattr(sys.excepthook, "_lra", False):
        return
    excepthook, thread_hook, unraisable = sys.excepthook, threading.excepthook, sys.unraisablehook

    def on_exception(kind, err, tb):
        if not _writers_failing(err):
            excepthook(kind, err, tb)

    def on_thread(args):
        if not _writers_failing(args.exc_value):
            thread_hook(args)

    def on_unraisable(u):
        if not _writers_failing(u.exc_value):
            unraisable(u)

    on_exception._lra = True
    sys.excepthook, threading.excepthook, sys.unraisablehook = on_exception, on_thread, on_unraisable


class ConfigMismatchError(RuntimeError):
    """The work directory holds a checkpoint of a different configuration."""


class CheckpointError(RuntimeError):
    """No checkpoint of the work directory can be used; the message names what to delete."""


def _manager(path: Path, keep: int) -> ocp.CheckpointManager:
    # Several processes save synchronously: with async saves orbax (0.12) sometimes finalised on
    # process 0 before process 1's array metadata existed and failed the save.
    options = ocp.CheckpointManagerOptions(max_to_keep=keep, create=True,
                                           enable_async_checkpointing=jax.process_count() == 1)
    return ocp.CheckpointManager(path.absolute(), options=options)


def folder_digest(folder: Path) -> str:
    """SHA-256 over every file below ``folder``: its relative path, its size and its bytes."""
    h = hashlib.sha256()
    for path in sorted(p for p in Path(folder).rglob("*") if p.is_file()):
        h.update(f"{path.relative_to(folder).as_posix()}\0{path.stat().st_size}\0".encode())
        with open(path, "rb") as f:
            while chunk := f.read(1 << 20):
                h.update(chunk)
    return h.hexdigest()


class Checkpoints:
    def __init__(self, workdir: Path):
        self.root = Path(workdir) / "checkpoints"
        self.sums = self.root / "checksums"
        self.managers = {"last": _manager(self.root / "last", 2), "best": _manager(self.root / "best", 1)}
        self.last, self.best = self.managers["last"], self.managers["best"]
        self._pending: list[tuple[str, int]] = []  # saves whose checksum is not written yet
        for name in _LOGGERS:
            if _QUIET not in logging.getLogger(name).filters:
                logging.getLogger(name).addFilter(_QUIET)
        _install_hooks()

    def steps(self, which: str = "last") -> list[int]:
        return sorted(self.managers[which].all_steps())

    def save(self, which: str, step: int, state: Any, meta: dict[str, Any]) -> None:
        # The previous save's checksum first (orbax waits for that save to complete anyway): this
        # save may push the oldest checkpoint out (max_to_keep), which must not happen while the
        # previous one is unverified. A checksum that cannot be written (a full disk) stops here,
        # with the verified checkpoint still there to resume from.
        self.managers[which].wait_until_finished()
        self.record_checksums()
        self.managers[which].save(step, args=ocp.args.Composite(
            state=ocp.args.StandardSave(state), meta=ocp.args.JsonSave(meta)), force=True)
        self._pending.append((which, step))
        self.record_checksums()

    def _sum_file(self, which: str, step: int) -> Path:
        return self.sums / f"{which}-{step}.sha256"

    def record_checksums(self) -> None:
        """Write the checksum of every save that has completed since the last call (cheap when
        none has: call it at every step boundary). Also forgets checksums of deleted steps."""
        if not self._pending or jax.process_index() != 0:
            return
        # orbax starts a save only once the previous one of its manager has completed, so only
        # the newest pending save of a manager can still be under way.
        done = []
        for which, manager in self.managers.items():
            steps = [s for w, s in self._pending if w == which]
            if steps and manager.is_saving_in_progress():
                steps = steps[:-1]
            done += [(which, s) for s in steps]
        for which, step in done:
            self._pending.remove((which, step))
            folder = self.root / which / str(step)
            if folder.is_dir():
                self.sums.mkdir(parents=True, exist_ok=True)
                atomic.replace(self._sum_file(which, step),
                               f"{folder_digest(folder)}  {which}/{step}\n".encode())
        if done:
            self.forget_deleted()

    def forget_deleted(self) -> list[str]:
        """Remove checksum files whose checkpoint folder is gone; returns their names."""
        gone = []
        for path in sorted(self.sums.glob("*.sha256")) if self.sums.is_dir() else []:
            which, _, step = path.stem.partition("-")
            if not (self.root / which / step).is_dir() and (which, int(step)) not in self._pending:
                path.unlink(missing_ok=True)
                gone.append(path.stem)
        return gone

    def verify(self, which: str, step: int) -> str | None:
        """None if checkpoint ``which/step`` gives its recorded checksum, else what is wrong."""
        recorded = self._sum_file(which, step)
        if not recorded.is_file():
            return ("no checksum was recorded for it (its save, or the checksum written after it, "
                    "did not complete: killed, or the disk was full)")
        try:
            expected = recorded.read_text().split()[0]
            actual = folder_digest(self.root / which / str(step))
        except (OSError, IndexError) as err:
            return f"unreadable ({err})"
        return None if actual == expected else "its files do not match the checksum recorded " \
                                                 "when it was written (corrupt or changed)"

    def newest_verified(self, which: str = "last") -> tuple[int | None, list[str]]:
        """The newest step of ``which`` that verifies, and a line per newer one skipped."""
        skipped = []
        for step in reversed(self.steps(which)):
            problem = self.verify(which, step)
            if problem is None:
                return step, skipped
            skipped.append(f"{self.root / which / str(step)}: {problem}")
        return None, skipped

    def set_aside(self, which: str, steps: list[int]) -> Path | None:
        """Move checkpoints that failed verification to ``checkpoints/rejected/`` (kept for a
        look, out of orbax's way so that their steps can be saved again)."""
        if not steps:
            return None
        rejected = self.root / "rejected"
        if jax.process_index() == 0:
            rejected.mkdir(exist_ok=True)
            for step in steps:
                target, n = rejected / f"{which}-{step}", 1
                while target.exists():
                    target, n = rejected / f"{which}-{step}_{n}", n + 1
                os.replace(self.root / which / str(step), target)
                self._sum_file(which, step).unlink(missing_ok=True)
        self.managers[which].reload()
        return rejected

    def restore_meta(self, which: str, step: int) -> dict[str, Any]:
        try:
            return self.managers[which].restore(
                step, args=ocp.args.Composite(meta=ocp.args.JsonRestore())).meta
        except Exception as err:  # orbax raises many kinds; the user needs the folder
            raise CheckpointError(f"{self.root / which / str(step)}: cannot be read "
                                  f"({type(err).__name__}); delete {self.root} to start over "
                                  f"from step 0") from None

    def restore(self, which: str, step: int, like: Any) -> tuple[Any, dict[str, Any]]:
        """Restore ``which/step`` into the structure, shapes and shardings of ``like``."""
        abstract = jax.tree.map(ocp.utils.to_shape_dtype_struct, like)
        try:
            out = self.managers[which].restore(step, args=ocp.args.Composite(
                state=ocp.args.StandardRestore(abstract), meta=ocp.args.JsonRestore()))
        except Exception as err:
            raise CheckpointError(f"{self.root / which / str(step)}: cannot be restored "
                                  f"({type(err).__name__}); delete {self.root} to start over "
                                  f"from step 0") from None
        return out.state, out.meta

    def wait(self) -> None:
        self.last.wait_until_finished()
        self.best.wait_until_finished()
        self.record_checksums()

    def close(self) -> None:
        self.last.close()
        self.best.close()


def check_same_config(saved: dict[str, Any], current: dict[str, Any]) -> None:
    """Refuse to resume a checkpoint written under another configuration, naming the keys."""
    differ = config_diff(with_protocol(saved), with_protocol(current))
    if differ:
        lines = [f"  {k}: checkpoint {was!r}, now {now!r}" for k, (was, now) in differ.items()]
        raise ConfigMismatchError(
            "the work directory holds a checkpoint of a different configuration:\n"
            + "\n".join(lines) + "\nuse another --workdir, or delete its checkpoints/ to start over")


def peek_last(workdir: Path) -> tuple[int, dict[str, Any] | None] | None:
    """(step, config) of the last checkpoint in ``workdir``, or None when it holds none.

    Read from the files, without a CheckpointManager (which would create directories): ``lra.sweep``
    looks into many work directories before it starts anything. Only finalised steps count (orbax
    writes a step under a temporary name and renames it to the step number when complete). The
    config is None where the meta file cannot be read.
    """
    last = Path(workdir) / "checkpoints" / "last"
    steps = sorted(int(p.name) for p in last.iterdir() if p.name.isdigit()) if last.is_dir() else []
    if not steps:
        return None
    try:  # orbax's JsonSave of the "meta" item, written by Checkpoints.save
        meta = json.loads((last / str(steps[-1]) / "meta" / "metadata").read_text())
        return steps[-1], meta["config"]
    except (OSError, ValueError, KeyError, TypeError):
        return steps[-1], None
