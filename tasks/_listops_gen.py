"""The ListOps generator (LRA variant): expression trees, their values and the TSV files.

Separate from ``tasks/listops.py`` (the reader and the task) because it is a program of its own:
``python -m lra.data generate listops`` runs it, its worker processes import only this module, and
the task calls ``generate`` only when its files are missing. It sits beside ``tasks/_snakes.py``,
Pathfinder's renderer, for the same reason. The token table ``VOCAB`` lives here because the
sampler's codes are its ids.

Generator (google-research/long-range-arena ``data/listops.py``, reproduced in distribution; the
original draws from an unseeded ``random`` and orders its output by set hashing, so it cannot be
reproduced bit for bit):

* ``gen(d)``: below ``max_depth`` draw r ~ U[0, 1), at ``max_depth`` r = 1. If r > 0.25 the node is
  a leaf, a digit ~ U{0..9}, counted length 1. Otherwise it is an operator over k ~ U{2..max_args}
  children ``gen(d + 1)``, the operator uniform over MIN, MAX, MED, SM; counted length 2 (operator
  and ``]``) + the children's lengths. The root is ``gen(1)``.
* A tree is kept iff ``min_length < length < max_length`` (strict). Trees are rejected as soon as
  their partial length reaches ``max_length``; this changes only how fast we sample, not the
  distribution of kept trees. Duplicates are removed.
* Value: MIN, MAX, SM = sum mod 10, MED = ``int(np.median(args))`` (an even count averages the two
  middle values and truncates: ``[MED 3 4 ]`` = 3).
* Serialisation (the original's quirk): a node over a1..ak is the left-nested pairs
  ``(((OP, a1), a2), ..., ak), ]`` and a pair prints as ``( left right )``, so
  ``[MAX 2 9 ]`` -> ``( ( ( [MAX 2 ) 9 ) ] )``.
* Files ``basic_{train,val,test}.tsv``: header ``Source<TAB>Target``, Python's csv writer with a tab
  delimiter (CRLF line ends).

Determinism: trees are drawn in fixed shards of ``_SHARD_SIZE`` kept trees, shard ``s`` from its own
stream ``SeedSequence(seed, spawn_key=(0, s))``; shards are merged in order (first occurrence of a
duplicate wins) until enough, then shuffled by ``SeedSequence(seed, spawn_key=(1,))`` and split into
train, val, test. The files depend on the seed and the options only, never on the worker count.

Interruption: each finished shard is kept in ``<out>/.listops-shards/`` (gzipped, written whole
under a temporary name) until the three files are written, so a generation stopped by a signal (or
killed) goes on from its finished shards and writes the same files as an uninterrupted one; the
folder records the settings its shards were drawn with, and other settings start it afresh.
"""

from __future__ import annotations

import csv
import gzip
import itertools
import json
import math
import os
import random
import shutil
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from lra.tasks import DataError
from lra.tasks._files import (
    check_writable,
    default_workers,
    ordered_map,
    remove_stale_temps,
    replacing,
    write_atomic,
)

from lra.workdir import naming

__all__ = ["GENERATOR_VERSION", "OPERATORS", "SPLITS", "VOCAB", "check_options",
           "estimate_seconds", "evaluate", "generate", "sampling_workers", "serialize",
           "split_files"]

OPERATORS = ("[MIN", "[MAX", "[MED", "[SM")
END = "]"
# The fixed id table: 0 = pad, then the operators, the closing bracket and the digits 0-9.
VOCAB: dict[str, int] = {tok: i + 1 for i, tok in enumerate((*OPERATORS, END, *"0123456789"))}
_MIN, _MAX, _MED, _SM = (VOCAB[op] for op in OPERATORS)
_END = VOCAB[END]
_DIGIT0 = VOCAB["0"]
_ID_TO_TOKEN = {i: tok for tok, i in VOCAB.items()}

