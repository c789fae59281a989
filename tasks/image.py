"""Image (LRA "sequential CIFAR-10"): a grayscale 32x32 image read pixel by pixel, 10 classes.

Data: tfds ``cifar10`` (50,000 train images, 10,000 test), read with ``tfds.data_source`` from
array_record files, without TensorFlow (see ``tasks._tfds``: where it is looked for, and how
``prepare`` gets it).

Splits, as in LRA: train = tfds ``train[:90%]`` (45,000), val = ``train[90%:]`` (5,000), test = the
test split (10,000); the first ``*_size`` examples of a split when those options are set.

Tokens: LRA's ``tf.image.rgb_to_grayscale`` reproduced in NumPy (``grayscale``): ITU-R BT.601 luma
``0.2989 R + 0.5870 G + 0.1140 B`` on float32 intensities in [0, 1], converted back to uint8 the way
TensorFlow's ``convert_image_dtype`` does, i.e. multiplied by 255.5 and truncated (not rounded to
nearest: pure green is 149, not 150). It matches TensorFlow 2.21 on all 2^24 colours (checked once
with TensorFlow installed; the tests keep the boundary cases). The 1024 pixels are read row by row,
one token each, as intensity + 1 (ids 1..256, ``vocab_size`` 257): no pixel takes the pad id 0, so
a black pixel is a token like any other (LRA masked ``inputs > 0``, dropping black pixels as
padding). Every image is exactly 1024 tokens, so ``mask`` is all True.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from lra.tasks import Task, example_index, register, split_sizes
from lra.tasks._tfds import TfdsDataset, first

__all__ = ["CIFAR10", "ImageTask", "PixelExamples", "grayscale"]

CIFAR10 = TfdsDataset(name="cifar10", task="image",
                      url="https://www.cs.toronto.edu/~kriz/cifar-10-binary.tar.gz",
                      size="170 MB")
SIDE = 32
VOCAB_SIZE = 257  # intensities 0..255 shifted to 1..256, pad 0
SPLITS = ("train", "val", "test")
_LUMA = np.array([0.2989, 0.5870, 0.1140], np.float32)


def grayscale(rgb: np.ndarray) -> np.ndarray:
    """uint8[..., 3] -> uint8[...], bit for bit ``tf.image.rgb_to_grayscale`` on uint8 images."""
    x = rgb.astype(np.float32) * np.float32(1.0 / 255.0)
    # TF sums the three products in this order in float32; a matmul's order differs in the last bit
    # and, after truncation, changes a few colours.
    luma = (x[..., 0] * _LUMA[0] + x[..., 1] * _LUMA[1]) + x[..., 2] * _LUMA[2]
    return (luma * np.float32(255.5)).astype(np.uint8)


def train_val_boundary(n: int) -> int:
    """Where ``train[:90%]`` ends for a split of n examples (tfds rounds percent slices to the
    closest example)."""
    return round(90 * n / 100)


class PixelExamples(Sequence):
    """Random access to records ``[start, start + size)`` of a tfds split of {"image", "label"}:
    ``ex[i]`` -> {"inputs": int32[1024], "mask": bool[1024] (all True), "targets": int32[]}."""

    def __init__(self, records: Sequence[dict[str, Any]], start: int, size: int):
        self.records, self.start, self.size = records, start, size

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, i: int) -> dict[str, np.ndarray]:
        i = example_index(i, self.size)
        record = self.records[self.start + i]
        image = np.asarray(record["image"])
        if image.shape != (SIDE, SIDE, 3) or image.dtype != np.uint8:
            raise ValueError(f"image: record {self.start + i} is {image.dtype}"
                             f"{list(image.shape)}, expected uint8[{SIDE}, {SIDE}, 3]")
        inputs = grayscale(image).reshape(-1).astype(np.int32) + 1
        return {"inputs": inputs, "mask": np.ones(SIDE * SIDE, bool),
                "targets": np.array(record["label"], np.int32)}


@register("image")
class ImageTask(Task):
    """CIFAR-10 in grayscale as a sequence of 1024 pixels, 10 classes.

    Data options: ``train_size``, ``val_size``, ``test_size``: use only the first N examples of a
    split (0 = all; for quick runs).
    """

    display_name = "Image"
    num_classes = 10
    pad_id = 0
    vocab_size = VOCAB_SIZE
    pixel_stats = (122.6 / 255, 61.0 / 255)  # grayscale CIFAR-10, as S5 normalises it
    max_len = SIDE * SIDE

    def __init__(self, data_dir: Path, *, train_size: int = 0, val_size: int = 0,
                 test_size: int = 0):
        super().__init__(data_dir)
        self.sizes = split_sizes("image", train_size, val_size, test_size)
        self._records: dict[str, Sequence] = {}

    def prepare(self) -> None:
        CIFAR10.ensure(self.data_dir)

    def _split(self, tfds_split: str) -> Sequence:
        if tfds_split not in self._records:
            self._records[tfds_split] = CIFAR10.open(self.data_dir, tfds_split)
        return self._records[tfds_split]

    def provenance(self):
        return CIFAR10.provenance(self.data_dir, list(SPLITS), self.sizes)

    def source(self, split: str) -> PixelExamples:
        if split not in SPLITS:
            raise ValueError(f"unknown split {split!r}; expected one of {', '.join(SPLITS)}")
        if split == "test":
            records = self._split("test")
            start, stop = 0, len(records)
        else:
            records = self._split("train")
            boundary = train_val_boundary(len(records))
            start, stop = (0, boundary) if split == "train" else (boundary, len(records))
        return PixelExamples(records, start, first(self.sizes[split], stop - start))

    def head(self, features_dim: int, mlp_dim: int, *, rngs, **options):
        from lra.tasks._heads import ClassifierHead

        return ClassifierHead(features_dim, mlp_dim, self.num_classes, rngs=rngs, **options)
