"""File and process helpers shared by the tasks that make or parse their own data.

ListOps and Pathfinder generate files with a pool of processes, Retrieval and ListOps parse large
TSV files once and keep the arrays, Pathfinder keeps decoded PNGs. They need the same few things,
written once here so that they behave alike:

* ``default_workers``: the CPUs this process may use (its affinity mask, not the machine's count).
* ``ordered_map``: ``fn(*args)`` for each argument tuple, computed by a pool of "spawn" processes
  and yielded in input order, so the output never depends on the worker count. The input may be
  endless (ListOps draws shards until it has enough); at most ``window`` calls are in flight.
  Workers end with their parent, even when it is killed with ``kill -9`` (Linux).
* Atomic files: a file is written under the temporary name ``.<name>.<pid>.tmp`` beside it and
  renamed into place, so it appears complete or not at all; ``remove_stale_temps`` deletes the
  temporaries of a process that was killed.
* ``.npz`` caches: arrays stored with the key they were made from (a source file's size and
  mtime, a format version); a cache whose key differs, or that cannot be read, is ignored, and one
  that cannot be written (a read-only folder) is skipped. ``parsed_tsv`` is the one path by which
  ListOps and Retrieval parse a TSV file once and read the arrays afterwards.
* ``format_duration`` for the "about N min" line printed before a long generation.
"""

from __future__ import annotations

import collections
import concurrent.futures
import contextlib
import multiprocessing
import os
import signal
import sys
import tempfile
import zipfile
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from lra.tasks import DataError

from lra.workdir import PROBE_BYTES, naming

__all__ = ["TSV_CACHE_VERSION", "check_writable", "default_workers", "format_duration", "load_arrays",
           "ordered_map", "parsed_tsv", "remove_stale_temps", "replacing", "save_arrays",
           "temp_path", "write_atomic"]

# ----------------------------------------------------------------------------------------------
# Processes


def default_workers() -> int:
    """The number of CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _die_with_parent(parent: int) -> None:
    """Worker initializer: end this worker when the process that started it dies, even by
    ``kill -9`` (Linux: the kernel sends SIGKILL; elsewhere a worker outlives a killed parent),
    and leave SIGINT and SIGTERM to the parent."""
    if sys.platform.startswith("linux"):
        import ctypes

        pr_set_pdeathsig = 1
        ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:  # the parent died before the prctl took effect
        os._exit(1)
    # Ctrl-C and a scheduler's SIGTERM reach the whole process group: the parent decides (it
    # stops the pool), so that a worker prints no KeyboardInterrupt traceback of its own.
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, signal.SIG_IGN)


def ordered_map(fn: Callable[..., Any], arguments: Iterable[tuple], workers: int,
                window: int) -> Iterator[Any]:
    """``fn(*args)`` for each tuple of ``arguments``, in order; in this process if ``workers`` is
    1, else in ``workers`` processes with at most ``window`` calls submitted and not yet yielded.

    ``fn`` must be importable by name (a module-level function). Closing the iterator cancels the
    calls not yet started and waits for the running ones. Under ``lra.stop_signals.raising`` a
    stop signal whose raise was lost (``stop_signals.poll``) stops it before the next result.
    """
    from lra import stop_signals

    if workers <= 1:
        for args in arguments:
            stop_signals.poll()
            yield fn(*args)
        return
    # spawn: safe in a process that already runs threads (JAX, tqdm), and the same on every OS.
    context = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(workers, mp_context=context,
                                                initializer=_die_with_parent,
                                                initargs=(os.getpid(),)) as pool:
        pending: collections.deque[concurrent.futures.Future] = collections.deque()
        try:
            for args in arguments:
                stop_signals.poll()
                pending.append(pool.submit(fn, *args))
                if len(pending) >= window:
                    yield pending.popleft().result()
            while pending:
                stop_signals.poll()
                yield pending.popleft().result()
        finally:
            for future in pending:
                future.cancel()


# ----------------------------------------------------------------------------------------------
# Atomic files


def temp_path(path: Path) -> Path:
    """Where ``path`` is written before it is renamed into place: ``.<name>.<pid>.tmp``."""
    return path.with_name(f".{path.name}.{os.getpid()}.tmp")


@contextlib.contextmanager
def replacing(paths: Sequence[Path]) -> Iterator[list[Path]]:
    """Temporary paths to write ``paths`` to. When the block ends normally each is renamed onto
    its path (all written before the first rename); whatever happens, none is left behind."""
    temps = [temp_path(Path(path)) for path in paths]
    try:
        yield temps
        for temp, path in zip(temps, paths):
            os.replace(temp, path)
    finally:
        for temp in temps:
            temp.unlink(missing_ok=True)


def check_writable(folder: Path) -> None:
    """Create ``folder`` and prove that bytes can be written in it (``lra.workdir.PROBE_BYTES``,
    synced, then the file removed: an empty file would pass on a full disk): before minutes of
    generating, not after. Raises the ``OSError`` (disk full, permission denied, read-only, ...)
    naming the folder."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    try:
        fd, probe = tempfile.mkstemp(dir=folder, prefix=".write-test.")
    except OSError as err:
        raise type(err)(err.errno, err.strerror, str(folder)) from None
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(bytes(PROBE_BYTES))
            f.flush()
            os.fsync(f.fileno())
    except OSError as err:
        raise type(err)(err.errno, err.strerror, str(folder)) from None
    finally:
        os.unlink(probe)