GENERATOR_VERSION = 1  # recorded with generated data; bump when the seed -> files mapping changes
VALUE_P = 0.25  # a node with r > VALUE_P is a leaf (so an operator with probability 0.25)
SPLITS = ("train", "val", "test")
_SHARD_SIZE = 256  # kept trees per shard; part of the seed -> data mapping, do not change lightly
_MAX_ATTEMPTS_PER_KEPT = 1000  # a shard whose acceptance rate falls below 0.1% is an error
_STALL_SHARDS = 20  # this many shards in a row without a new distinct tree is an error

# Sampler codes: a leaf or ``]`` is its vocabulary id (< 16); an operator is ``id | arity << 4``,
# so that serialisation knows how many "(" open it.
_ARITY_SHIFT = 4


# ----------------------------------------------------------------------------------------------
# Sampling, serialisation, evaluation


def _sample_codes(rand, max_depth: int, max_args: int, max_length: int) -> list[int] | None:
    """One tree in preorder sampler codes, or None if its counted length reaches max_length.

    Sampling stops as soon as the partial length reaches ``max_length``; rejecting those trees
    early changes only the speed, not the distribution of the trees kept.
    """
    codes: list[int] = []
    emit = codes.append
    open_children: list[int] = []  # children still to draw, per open operator (depth = len + 1)
    length = 0
    span = max_args - 1
    while True:
        if len(open_children) + 1 < max_depth and rand() <= VALUE_P:
            # The original draws the operator after the children; it is independent of them.
            k = 2 + int(rand() * span)
            emit((_MIN + int(rand() * 4)) | (k << _ARITY_SHIFT))  # ids _MIN.._SM
            open_children.append(k)
            length += 2
        else:
            emit(_DIGIT0 + int(rand() * 10))
            length += 1
            while open_children:
                open_children[-1] -= 1
                if open_children[-1]:
                    break
                open_children.pop()
                emit(_END)
            else:
                return codes if length < max_length else None
        if length >= max_length:
            return None


def _apply(op: int, args: list[int]) -> int:
    if op == _MIN:
        return min(args)
    if op == _MAX:
        return max(args)
    if op == _SM:
        return sum(args) % 10
    args = sorted(args)
    mid = len(args) // 2
    # int(np.median(...)): the mean of the two middle values, truncated (all values are >= 0).
    return args[mid] if len(args) % 2 else (args[mid - 1] + args[mid]) // 2


class _Pieces(dict):
    """Sampler code -> its text inside a tree: ``d )`` for a digit (it closes the pair it is the
    right half of), ``] ) )`` for a ``]`` (its own pair, then its node's), ``( ( ( [OP`` for an
    operator over k arguments (k + 1 pairs open)."""

    def __missing__(self, code: int) -> str:
        arity, op = code >> _ARITY_SHIFT, code & ((1 << _ARITY_SHIFT) - 1)
        if arity < 1 or not _MIN <= op <= _SM:
            raise KeyError(code)
        piece = self[code] = "( " * (arity + 1) + _ID_TO_TOKEN[op]
        return piece


_PIECES = _Pieces({_END: "] ) )", **{_DIGIT0 + d: f"{d} )" for d in range(10)}})


def _codes_to_string(codes: list[int]) -> str:
    """Preorder sampler codes -> the original's parenthesised string."""
    if len(codes) == 1:
        return str(codes[0] - _DIGIT0)  # a lone digit
    # The root's "]" closes only its own pair.
    return " ".join(map(_PIECES.__getitem__, codes[:-1])) + " ] )"


def _evaluate_codes(codes: list[int]) -> int:
    """Preorder sampler codes -> the tree's value."""
    values: list[int] = []
    push = values.append
    frames: list[tuple[int, int]] = []  # (operator id, where its arguments start in values)
    for code in codes:
        if code > 15:
            frames.append((code & 15, len(values)))
        elif code == _END:
            op, start = frames.pop()
            args = values[start:]
            del values[start:]
            push(_apply(op, args))
        else:
            push(code - _DIGIT0)
    return values[0]


