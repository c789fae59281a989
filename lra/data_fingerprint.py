"""The fingerprint of the data a run reads: which files, their sizes and SHA-256, the generator.

    {"sha256": hex over the rest, "generator": {"name", "version", "seed"} or null,
     "files": {<path relative to the data directory>: {"bytes": int, "sha256": hex}}}

The files are those the task's provenance names per split (``tasks.Provenance.files``). A name
that is a folder (Pathfinder's image folders, a tensorflow-datasets folder) is one entry whose
``bytes`` is the folder's total, whose ``sha256`` is taken over each file's relative path, size and
SHA-256 in sorted order, and which adds ``"count"``: the number of files (a folder of 600,000 PNGs
would not fit one entry per file in a result record). A name that does not exist on disk (a
tensorflow-datasets split name) is left out.

A fingerprint covers the data, never a file a reader makes: inside a folder it skips the paths the
task declares as derived (``tasks.Provenance.derived``: Pathfinder's ``decoded/`` pixel cache,
written on first read, whose bytes hold the metadata file's mtime), the temporaries of an atomic
write (``.<name>.<id>.tmp``, left by a killed writer) and this module's own digest cache. Nothing of
a folder's path or of a file's mtime enters a digest, so a copy of the data (a cluster staging it
to a node: new mtimes, no cache) has the fingerprint of the original, before and after a read.

Fingerprints recorded before 2026-12-06 hashed every file of a folder, the reader's cache included.
Such a fingerprint still matches the data it was made on: where the one computed now differs and
the folder holds files it skipped, ``difference`` compares the saved one with the old scheme
computed over the same folder too (``Fingerprint.with_derived``), so a result or checkpoint made
before the change resumes, evaluates and counts as done where its data and cache are unchanged.

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
OLD_SCHEME = " (before 2026-12-06: derived files hashed)"  # the digest cache's slot for that scheme


class DataMismatchError(RuntimeError):
    """The data present differs from the data a checkpoint or result was made on (exit status 1)."""


class Fingerprint(dict):
    """What ``fingerprint`` returns: the dict recorded in result files and checkpoints (a plain dict
    once written), and, for comparison only, ``with_derived()``: the fingerprint of the same files
    under the scheme of fingerprints recorded before 2026-12-06, which hashed every file of a
    folder (None where no file was skipped: both schemes then agree)."""

    def __init__(self, value: dict[str, Any], with_derived=None):
        super().__init__(value)
        self._with_derived, self._old = with_derived, None

    def with_derived(self) -> dict[str, Any] | None:
        if self._with_derived is not None and self._old is None:
            try:
                self._old = self._with_derived()
            except OSError:  # a file went away while it was hashed (a cache being rebuilt)
                self._old = {}
        return self._old or None


def _skipped(rel: str, derived: tuple[str, ...]) -> bool:
    """Whether the file at ``rel`` (a path inside a fingerprinted folder) is no part of the data: a
    derived path or below one, an atomic writer's temporary or the digest cache."""
    name = rel.rsplit("/", 1)[-1]
    if name == CACHE_FILE or (name.startswith(".") and name.endswith(".tmp")):
        return True
    return any(rel == d or rel.startswith(d + "/") for d in derived)


def _sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def _stat_key(path: Path, derived: tuple[str, ...] | None) -> tuple[str, list[tuple[str, int, int]], bool]:
    """(cache key, [(relative path, bytes, mtime_ns)] of the files (one row for a file), whether a
    file was left out). In a folder the files ``_skipped`` by ``derived`` are left out (None: none
    is, the scheme before 2026-12-06)."""
    if path.is_file():
        st = path.stat()
        return f"file:{st.st_size}:{st.st_mtime_ns}", [("", st.st_size, st.st_mtime_ns)], False
    rows, left_out = [], False
    for p in sorted(q for q in path.rglob("*") if q.is_file()):
        rel = p.relative_to(path).as_posix()
        if derived is not None and _skipped(rel, derived):
            left_out = True
            continue
        st = p.stat()
        rows.append((rel, st.st_size, st.st_mtime_ns))
    key = hashlib.sha256(json.dumps(rows).encode()).hexdigest()
    return f"folder:{key}", rows, left_out


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


def _entry(path: Path, cache: dict[str, Any], derived: tuple[str, ...] | None = (),
           slot: str = "") -> tuple[dict[str, Any], bool]:
    """(the entry of the file or folder ``path``, whether a file of it was left out); cached
    under its absolute path plus ``slot``."""
    key, rows, left_out = _stat_key(path, derived)
    cached = cache.get(str(path.absolute()) + slot)
    if isinstance(cached, dict) and cached.get("key") == key:
        return cached["entry"], left_out
    if path.is_file():
        entry = {"bytes": rows[0][1], "sha256": _sha256_file(path)}
    else:
        h = hashlib.sha256()
        for rel, size, _ in rows:
            h.update(f"{rel}\0{size}\0{_sha256_file(path / rel)}\n".encode())
        entry = {"bytes": sum(r[1] for r in rows), "sha256": h.hexdigest(), "count": len(rows)}
    cache[str(path.absolute()) + slot] = {"key": key, "entry": entry}
    return entry, left_out


