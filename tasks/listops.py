"""ListOps (LRA variant): the TSV reader and the task; the generator is ``tasks._listops_gen``.

A ListOps example is a nested list of operations over digits, e.g. ``[MAX 2 9 [MIN 4 7 ] 0 ]`` = 9;
the model reads the whole expression and predicts its value (10 classes). LRA uses sequences of
500 to 2000 tokens. The files are ``basic_{train,val,test}.tsv`` (header ``Source<TAB>Target``),
the official ones or those our generator writes (its docstring gives the distribution, the
serialisation and how a seed maps to files).

Tokenisation: the parentheses are dropped, every other whitespace token is one id from the fixed
table ``VOCAB`` (0 = pad, ``[MIN [MAX [MED [SM ]``, digits), so ``vocab_size`` = 16 and an unknown
token is an error. The token count then equals the counted length, so it is < ``max_length``.
The original LRA pipeline instead built its id table from a Python set over validation rows (ids
1..15 in a process-dependent order, ``]`` spelled ``X``) plus an out-of-vocabulary id 16, giving 17.
"""

from __future__ import annotations

import csv
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from lra.tasks import DataError, Provenance, Task, data_options, example_index, register, relative
from lra.tasks._files import check_writable, format_duration, parsed_tsv
from lra.tasks._listops_gen import (
    GENERATOR_VERSION,
    OPERATORS,
    SPLITS,
    VOCAB,
    check_options,
    estimate_seconds,
    evaluate,
    generate,
    sampling_workers,
    serialize,
    split_files,
)

__all__ = ["OPERATORS", "VOCAB", "ListOpsTask", "evaluate", "generate", "read_split", "serialize"]

PAD_ID = 0
VOCAB_SIZE = len(VOCAB) + 1  # 16


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
    tokens, offsets, targets = parsed_tsv(path, [_cache_path(path)], lambda: _parse_tsv(path),
                                          cache=cache)
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
        i = example_index(i, len(self.targets))
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

    display_name = "ListOps"
    num_classes = 10
    pad_id = PAD_ID
    vocab_size = VOCAB_SIZE

    def __init__(self, data_dir: Path, *, min_length: int = 500, max_length: int = 2000,
                 max_depth: int = 10, max_args: int = 10, train_size: int = 96_000,
                 val_size: int = 2_000, test_size: int = 2_000, seed: int = 0):
        super().__init__(data_dir)
        check_options(min_length, max_length, max_depth, max_args)
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
            notes=notes,
            derived=tuple(relative(_cache_path(p), self.data_dir)
                          for p in split_files(directory).values()))

    def prepare(self) -> None:
        directory = self.directory
        if all(p.is_file() for p in split_files(directory).values()):
            return
        check_writable(directory)  # before announcing minutes of generating
        o = self.options
        n = o["train_size"] + o["val_size"] + o["test_size"]
        workers = sampling_workers(n)
        gen = {key: o[key] for key in ("min_length", "max_length", "max_depth", "max_args")}
        seconds = estimate_seconds(n, workers=workers, **gen)
        estimate = ("unknown time; few trees fall in the length window" if seconds is None
                    else format_duration(seconds))
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

    def head(self, features_dim: int, mlp_dim: int, *, rngs, **options):
        from lra.tasks._heads import ClassifierHead  # imports JAX; keep this module light for workers

        return ClassifierHead(features_dim, mlp_dim, self.num_classes, rngs=rngs, **options)


def _defaults() -> dict[str, Any]:
    return data_options("listops")