def _serialize_codes(codes: list[int]) -> tuple[str, int]:
    return _codes_to_string(codes), _evaluate_codes(codes)


def _tree_codes(tree: Any) -> list[int]:
    if isinstance(tree, int | np.integer):
        if not 0 <= tree <= 9:
            raise ValueError(f"a leaf must be a digit 0-9, got {tree}")
        return [_DIGIT0 + int(tree)]
    op, args = tree
    op = op if op.startswith("[") else "[" + op
    if op not in OPERATORS or len(args) < 1:
        raise ValueError(f"not a ListOps node: {tree!r}")
    codes = [VOCAB[op] | (len(args) << _ARITY_SHIFT)]
    for arg in args:
        codes += _tree_codes(arg)
    return [*codes, _END]


def serialize(tree: Any) -> str:
    """A tree -> the original's string. A tree is a digit or ``(op, [args])``, op e.g. ``"MAX"``.

    >>> serialize(("MAX", [2, 9]))
    '( ( ( [MAX 2 ) 9 ) ] )'
    """
    return _serialize_codes(_tree_codes(tree))[0]


def evaluate(tree: Any) -> int:
    """The value of a tree (same form as for ``serialize``)."""
    return _serialize_codes(_tree_codes(tree))[1]


def _shard_seed(seed: int, shard: int) -> int:
    state = np.random.SeedSequence(seed, spawn_key=(0, shard)).generate_state(4, np.uint32)
    return int.from_bytes(state.astype("<u4").tobytes(), "little")


def _sample_shard(seed: int, shard: int, min_length: int, max_length: int, max_depth: int,
                  max_args: int, size: int = _SHARD_SIZE) -> list[tuple[str, int]]:
    """``size`` kept trees of shard ``shard`` as (source, target); a pure function of its inputs."""
    rand = random.Random(_shard_seed(seed, shard)).random
    kept: list[tuple[str, int]] = []
    budget = _MAX_ATTEMPTS_PER_KEPT * size + 10_000
    for _ in range(budget):
        codes = _sample_codes(rand, max_depth, max_args, max_length)
        if codes is not None and min_length < len(codes) < max_length:
            kept.append(_serialize_codes(codes))
            if len(kept) == size:
                return kept
    raise DataError(
        f"ListOps: fewer than {size} of {budget} sampled trees have {min_length} < length < "
        f"{max_length} (max_depth {max_depth}, max_args {max_args}); widen the length window")


# ----------------------------------------------------------------------------------------------
# Generation


def _max_tree_length(max_depth: int, max_args: int) -> int:
    length = 1
    for _ in range(max_depth - 1):
        length = 2 + max_args * length
    return length


def check_options(min_length: int, max_length: int, max_depth: int, max_args: int) -> None:
    if max_depth < 1 or max_args < 2:
        raise ValueError(f"ListOps needs max_depth >= 1 and max_args >= 2, got "
                         f"max_depth {max_depth}, max_args {max_args}")
    if min_length < 0 or max_length <= min_length + 1:
        raise ValueError(f"ListOps keeps min_length < length < max_length (strict); "
                         f"got min_length {min_length}, max_length {max_length}")
    longest = _max_tree_length(max_depth, max_args)
    if longest <= min_length:
        raise ValueError(f"ListOps trees with max_depth {max_depth} and max_args {max_args} are "
                         f"at most {longest} long, not more than min_length {min_length}")


SHARD_STORE = ".listops-shards"


