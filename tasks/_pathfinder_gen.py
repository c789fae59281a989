"""The Pathfinder generator: images of the snakes renderer written in the LRA archive's layout.

Separate from ``tasks/pathfinder.py`` (the reader and the tasks) because it is a program of its
own: ``python -m lra.data generate pathfinder`` runs it, its worker processes import only this
module and ``tasks._snakes`` (the renderer), and a task calls ``generate`` only when images are
missing. The archive's layout (batches, metadata files, difficulty folders) is defined here, where
it is written; the reader imports it.

Image k of a set is ``imgs/{k // 1000}/sample_{k % 1000}.png``; its metadata line is
``imgs/<batch> sample_<i>.png <i> <label> <kappa> <C> <C_d> <L> <t> <m> 1``. The difficulty folders
are ``curv_baseline`` (easy, C = 6), ``curv_contour_length_9`` and ``curv_contour_length_14``
(hard). A batch's PNGs are written first, each under a temporary name then renamed, and its
metadata file last (also renamed into place), so a batch is complete iff its metadata file is;
an interrupted generation resumes at the first incomplete batch. ``generator.json`` records the
settings, so that a folder is never extended with images of other settings.

Determinism: image k is drawn from ``SeedSequence(seed, spawn_key=(resolution, C, k))`` alone, so a
set does not depend on the number of worker processes, and the first N images of a larger set
are the set of N images.
"""

from __future__ import annotations

import io
import json
import math
import os
import sys
from pathlib import Path
from typing import Any

import numpy as np
from lra.tasks import DataError
from lra.tasks._files import check_writable, default_workers, ordered_map, write_atomic
from lra.tasks._snakes import DIFFICULTIES, PARAMS, Drawing, draw, metadata_fields

__all__ = ["BATCH_SIZE", "GENERATOR_FILE", "GENERATOR_VERSION", "check", "count_lines",
           "estimate_seconds", "folder_name", "generate", "metadata_files", "missing_batches",
           "render", "rendering_workers"]

BATCH_SIZE = 1000  # images per imgs/<batch> folder and metadata file, as in the archive
GENERATOR_FILE = "generator.json"
GENERATOR_VERSION = 2  # part of the seed -> images mapping; bump when the pictures change
# (2: seeds fail where the original's cv2 dilation border quirk makes them fail)
# Images per work unit, about a second of work each; the output does not depend on it.
_CHUNK = {32: 40, 64: 2, 128: 2, 256: 20}
# Rough CPU seconds per image on one core (measured), for the message before generating.
_SECONDS_PER_IMAGE = {32: 0.015, 64: 0.8, 128: 0.6, 256: 0.06}


def check(resolution: int, difficulty: str) -> None:
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
    check(resolution, difficulty)
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


def rendering_workers(todo: int, resolution: int) -> int:
    """The processes a task starts to render ``todo`` images: the usable CPUs, at most one per
    work unit."""
    return max(1, min(default_workers(), math.ceil(todo / _CHUNK[resolution])))


def estimate_seconds(todo: int, resolution: int, workers: int) -> float:
    """Rough time to render ``todo`` images on ``workers`` processes (+ starting them)."""
    return 2 + todo * _SECONDS_PER_IMAGE[resolution] / workers


def _settings(resolution: int, difficulty: str, seed: int) -> dict[str, Any]:
    return {"generator": "lra snakes2", "version": GENERATOR_VERSION, "resolution": resolution,
            "difficulty": difficulty, "seed": seed}


def _claim(folder: Path, settings: dict[str, Any]) -> None:
    """Make ``folder`` ours for these settings, or refuse if it holds other images."""
    record = folder / GENERATOR_FILE
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
                                f"{found.get('version')!r}; this is version {GENERATOR_VERSION}, "
                                f"whose pictures differ (see tasks/_snakes.py). Delete the folder "
                                f"to regenerate it, or use another data directory")
            raise DataError(f"{folder} holds Pathfinder images made with other settings "
                            f"({', '.join(f'{k}={found.get(k)!r}' for k in differ)}, asked: "
                            f"{', '.join(f'{k}={settings.get(k)!r}' for k in differ)}); choose "
                            f"another output folder or delete it")
        return
    if metadata_files(folder):
        raise DataError(f"{folder} holds Pathfinder data this generator did not write (an "
                        f"official release?); it is never written over: choose another folder")
    folder.mkdir(parents=True, exist_ok=True)
    write_atomic(record, (json.dumps(settings, indent=1) + "\n").encode(), sync=True)


def count_lines(path: Path) -> int:
    """The lines with text in a metadata file (0 when it is missing)."""
    try:
        return sum(1 for line in path.read_bytes().splitlines() if line.strip())
    except FileNotFoundError:
        return 0


def missing_batches(folder: Path, num_images: int) -> list[tuple[int, int, int]]:
    """(batch, first, stop) sample ranges still to make for the first ``num_images`` images."""
    plan = []
    for batch in range(math.ceil(num_images / BATCH_SIZE)):
        size = min(BATCH_SIZE, num_images - batch * BATCH_SIZE)
        have = count_lines(folder / "metadata" / f"{batch}.npy")
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
    check(resolution, difficulty)
    if num_images < 0:
        raise ValueError(f"num_images must be >= 0, got {num_images}")
    folder = Path(out_dir) / folder_name(difficulty)
    check_writable(Path(out_dir))  # a full disk or a read-only folder fails now, not mid-way
    _claim(folder, _settings(resolution, difficulty, seed))
    plan = missing_batches(folder, num_images)
    chunk = _CHUNK[resolution]
    units = [(batch * BATCH_SIZE + i, batch * BATCH_SIZE + min(i + chunk, stop))
             for batch, first, stop in plan for i in range(first, stop, chunk)]
    todo = sum(stop - first for _, first, stop in plan)
    workers = max(1, min(workers or default_workers(), len(units)))
    params, contour_length = PARAMS[resolution], DIFFICULTIES[difficulty][0]

    from tqdm import tqdm

    sizes = {batch: stop for batch, _, stop in plan}  # lines each batch's metadata file will have
    lines: dict[int, list[str]] = {}
    with tqdm(total=todo, desc=f"Pathfinder {resolution}x{resolution} {difficulty}", unit="img",
              file=sys.stderr, disable=not progress, smoothing=0.05) as bar:
        # A bounded window of 4 units a worker; the results come back in order.
        results = ordered_map(_render_chunk, ((resolution, difficulty, seed, *unit) for unit in units),
                              workers, window=4 * workers)
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
                    write_atomic(folder / "imgs" / str(batch) / f"sample_{i}.png", png)
                    fields = [f"imgs/{batch}", f"sample_{i}.png", str(i), str(label),
                              *metadata_fields(params, contour_length, margin)]
                    lines[batch].append(" ".join(fields))
                bar.update(len(images))
                if len(lines[batch]) == sizes[batch]:
                    (folder / "metadata").mkdir(exist_ok=True)
                    text = "".join(line + "\n" for line in lines.pop(batch))
                    write_atomic(folder / "metadata" / f"{batch}.npy", text.encode(), sync=True)
        finally:
            results.close()
    return folder


def metadata_files(folder: Path) -> list[Path]:
    """``folder/metadata/*.npy`` by batch number (names that are not numbers after, by name)."""
    files = [p for p in (folder / "metadata").glob("*.npy") if p.is_file()]
    return sorted(files, key=lambda p: (0, int(p.stem), "") if p.stem.isdigit() else (1, 0, p.stem))


