"""Batching, written once: tasks give random-access examples, this module groups them into batches.

Training batches are addressed by step: batch ``s`` holds positions ``[s*B, (s+1)*B)`` of an endless
stream of epochs, each a fresh seeded permutation (grain's ``MapDataset.shuffle(...).repeat()``). The
data position of a run is therefore its step counter, so a resumed run sees exactly the batches an
uninterrupted run would, on any number of devices or processes. Each process reads only its own
contiguous share of every global batch.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import grain
import numpy as np


def stack(examples: Sequence[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """A list of example dicts -> one dict of arrays with a leading batch axis."""
    return {key: np.stack([ex[key] for ex in examples]) for key in examples[0]}


def _share(global_batch: int, process_index: int, process_count: int) -> slice:
    if global_batch % process_count:
        raise ValueError(f"global batch {global_batch} does not divide over {process_count} processes")
    per = global_batch // process_count
    return slice(process_index * per, (process_index + 1) * per)


class TrainBatches:
    """``batches[step]`` -> this process's share of global training batch ``step``."""

    def __init__(self, source: Sequence[dict[str, np.ndarray]], global_batch: int, *, seed: int,
                 process_index: int = 0, process_count: int = 1):
        if len(source) == 0:
            raise ValueError("the training split is empty")
        self.stream = grain.MapDataset.source(source).shuffle(seed=seed).repeat(None)
        self.global_batch = global_batch
        self.rows = _share(global_batch, process_index, process_count)

    def __getitem__(self, step: int) -> dict[str, np.ndarray]:
        start = step * self.global_batch
        positions = range(start + self.rows.start, start + self.rows.stop)
        return stack([self.stream[p] for p in positions])


def eval_batches(source: Sequence[dict[str, np.ndarray]], global_batch: int, *,
                 max_batches: int = 0, process_index: int = 0,
                 process_count: int = 1) -> Iterator[dict[str, np.ndarray]]:
    """Batches over a split in order; the last one is filled with copies weighted 0.

    Every batch carries ``weights`` float32[B] (1 = counts, 0 = filler), so that every batch has the
    same shape (one compilation, divisible over devices) and metrics stay exact.
    ``max_batches`` > 0 stops early (a cheaper, partial validation).
    """
    n = len(source)
    num = -(-n // global_batch)
    if max_batches:
        num = min(num, max_batches)
    rows = _share(global_batch, process_index, process_count)
    for b in range(num):
        idx = [b * global_batch + r for r in range(rows.start, rows.stop)]
        examples = [source[min(i, n - 1)] for i in idx]
        batch = stack(examples)
        batch["weights"] = np.array([1.0 if i < n else 0.0 for i in idx], np.float32)
        yield batch