class _ShardStore:
    """The finished shards of a generation not yet written out: ``<out>/.listops-shards/<s>.tsv.gz``
    (``source<TAB>target`` lines) and ``settings.json``, the settings they were drawn with."""

    def __init__(self, out: Path, settings: dict[str, Any], *, sync: bool = True):
        self.folder, self.sync = Path(out) / SHARD_STORE, sync
        record = self.folder / "settings.json"
        try:
            same = json.loads(record.read_text()) == settings
        except (OSError, ValueError):
            same = False
        if not same:  # none yet, or shards of other settings: they cannot be used
            shutil.rmtree(self.folder, ignore_errors=True)
            self.folder.mkdir(parents=True)
            write_atomic(record, json.dumps(settings, sort_keys=True).encode(), sync=sync)
        remove_stale_temps(self.folder, "*.tsv.gz")

    def kept(self) -> int:
        """How many shards, from shard 0 on, are kept."""
        n = 0
        while (self.folder / f"{n}.tsv.gz").is_file():
            n += 1
        return n

    def load(self, shard: int) -> list[tuple[str, int]] | None:
        """Shard ``shard`` as (source, target) rows, or None if it is not kept (or unreadable)."""
        try:
            text = gzip.decompress((self.folder / f"{shard}.tsv.gz").read_bytes()).decode()
            return [(source, int(target)) for source, target in
                    (line.split("\t") for line in text.splitlines())]
        except (OSError, EOFError, ValueError):
            return None

    def save(self, shard: int, rows: Sequence[tuple[str, int]]) -> None:
        text = "".join(f"{source}\t{target}\n" for source, target in rows)
        write_atomic(self.folder / f"{shard}.tsv.gz", gzip.compress(text.encode(), 1),
                     sync=self.sync)

    def remove(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)


def _shard_results(workers: int, args: tuple,
                   store: _ShardStore | None = None) -> Iterator[list[tuple[str, int]]]:
    """Shard 0, 1, 2, ... in order: the ones ``store`` keeps, then the others computed by
    ``workers`` processes (in this one if 1) and kept in ``store`` as they come."""
    seed, rest = args[0], args[1:]
    first = 0
    while store is not None and (rows := store.load(first)) is not None:
        yield rows
        first += 1
    shards = ((seed, shard, *rest) for shard in itertools.count(first))
    # A bounded window of 2 shards a worker: the stream of shards is endless.
    computed = ordered_map(_sample_shard, shards, workers, window=2 * workers)
    try:
        for shard, rows in zip(itertools.count(first), computed):
            if store is not None:
                store.save(shard, rows)
            yield rows
    finally:
        computed.close()


def _sample_distinct(n: int, *, seed: int, workers: int, min_length: int, max_length: int,
                     max_depth: int, max_args: int, progress: bool,
                     store: _ShardStore | None = None) -> list[tuple[str, int]]:
    from tqdm import tqdm

    examples: list[tuple[str, int]] = []
    seen: set[str] = set()
    stalled = 0
    args = (seed, min_length, max_length, max_depth, max_args)
    with tqdm(total=n, desc="ListOps trees", unit="tree", file=sys.stderr, disable=not progress,
              smoothing=0.1) as bar:
        shards = _shard_results(workers, args, store)
        try:
            for shard in shards:
                before = len(examples)
                for source, target in shard:
                    if source not in seen:
                        seen.add(source)
                        examples.append((source, target))
                        if len(examples) == n:
                            break
                bar.update(len(examples) - before)
                if len(examples) == n:
                    return examples
                stalled = stalled + 1 if len(examples) == before else 0
                if stalled == _STALL_SHARDS:
                    raise DataError(
                        f"ListOps: only {len(examples)} distinct trees with {min_length} < length "
                        f"< {max_length} found, {n} wanted; widen the length window or ask for "
                        f"fewer examples")
        finally:
            shards.close()
    return examples


def _write_tsv(path: Path, rows: Sequence[tuple[str, int]]) -> None:
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f, delimiter="\t")  # the original's writer: CRLF line ends
        writer.writerow(["Source", "Target"])
        writer.writerows(rows)


