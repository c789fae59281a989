"""A run's work directory: the OS lock that keeps a second run out, the checks made before step 1,
and the rule "one result per (work directory, completed run)".

* Lock: ``<workdir>/lock`` is locked with ``fcntl.flock`` (exclusive, non-blocking) by the run that
  uses the directory and holds that run's pid. The kernel drops the lock when the process ends, even
  by ``kill -9``, so a stale lock file never blocks anyone; a second run on a locked directory stops
  at once naming the holder.
  ``holder`` tells a reader (``lra.evaluate``) whether a live run holds it.
* Pre-flight: the work directory, data directory and results directory must be folders (not files)
  and the results directory writable, checked before any training step, so a result is never
  measured and then lost. "Writable" is proven with real bytes (``PROBE_BYTES`` written and
  synced, then deleted): an empty file takes no block, so a full disk passes a probe that only
  creates one. The work directory's path must be UTF-8 (``check_path_encodable``): the
  checkpoint library refuses other paths, and only when it first saves.
* Finished runs: ``result.json`` in the work directory marks a completed run and names its result
  file; re-running the command reports it and writes nothing. ``--force`` moves the earlier run's
  files (``RUN_FILES``: checkpoints, logs, TensorBoard files, the tracker's run id and files) into
  ``previous-<date>/`` inside the work directory and trains again from step 0, as a new run
  everywhere (the tracker too).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import errno
import fcntl
import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from lra import tracker

LOCK_FILE = "lock"
RESULT_FILE = "result.json"
# What --force moves aside: everything a run (and lra.sweep, its log) writes, except the lock:
# checkpoints, the result record, metrics.jsonl, TensorBoard events, the sweep's log, and wandb's
# run id (lra.tracker.ID_FILE) and offline files: a run id left behind makes the new run continue
# the old tracker run, which drops every step that run has logged already.
RUN_FILES = ("checkpoints", RESULT_FILE, "metrics.jsonl", "tensorboard", "sweep.log",
             tracker.ID_FILE, tracker.FILES_DIR)
# ... and what a killed write of result.json leaves (lra.results.write_json_atomic's temporary).
RUN_TEMPS = (f".{RESULT_FILE}.*.tmp",)
PROBE_BYTES = 64 * 1024  # written and synced by the writability probes


class PathEncodingError(ValueError):
    """A path with a byte that is not UTF-8 in its name."""


def check_path_encodable(path: Path, what: str) -> None:
    """Raise ``PathEncodingError`` naming ``what`` when ``path`` is not valid UTF-8 (on POSIX such
    a name reaches Python with surrogate escapes). Orbax, and tensorstore under it, take paths as
    UTF-8 strings and fail on such a name only at the first checkpoint save, after training."""
    text = os.fspath(path)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as err:
        shown = text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
        raise PathEncodingError(f"{what} {shown}: the path has a byte that is not UTF-8 (character "
                                f"{err.start}); the checkpoint library cannot use it, choose a "
                                f"UTF-8 path") from None


@contextlib.contextmanager
def naming(path: Path) -> Iterator[None]:
    """Re-raise an ``OSError`` met inside the block with ``path`` as its file name when it names
    none (a write or fsync that finds the disk full says only "No space left on device")."""
    try:
        yield
    except OSError as err:
        if err.filename is not None:
            raise
        raise type(err)(err.errno, err.strerror or str(err), str(path)) from None


def _probe(folder: Path) -> None:
    """Write ``PROBE_BYTES`` into a new file in ``folder``, sync it, delete it; the OSError of a
    full disk, a quota or a read-only folder names the probe file."""
    fd, probe = tempfile.mkstemp(dir=folder, prefix=".write-test.")
    try:
        with naming(probe), os.fdopen(fd, "wb") as f:
            f.write(bytes(PROBE_BYTES))
            f.flush()
            os.fsync(f.fileno())
    finally:
        os.unlink(probe)


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
    _probe(runs)


def check_folder_writable(folder: Path, what: str) -> None:
    """Create ``folder`` and prove a file can be written in it, or raise the ``OSError`` whose
    ``strerror`` names ``what`` and the folder in one line."""
    not_a_file(folder, what)
    try:
        Path(folder).mkdir(parents=True, exist_ok=True)
        _probe(Path(folder))
    except OSError as err:
        raise type(err)(err.errno, f"{what} {folder}: {err.strerror.lower()} "
                                   f"({err.filename})") from None


def holder(workdir: Path) -> str | None:
    """The pid of the live run that holds ``workdir``'s lock (as the lock file says), or None when
    no process holds it. The lock is tried shared and let go at once, so a run is kept out for
    no longer than the try."""
    try:
        handle = open(Path(workdir) / LOCK_FILE)
    except OSError:  # no lock file: no run has ever held the directory (or it is unreadable)
        return None
    with handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return handle.read().strip() or "unknown"
        fcntl.flock(handle, fcntl.LOCK_UN)
    return None


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
    present += [p for pattern in RUN_TEMPS for p in sorted(Path(workdir).glob(pattern))]
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
