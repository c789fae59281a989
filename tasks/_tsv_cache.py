"""A parsed TSV kept as an .npz next to it (tokens, offsets, targets), valid while the TSV's size and
modification time are unchanged. Shared by the tasks that parse large text files (ListOps, Retrieval)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

VERSION = 1  # bump when the cached arrays change meaning


def load(cache: Path, stat: os.stat_result):
    """(tokens, offsets, targets) from ``cache`` if it matches the TSV's ``stat``, else None."""
    try:
        with np.load(cache, allow_pickle=False) as z:
            key = (int(z["version"]), int(z["tsv_size"]), int(z["tsv_mtime_ns"]))
            if key != (VERSION, stat.st_size, stat.st_mtime_ns):
                return None
            return z["tokens"], z["offsets"], z["targets"]
    except (OSError, KeyError, ValueError, EOFError):
        return None  # missing, stale format or half-written by someone else: parse again


def save(cache: Path, stat: os.stat_result, arrays) -> bool:
    """Write atomically; False when the folder cannot take it (e.g. a read-only release folder)."""
    tokens, offsets, targets = arrays
    temp = cache.with_name(f".{cache.name}.{os.getpid()}.tmp")
    try:
        cache.parent.mkdir(parents=True, exist_ok=True)
        with open(temp, "wb") as f:
            np.savez(f, tokens=tokens, offsets=offsets, targets=targets, version=np.int64(VERSION),
                     tsv_size=np.int64(stat.st_size), tsv_mtime_ns=np.int64(stat.st_mtime_ns))
        os.replace(temp, cache)
        return True
    except OSError:
        return False
    finally:
        temp.unlink(missing_ok=True)
