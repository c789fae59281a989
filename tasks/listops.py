"""ListOps (LRA variant): the faithful generator, the TSV reader and the task.

A ListOps example is a nested list of operations over digits, e.g. ``[MAX 2 9 [MIN 4 7 ] 0 ]`` = 9;
the model reads the whole expression and predicts its value (10 classes). LRA uses sequences of
500 to 2000 tokens.

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

Tokenisation: the parentheses are dropped, every other whitespace token is one id from the fixed
table ``VOCAB`` (0 = pad, ``[MIN [MAX [MED [SM ]``, digits), so ``vocab_size`` = 16 and an unknown
token is an error. The token count then equals the counted length, so it is < ``max_length``.
The original LRA pipeline instead built its id table from a Python set over validation rows (ids
1..15 in a process-dependent order, ``]`` spelled ``X``) plus an out-of-vocabulary id 16, giving 17.
"""

from __future__ import annotations

import concurrent.futures
import csv
import math
import multiprocessing
import os
import random
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from tasks import DataError, Provenance, Task, _tsv_cache, data_options, register, relative

__all__ = ["OPERATORS", "VOCAB", "ListOpsTask", "evaluate", "generate", "read_split", "serialize"]

OPERATORS = ("[MIN", "[MAX", "[MED", "[SM")
END = "]"
# The fixed id table: 0 = pad, then the operators, the closing bracket and the digits 0-9.
VOCAB: dict[str, int] = {tok: i + 1 for i, tok in enumerate((*OPERATORS, END, *"0123456789"))}
PAD_ID = 0
VOCAB_SIZE = len(VOCAB) + 1  # 16
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


def _check_options(min_length: int, max_length: int, max_depth: int, max_args: int) -> None:
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


def _default_workers() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _die_with_parent(parent: int) -> None:
    """Worker initializer: end this worker when the process that started it dies, even by
    ``kill -9`` (Linux: the kernel sends SIGKILL; elsewhere a worker outlives a killed parent)."""
    if sys.platform.startswith("linux"):
        import ctypes
        import signal

        pr_set_pdeathsig = 1
        ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:  # the parent died before the prctl took effect
        os._exit(1)


def _remove_stale_temps(out: Path) -> None:
    """Delete temporary files left by a generation whose process was killed (its pid is gone)."""
    for temp in out.glob(".basic_*.tsv.*.tmp"):
        try:
            pid = int(temp.name.split(".")[-2])
            os.kill(pid, 0)
        except ProcessLookupError:
            temp.unlink(missing_ok=True)
        except (ValueError, PermissionError):  # not ours, or another user's live process
            continue


def _shard_results(workers: int, args: tuple) -> Iterator[list[tuple[str, int]]]:
    """Shard 0, 1, 2, ... in order, computed by ``workers`` processes (in this one if 1)."""
    if workers <= 1:
        shard = 0
        while True:
            yield _sample_shard(args[0], shard, *args[1:])
            shard += 1
    # spawn: safe in a process that already runs threads (JAX, tqdm), and the same on every OS.
    context = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(workers, mp_context=context,
                                                initializer=_die_with_parent,
                                                initargs=(os.getpid(),)) as pool:
        pending: list[concurrent.futures.Future] = []
        next_shard = 0
        try:
            while True:
                while len(pending) < 2 * workers:  # a bounded window: an endless stream of shards
                    pending.append(pool.submit(_sample_shard, args[0], next_shard, *args[1:]))
                    next_shard += 1
                yield pending.pop(0).result()
        finally:
            for future in pending:
                future.cancel()


def _sample_distinct(n: int, *, seed: int, workers: int, min_length: int, max_length: int,
                     max_depth: int, max_args: int, progress: bool) -> list[tuple[str, int]]:
    from tqdm import tqdm

    examples: list[tuple[str, int]] = []
    seen: set[str] = set()
    stalled = 0
    args = (seed, min_length, max_length, max_depth, max_args)
    with tqdm(total=n, desc="ListOps trees", unit="tree", file=sys.stderr, disable=not progress,
              smoothing=0.1) as bar:
        shards = _shard_results(workers, args)
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
        f.flush()
        os.fsync(f.fileno())


def split_files(directory: Path) -> dict[str, Path]:
    return {split: Path(directory) / f"basic_{split}.tsv" for split in SPLITS}


