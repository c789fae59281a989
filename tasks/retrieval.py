"""Retrieval (LRA "byte-level document retrieval"): does one ACL Anthology (AAN) paper cite the other?

Data: the official LRA files ``new_aan_pairs.{train,eval,test}.tsv`` (147,086 / 18,090 / 17,437
pairs) from the ``lra_release`` archive (``python -m lra.data fetch-release`` downloads and unpacks
it). They are looked for, in order, in ``<data_dir>/retrieval/``, ``<data_dir>/tsv_data/``,
``<data_dir>/lra_release/tsv_data/`` and ``<data_dir>/lra_release/lra_release/tsv_data/`` (the
archive's own nesting). Splits: train, val = ``eval``, test.

Format (as LRA's reader, ``tf.data.experimental.make_csv_dataset`` without quoting): one pair per
line, no header, 5 tab-separated fields ``label id1 id2 text1 text2``; the label is a number, 0 or
1 (e.g. ``1.0``). Fields are taken verbatim (no quote handling, no unescaping); a line ending
``\\r\\n`` loses the ``\\r``. A malformed line raises ``DataError`` naming the file, the 1-based
line and the reason.

Tokens: LRA cut each raw text to its first 10,000 bytes, encoded bytes as byte + 1
(``ByteTextEncoder``) and kept the first ``max_length`` (4000) ids: that is, the first
``min(max_length, 10000)`` bytes of each document, id = byte + 1, pad 0, ``vocab_size`` 257. Each
document is padded separately; ``mask`` / ``mask2`` are True at its true length.

The model is a two-tower classifier: one shared encoder reads ``inputs`` and ``inputs2``
(``inputs = ("inputs", "inputs2")``), and ``DualHead`` classifies ``[u, v, u*v, u-v]`` of the two
pooled vectors, as the paper describes (LRA's code, by default, used ``[u, v]``).

Parsing a file takes a while (the train file is about 2 GB), so its arrays are cached next to it in
``<file>.bytes<N>.npz`` (N = the cut), keyed by the file's size and mtime; when that folder is
read-only the cache goes to ``<data_dir>/retrieval/cache/``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from lra.tasks import DataError, Provenance, Task, example_index, register, relative, split_sizes
from lra.tasks._files import parsed_tsv

__all__ = ["FILES", "PairExamples", "RetrievalTask", "find_directory", "read_split"]

FILES = {"train": "new_aan_pairs.train.tsv", "val": "new_aan_pairs.eval.tsv",
         "test": "new_aan_pairs.test.tsv"}
DIRECTORIES = ("retrieval", "tsv_data", "lra_release/tsv_data", "lra_release/lra_release/tsv_data")
RAW_CUT = 10_000  # LRA read at most this many bytes of a document
VOCAB_SIZE = 257
_FIELDS = 5


def find_directory(data_dir: Path) -> Path | None:
    """The first of ``DIRECTORIES`` under ``data_dir`` that holds all three TSV files."""
    for name in DIRECTORIES:
        candidate = Path(data_dir) / name
        if all((candidate / f).is_file() for f in FILES.values()):
            return candidate
    return None


def _parse_tsv(path: Path, cut: int, progress: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(uint8 bytes of all documents, int64[2N + 1] offsets: pair i = documents 2i, 2i + 1,
    uint8[N] labels)."""
    from tqdm import tqdm

    chunks: list[bytes] = []
    lengths: list[int] = []
    labels = bytearray()
    size = path.stat().st_size
    with open(path, "rb") as f, tqdm(total=size, unit="B", unit_scale=True, file=sys.stderr,
                                     desc=path.name, disable=not progress, mininterval=1.0) as bar:
        pending_blank = 0  # blank lines are an error unless only blank lines follow them
        for number, raw in enumerate(f, start=1):
            bar.update(len(raw))
            line = raw[:-1] if raw.endswith(b"\n") else raw
            if line.endswith(b"\r"):
                line = line[:-1]
            if not line:
                pending_blank = pending_blank or number
                continue
            if pending_blank:
                raise DataError(f"{path}:{pending_blank}: empty line")
            fields = line.split(b"\t")
            if len(fields) != _FIELDS:
                raise DataError(f"{path}:{number}: expected {_FIELDS} tab-separated fields "
                                f"(label, id1, id2, text1, text2), got {len(fields)}")
            labels.append(_label(fields[0], path, number))
            for text in (fields[3], fields[4]):
                chunks.append(text[:cut])
                lengths.append(min(len(text), cut))
    offsets = np.zeros(len(lengths) + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    tokens = np.frombuffer(b"".join(chunks), np.uint8)
    return tokens, offsets, np.frombuffer(bytes(labels), np.uint8).copy()


def _label(field: bytes, path: Path, number: int) -> int:
    try:
        value = float(field)
    except ValueError:
        value = None
    if value not in (0.0, 1.0):
        text = field.decode("utf-8", "replace")
        raise DataError(f"{path}:{number}: the label (field 1) must be 0 or 1, got {text[:40]!r}")
    return int(value)


def _cache_paths(path: Path, cut: int, fallback_dir: Path | None) -> list[Path]:
    name = f"{path.name}.bytes{cut}.npz"
    return [path.with_name(name)] + ([fallback_dir / name] if fallback_dir is not None else [])


def read_split(path: str | os.PathLike, max_len: int = 4000, *, cache: bool = True,
               cache_dir: Path | None = None, progress: bool = False) -> PairExamples:
    """Read one AAN pairs TSV. ``max_len``: ids kept per document (the first ``min(max_len,
    10000)`` bytes). Arrays are cached (see the module docstring); ``cache_dir`` is the fallback
    folder for the cache when the file's own folder is read-only."""
    path = Path(path)
    cut = min(max_len, RAW_CUT)
    caches = _cache_paths(path, cut, cache_dir)  # next to the file, else the fallback folder
    arrays = parsed_tsv(path, caches, lambda: _parse_tsv(path, cut, progress), cache=cache)
    return PairExamples(*arrays, max_len)


class PairExamples(Sequence):
    """``ex[i]`` -> {"inputs", "inputs2": int32[L], "mask", "mask2": bool[L], "targets": int32[]}
    with L = ``max_len``: the two documents of pair i, each padded with 0 after its true length."""

    def __init__(self, tokens: np.ndarray, offsets: np.ndarray, targets: np.ndarray, max_len: int,
                 size: int = 0):
        self.tokens, self.offsets, self.targets, self.max_len = tokens, offsets, targets, max_len
        self.size = len(targets) if size == 0 else min(size, len(targets))

    def __len__(self) -> int:
        return self.size

    def subset(self, size: int) -> PairExamples:
        """The first ``size`` pairs (0 = all)."""
        return PairExamples(self.tokens, self.offsets, self.targets, self.max_len, size)

    def _document(self, k: int) -> tuple[np.ndarray, np.ndarray]:
        start = int(self.offsets[k])
        n = min(int(self.offsets[k + 1]) - start, self.max_len)
        inputs = np.zeros(self.max_len, np.int32)
        inputs[:n] = self.tokens[start:start + n]
        inputs[:n] += 1
        mask = np.zeros(self.max_len, bool)
        mask[:n] = True
        return inputs, mask

    def __getitem__(self, i: int) -> dict[str, np.ndarray]:
        i = example_index(i, self.size)
        inputs, mask = self._document(2 * i)
        inputs2, mask2 = self._document(2 * i + 1)
        return {"inputs": inputs, "mask": mask, "inputs2": inputs2, "mask2": mask2,
                "targets": np.array(self.targets[i], np.int32)}


@register("retrieval")
class RetrievalTask(Task):
    """AAN citation pairs as two UTF-8 byte sequences, 2 classes, ``max_length`` bytes each.

    Data options: ``max_length`` (4000 per document, LRA), and ``train_size``, ``val_size``,
    ``test_size``: use only the first N pairs of a split (0 = all; for quick runs).
    """

    display_name = "Retrieval"
    num_classes = 2
    pad_id = 0
    vocab_size = VOCAB_SIZE
    inputs = ("inputs", "inputs2")

    def __init__(self, data_dir: Path, *, max_length: int = 4000, train_size: int = 0,
                 val_size: int = 0, test_size: int = 0):
        super().__init__(data_dir)
        if max_length < 1:
            raise ValueError(f"retrieval: max_length must be >= 1, got {max_length}")
        self.max_len = max_length
        self.sizes = split_sizes("retrieval", train_size, val_size, test_size)
        self._sources: dict[str, PairExamples] = {}

    @property
    def directory(self) -> Path:
        """Where the TSV files are; raises DataError saying how to get them when they are nowhere."""
        found = find_directory(self.data_dir)
        if found is None:
            looked = ", ".join(str(self.data_dir / d) for d in DIRECTORIES)
            raise DataError(
                f"retrieval: the AAN files {', '.join(FILES.values())} are not in any of {looked}. "
                f"They come with the official LRA release: `python -m lra.data fetch-release --out "
                f"DIR` downloads and unpacks it (about 8 GB; or download "
                f"https://storage.googleapis.com/long-range-arena/lra_release.gz yourself and "
                f"unpack it), then pass --data-dir DIR (or set LRA_DATA_DIR=DIR); or copy the three "
                f"files to {self.data_dir / 'retrieval'}")
        return found

    def _read(self, split: str, progress: bool) -> PairExamples:
        if split not in self._sources:
            path = self.directory / FILES[split]
            self._sources[split] = read_split(path, self.max_len, progress=progress,
                                              cache_dir=self.data_dir / "retrieval" / "cache")
        return self._sources[split]

    def prepare(self) -> None:
        """Find the files and parse them once (the arrays are cached for later runs)."""
        for split in FILES:
            self._read(split, progress=True)

    def provenance(self) -> Provenance:
        directory = self.directory
        cut = min(self.max_len, RAW_CUT)
        caches = [c for f in FILES.values()
                  for c in _cache_paths(directory / f, cut, self.data_dir / "retrieval" / "cache")]
        return Provenance(folder=relative(directory, self.data_dir), origin="official",
                          files={s: relative(directory / f, self.data_dir) for s, f in FILES.items()},
                          wanted=dict(self.sizes),
                          derived=tuple(relative(c, self.data_dir) for c in caches))

    def source(self, split: str) -> PairExamples:
        if split not in FILES:
            raise ValueError(f"unknown split {split!r}; expected one of {', '.join(FILES)}")
        return self._read(split, progress=False).subset(self.sizes[split])

    def head(self, features_dim: int, mlp_dim: int, *, rngs, **options):
        from lra.tasks._heads import DualHead

        return DualHead(features_dim, mlp_dim, self.num_classes, rngs=rngs, **options)
