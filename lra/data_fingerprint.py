"""The fingerprint of the data a run reads: which files, their sizes and SHA-256, the generator.

    {"sha256": hex over the rest, "generator": {"name", "version", "seed"} or null,
     "files": {<path relative to the data directory>: {"bytes": int, "sha256": hex}}}

The files are those the task's provenance names per split (``tasks.Provenance.files``). A name
that is a folder (Pathfinder's image folders, a tensorflow-datasets folder) is one entry whose
``bytes`` is the folder's total, whose ``sha256`` is taken over each file's relative path, size and
SHA-256 in sorted order, and which adds ``"count"``: the number of files (a folder of 600,000 PNGs
would not fit one entry per file in a result record). A name that does not exist on disk (a
tensorflow-datasets split name) is left out.

Hashing a data set of hundreds of MB on every start would cost seconds to minutes, so each entry's
digest is cached in ``<data dir>/.lra-fingerprints.json`` under its absolute path, keyed by what
``os.stat`` says of it (size and mtime in ns, for a folder a digest of every file's relative path,
size and mtime): a file whose size or modification time changed is hashed again; the cache is only
a cache (unreadable or unwritable: everything is hashed, nothing fails).

A checkpoint stores the fingerprint of the data it was trained on, the result file the one the
run finished on; a resume, a completed run's re-run, ``lra.sweep``'s skip check and
``lra.evaluate`` compare it with the data present now (``difference``) and refuse on a mismatch,
naming the first difference in one line.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from lra import atomic

CACHE_FILE = ".lra-fingerprints.json"


class DataMismatchError(RuntimeError):
    """The data present differs from the data a checkpoint or result was made on (exit status 1)."""


def _sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def _stat_key(path: Path) -> tuple[str, list[tuple[str, int, int]]]:
    """(cache key, [(relative path, bytes, mtime_ns)] of the files; one row for a file)."""
    if path.is_file():
        st = path.stat()
        return f"file:{st.st_size}:{st.st_mtime_ns}", [("", st.st_size, st.st_mtime_ns)]
    rows = []
    for p in sorted(q for q in path.rglob("*") if q.is_file()):
        st = p.stat()
        rows.append((p.relative_to(path).as_posix(), st.st_size, st.st_mtime_ns))
    key = hashlib.sha256(json.dumps(rows).encode()).hexdigest()
    return f"folder:{key}", rows


def _load_cache(data_dir: Path) -> dict[str, Any]:
    try:
        cache = json.loads((data_dir / CACHE_FILE).read_text())
        return cache if isinstance(cache, dict) else {}
    except (OSError, ValueError):
        return {}


def _save_cache(data_dir: Path, cache: dict[str, Any]) -> None:
    try:
        atomic.replace(data_dir / CACHE_FILE, json.dumps(cache, sort_keys=True).encode())
    except OSError:
        pass  # a read-only data directory: hash again next time


def _entry(path: Path, cache: dict[str, Any]) -> dict[str, Any]:
    key, rows = _stat_key(path)
    cached = cache.get(str(path.absolute()))
    if isinstance(cached, dict) and cached.get("key") == key:
        return cached["entry"]
    if path.is_file():
        entry = {"bytes": rows[0][1], "sha256": _sha256_file(path)}
    else:
        h = hashlib.sha256()
        for rel, size, _ in rows:
            h.update(f"{rel}\0{size}\0{_sha256_file(path / rel)}\n".encode())
        entry = {"bytes": sum(r[1] for r in rows), "sha256": h.hexdigest(), "count": len(rows)}
    cache[str(path.absolute())] = {"key": key, "entry": entry}
    return entry


def digest(files: dict[str, Any], generator: dict[str, Any] | None) -> str:
    return hashlib.sha256(json.dumps({"files": files, "generator": generator},
                                     sort_keys=True).encode()).hexdigest()


def fingerprint(provenance, data_dir: Path) -> dict[str, Any]:
    """The fingerprint of the files ``provenance`` (a ``tasks.Provenance``) names under
    ``data_dir``, and its generator."""
    data_dir = Path(data_dir)
    names = sorted(set(provenance.files.values()))
    cache = _load_cache(data_dir) if data_dir.is_dir() else {}
    before = json.dumps(cache, sort_keys=True)
    files = {}
    for name in names:
        path = Path(name) if Path(name).is_absolute() else data_dir / name
        if path.exists():
            files[name] = _entry(path, cache)
    if data_dir.is_dir() and json.dumps(cache, sort_keys=True) != before:
        _save_cache(data_dir, cache)
    generator = json.loads(json.dumps(provenance.generator)) if provenance.generator else None
    return {"sha256": digest(files, generator), "files": files, "generator": generator}


def _generator_text(g: dict[str, Any] | None) -> str:
    if not g:
        return "none (files read as found)"
    return f"{g.get('name')} v{g.get('version')} seed {g.get('seed')}"


def difference(saved: dict[str, Any] | None, now: dict[str, Any], *,
               absent_ok_if_generated: bool = False) -> str | None:
    """None when ``now`` is the data ``saved`` was made on, else the first difference in words
    (and how many more). ``saved`` None (written before fingerprints existed): no difference.

    ``absent_ok_if_generated``: a file of ``saved`` missing now is no difference when the same
    generator would make it again (``lra.sweep``'s skip check runs before any data is generated).
    """
    if not isinstance(saved, dict) or saved.get("sha256") == now.get("sha256"):
        return None
    diffs = []
    if saved.get("generator") != now.get("generator"):
        diffs.append(f"generator: {_generator_text(saved.get('generator'))} then, "
                     f"{_generator_text(now.get('generator'))} now")
    a, b = saved.get("files") or {}, now.get("files") or {}
    for name in sorted(a.keys() | b.keys()):
        if name not in b:
            if not (absent_ok_if_generated and saved.get("generator")
                    and saved.get("generator") == now.get("generator")):
                diffs.append(f"{name}: read then, not present now")
        elif name not in a:
            diffs.append(f"{name}: read now, not then")
        elif a[name] != b[name]:
            x, y = a[name], b[name]
            what = (f"{x.get('bytes')} bytes then, {y.get('bytes')} now" if x.get("bytes") != y.get("bytes")
                    else f"same size, sha256 {str(x.get('sha256'))[:12]} then, "
                         f"{str(y.get('sha256'))[:12]} now")
            diffs.append(f"{name}: {what}")
    if not diffs:
        return None
    return diffs[0] + (f" (and {len(diffs) - 1} more differences)" if len(diffs) > 1 else "")
