"""Pathfinder and Path-X (LRA): the generator's files, the reader and the two tasks.

An image shows two target snakes made of short dashes, shorter distractor snakes and two circular
markers; the model reads the image as a sequence of pixels and says whether the markers sit on the
two ends of one snake (label 1) or not (label 0). ``pathfinder`` is 32x32 (1024 tokens), ``pathx``
128x128 (16384 tokens), both at LRA's "hard" difficulty (snakes of 14 dashes) by default (LRA issue
#11). The renderer is ``tasks._snakes`` (the "snakes2" generator LRA used, reproduced in
distribution: the original drew from numpy's unseeded global state).

Files (the LRA archive's layout, ``pathfinder{32,64,128,256}/<difficulty folder>/``)::

    <folder>/imgs/<batch>/sample_<i>.png   # 8-bit grey PNG; i restarts at 0 in every batch
    <folder>/metadata/<batch>.npy          # TEXT despite the name: one line per image, 11 fields
    <folder>/generator.json                # ours only: the settings the images were made with

Image k of a set is ``imgs/{k // 1000}/sample_{k % 1000}.png``; its metadata line is
``imgs/<batch> sample_<i>.png <i> <label> <kappa> <C> <C_d> <L> <t> <m> 1``. The difficulty folders
are ``curv_baseline`` (easy, C = 6), ``curv_contour_length_9`` and ``curv_contour_length_14``
(hard). A batch's PNGs are written first, each under a temporary name then renamed, and its
metadata file last (also renamed into place), so a batch is complete iff its metadata file is;
an interrupted generation resumes at the first incomplete batch.

Determinism: image k is drawn from ``SeedSequence(seed, spawn_key=(resolution, C, k))`` alone, so a
set does not depend on the number of worker processes, and the first N images of a larger set
are the set of N images.

Reading (ours or an official ``lra_release``): the metadata files of the folder in order of their
batch number (names that are not numbers: by name), lines in order; the first ``num_images``
lines are used. Zero-byte PNGs are skipped and counted (the archive has one, in
``pathfinder32/curv_baseline``). Splits: the first 80% of the images in that order are ``train``,
the next 10% ``val``, the last 10% ``test`` (LRA's ``[:80%]``, ``[80%:90%]``, ``[90%:]``; every
image is an independent draw, so no shuffle is needed). Decoded pixels are cached per metadata
file in ``<folder>/decoded/<batch>.npz`` (rebuilt when the metadata file's size or mtime changes;
skipped where the folder is read-only).

Tokens: pixel value + 1 (1..256), so that no pixel is the pad id 0 (the original LRA masked black
pixels, most of every image, as padding); vocabulary 257; the mask is all True (every image has
its full length).
"""

from __future__ import annotations

import concurrent.futures
import io
import json
import math
import multiprocessing
import os
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from tasks import DataError, Provenance, Task, register, relative
from tasks._snakes import DIFFICULTIES, PARAMS, Drawing, draw, metadata_fields

__all__ = ["BATCH_SIZE", "DIFFICULTIES", "PathXTask", "PathfinderExamples", "PathfinderImages",
           "PathfinderTask", "generate", "read_images", "render", "split_images"]

BATCH_SIZE = 1000  # images per imgs/<batch> folder and metadata file, as in the archive
PAD_ID = 0
VOCAB_SIZE = 257  # pad + 256 pixel values shifted by one
SPLITS = ("train", "val", "test")
RESOLUTIONS = tuple(PARAMS)
_FIELDS = 11
_GENERATOR_FILE = "generator.json"
_GENERATOR_VERSION = 2  # part of the seed -> images mapping; bump when the pictures change
# (2: seeds fail where the original's cv2 dilation border quirk makes them fail)
_CACHE_VERSION = 1
_NPY_MAGIC = b"\x93NUMPY"
# Images per work unit, about a second of work each; the output does not depend on it.
_CHUNK = {32: 40, 64: 2, 128: 2, 256: 20}
# Rough CPU seconds per image on one core (measured), for the message before generating.
_SECONDS_PER_IMAGE = {32: 0.015, 64: 0.8, 128: 0.6, 256: 0.06}


def _check(resolution: int, difficulty: str) -> None:
    if resolution not in PARAMS:
        raise ValueError(f"Pathfinder resolution must be one of {', '.join(map(str, PARAMS))}, "
                         f"got {resolution}")
    if difficulty not in DIFFICULTIES:
        raise ValueError(f"Pathfinder difficulty must be one of {', '.join(DIFFICULTIES)}, "
                         f"got {difficulty!r}")