def generate(out_dir: str | os.PathLike, *, train: int = 96_000, val: int = 2_000,
             test: int = 2_000, seed: int = 0, workers: int | None = None,
             min_length: int = 500, max_length: int = 2000, max_depth: int = 10,
             max_args: int = 10, progress: bool = True) -> dict[str, Path]:
    """Write ``out_dir/basic_{train,val,test}.tsv``; the same files for a seed on any ``workers``.

    ``workers``: processes that sample (default: the usable CPUs; 1 = in this process). They are
    started with "spawn", so a script calling this with workers > 1 needs the usual
    ``if __name__ == "__main__":`` guard. Each file appears complete or not at all (written to a
    temporary name, then renamed). Returns {split: path}.
    """
    _check_options(min_length, max_length, max_depth, max_args)
    sizes = {"train": train, "val": val, "test": test}
    if min(sizes.values()) < 0:
        raise ValueError(f"split sizes must be >= 0, got {sizes}")
    n = sum(sizes.values())
    workers = max(1, min(workers or _default_workers(), math.ceil(n / _SHARD_SIZE)))
    examples = _sample_distinct(n, seed=seed, workers=workers, min_length=min_length,
                                max_length=max_length, max_depth=max_depth, max_args=max_args,
                                progress=progress)
    order = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(1,))).permutation(n)
    examples = [examples[i] for i in order]

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    _remove_stale_temps(out)
    paths = split_files(out)
    temps = {split: path.with_name(f".{path.name}.{os.getpid()}.tmp") for split, path in
             paths.items()}
    try:
        start = 0
        for split in SPLITS:
            _write_tsv(temps[split], examples[start:start + sizes[split]])
            start += sizes[split]
        for split in SPLITS:
            os.replace(temps[split], paths[split])
    finally:
        for temp in temps.values():
            temp.unlink(missing_ok=True)
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


def _format_duration(seconds: float | None) -> str:
    if seconds is None:
        return "unknown time; few trees fall in the length window"
    if seconds < 90:
        return f"{max(1, round(seconds))} s"
    if seconds < 5400:
        return f"{round(seconds / 60)} min"
    return f"{seconds / 3600:.1f} h"


# ----------------------------------------------------------------------------------------------
# Reading


# Parentheses map to _DROP and are removed after the lookup.
_DROP = 255
_READ_TABLE = {**VOCAB, "(": _DROP, ")": _DROP}


def _cache_path(path: Path) -> Path:
    return path.with_name(path.name + ".tokens.npz")