def _fsync(path: Path) -> None:
    """Flush ``path``'s written data to the disk."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def sampling_workers(n: int, workers: int | None = None) -> int:
    """The processes that sample ``n`` trees: ``workers`` (default: the usable CPUs), at most
    one per shard."""
    return max(1, min(workers or default_workers(), math.ceil(n / _SHARD_SIZE)))


def split_files(directory: Path) -> dict[str, Path]:
    return {split: Path(directory) / f"basic_{split}.tsv" for split in SPLITS}


def generate(out_dir: str | os.PathLike, *, train: int = 96_000, val: int = 2_000,
             test: int = 2_000, seed: int = 0, workers: int | None = None,
             min_length: int = 500, max_length: int = 2000, max_depth: int = 10,
             max_args: int = 10, progress: bool = True, sync: bool = True) -> dict[str, Path]:
    """Write ``out_dir/basic_{train,val,test}.tsv``; the same files for a seed on any ``workers``.

    ``workers``: processes that sample (default: the usable CPUs; 1 = in this process). They are
    started with "spawn", so a script calling this with workers > 1 needs the usual
    ``if __name__ == "__main__":`` guard. Each file appears complete or not at all (written to a
    temporary name, then renamed). ``sync``: each file is flushed to the disk (fsync) before the
    renames, so that a power cut cannot leave a renamed but empty file; ``sync=False`` skips that,
    for a throw-away disk where the fsync of some 660 MB costs more than the sampling (the
    accelerator window, ``lra.bench.device_check``). An interrupted call's finished shards are kept
    in ``out_dir/.listops-shards/`` and used by the next call. Returns {split: path}.
    """
    check_options(min_length, max_length, max_depth, max_args)
    sizes = {"train": train, "val": val, "test": test}
    if min(sizes.values()) < 0:
        raise ValueError(f"split sizes must be >= 0, got {sizes}")
    n = sum(sizes.values())
    out = Path(out_dir)
    check_writable(out)  # a folder it cannot write fails now, not after the sampling
    workers = sampling_workers(n, workers)
    store = _ShardStore(out, {"generator": GENERATOR_VERSION, "shard_size": _SHARD_SIZE,
                              "seed": seed, "min_length": min_length, "max_length": max_length,
                              "max_depth": max_depth, "max_args": max_args}, sync=sync)
    if kept := store.kept():
        print(f"ListOps: going on from the {kept} finished shards ({kept * _SHARD_SIZE} trees) "
              f"kept in {store.folder}", file=sys.stderr, flush=True)
    examples = _sample_distinct(n, seed=seed, workers=workers, min_length=min_length,
                                max_length=max_length, max_depth=max_depth, max_args=max_args,
                                progress=progress, store=store)
    order = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(1,))).permutation(n)
    examples = [examples[i] for i in order]

    remove_stale_temps(out, "basic_*.tsv")
    paths = split_files(out)
    with replacing([paths[split] for split in SPLITS]) as temps:
        start = 0
        for split, temp in zip(SPLITS, temps):
            with naming(paths[split]):  # a full disk's error names the file
                _write_tsv(temp, examples[start:start + sizes[split]])
                if sync:
                    _fsync(temp)
            start += sizes[split]
    store.remove()
    return paths


def estimate_seconds(n: int, *, workers: int, min_length: int = 500, max_length: int = 2000,
                     max_depth: int = 10, max_args: int = 10,
                     budget_s: float = 0.3) -> float | None:
    """Rough generation time for ``n`` examples, from sampling for about ``budget_s`` here."""
    rand = random.Random(12345).random
    kept = 0
    start = time.perf_counter()
    while (elapsed := time.perf_counter() - start) < budget_s:
        for _ in range(50):
            codes = _sample_codes(rand, max_depth, max_args, max_length)
            if codes is not None and min_length < len(codes) < max_length:
                _serialize_codes(codes)
                kept += 1
    if kept == 0:
        return None
    per_worker = kept / elapsed
    # + spawning workers and writing ~7 kB per example.
    return 2.0 + n / (per_worker * workers * 0.9) + n * 2e-5

