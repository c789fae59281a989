"""A run's work directory: the OS lock that keeps a second run out, the checks made before step 1,
and the rule "one result per (work directory, completed run)".

* Lock: ``<workdir>/lock`` is locked with ``fcntl.flock`` (exclusive, non-blocking) by the run that
  uses the directory and holds that run's pid. The kernel drops the lock when the process ends, even
  by ``kill -9``, so a stale lock file never blocks anyone; a second run on a locked directory stops
  at once naming the holder.
* Pre-flight: the work directory, data directory and results directory must be folders (not files)
  and the results directory writable, checked before any training step, so a result is never
  measured and then lost.
* Finished runs: ``result.json`` in the work directory marks a completed run and names its result
  file; re-running the command reports it and writes nothing. ``--force`` moves the earlier run's
  files into ``previous-<date>/`` inside the work directory and trains again from step 0.
"""

from __future__ import annotations

import datetime as dt
import errno
import fcntl
import json
import os
import tempfile
from pathlib import Path
from typing import IO, Any

LOCK_FILE = "lock"
RESULT_FILE = "result.json"
# What --force moves aside: everything a run (and lra.sweep, its log) writes, except the lock.
RUN_FILES = ("checkpoints", RESULT_FILE, "metrics.jsonl", "tensorboard", "sweep.log")


class WorkdirLockedError(RuntimeError):
    """Another live process holds the work directory."""


def not_a_file(path: Path, what: str) -> None:
    """Raise ``NotADirectoryError`` naming ``what`` when ``path`` (or a parent) is a file."""
    for p in (Path(path), *Path(path).parents):
        if p.exists() and not p.is_dir():
            raise NotADirectoryError(errno.ENOTDIR, f"{what} {path}: {p} is a file, not a folder")


def lock(workdir: Path) -> IO[str]:
    """Lock ``workdir`` for this process; keep the returned file open for as long as the run."""
    path = Path(workdir) / LOCK_FILE
    handle = open(path, "a+")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.seek(0)
        holder = handle.read().strip() or "unknown"
        handle.close()
        raise WorkdirLockedError(f"{workdir} is in use by another run (pid {holder}); wait for it "
                                 f"to finish or use another --workdir") from None
    handle.seek(0)
    handle.truncate()
    handle.write(f"{os.getpid()}\n")
    handle.flush()
    return handle


def check_writable(results_dir: Path) -> None:
    """Create ``<results_dir>/runs`` and prove a file can be written there (then remove it)."""
    not_a_file(results_dir, "--results-dir")
    runs = Path(results_dir) / "runs"
    runs.mkdir(parents=True, exist_ok=True)
    fd, probe = tempfile.mkstemp(dir=runs, prefix=".write-test.")
    os.close(fd)
    os.unlink(probe)


def check_folder_writable(folder: Path, what: str) -> None:
    """Create ``folder`` and prove a file can be written in it, or raise the ``OSError`` whose
    ``strerror`` names ``what`` and the folder in one line."""
    not_a_file(folder, what)
    try:
        Path(folder).mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(dir=folder, prefix=".write-test.")
    except OSError as err:
        raise type(err)(err.errno, f"{what} {folder}: {err.strerror.lower()} "
                                   f"({err.filename})") from None
    os.close(fd)
    os.unlink(probe)


def finished(workdir: Path) -> dict[str, Any] | None:
    """The record of the completed run in ``workdir``, if there is one."""
    path = Path(workdir) / RESULT_FILE
    try:
        record = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as err:
        raise OSError(errno.EIO, f"{path}: unreadable ({err}); delete it to finish the run again, "
                                 f"or use --force") from None
    if not isinstance(record, dict):
        raise OSError(errno.EIO, f"{path}: expected a JSON object, got {type(record).__name__}; "
                                 f"delete it to finish the run again, or use --force")
    return record if record.get("status") == "completed" else None


def move_aside(workdir: Path) -> Path | None:
    """Move an earlier run's files into ``<workdir>/previous-<UTC date>/``; returns that folder."""
    present = [Path(workdir) / name for name in RUN_FILES if (Path(workdir) / name).exists()]
    if not present:
        return None
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%S")
    target = Path(workdir) / f"previous-{stamp}"
    n = 1
    while target.exists():
        target, n = Path(workdir) / f"previous-{stamp}_{n}", n + 1
    target.mkdir()
    for path in present:
        os.replace(path, target / path.name)
    return target
