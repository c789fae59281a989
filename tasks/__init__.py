"""LRA tasks behind one contract, and the registry that finds them.

A task is a class in its own file in this package, registered with ``@register("name")``. It owns
its data (where it comes from, how it is tokenised), its facts and its head. The trainer only ever
talks to this interface; it never tests a task's name.

Contract (see ``Task`` below for the exact signatures)::

    task = tasks.build("listops", data_dir=Path(...), **data_options)
    task.vocab_size, task.max_len, task.num_classes, task.pad_id   # facts
    task.inputs          # ("inputs",) or ("inputs", "inputs2") for two-tower tasks
    task.prepare()       # make sure the data is there (generate it, or explain how to get it)
    src = task.source("train")                                    # "train" | "val" | "test"
    len(src); src[i] -> {"inputs": int32[L], "mask": bool[L], "targets": int32[]}
                         #   per_position: "targets": int32[L] and "target_mask": bool[L]
    task.head(features_dim, mlp_dim, rngs=..., **options)  # nnx.Module: pooled encodings -> logits
    task.per_position, task.causal, task.track    # declared facts (below)
    task.provenance()    # Provenance: the folder read, official or generated, examples wanted

``mask`` is True at real tokens and comes from true lengths, never from ``token > 0``.
Every example of a split has the same length ``max_len`` (padded with ``pad_id``).

Two declared facts change what a task predicts (the trainer reads them, never a task's name):

* ``per_position`` (default False: one target per example, the LRA tasks). True: an example
  carries ``targets: int32[L]`` and ``target_mask: bool[L]`` (True where a target counts), the
  encoder's per-position outputs float[B, L, D] go to the head unpooled, the head returns
  float32[B, L, num_classes], and the loss and accuracy average over the counted positions of the
  batch (an evaluation over the counted positions of the split). tasks/mqar.py is the example.
* ``track`` (default "lra"): the table the task belongs to. ``lra.sweep --task all`` runs LRA's
  six (``in_track("lra")``); a task of another track (MQAR's "recall") runs when named.
* ``causal`` (default False). True: the model must run causally (every family is built with
  ``causal=True``; a family without a causal mode is refused when the config is resolved), so that
  each position's prediction sees only its past.
Batching (shuffling, grouping examples into ``[B, L]`` arrays) happens once, in ``lra.data_pipeline``.
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from lra.registry import Registry, UnknownNameError

__all__ = [
    "MIN_EXAMPLES",
    "DataError",
    "Provenance",
    "Task",
    "UnknownTaskError",
    "available",
    "build",
    "check_examples",
    "default_data_dir",
    "example_index",
    "family",
    "in_track",
    "register",
    "split_sizes",
]

# The fewest examples a split may have: an evaluation over nothing measures nothing.
MIN_EXAMPLES = 1


def default_data_dir() -> Path:
    """``$LRA_DATA_DIR`` if set, else ``~/.cache/lra``."""
    env = os.environ.get("LRA_DATA_DIR")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "lra"


class DataError(RuntimeError):
    """A data problem a user can fix: missing files, a malformed row. The message says which/how."""


class UnknownTaskError(UnknownNameError):
    """Raised for a task name nobody registered; the message lists the valid names."""


@dataclass(frozen=True)
class Provenance:
    """Where a task's examples come from; recorded in result files and said in a run's first lines.

    ``folder``: the folder read, relative to the data directory (absolute if outside it).
    ``origin``: "official" (LRA's release), "generated" (by this package; ``generator`` then holds
    its ``version`` and ``seed``) or "tensorflow-datasets". ``files``: per split, the file or
    folder it is read from. ``wanted``: per split, the examples the config asks for (0 = the whole
    split). ``notes``: lines the user should see, e.g. an official folder the options cannot use.
    ``derived``: the files and folders a reader makes from the data (caches: Pathfinder's
    ``decoded/``, ListOps' ``*.tokens.npz``), relative to the data directory like ``files``; they
    are never part of the data's fingerprint (``lra.data_fingerprint``), so a copy of the data
    without them, or with them rebuilt, is the same data. Declare every path a reader writes.
    """

    folder: str
    origin: str
    files: dict[str, str]
    wanted: dict[str, int]
    generator: dict[str, Any] | None = None
    notes: tuple[str, ...] = field(default=())
    derived: tuple[str, ...] = field(default=())

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        del out["notes"], out["derived"]
        return out


def relative(path: Path, data_dir: Path) -> str:
    """``path`` relative to ``data_dir`` where it lies below it, else absolute."""
    try:
        return Path(path).absolute().relative_to(Path(data_dir).absolute()).as_posix()
    except ValueError:
        return os.fspath(Path(path).absolute())


def check_examples(provenance: Provenance, counts: dict[str, int], data_dir: Path) -> None:
    """Refuse splits with fewer than ``MIN_EXAMPLES`` examples or fewer than the config asks for,
    naming the file or folder."""
    for split, n in counts.items():
        wanted = provenance.wanted.get(split, 0)
        need = max(MIN_EXAMPLES, wanted)
        if n < need:
            where = Path(data_dir) / provenance.files.get(split, provenance.folder)
            asked = (f"the config asks for {wanted}" if wanted > MIN_EXAMPLES
                     else f"at least {MIN_EXAMPLES} needed")
            raise DataError(f"{where}: the {split} split has {n} example{'s' * (n != 1)}; {asked}. "
                            f"Complete or delete the data (it is regenerated where it can be), "
                            f"or ask for fewer examples")


def split_sizes(task: str, train_size: int, val_size: int, test_size: int) -> dict[str, int]:
    """The ``*_size`` data options as {split: size}: use the first N examples, 0 = the whole
    split; a negative size is a ValueError naming the task and the option."""
    sizes = {"train": train_size, "val": val_size, "test": test_size}
    for split, size in sizes.items():
        if size < 0:
            raise ValueError(f"{task}: {split}_size must be >= 0 (0 = the whole split), got {size}")
    return sizes


def example_index(i: int, n: int) -> int:
    """Example ``i`` of ``n`` as a position in [0, n), counting from the end when negative (like a
    list); IndexError outside."""
    i = int(i)
    if not -n <= i < n:
        raise IndexError(f"example {i} out of range for {n} examples")
    return i % n


class Task:
    """Base class: subclasses set the facts and implement ``prepare``, ``source`` and ``head``."""

    name: ClassVar[str]
    # The name LRA's paper uses ("ListOps", "Path-X"), for figures, tables and pages: a string
    # literal in the registered class's body (or a base class of the same file), which the
    # leaderboard reads from the file without importing the task (lra/leaderboard/names.py).
    display_name: ClassVar[str]
    vocab_size: int
    max_len: int
    num_classes: int
    pad_id: int = 0
    inputs: tuple[str, ...] = ("inputs",)
    # True where the validation examples are the test examples (IMDB has no validation split):
    # selecting a checkpoint on validation is then selecting it on test (the leaderboard says so).
    validation_is_test: bool = False
    # Pixel tasks: token = intensity (0..255) + pixel_offset, and pixel_stats = (mean, std) of
    # intensity / 255 that a linear input encoder normalises with. None for token tasks.
    pixel_stats: tuple[float, float] | None = None
    pixel_offset: int = 1
    # Per-position targets (the module docstring): examples carry targets int32[L] and
    # target_mask bool[L]; the head classifies every position. False: one target per example.
    per_position: bool = False
    # The model runs causally (each position sees only its past); the config refuses a family
    # without a causal mode.
    causal: bool = False
    # The table a task belongs to: "lra" (LRA's six; what ``lra.sweep --task all`` runs) or
    # another track ("recall": MQAR), named only where asked for by name.
    track: ClassVar[str] = "lra"

    def __init__(self, data_dir: Path, **options: Any):
        self.data_dir = Path(data_dir)

    def prepare(self) -> None:
        """Make the data available under ``data_dir`` or raise ``DataError`` saying how to get it."""
        raise NotImplementedError

    def source(self, split: str) -> Sequence[dict[str, np.ndarray]]:
        """Random-access examples of ``split`` ("train", "val" or "test")."""
        raise NotImplementedError

    def head(self, features_dim: int, mlp_dim: int, *, rngs, **options):
        """The classifier: one pooled encoding per entry of ``inputs`` -> float[B, num_classes];
        with ``per_position``, the encodings float[B, L, D] -> float[B, L, num_classes].
        ``options``: the model's head keys (``form``, ``activation``: tasks/_heads.py), passed on
        to the head unchanged (a per-position head is one Dense whatever the form)."""
        raise NotImplementedError

    def provenance(self) -> Provenance:
        """Where the examples come from (call after ``prepare``)."""
        raise NotImplementedError

    def chance(self, examples: int) -> tuple[float, int]:
        """(the accuracy of a guess, the predictions an evaluation of ``examples`` examples
        averages over): one of ``num_classes`` per example here. The trainer's at-chance notice
        compares validation accuracy with it (``lra.metrics_log.AtChance``); a task whose guess or
        count differs says so (MQAR: a value is one of V/2 tokens, at each query position)."""
        return 1.0 / self.num_classes, examples

    def describe(self) -> dict[str, Any]:
        """The facts, for result files."""
        return {"vocab_size": self.vocab_size, "max_len": self.max_len,
                "num_classes": self.num_classes, "pad_id": self.pad_id, "inputs": list(self.inputs)}


_REGISTRY = Registry("task", __name__, __path__, error=UnknownTaskError)


def register(name: str) -> Callable[[type[Task]], type[Task]]:
    def wrap(cls: type[Task]) -> type[Task]:
        _REGISTRY.register(name)(cls)
        cls.name = name
        return cls

    return wrap


def available() -> list[str]:
    return _REGISTRY.names()


def in_track(track: str = "lra") -> list[str]:
    """The registered tasks of one track (``Task.track``), sorted: ``in_track()`` is LRA's six."""
    return [n for n in available() if family(n).track == track]


def family(name: str) -> type[Task]:
    return _REGISTRY.get(name)


def data_options(name: str) -> dict[str, Any]:
    """The task's data options (keyword arguments of its constructor) and their defaults."""
    params = inspect.signature(family(name).__init__).parameters
    return {p.name: p.default for p in params.values()
            if p.kind is p.KEYWORD_ONLY and p.name != "data_dir"}


def build(name: str, data_dir: Path, **options: Any) -> Task:
    return family(name)(Path(data_dir), **options)