def folder_name(difficulty: str) -> str:
    """The archive's folder of a difficulty, e.g. "hard" -> "curv_contour_length_14"."""
    return DIFFICULTIES[difficulty][1]


# ----------------------------------------------------------------------------------------------
# Generating


def render(index: int, *, resolution: int = 32, difficulty: str = "hard", seed: int = 0) -> Drawing:
    """Image ``index`` of the set (resolution, difficulty, seed), with the generator's record;
    a pure function of its arguments."""
    _check(resolution, difficulty)
    contour_length = DIFFICULTIES[difficulty][0]
    rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(resolution, contour_length,
                                                                        index)))
    return draw(PARAMS[resolution], contour_length, rng)


def _png(image: np.ndarray) -> bytes:
    from PIL import Image

    buffer = io.BytesIO()
    Image.fromarray(image, mode="L").save(buffer, format="PNG")
    return buffer.getvalue()


def _render_chunk(resolution: int, difficulty: str, seed: int, start: int,
                  stop: int) -> list[tuple[bytes, int, int]]:
    """(PNG bytes, label, margin) of images start..stop-1; runs in the worker processes."""
    out = []
    for index in range(start, stop):
        drawing = render(index, resolution=resolution, difficulty=difficulty, seed=seed)
        out.append((_png(drawing.image), drawing.label, drawing.margin))
    return out


def _default_workers() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _chunk_results(workers: int, settings: tuple, units: list[tuple[int, int]]) -> Iterator[list]:
    """The results of ``_render_chunk`` for each (start, stop) unit, in order."""
    if workers <= 1:
        for start, stop in units:
            yield _render_chunk(*settings, start, stop)
        return
    # spawn: safe in a process that already runs threads (JAX, tqdm), and the same on every OS.
    context = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(workers, mp_context=context) as pool:
        pending: list[concurrent.futures.Future] = []
        try:
            for unit in units:
                pending.append(pool.submit(_render_chunk, *settings, *unit))
                if len(pending) >= 4 * workers:  # a bounded window of work in flight
                    yield pending.pop(0).result()
            while pending:
                yield pending.pop(0).result()
        finally:
            for future in pending:
                future.cancel()


def _write_atomic(path: Path, data: bytes, *, sync: bool = False) -> None:
    temp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(temp, "wb") as f:
            f.write(data)
            if sync:
                f.flush()
                os.fsync(f.fileno())
        os.replace(temp, path)
    finally:
        temp.unlink(missing_ok=True)


def _settings(resolution: int, difficulty: str, seed: int) -> dict[str, Any]:
    return {"generator": "lra snakes2", "version": _GENERATOR_VERSION, "resolution": resolution,
            "difficulty": difficulty, "seed": seed}


def _claim(folder: Path, settings: dict[str, Any]) -> None:
    """Make ``folder`` ours for these settings, or refuse if it holds other images."""
    record = folder / _GENERATOR_FILE
    if record.is_file():
        try:
            found = json.loads(record.read_text())
        except (OSError, ValueError) as err:
            raise DataError(f"{record}: not readable ({err}); delete the folder to "
                            f"regenerate") from None
        if found != settings:
            differ = sorted(k for k in set(found) | set(settings) if found.get(k) != settings.get(k))
            if differ == ["version"]:
                raise DataError(f"{folder} holds Pathfinder images from generator version "
                                f"{found.get('version')!r}; this is version {_GENERATOR_VERSION}, "
                                f"whose pictures differ (see tasks/_snakes.py). Delete the folder "
                                f"to regenerate it, or use another data directory")
            raise DataError(f"{folder} holds Pathfinder images made with other settings "
                            f"({', '.join(f'{k}={found.get(k)!r}' for k in differ)}, asked: "
                            f"{', '.join(f'{k}={settings.get(k)!r}' for k in differ)}); choose "
                            f"another output folder or delete it")
        return
    if _metadata_files(folder):
        raise DataError(f"{folder} holds Pathfinder data this generator did not write (an "
                        f"official release?); it is never written over: choose another folder")
    folder.mkdir(parents=True, exist_ok=True)
    _write_atomic(record, (json.dumps(settings, indent=1) + "\n").encode(), sync=True)


def _count_lines(path: Path) -> int:
    try:
        return sum(1 for line in path.read_bytes().splitlines() if line.strip())
    except FileNotFoundError:
        return 0


