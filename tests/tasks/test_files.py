"""tasks._files: what the task tests do not already reach: a write that fails half-way leaves the
old files and no temporary, and a cache that is stale, damaged or unwritable is never used or
fatal (the pool, the worker count and stale temporaries are covered by the ListOps and Pathfinder
generation tests)."""

from __future__ import annotations

import numpy as np
import pytest
from lra.tasks import _files


def test_a_failed_replacement_keeps_every_old_file_and_no_temporary(tmp_path):
    paths = [tmp_path / "a.txt", tmp_path / "b.txt"]
    for path in paths:
        path.write_text("old")
    with pytest.raises(OSError, match="disk full"), _files.replacing(paths) as temps:
        temps[0].write_text("new")
        temps[1].write_text("ne")  # half-written when the writer fails
        raise OSError("disk full")
    assert [p.read_text() for p in paths] == ["old", "old"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.txt", "b.txt"]

    _files.write_atomic(paths[1], b"new", sync=True)
    assert paths[1].read_text() == "new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.txt", "b.txt"]


def test_a_cache_is_used_only_with_its_key_and_never_fails(tmp_path):
    cache = tmp_path / "sub" / "x.npz"
    key = {"version": np.int64(1), "size": np.int64(10)}
    arrays = {"tokens": np.arange(5, dtype=np.uint8), "labels": np.array(["a", "bc"])}
    assert _files.save_arrays(cache, key, arrays)
    tokens, labels = _files.load_arrays(cache, key, ("tokens", "labels"))
    assert tokens.dtype == np.uint8 and tokens.tolist() == [0, 1, 2, 3, 4]
    assert labels.tolist() == ["a", "bc"]
    assert _files.load_arrays(cache, {**key, "size": np.int64(11)}, ("tokens",)) is None  # stale
    assert _files.load_arrays(cache, {**key, "mtime": np.int64(0)}, ("tokens",)) is None  # no field
    assert _files.load_arrays(cache, key, ("pixels",)) is None  # another format
    cache.write_bytes(cache.read_bytes()[:40])  # half-written by a killed process
    assert _files.load_arrays(cache, key, ("tokens",)) is None
    assert _files.load_arrays(tmp_path / "missing.npz", key, ("tokens",)) is None

    blocked = tmp_path / "file"
    blocked.write_text("")  # a file where the cache folder should be
    assert not _files.save_arrays(blocked / "x.npz", key, arrays)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file", "sub"]


@pytest.mark.parametrize(("seconds", "text"), [(0.2, "1 s"), (89, "89 s"), (90, "2 min"),
                                               (5399, "90 min"), (5400, "1.5 h")])
def test_durations_read_naturally(seconds, text):
    assert _files.format_duration(seconds) == text