def digest(files: dict[str, Any], generator: dict[str, Any] | None) -> str:
    return hashlib.sha256(json.dumps({"files": files, "generator": generator},
                                     sort_keys=True).encode()).hexdigest()


def _absolute(name: str, data_dir: Path) -> Path:
    return Path(name) if Path(name).is_absolute() else data_dir / name


def _derived_inside(folder: Path, provenance, data_dir: Path) -> tuple[str, ...]:
    """The derived paths of ``provenance`` that lie in ``folder``, relative to it."""
    inside = []
    for name in getattr(provenance, "derived", ()):
        try:
            inside.append(_absolute(name, data_dir).absolute().relative_to(folder.absolute()).as_posix())
        except ValueError:
            continue
    return tuple(inside)


def _with_everything(paths: dict[str, Path], generator, data_dir: Path) -> dict[str, Any]:
    """The fingerprint of ``paths`` as recorded before 2026-12-06: every file of a folder hashed
    (its digests cached beside today's, so that a sweep comparing many cells hashes them once)."""
    cache = _load_cache(data_dir) if data_dir.is_dir() else {}
    before = json.dumps(cache, sort_keys=True)
    files = {name: _entry(path, cache, None, OLD_SCHEME)[0] for name, path in paths.items()}
    if data_dir.is_dir() and json.dumps(cache, sort_keys=True) != before:
        _save_cache(data_dir, cache)
    return {"sha256": digest(files, generator), "files": files, "generator": generator}


def fingerprint(provenance, data_dir: Path) -> Fingerprint:
    """The fingerprint of the files ``provenance`` (a ``tasks.Provenance``) names under
    ``data_dir`` (less what a reader makes, see the module docstring), and its generator."""
    data_dir = Path(data_dir)
    names = sorted(set(provenance.files.values()))
    cache = _load_cache(data_dir) if data_dir.is_dir() else {}
    before = json.dumps(cache, sort_keys=True)
    files, paths, left_out = {}, {}, False
    for name in names:
        path = _absolute(name, data_dir)
        if path.exists():
            derived = _derived_inside(path, provenance, data_dir) if path.is_dir() else ()
            (files[name], skipped), paths[name] = _entry(path, cache, derived), path
            left_out = left_out or skipped
    if data_dir.is_dir() and json.dumps(cache, sort_keys=True) != before:
        _save_cache(data_dir, cache)
    generator = json.loads(json.dumps(provenance.generator)) if provenance.generator else None
    old = (lambda: _with_everything(paths, generator, data_dir)) if left_out else None
    return Fingerprint({"sha256": digest(files, generator), "files": files, "generator": generator},
                       old)


def refreshed(saved: dict[str, Any] | None, provenance, data_dir: Path) -> tuple[str, dict[str, Any]]:
    """(verdict, today's fingerprint) of the data ``provenance`` names, for a ``saved`` fingerprint:
    "current" (the same), "older" (recorded before 2026-12-06 on these files, the reader's cache
    as it is now: today's fingerprint replaces it; ``python -m lra.data refingerprint``) or
    "other" (other data, or a cache rebuilt since: nothing can tell)."""
    now = fingerprint(provenance, data_dir)
    plain = json.loads(json.dumps(now))
    if not isinstance(saved, dict) or saved.get("sha256") == now["sha256"]:
        return "current", plain
    old = now.with_derived()
    return ("older" if old is not None and saved.get("sha256") == old["sha256"] else "other"), plain


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
    old = now.with_derived() if isinstance(now, Fingerprint) else None
    if old is not None and saved.get("sha256") == old["sha256"]:
        return None  # recorded before 2026-12-06 on these files, the reader's cache included
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
    return (diffs[0] + (f" (and {len(diffs) - 1} more differences)" if len(diffs) > 1 else "")
            + _older_hint(a, b, old))


def _older_hint(then: dict[str, Any], now: dict[str, Any], old: dict[str, Any] | None) -> str:
    """Where a saved folder entry counts more files than today's and today's left some out: it may
    have been recorded before 2026-12-06, with a reader's cache that is not the one here now."""
    if old is None or not any(isinstance(then.get(n), dict) and then[n].get("count", 0) > e.get("count", 0)
                              for n, e in now.items()):
        return ""
    return ("; if it was recorded before 2026-12-06 it also hashed the reader's cache (e.g. "
            "Pathfinder's decoded/), which only the data directory it was made on still matches")