def _plan(folder: Path, num_images: int) -> list[tuple[int, int, int]]:
    """(batch, first, stop) sample ranges still to make for the first ``num_images`` images."""
    plan = []
    for batch in range(math.ceil(num_images / BATCH_SIZE)):
        size = min(BATCH_SIZE, num_images - batch * BATCH_SIZE)
        have = _count_lines(folder / "metadata" / f"{batch}.npy")
        if have < size:
            plan.append((batch, have, size))
    return plan


def generate(out_dir: str | os.PathLike, *, resolution: int = 32, difficulty: str = "hard",
             num_images: int = 200_000, seed: int = 0, workers: int | None = None,
             progress: bool = True) -> Path:
    """Write images 0..num_images-1 of the set (resolution, difficulty, seed) into
    ``out_dir/<difficulty folder>/`` and return that folder.

    The same files for a seed on any ``workers`` (processes, default: the usable CPUs; 1 = in
    this process; started with "spawn", so a script calling this needs the usual
    ``if __name__ == "__main__":`` guard). Complete batches already there are kept, so an
    interrupted call resumes, and asking for more images than a folder holds adds the missing
    ones. A folder made with other settings, or not by this generator, is refused.
    """
    _check(resolution, difficulty)
    if num_images < 0:
        raise ValueError(f"num_images must be >= 0, got {num_images}")
    folder = Path(out_dir) / folder_name(difficulty)
    _claim(folder, _settings(resolution, difficulty, seed))
    plan = _plan(folder, num_images)
    chunk = _CHUNK[resolution]
    units = [(batch * BATCH_SIZE + i, batch * BATCH_SIZE + min(i + chunk, stop))
             for batch, first, stop in plan for i in range(first, stop, chunk)]
    todo = sum(stop - first for _, first, stop in plan)
    workers = max(1, min(workers or _default_workers(), len(units)))
    params, contour_length = PARAMS[resolution], DIFFICULTIES[difficulty][0]

    from tqdm import tqdm

    sizes = {batch: stop for batch, _, stop in plan}  # lines each batch's metadata file will have
    lines: dict[int, list[str]] = {}
    with tqdm(total=todo, desc=f"Pathfinder {resolution}x{resolution} {difficulty}", unit="img",
              file=sys.stderr, disable=not progress, smoothing=0.05) as bar:
        results = _chunk_results(workers, (resolution, difficulty, seed), units)
        try:
            for (start, _), images in zip(units, results):
                batch = start // BATCH_SIZE
                if batch not in lines:
                    meta = folder / "metadata" / f"{batch}.npy"
                    lines[batch] = meta.read_text().splitlines() if meta.is_file() else []
                    lines[batch] = [line for line in lines[batch] if line.strip()]
                    (folder / "imgs" / str(batch)).mkdir(parents=True, exist_ok=True)
                for offset, (png, label, margin) in enumerate(images):
                    i = start - batch * BATCH_SIZE + offset
                    _write_atomic(folder / "imgs" / str(batch) / f"sample_{i}.png", png)
                    fields = [f"imgs/{batch}", f"sample_{i}.png", str(i), str(label),
                              *metadata_fields(params, contour_length, margin)]
                    lines[batch].append(" ".join(fields))
                bar.update(len(images))
                if len(lines[batch]) == sizes[batch]:
                    (folder / "metadata").mkdir(exist_ok=True)
                    text = "".join(line + "\n" for line in lines.pop(batch))
                    _write_atomic(folder / "metadata" / f"{batch}.npy", text.encode(), sync=True)
        finally:
            results.close()
    return folder


def _format_duration(seconds: float) -> str:
    if seconds < 90:
        return f"{max(1, round(seconds))} s"
    if seconds < 5400:
        return f"{round(seconds / 60)} min"
    return f"{seconds / 3600:.1f} h"


# ----------------------------------------------------------------------------------------------
# Reading


def _metadata_files(folder: Path) -> list[Path]:
    """``folder/metadata/*.npy`` by batch number (names that are not numbers after, by name)."""
    files = [p for p in (folder / "metadata").glob("*.npy") if p.is_file()]
    return sorted(files, key=lambda p: (0, int(p.stem), "") if p.stem.isdigit() else (1, 0, p.stem))


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
    return folder / "decoded" / f"{meta.stem}.npz"


def _cache_key(meta: Path, side: int) -> np.ndarray:
    stat = meta.stat()
    return np.array([_CACHE_VERSION, stat.st_size, stat.st_mtime_ns, side], np.int64)


