"""Download and unpack the official LRA release archive (``lra_release.gz``, about 8.2 GB).

    python -m lra.data fetch-release [--out DIR] [--url URL] [--sha256 HEX] [--delete-archive]

``DIR`` defaults to the data directory (``$LRA_DATA_DIR``, else ``~/.cache/lra``); afterwards
``--data-dir DIR`` finds the official ListOps, AAN (retrieval) and Pathfinder files in it.

* Download: to ``DIR/lra_release.gz.part``, renamed to ``DIR/lra_release.gz`` once complete. An
  interrupted download resumes where it stopped (HTTP ``Range``), both across runs and within one
  run (up to ``attempts`` connections, as long as each one makes progress); a server that ignores
  ``Range`` makes it start over. The host is probed first, so without network this fails in
  seconds; a server that sends nothing for ``timeout`` seconds (30) twice in a row is given up on.
  A failed write (disk full, permission denied) stops at once, naming the file: it is not a lost
  connection and is not retried. ``--sha256`` must be 64 hex digits, checked before downloading.
* Verification: the size against the server's ``Content-Length`` / ``Content-Range``; the SHA-256
  against ``--sha256`` when given (LRA publishes none). The computed SHA-256 is printed and recorded
  in ``DIR/lra_release.gz.sha256`` (``sha256sum`` format), so a later download can be checked
  against it.
* Extraction: with tarfile's ``data`` filter, which refuses ``..`` components, links that point
  outside the folder and device files (and strips group/other write bits), plus a refusal of
  absolute paths (the filter would silently make them relative). Members go to a staging folder first and
  are moved into ``DIR`` only when the whole archive has been extracted, so an unsafe or broken
  archive leaves nothing behind. ``DIR/.lra_release.gz.extracted`` records a finished extraction;
  a second run skips it.

Errors are ``ReleaseError`` (a ``tasks.DataError``), so the data command line prints them as one
line and exits with status 2.
"""

from __future__ import annotations

import argparse
import hashlib
import http.client
import os
import re
import shutil
import sys
import tarfile
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

from lra.tasks import DataError, default_data_dir
from lra.tasks.net import reachable

__all__ = ["DEFAULT_URL", "ReleaseError", "download", "extract", "fetch_release", "sha256_file"]

DEFAULT_URL = "https://storage.googleapis.com/long-range-arena/lra_release.gz"
_CHUNK = 1 << 20


class ReleaseError(DataError):
    """The release could not be downloaded, verified or unpacked; the message says why."""


class _Interrupted(Exception):
    """A connection ended early; the download can resume."""


class _Stalled(_Interrupted):
    """The server sent nothing for ``timeout`` seconds."""


STALLS = 2  # consecutive stalled connections before giving up


def check_sha256(value: str | None) -> None:
    if value is not None and not re.fullmatch(r"[0-9a-fA-F]{64}", value):
        raise ReleaseError(f"--sha256 {value!r}: expected 64 hexadecimal digits (a SHA-256)")


def _bar(total: int | None, initial: int, desc: str, progress: bool):
    from tqdm import tqdm

    return tqdm(total=total, initial=initial, unit="B", unit_scale=True, unit_divisor=1024,
                desc=desc, file=sys.stderr, disable=not progress, mininterval=0.5)


def _content_range_total(value: str | None) -> int | None:
    """``bytes a-b/total`` or ``bytes */total`` -> total (None when absent or ``*``)."""
    if not value or "/" not in value:
        return None
    total = value.rsplit("/", 1)[1].strip()
    return int(total) if total.isdigit() else None


def _content_range_start(value: str | None) -> int | None:
    try:
        return int(value.split()[1].split("-")[0])  # "bytes 100-199/200"
    except (AttributeError, IndexError, ValueError):
        return None


def _one_request(url: str, part: Path, timeout: float, progress: bool) -> int:
    """One connection: append to ``part`` from its current size. Returns the total size when the
    file is complete; raises _Interrupted when the connection ends early."""
    have = part.stat().st_size if part.exists() else 0
    request = urllib.request.Request(url, headers={"User-Agent": "lra-fetch-release"})
    if have:
        request.add_header("Range", f"bytes={have}-")
    try:
        response = urllib.request.urlopen(request, timeout=timeout)
    except urllib.error.HTTPError as err:
        if err.code == 416 and have:  # nothing left after `have`: complete, or a stale part file
            total = _content_range_total(err.headers.get("Content-Range"))
            if total == have:
                return have
            part.unlink()
            raise _Interrupted(f"the partial file ({have} bytes) does not fit the server's "
                               f"({total} bytes); starting over") from None
        raise ReleaseError(f"{url}: HTTP {err.code} {err.reason}") from None
    with response:
        have, total, mode = _resume_point(response, part, have)
        try:
            f = open(part, mode)
        except OSError as err:
            raise ReleaseError(f"{part}: cannot write it ({err.strerror or err})") from None
        with f, _bar(total, have, part.name, progress) as bar:
            _copy(response, f, part, timeout, bar)
        return _checked_size(part, total)


