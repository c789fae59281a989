"""Pathfinder and Path-X (LRA): the two tasks over the archive's image folders.

An image shows two target snakes made of short dashes, shorter distractor snakes and two circular
markers; the model reads the image as a sequence of pixels and says whether the markers sit on the
two ends of one snake (label 1) or not (label 0). ``pathfinder`` is 32x32 (1024 tokens), ``pathx``
128x128 (16384 tokens), both at LRA's "hard" difficulty (snakes of 14 dashes) by default (LRA issue
#11). The renderer is ``tasks._snakes`` (the "snakes2" generator LRA used, reproduced in
distribution: the original drew from numpy's unseeded global state); ``tasks._pathfinder_gen``
writes its images in the layout below (and says how a seed maps to images), and
``tasks._pathfinder_read`` reads that layout.

Files (the LRA archive's layout, ``pathfinder{32,64,128,256}/<difficulty folder>/``)::

    <folder>/imgs/<batch>/sample_<i>.png   # 8-bit grey PNG; i restarts at 0 in every batch
    <folder>/metadata/<batch>.npy          # TEXT despite the name: one line per image, 11 fields
    <folder>/generator.json                # ours only: the settings the images were made with
    <folder>/decoded/<batch>.npz           # the reader's cache of decoded pixels (never data)

Splits: the first ``num_images`` images in reading order (metadata files by batch number, lines
in order), zero-byte PNGs skipped; the first 80% are ``train``, the next 10% ``val``, the last 10%
``test`` (LRA's ``[:80%]``, ``[80%:90%]``, ``[90%:]``; every image is an independent draw, so no
shuffle is needed).

Tokens: pixel value + 1 (1..256), so that no pixel is the pad id 0 (the original LRA masked black
pixels, most of every image, as padding); vocabulary 257; the mask is all True (every image has
its full length).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import ClassVar

import numpy as np
from lra.tasks import DataError, Provenance, Task, example_index, register, relative
from lra.tasks._files import format_duration
from lra.tasks._pathfinder_gen import (
    BATCH_SIZE,
    DIFFICULTIES,
    GENERATOR_FILE,
    GENERATOR_VERSION,
    check,
    count_lines,
    estimate_seconds,
    folder_name,
    generate,
    metadata_files,
    missing_batches,
    render,
    rendering_workers,
)
from lra.tasks._pathfinder_read import CACHE_FOLDER, PathfinderImages, read_images

__all__ = ["BATCH_SIZE", "DIFFICULTIES", "PathXTask", "PathfinderExamples", "PathfinderImages",
           "PathfinderTask", "folder_name", "generate", "read_images", "render", "split_images"]

PAD_ID = 0
VOCAB_SIZE = 257  # pad + 256 pixel values shifted by one
SPLITS = ("train", "val", "test")


class PathfinderExamples(Sequence):
    """One split: ``ex[i]`` -> {"inputs": int32[H*W] = pixel + 1, "mask": bool[H*W] all True,
    "targets": int32[]}."""

    def __init__(self, pixels: np.ndarray, labels: np.ndarray):
        self.pixels, self.labels = pixels, labels

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, i: int) -> dict[str, np.ndarray]:
        i = example_index(i, len(self.labels))
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
        check(self.resolution, difficulty)
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
            if not folder.is_dir() or (folder / GENERATOR_FILE).exists():
                continue
            if not metadata_files(folder):
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
            generator=None if official else {"name": "lra snakes2", "version": GENERATOR_VERSION,
                                             "seed": self.options["seed"]},
            notes=notes, derived=(relative(folder / CACHE_FOLDER, self.data_dir),))

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
        todo = sum(stop - first for _, first, stop in missing_batches(folder, n))
        if todo == 0:
            return
        workers = rendering_workers(todo, self.resolution)
        estimate = format_duration(estimate_seconds(todo, self.resolution, workers))
        have = f" (it has {n - todo})" if todo < n else ""
        print(f"{self._what()} data not found in {folder}{have}; generating {todo} of {n} images "
              f"with seed {self.options['seed']} on {workers} processes (about {estimate}) ...",
              file=sys.stderr, flush=True)
        generate(folder.parent, resolution=self.resolution, difficulty=self.options["difficulty"],
                 num_images=n, seed=self.options["seed"], workers=workers)

    def _load(self) -> dict[str, PathfinderExamples]:
        official = self.official_directory()
        folder, n = official or self.generated_directory, self.options["num_images"]
        if official is None and missing_batches(folder, n):
            have = sum(count_lines(p) for p in metadata_files(folder))
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

    def head(self, features_dim: int, mlp_dim: int, *, rngs, **options):
        from lra.tasks._heads import ClassifierHead  # imports JAX; keep this module light for workers

        return ClassifierHead(features_dim, mlp_dim, self.num_classes, rngs=rngs, **options)


@register("pathfinder")
class PathfinderTask(_PathfinderTask):
    """Pathfinder: 32x32 images, 1024 pixel tokens, 2 classes (LRA's "pathfinder32_hard")."""

    display_name = "Pathfinder"
    resolution = 32


@register("pathx")
class PathXTask(_PathfinderTask):
    """Path-X: 128x128 images, 16384 pixel tokens, 2 classes (LRA's "pathfinder128_hard")."""

    display_name = "Path-X"
    resolution = 128