def _load_cache(cache: Path, key: np.ndarray):
    try:
        with np.load(cache, allow_pickle=False) as z:
            if not np.array_equal(z["key"], key):
                return None
            return z["pixels"], z["labels"], z["rows"], [str(s) for s in z["skipped"]], \
                z["skipped_rows"]
    except (OSError, KeyError, ValueError, EOFError):
        return None  # missing, stale format or half-written: decode again


def _save_cache(cache: Path, key: np.ndarray, arrays) -> None:
    pixels, labels, rows, skipped, skipped_rows = arrays
    try:
        cache.parent.mkdir(exist_ok=True)
        buffer = io.BytesIO()
        np.savez(buffer, key=key, pixels=pixels, labels=labels, rows=rows,
                 skipped=np.array(skipped, dtype=str), skipped_rows=skipped_rows)
        _write_atomic(cache, buffer.getvalue())
    except OSError:
        pass  # e.g. a read-only release folder: work without the cache


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
    files = _metadata_files(folder)
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


class PathfinderExamples(Sequence):
    """One split: ``ex[i]`` -> {"inputs": int32[H*W] = pixel + 1, "mask": bool[H*W] all True,
    "targets": int32[]}."""

    def __init__(self, pixels: np.ndarray, labels: np.ndarray):
        self.pixels, self.labels = pixels, labels

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, i: int) -> dict[str, np.ndarray]:
        n = len(self.labels)
        i = int(i)
        if not -n <= i < n:
            raise IndexError(f"example {i} out of range for {n} examples")
        pixels = self.pixels[i]
        return {"inputs": pixels.astype(np.int32) + 1, "mask": np.ones(pixels.shape, bool),
                "targets": np.array(self.labels[i], np.int32)}