def _resume_point(response, part: Path, have: int) -> tuple[int, int | None, str]:
    """(bytes kept, total size or None, file mode) for the response to a request from ``have``."""
    if response.status == 206:
        start = _content_range_start(response.headers.get("Content-Range"))
        if start != have:
            part.unlink()
            raise _Interrupted(f"the server resumed at byte {start}, not {have}; starting over")
        return have, _content_range_total(response.headers.get("Content-Range")), "ab"
    # 200: the whole file (a server that ignores Range)
    length = response.headers.get("Content-Length")
    return 0, (int(length) if length and length.isdigit() else None), "wb"


def _copy(response, f, part: Path, timeout: float, bar) -> None:
    """The response's bytes into ``f`` until the stream ends; a network failure is _Interrupted
    (or _Stalled), a write failure a ReleaseError that keeps what was written."""
    while True:
        try:
            chunk = response.read(_CHUNK)
        except TimeoutError as err:
            raise _Stalled(f"the server sent nothing for {timeout:g} s ({err})") from None
        except (OSError, http.client.HTTPException) as err:
            raise _Interrupted(f"connection lost: {err}") from None
        if not chunk:
            return
        try:
            f.write(chunk)
        except OSError as err:  # disk full, quota, permissions: not the network's fault
            raise ReleaseError(f"{part}: writing failed ({err.strerror or err}); "
                               f"{f.tell()} bytes are kept there, free space and run the "
                               f"same command again to resume") from None
        bar.update(len(chunk))


def _checked_size(part: Path, total: int | None) -> int:
    """``part``'s size once it is complete (``total`` None: the server gave no size, so the end of
    the stream is trusted); _Interrupted if short, and removed if longer than announced."""
    size = part.stat().st_size
    if total is None:
        return size
    if size < total:
        raise _Interrupted(f"connection closed after {size} of {total} bytes")
    if size > total:
        part.unlink()
        raise _Interrupted(f"received {size} bytes, more than the {total} announced; "
                           f"starting over")
    return size


def download(url: str, dest: Path, *, attempts: int = 5, timeout: float = 30.0,
             retry_wait: float = 2.0, progress: bool = True) -> Path:
    """Download ``url`` to ``dest`` (via ``dest.part``, resumable). Returns ``dest``."""
    dest = Path(dest)
    if dest.is_file():
        print(f"{dest} is already there; not downloading it again", file=sys.stderr)
        return dest
    if not reachable(url):
        raise ReleaseError(f"cannot reach {urllib.parse.urlsplit(url).hostname} (no network?); "
                           f"download {url} on a machine with network access and put it at {dest}, "
                           f"then run this command again to verify and unpack it")
    dest.parent.mkdir(parents=True, exist_ok=True)
    part = dest.with_name(dest.name + ".part")
    failures = stalls = 0
    while True:
        before = part.stat().st_size if part.exists() else 0
        try:
            _one_request(url, part, timeout, progress)
            break
        except (_Interrupted, urllib.error.URLError, OSError, http.client.HTTPException) as err:
            # Retry while connections make progress; give up after `attempts` in a row that don't,
            # or after STALLS in a row where the server sent nothing at all.
            after = part.stat().st_size if part.exists() else 0
            failures = 0 if after > before else failures + 1
            stalled = isinstance(err, _Stalled | TimeoutError) or isinstance(
                getattr(err, "reason", None), TimeoutError)
            stalls = stalls + 1 if stalled and after == before else 0
            if stalls >= STALLS:
                raise ReleaseError(f"{url}: {err}; the server stalled {stalls} times in a row, "
                                   f"giving up. {after} bytes are kept in {part}: run the same "
                                   f"command again to resume") from None
            if failures >= attempts:
                raise ReleaseError(f"{url}: {err}; gave up after {attempts} attempts without "
                                   f"progress. {after} bytes are kept in {part}: run the same "
                                   f"command again to resume") from None
            print(f"{err}; resuming at byte {after}", file=sys.stderr)
            time.sleep(retry_wait)
    os.replace(part, dest)
    return dest


