"""Text (LRA "byte-level text classification"): IMDB sentiment from UTF-8 bytes, 2 classes.

Data: tfds ``imdb_reviews`` (25,000 labelled train reviews, 25,000 test), read with
``tfds.data_source`` from array_record files, without TensorFlow (see ``tasks._tfds``: where it is
looked for, and how ``prepare`` gets it).

Splits, as in LRA: train = the 25,000 train reviews; IMDB has no validation split, so LRA validates
on the test split, and so do we: ``val`` and ``test`` are both the tfds test split (the first
``val_size`` / ``test_size`` examples of it when those are set). Accuracy "at the best validation
step" is therefore selected on the test set; LRA reported the last step.

Tokens (LRA's ``tfds.deprecated.text.ByteTextEncoder``): each UTF-8 byte b of the review (tfds has
stripped surrounding whitespace; nothing else is cleaned, ``<br />`` tags stay) is id b + 1, so id 0
is free for padding and ``vocab_size`` = 257. A review longer than ``max_length`` bytes is cut
(LRA); shorter ones are padded with 0 and ``mask`` is True at the first (true length) positions.
``max_length`` is 1000 in the LRA repository's configs; the paper reports the best of 1K-4K, so 4000
is the other setting people use (``--set data.max_length=4000``).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from lra.tasks import Task, example_index, register, split_sizes
from lra.tasks._tfds import TfdsDataset, first

__all__ = ["IMDB", "ByteExamples", "TextTask", "encode"]

IMDB = TfdsDataset(name="imdb_reviews", task="text",
                   url="http://ai.stanford.edu/~amaas/data/sentiment/aclImdb_v1.tar.gz",
                   size="80 MB")
VOCAB_SIZE = 257  # 256 byte values + 1, pad 0
SPLITS = {"train": "train", "val": "test", "test": "test"}  # ours -> tfds's


def encode(text: str | bytes, max_len: int) -> tuple[np.ndarray, np.ndarray]:
    """Text -> (int32[max_len] ids = UTF-8 byte + 1, padded with 0; bool[max_len] mask)."""
    data = text.encode("utf-8") if isinstance(text, str) else bytes(text)
    n = min(len(data), max_len)
    inputs = np.zeros(max_len, np.int32)
    inputs[:n] = np.frombuffer(data, np.uint8, count=n)
    inputs[:n] += 1
    mask = np.zeros(max_len, bool)
    mask[:n] = True
    return inputs, mask


class ByteExamples(Sequence):
    """Random access to the first ``size`` records of a tfds split of {"text", "label"}:
    ``ex[i]`` -> {"inputs": int32[L], "mask": bool[L], "targets": int32[]}, L = ``max_len``."""

    def __init__(self, records: Sequence[dict[str, Any]], max_len: int, size: int = 0):
        self.records, self.max_len = records, max_len
        self.size = first(size, len(records))

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, i: int) -> dict[str, np.ndarray]:
        record = self.records[example_index(i, self.size)]
        inputs, mask = encode(record["text"], self.max_len)
        return {"inputs": inputs, "mask": mask, "targets": np.array(record["label"], np.int32)}


@register("text")
class TextTask(Task):
    """IMDB reviews as UTF-8 bytes, 2 classes (negative, positive), up to ``max_length`` bytes.

    Data options: ``max_length`` (1000, LRA's config; 4000 is the paper's longest), and
    ``train_size``, ``val_size``, ``test_size``: use only the first N examples of a split (0 = all;
    for quick runs).
    """

    display_name = "Text"
    num_classes = 2
    validation_is_test = True  # val and test are both IMDB's test split (see the module docstring)
    pad_id = 0
    vocab_size = VOCAB_SIZE

    def __init__(self, data_dir: Path, *, max_length: int = 1000, train_size: int = 0,
                 val_size: int = 0, test_size: int = 0):
        super().__init__(data_dir)
        if max_length < 1:
            raise ValueError(f"text: max_length must be >= 1, got {max_length}")
        self.max_len = max_length
        self.sizes = split_sizes("text", train_size, val_size, test_size)
        self._records: dict[str, Sequence] = {}

    def prepare(self) -> None:
        IMDB.ensure(self.data_dir)

    def provenance(self):
        return IMDB.provenance(self.data_dir, list(SPLITS), self.sizes)

    def source(self, split: str) -> ByteExamples:
        if split not in SPLITS:
            raise ValueError(f"unknown split {split!r}; expected one of {', '.join(SPLITS)}")
        tfds_split = SPLITS[split]
        if tfds_split not in self._records:  # val and test share one reader
            self._records[tfds_split] = IMDB.open(self.data_dir, tfds_split)
        return ByteExamples(self._records[tfds_split], self.max_len, self.sizes[split])

    def head(self, features_dim: int, mlp_dim: int, *, rngs, **options):
        from lra.tasks._heads import ClassifierHead

        return ClassifierHead(features_dim, mlp_dim, self.num_classes, rngs=rngs, **options)
