"""The Pathfinder reader: a folder in the LRA archive's layout -> decoded pixels and labels.

Separate from ``tasks/pathfinder.py`` (the tasks, which only choose the folder and split what is
read) and from ``tasks/_pathfinder_gen.py`` (the writer) because it reads any folder in that
layout, ours or an official ``lra_release``, with the edge cases of both: two metadata formats,
empty PNGs, caches that go stale.

Order: the metadata files of the folder by batch number (names that are not numbers after, by
name), lines in order; the first ``limit`` lines are used. Zero-byte PNGs are skipped and counted
(the archive has one, in ``pathfinder32/curv_baseline``). A metadata file is text lines (the
archive) or a binary ``np.save`` string array (the 2019 generator's own output). Decoded pixels are
cached per metadata file in ``<folder>/decoded/<batch>.npz`` (rebuilt when the metadata file's
size or mtime changes; skipped where the folder is read-only). The cache's bytes hold that mtime,
so the tasks declare ``CACHE_FOLDER`` derived (``tasks.Provenance.derived``): it is never part of
the data's fingerprint.
"""

from __future__ import annotations

import io
import math
import os
import sys
from pathlib import Path

import numpy as np
from lra.tasks import DataError
from lra.tasks._files import load_arrays, save_arrays
from lra.tasks._pathfinder_gen import metadata_files

__all__ = ["CACHE_FOLDER", "PathfinderImages", "read_images"]

_FIELDS = 11
CACHE_FOLDER = "decoded"  # <folder>/decoded/<batch>.npz: what the reader writes, never data
_CACHE_VERSION = 1  # part of the decoded cache's key: bump when the cached arrays change meaning
_CACHE_ARRAYS = ("pixels", "labels", "rows", "skipped", "skipped_rows")
_NPY_MAGIC = b"\x93NUMPY"


def _read_metadata(path: Path) -> list[tuple[int, str, int]]:
    """(line number, relative image path, label) of each line of one metadata file.

    Text lines (the archive) or a binary ``np.save`` string array (the 2019 generator's own
    output); a row of the latter counts as a line.
    """
    raw = path.read_bytes()
    if raw.startswith(_NPY_MAGIC):
        try:
            table = np.load(io.BytesIO(raw), allow_pickle=False)
        except ValueError as err:
            raise DataError(f"{path}: an unreadable .npy array ({err}); expected text lines or "
                            f"a string array of {_FIELDS} columns") from None
        rows = [(n, [str(v) for v in np.atleast_1d(row)]) for n, row in
                enumerate(np.atleast_2d(table), 1)]
    else:
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise DataError(f"{path}: not a text file; expected one line per image with "
                            f"{_FIELDS} space-separated fields") from None
        rows = [(n, line.split()) for n, line in enumerate(text.splitlines(), 1) if line.strip()]
    entries = []
    for n, fields in rows:
        if len(fields) != _FIELDS:
            raise DataError(f"{path}:{n}: expected {_FIELDS} space-separated fields (folder, file "
                            f"name, index, label, continuity, contour length, distractor length, "
                            f"paddle length, thickness, margin, contrasts), got {len(fields)}")
        subdir, name, label = fields[0], fields[1], fields[3]
        if label not in ("0", "1"):
            raise DataError(f"{path}:{n}: expected the label 0 or 1 in field 4, got {label!r}")
        if not name.endswith(".png"):
            raise DataError(f"{path}:{n}: expected a .png file name in field 2, got {name!r}")
        entries.append((n, f"{subdir}/{name}", int(label)))
    return entries


class PathfinderImages:
    """Decoded images: ``pixels`` uint8[N, H*W] (row-major), ``labels`` uint8[N], and the
    ``skipped`` zero-byte PNGs (paths relative to the folder)."""

    def __init__(self, pixels: np.ndarray, labels: np.ndarray, skipped: list[str]):
        self.pixels, self.labels, self.skipped = pixels, labels, skipped

    def __len__(self) -> int:
        return len(self.labels)


def _decode(folder: Path, relative: str, side: int | None, where: str) -> np.ndarray | None:
    """uint8[H, W] of one PNG, or None for a zero-byte file."""
    from PIL import Image, UnidentifiedImageError

    path = folder / relative
    try:
        if path.stat().st_size == 0:
            return None
        with Image.open(path) as image:
            if image.mode != "L":
                image = image.convert("L")
            pixels = np.asarray(image)
    except FileNotFoundError:
        raise DataError(f"{where}: image {path} not found") from None
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError) as err:
        raise DataError(f"{path}: not a readable PNG ({err}); listed at {where}") from None
    if side is not None and pixels.shape != (side, side):
        raise DataError(f"{path}: expected a {side}x{side} image, got "
                        f"{pixels.shape[1]}x{pixels.shape[0]} (listed at {where})")
    return pixels