def split_images(images: PathfinderImages) -> dict[str, PathfinderExamples]:
    """80/10/10 in reading order: train = [:80%], val = [80%:90%], test = [90%:]."""
    n = len(images)
    bounds = (0, n * 8 // 10, n * 9 // 10, n)
    return {split: PathfinderExamples(images.pixels[a:b], images.labels[a:b])
            for split, a, b in zip(SPLITS, bounds[:-1], bounds[1:])}


# ----------------------------------------------------------------------------------------------
# The tasks

_OFFICIAL_ROOTS = (".", "lra_release", "lra_release/lra_release")


class _PathfinderTask(Task):
    """Shared by ``pathfinder`` and ``pathx``; subclasses set ``resolution``.

    Data options (keyword-only): ``difficulty`` ("easy", "intermediate", "hard"), ``num_images``
    (how many images the task uses, 80/10/10; the missing ones are generated), ``seed`` (of the
    data generation). Where the data is read from:

    * with ``seed`` 0, an official folder ``pathfinder<res>/<difficulty folder>`` under
      ``data_dir``, ``data_dir/lra_release/`` or ``data_dir/lra_release/lra_release/`` (the first
      found; read, never written);
    * otherwise ``<data_dir>/pathfinder/pathfinder<res>/<difficulty folder>`` (seed 0) or
      ``<data_dir>/pathfinder/seed<seed>/pathfinder<res>/<difficulty folder>``, generated there
      by ``prepare()`` (the same folder serves every ``num_images``: a smaller set is the start
      of a larger one).
    """

    resolution: ClassVar[int]
    num_classes = 2
    pad_id = PAD_ID
    vocab_size = VOCAB_SIZE
    pixel_stats = (0.5, 0.5)  # pixels to [-1, 1], as S5 and Mega normalise Pathfinder

    def __init__(self, data_dir: Path, *, difficulty: str = "hard", num_images: int = 200_000,
                 seed: int = 0):
        super().__init__(data_dir)
        _check(self.resolution, difficulty)
        if num_images < 10:
            raise ValueError(f"num_images must be >= 10 (an 80/10/10 split), got {num_images}")
        self.options = {"difficulty": difficulty, "num_images": num_images, "seed": seed}
        self.max_len = self.resolution ** 2
        self.skipped: list[str] = []  # zero-byte PNGs met by source()
        self._splits: dict[str, PathfinderExamples] | None = None

    def official_directory(self) -> Path | None:
        """The official folder that is used, if any."""
        if self.options["seed"] != 0:
            return None
        return self._official_present()

    def _official_present(self) -> Path | None:
        """The first official folder under the data directory, whatever the seed; one without
        metadata files is an error (it is never silently replaced by generated images)."""
        for root in _OFFICIAL_ROOTS:
            folder = (self.data_dir / root / f"pathfinder{self.resolution}" /
                      folder_name(self.options["difficulty"]))
            if not folder.is_dir() or (folder / _GENERATOR_FILE).exists():
                continue
            if not _metadata_files(folder):
                raise DataError(f"{folder}: an incomplete official Pathfinder folder (no "
                                f"metadata/*.npy); restore it from the LRA release, or move it "
                                f"away to use generated images")
            return folder
        return None

    def provenance(self) -> Provenance:
        official = self.official_directory()
        folder, n = official or self.generated_directory, self.options["num_images"]
        n -= len(self.skipped)  # empty PNGs of the release are skipped (and reported) on reading
        bounds = (0, n * 8 // 10, n * 9 // 10, n)
        notes = ()
        if official is None and (present := self._official_present()) is not None:
            notes = (f"the official {present} is not used with data.seed={self.options['seed']} "
                     f"(it is seed 0's); reading generated images from {folder}",)
        return Provenance(
            folder=relative(folder, self.data_dir), origin="official" if official else "generated",
            files={s: relative(folder, self.data_dir) for s in SPLITS},
            wanted={s: b - a for s, a, b in zip(SPLITS, bounds[:-1], bounds[1:])},
            generator=None if official else {"name": "lra snakes2", "version": _GENERATOR_VERSION,
                                             "seed": self.options["seed"]},
            notes=notes)

    @property
    def generated_directory(self) -> Path:
        seed = self.options["seed"]
        base = self.data_dir / "pathfinder" / (f"seed{seed}" if seed else "")
        return base / f"pathfinder{self.resolution}" / folder_name(self.options["difficulty"])

    @property
    def directory(self) -> Path:
        """The folder the images are read from (or will be generated into)."""
        return self.official_directory() or self.generated_directory

    def _what(self) -> str:
        return f"Pathfinder {self.resolution}x{self.resolution} ({self.options['difficulty']})"

    def prepare(self) -> None:
        if self.official_directory() is not None:
            return
        folder, n = self.generated_directory, self.options["num_images"]
        todo = sum(stop - first for _, first, stop in _plan(folder, n))
        if todo == 0:
            return
        workers = max(1, min(_default_workers(), math.ceil(todo / _CHUNK[self.resolution])))
        estimate = _format_duration(2 + todo * _SECONDS_PER_IMAGE[self.resolution] / workers)
        have = f" (it has {n - todo})" if todo < n else ""
        print(f"{self._what()} data not found in {folder}{have}; generating {todo} of {n} images "
              f"with seed {self.options['seed']} on {workers} processes (about {estimate}) ...",
              file=sys.stderr, flush=True)
        generate(folder.parent, resolution=self.resolution, difficulty=self.options["difficulty"],
                 num_images=n, seed=self.options["seed"], workers=workers)

    def _load(self) -> dict[str, PathfinderExamples]:
        official = self.official_directory()
        folder, n = official or self.generated_directory, self.options["num_images"]
        if official is None and _plan(folder, n):
            have = sum(_count_lines(p) for p in _metadata_files(folder))
            raise DataError(
                f"{folder}: {have} of the {n} {self._what()} images are there; run `python -m "
                f"lra.data prepare --task {self.name}` (or task.prepare()) to generate them, or "
                f"pass an unpacked lra_release as the data directory")
        images = read_images(folder, limit=n, side=self.resolution, progress=n > 20_000)
        self.skipped = images.skipped
        if images.skipped:
            print(f"{folder}: skipped {len(images.skipped)} empty PNG file(s) "
                  f"({', '.join(images.skipped[:3])}{', ...' if len(images.skipped) > 3 else ''})",
                  file=sys.stderr)
        return split_images(images)

    def source(self, split: str) -> PathfinderExamples:
        if split not in SPLITS:
            raise ValueError(f"unknown split {split!r}; expected one of {', '.join(SPLITS)}")
        if self._splits is None:
            self._splits = self._load()
        return self._splits[split]

    def head(self, features_dim: int, mlp_dim: int, *, rngs):
        from tasks._heads import ClassifierHead  # imports JAX; keep this module light for workers

        return ClassifierHead(features_dim, mlp_dim, self.num_classes, rngs=rngs)


@register("pathfinder")
class PathfinderTask(_PathfinderTask):
    """Pathfinder: 32x32 images, 1024 pixel tokens, 2 classes (LRA's "pathfinder32_hard")."""

    resolution = 32


@register("pathx")
class PathXTask(_PathfinderTask):
    """Path-X: 128x128 images, 16384 pixel tokens, 2 classes (LRA's "pathfinder128_hard")."""

    resolution = 128