def write_atomic(path: Path, data: bytes, *, sync: bool = False) -> None:
    """Write ``data`` to ``path`` complete or not at all; ``sync``: on disk before the rename. An
    ``OSError`` (a full disk) names ``path``."""
    with naming(path), replacing([path]) as (temp,), open(temp, "wb") as f:
        f.write(data)
        if sync:
            f.flush()
            os.fsync(f.fileno())


def remove_stale_temps(folder: Path, names: str) -> None:
    """Delete the temporaries of files matching the glob ``names`` in ``folder`` whose writing
    process is gone (killed during a write)."""
    for temp in folder.glob(f".{names}.*.tmp"):
        try:
            pid = int(temp.name.split(".")[-2])
            os.kill(pid, 0)
        except ProcessLookupError:
            temp.unlink(missing_ok=True)
        except (ValueError, PermissionError):  # not ours, or another user's live process
            continue


# ----------------------------------------------------------------------------------------------
# .npz caches


def load_arrays(cache: Path, key: Mapping[str, Any], names: Sequence[str]) -> tuple | None:
    """The arrays ``names`` stored in ``cache`` if every entry of ``key`` matches, else None."""
    try:
        with np.load(cache, allow_pickle=False) as z:
            if not all(np.array_equal(z[name], value) for name, value in key.items()):
                return None
            return tuple(z[name] for name in names)
    except (OSError, KeyError, ValueError, EOFError, zipfile.BadZipFile):
        return None  # missing, stale format or half-written by someone else: make them again


def save_arrays(cache: Path, key: Mapping[str, Any], arrays: Mapping[str, Any]) -> bool:
    """Store ``arrays`` with ``key`` atomically; False when the folder cannot take it (e.g. a
    read-only release folder): the caller works without the cache."""
    try:
        cache.parent.mkdir(parents=True, exist_ok=True)
        with replacing([cache]) as (temp,), open(temp, "wb") as f:  # streamed: arrays can be GBs
            np.savez(f, **arrays, **key)
        return True
    except OSError:
        return False


TSV_CACHE_VERSION = 1  # bump when the arrays cached for a parsed TSV change meaning
_TSV_ARRAYS = ("tokens", "offsets", "targets")


def parsed_tsv(path: Path, caches: Sequence[Path], parse: Callable[[], tuple], *,
               cache: bool = True) -> tuple:
    """(tokens, offsets, targets) that ``parse()`` makes of the TSV file ``path`` (ListOps,
    Retrieval), through ``.npz`` caches valid while the file's size and mtime are unchanged: from
    the first of ``caches`` that holds them, else parsed and stored in the first of ``caches``
    that can take them. ``cache=False``: parsed, nothing stored. A missing file is a DataError."""
    try:
        stat = path.stat()
    except FileNotFoundError:
        raise DataError(f"{path}: file not found") from None
    key = {"version": np.int64(TSV_CACHE_VERSION), "tsv_size": np.int64(stat.st_size),
           "tsv_mtime_ns": np.int64(stat.st_mtime_ns)}
    for candidate in caches if cache else ():
        if (arrays := load_arrays(candidate, key, _TSV_ARRAYS)) is not None:
            return arrays
    arrays = parse()
    for candidate in caches if cache else ():
        if save_arrays(candidate, key, dict(zip(_TSV_ARRAYS, arrays))):
            break
    return arrays


# ----------------------------------------------------------------------------------------------
# Messages


def format_duration(seconds: float) -> str:
    """``12 s``, ``7 min`` or ``2.5 h``."""
    if seconds < 90:
        return f"{max(1, round(seconds))} s"
    if seconds < 5400:
        return f"{round(seconds / 60)} min"
    return f"{seconds / 3600:.1f} h"