def _parse_tsv(path: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Parse a ListOps TSV -> (tokens uint8[T], offsets int64[N + 1], targets uint8[N])."""
    chunks: list[np.ndarray] = []
    lengths: list[int] = []
    targets = bytearray()
    lookup = _READ_TABLE.__getitem__
    with open(path, newline="", encoding="utf-8") as f:  # csv handles CRLF and LF
        reader = csv.reader(f, delimiter="\t")
        try:
            header = next(reader, None)
            if header != ["Source", "Target"]:
                raise DataError(f"{path}:1: expected the header 'Source<TAB>Target', "
                                f"got {_shorten(chr(9).join(header or []))!r}")
            for row in reader:
                line = reader.line_num
                if len(row) != 2:
                    raise DataError(f"{path}:{line}: expected 2 tab-separated columns "
                                    f"(Source, Target), got {len(row)}")
                source, target = row
                if len(target) != 1 or target not in "0123456789":
                    raise DataError(f"{path}:{line}: expected a target digit 0-9, "
                                    f"got {_shorten(target)!r}")
                words = source.split()
                try:
                    ids = np.fromiter(map(lookup, words), np.uint8, len(words))
                except KeyError as err:
                    raise DataError(
                        f"{path}:{line}: unknown token {_shorten(str(err.args[0]))!r} in Source; "
                        f"expected '(', ')' or one of {' '.join(VOCAB)}") from None
                ids = ids[ids != _DROP]
                if ids.size == 0:
                    raise DataError(f"{path}:{line}: expected a ListOps expression, got an empty "
                                    "Source")
                chunks.append(ids)
                lengths.append(ids.size)
                targets.append(int(target))
        except (csv.Error, UnicodeDecodeError) as err:
            raise DataError(f"{path}:{reader.line_num + 1}: not a tab-separated text file "
                            f"({err})") from None
    offsets = np.zeros(len(lengths) + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    tokens = np.concatenate(chunks) if chunks else np.zeros(0, np.uint8)
    return tokens, offsets, np.frombuffer(bytes(targets), np.uint8).copy()


def _shorten(text: str, limit: int = 40) -> str:
    return text if len(text) <= limit else text[:limit] + "..."


def read_split(path: str | os.PathLike, max_len: int | None = None,
               *, cache: bool = True) -> ListOpsExamples:
    """Read one ListOps TSV (ours or the official ``listops-1000/basic_*.tsv``).

    Malformed rows raise ``DataError`` naming the file and the 1-based line. The tokenised arrays
    are cached in ``<file>.tokens.npz`` (rebuilt when the TSV's size or mtime changes).
    ``max_len``: pad/limit length; a longer example is an error (default: the longest example).
    """
    path = Path(path)
    try:
        stat = path.stat()
    except FileNotFoundError:
        raise DataError(f"{path}: file not found") from None
    arrays = _tsv_cache.load(_cache_path(path), stat) if cache else None
    if arrays is None:
        arrays = _parse_tsv(path)
        if cache:
            _tsv_cache.save(_cache_path(path), stat, arrays)
    tokens, offsets, targets = arrays
    lengths = np.diff(offsets)
    if max_len is None:
        max_len = int(lengths.max(initial=1))
    too_long = np.flatnonzero(lengths > max_len)
    if too_long.size:
        i = int(too_long[0])
        raise DataError(f"{path}:{i + 2}: expected at most {max_len} tokens without parentheses, "
                        f"got {lengths[i]}")
    return ListOpsExamples(tokens, offsets, targets, max_len)


class ListOpsExamples(Sequence):
    """Random access to one split: ``ex[i]`` -> {"inputs": int32[L], "mask": bool[L],
    "targets": int32[]}, with L = ``max_len``; ``mask`` is True at the first (true length)
    positions and ``inputs`` is padded with 0 after them."""

    def __init__(self, tokens: np.ndarray, offsets: np.ndarray, targets: np.ndarray, max_len: int):
        self.tokens, self.offsets, self.targets, self.max_len = tokens, offsets, targets, max_len

    def __len__(self) -> int:
        return len(self.targets)

    def lengths(self) -> np.ndarray:
        """int64[N]: the true length of every example."""
        return np.diff(self.offsets)

    def __getitem__(self, i: int) -> dict[str, np.ndarray]:
        n = len(self.targets)
        i = int(i)
        if not -n <= i < n:
            raise IndexError(f"example {i} out of range for {n} examples")
        i %= n
        start, stop = int(self.offsets[i]), int(self.offsets[i + 1])
        inputs = np.zeros(self.max_len, np.int32)
        inputs[:stop - start] = self.tokens[start:stop]
        mask = np.zeros(self.max_len, bool)
        mask[:stop - start] = True
        return {"inputs": inputs, "mask": mask, "targets": np.array(self.targets[i], np.int32)}


# ----------------------------------------------------------------------------------------------
# The task

_OPTION_ABBREVIATIONS = {"min_length": "min", "max_length": "max", "max_depth": "depth",
                         "max_args": "args", "train_size": "train", "val_size": "val",
                         "test_size": "test", "seed": "seed"}
_OFFICIAL_DIRS = ("listops-1000", "lra_release/listops-1000",
                  "lra_release/lra_release/listops-1000")


@register("listops")
class ListOpsTask(Task):
    """ListOps: 10-way classification of a nested list expression, up to ``max_length`` tokens.

    Data options (keyword-only; the defaults are the paper's): the generator's ``min_length``,
    ``max_length``, ``max_depth``, ``max_args``, the split sizes and ``seed`` (of the data
    generation, not of training). Files live in ``<data_dir>/listops/`` for the defaults (an
    official ``listops-1000/`` under ``data_dir``, ``data_dir/lra_release/`` or
    ``data_dir/lra_release/lra_release/`` is used first), in ``<data_dir>/listops/<options>/``
    otherwise.
    """

    num_classes = 10
    pad_id = PAD_ID
    vocab_size = VOCAB_SIZE

    def __init__(self, data_dir: Path, *, min_length: int = 500, max_length: int = 2000,
                 max_depth: int = 10, max_args: int = 10, train_size: int = 96_000,
                 val_size: int = 2_000, test_size: int = 2_000, seed: int = 0):
        super().__init__(data_dir)
        _check_options(min_length, max_length, max_depth, max_args)
        for name, size in (("train_size", train_size), ("val_size", val_size),
                           ("test_size", test_size)):
            if size < 1:
                raise ValueError(f"ListOps: {name} must be >= 1, got {size}")
        self.options = {"min_length": min_length, "max_length": max_length,
                        "max_depth": max_depth, "max_args": max_args, "train_size": train_size,
                        "val_size": val_size, "test_size": test_size, "seed": seed}
        self.max_len = max_length
        self._sources: dict[str, ListOpsExamples] = {}

    def _changed(self) -> list[str]:
        defaults = _defaults()
        return [key for key in self.options if self.options[key] != defaults[key]]

    def _official(self) -> Path | None:
        """The first official folder present; one that lacks a split file is an error (it is
        never silently replaced by generated data)."""
        for official in _OFFICIAL_DIRS:
            candidate = self.data_dir / official
            if candidate.is_dir():
                missing = [p.name for p in split_files(candidate).values() if not p.is_file()]
                if missing:
                    raise DataError(f"{candidate}: an incomplete official ListOps folder (no "
                                    f"{', '.join(missing)}); restore the missing files from the "
                                    f"LRA release, or move the folder away to use generated data")
                return candidate
        return None

    @property
    def directory(self) -> Path:
        """Where the three TSV files are (or will be generated)."""
        changed = self._changed()
        if not changed:
            return self._official() or self.data_dir / "listops"
        name = "_".join(f"{_OPTION_ABBREVIATIONS[key]}{self.options[key]}" for key in changed)
        return self.data_dir / "listops" / name

    def provenance(self) -> Provenance:
        directory = self.directory
        official = not self._changed() and self._official() is not None
        notes = ()
        if not official and self._changed():
            try:
                present = self._official()
            except DataError:
                present = None
            if present is not None:
                differ = ", ".join(f"{k}={self.options[k]}" for k in self._changed())
                notes = (f"the official {present} is not used: these data options differ from "
                         f"the official set's ({differ}); reading generated data from {directory}",)
        return Provenance(
            folder=relative(directory, self.data_dir), origin="official" if official else "generated",
            files={s: relative(p, self.data_dir) for s, p in split_files(directory).items()},
            wanted={s: self.options[f"{s}_size"] for s in SPLITS},
            generator=None if official else {"name": "lra listops", "version": GENERATOR_VERSION,
                                             "seed": self.options["seed"]},
            notes=notes)

    def prepare(self) -> None:
        directory = self.directory
        if all(p.is_file() for p in split_files(directory).values()):
            return
        o = self.options
        n = o["train_size"] + o["val_size"] + o["test_size"]
        workers = max(1, min(_default_workers(), math.ceil(n / _SHARD_SIZE)))
        gen = {key: o[key] for key in ("min_length", "max_length", "max_depth", "max_args")}
        estimate = _format_duration(estimate_seconds(n, workers=workers, **gen))
        print(f"ListOps data not found in {directory}; generating {n} examples with seed "
              f"{o['seed']} (about {estimate}) ...", file=sys.stderr, flush=True)
        generate(directory, train=o["train_size"], val=o["val_size"], test=o["test_size"],
                 seed=o["seed"], workers=workers, **gen)

    def source(self, split: str) -> ListOpsExamples:
        if split not in SPLITS:
            raise ValueError(f"unknown split {split!r}; expected one of {', '.join(SPLITS)}")
        if split not in self._sources:
            path = split_files(self.directory)[split]
            if not path.is_file():
                raise DataError(f"{path}: file not found; run `python -m lra.data prepare --task "
                                f"listops` (or task.prepare()) to generate it")
            self._sources[split] = read_split(path, self.max_len)
        return self._sources[split]

    def head(self, features_dim: int, mlp_dim: int, *, rngs):
        from tasks._heads import ClassifierHead  # imports JAX; keep this module light for workers

        return ClassifierHead(features_dim, mlp_dim, self.num_classes, rngs=rngs)


def _defaults() -> dict[str, Any]:
    return data_options("listops")