def sha256_file(path: Path, progress: bool = False) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f, _bar(path.stat().st_size, 0, f"sha256 {path.name}", progress) as bar:
        while chunk := f.read(_CHUNK):
            digest.update(chunk)
            bar.update(len(chunk))
    return digest.hexdigest()


def _member_filter(member: tarfile.TarInfo, dest: str) -> tarfile.TarInfo:
    """tarfile's ``data`` filter, except that an absolute name is refused, not made relative."""
    if member.name.startswith(("/", os.sep)) or os.path.isabs(member.name):
        raise tarfile.AbsolutePathError(member)
    return tarfile.data_filter(member, dest)


def extract(archive: Path, out: Path, *, progress: bool = True) -> list[Path]:
    """Unpack the tar archive ``archive`` (any compression) into ``out`` safely (see the module
    docstring). Returns the top-level paths created."""
    if not hasattr(tarfile, "data_filter"):
        raise ReleaseError("safe extraction needs tarfile's extraction filters (Python >= 3.11.4)")
    from tqdm import tqdm

    out = Path(out)
    staging = out / f".{archive.name}.extracting"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    try:
        with tarfile.open(archive, "r|*") as tar, \
                tqdm(desc=f"unpacking {archive.name}", unit=" files", file=sys.stderr,
                     disable=not progress, mininterval=0.5) as bar:
            for member in tar:
                tar.extract(member, staging, filter=_member_filter)
                bar.update(1)
        tops = sorted(staging.iterdir())
        clashes = [str(out / p.name) for p in tops if (out / p.name).exists()]
        if clashes:
            raise ReleaseError(f"{archive}: not unpacked, because {', '.join(clashes)} already "
                               f"exist; move them away or choose another --out")
        for p in tops:
            os.replace(p, out / p.name)
        return [out / p.name for p in tops]
    except tarfile.FilterError as err:
        raise ReleaseError(f"{archive}: refusing to unpack: member {err.tarinfo.name!r} is unsafe "
                           f"({err}); nothing was unpacked") from None
    except (tarfile.TarError, EOFError, OSError) as err:
        raise ReleaseError(f"{archive}: cannot unpack it ({type(err).__name__}: {err}); nothing "
                           f"was unpacked") from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def fetch_release(out: Path, *, url: str = DEFAULT_URL, sha256: str | None = None,
                  delete_archive: bool = False, progress: bool = True, attempts: int = 5,
                  retry_wait: float = 2.0) -> Path:
    """Download, verify and unpack the release into ``out``. Returns ``out``."""
    check_sha256(sha256)
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise ReleaseError(f"--out {out}: a file, not a folder")
    name = Path(urllib.parse.urlsplit(url).path).name or "lra_release.gz"
    archive = out / name
    marker = out / f".{name}.extracted"
    if marker.is_file() and not archive.exists():
        print(f"{archive.name} was already unpacked in {out} (see {marker})", file=sys.stderr)
        return out
    download(url, archive, attempts=attempts, retry_wait=retry_wait, progress=progress)
    digest = sha256_file(archive, progress)
    if sha256 and digest != sha256.lower():
        archive.unlink()
        raise ReleaseError(f"{archive}: SHA-256 {digest} does not match the expected {sha256}; "
                           f"the file was deleted, run the command again to download it anew")
    archive.with_name(archive.name + ".sha256").write_text(f"{digest}  {archive.name}\n")
    print(f"sha256 {digest}  {archive}", file=sys.stderr)
    if marker.is_file() and marker.read_text().strip() == digest:
        print(f"{archive.name} was already unpacked in {out}", file=sys.stderr)
    else:
        for path in extract(archive, out, progress=progress):
            print(path)
        marker.write_text(digest + "\n")
    if delete_archive:
        archive.unlink()
    return out


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", type=Path, default=None,
                        help="where to download and unpack (default: $LRA_DATA_DIR, else "
                             "~/.cache/lra)")
    parser.add_argument("--url", default=DEFAULT_URL, help=f"archive URL (default: {DEFAULT_URL})")
    parser.add_argument("--sha256", default=None, metavar="HEX",
                        help="expected SHA-256 of the archive (the computed one is always printed "
                             "and recorded next to it)")
    parser.add_argument("--delete-archive", action="store_true",
                        help="delete the archive once it is unpacked (it is about 8.2 GB)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")


def run(args: argparse.Namespace) -> None:
    """The ``fetch-release`` sub-command of ``python -m lra.data``."""
    fetch_release(args.out if args.out is not None else default_data_dir(), url=args.url,
                  sha256=args.sha256, delete_archive=args.delete_archive,
                  progress=not args.no_progress)