def _cache_file(folder: Path, meta: Path) -> Path:
    return folder / CACHE_FOLDER / f"{meta.stem}.npz"


def _cache_key(meta: Path, side: int) -> np.ndarray:
    stat = meta.stat()
    return np.array([_CACHE_VERSION, stat.st_size, stat.st_mtime_ns, side], np.int64)


def _load_cache(cache: Path, key: np.ndarray):
    arrays = load_arrays(cache, {"key": key}, _CACHE_ARRAYS)
    if arrays is None:
        return None
    pixels, labels, rows, skipped, skipped_rows = arrays
    return pixels, labels, rows, [str(s) for s in skipped], skipped_rows


def _save_cache(cache: Path, key: np.ndarray, arrays) -> None:
    pixels, labels, rows, skipped, skipped_rows = arrays
    save_arrays(cache, {"key": key}, {"pixels": pixels, "labels": labels, "rows": rows,
                                      "skipped": np.array(skipped, dtype=str),
                                      "skipped_rows": skipped_rows})


def _decode_file(folder: Path, meta: Path, entries: list[tuple[int, str, int]], side: int):
    """(pixels uint8[n, side*side], labels uint8[n], row of each image int64[n], skipped paths,
    rows of the skipped) for the given entries of one metadata file."""
    from concurrent.futures import ThreadPoolExecutor

    def one(entry):
        line, relative, _ = entry
        return _decode(folder, relative, side, f"{meta}:{line}")

    with ThreadPoolExecutor(4) as pool:  # PIL decodes without the GIL
        decoded = list(pool.map(one, entries))
    kept = [i for i, pixels in enumerate(decoded) if pixels is not None]
    pixels = np.zeros((len(kept), side * side), np.uint8)
    for k, i in enumerate(kept):
        pixels[k] = decoded[i].reshape(-1)
    labels = np.array([entries[i][2] for i in kept], np.uint8)
    skipped_rows = np.array([i for i, p in enumerate(decoded) if p is None], np.int64)
    return (pixels, labels, np.array(kept, np.int64),
            [entries[i][1] for i in skipped_rows.tolist()], skipped_rows)


def read_images(folder: str | os.PathLike, *, limit: int | None = None, side: int | None = None,
                cache: bool = True, progress: bool = False) -> PathfinderImages:
    """Read a Pathfinder folder (ours or the official ``pathfinder32/curv_contour_length_14``).

    ``limit``: use the first ``limit`` metadata lines (all by default). ``side``: the expected
    image width and height (default: that of the first image). Problems raise ``DataError``
    naming the metadata file and line, or the image.
    """
    from tqdm import tqdm

    folder = Path(folder)
    files = metadata_files(folder)
    if not files:
        raise DataError(f"{folder / 'metadata'}: no metadata files (*.npy); expected the "
                        f"layout imgs/<batch>/sample_<i>.png + metadata/<batch>.npy")
    remaining = math.inf if limit is None else limit
    work = []  # (metadata file, its entries, how many of them are used)
    for meta in files:
        if remaining <= 0:
            break
        entries = _read_metadata(meta)
        take = int(min(remaining, len(entries)))
        work.append((meta, entries, take))
        remaining -= take
    if side is None:
        side = next((p.shape[0] for meta, entries, take in work for line, relative, _ in
                     entries[:take] if (p := _decode(folder, relative, None, f"{meta}:{line}"))
                     is not None), 0)
    pixels = np.empty((sum(take for *_, take in work), side * side), np.uint8)
    labels = np.empty(len(pixels), np.uint8)
    skipped: list[str] = []
    count = 0
    for meta, entries, take in tqdm(work, desc=f"decoding {folder.name}", unit="file",
                                    file=sys.stderr, disable=not progress, leave=False):
        arrays = None
        if cache:
            key = _cache_key(meta, side)
            arrays = _load_cache(_cache_file(folder, meta), key)
            if arrays is None and take == len(entries):
                arrays = _decode_file(folder, meta, entries, side)
                _save_cache(_cache_file(folder, meta), key, arrays)
        if arrays is None:
            arrays = _decode_file(folder, meta, entries[:take], side)
        part_pixels, part_labels, rows, part_skipped, skipped_rows = arrays
        keep = rows < take
        n = int(keep.sum())
        pixels[count:count + n] = part_pixels[keep]
        labels[count:count + n] = part_labels[keep]
        count += n
        skipped += [s for s, r in zip(part_skipped, skipped_rows.tolist()) if r < take]
    return PathfinderImages(pixels[:count], labels[:count], skipped)

