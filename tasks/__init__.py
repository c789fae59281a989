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
    task.head(features_dim, mlp_dim, rngs=...)  # nnx.Module: pooled encodings -> logits

``mask`` is True at real tokens and comes from true lengths, never from ``token > 0``.
Every example of a split has the same length ``max_len`` (padded with ``pad_id``).
Batching (shuffling, grouping examples into ``[B, L]`` arrays) happens once, in ``lra.data_pipeline``.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from lra.registry import Registry, UnknownNameError

__all__ = ["DataError", "Task", "UnknownTaskError", "available", "build", "family", "register"]



class DataError(RuntimeError):
    """A data problem a user can fix: missing files, a malformed row. The message says which/how."""


class UnknownTaskError(UnknownNameError):
    """Raised for a task name nobody registered; the message lists the valid names."""


class Task:
    """Base class: subclasses set the facts and implement ``prepare``, ``source`` and ``head``."""

    name: ClassVar[str]
    vocab_size: int
    max_len: int
    num_classes: int
    pad_id: int = 0
    inputs: tuple[str, ...] = ("inputs",)
    # Pixel tasks: token = intensity (0..255) + pixel_offset, and pixel_stats = (mean, std) of
    # intensity / 255 that a linear input encoder normalises with. None for token tasks.
    pixel_stats: tuple[float, float] | None = None
    pixel_offset: int = 1

    def __init__(self, data_dir: Path, **options: Any):
        self.data_dir = Path(data_dir)

    def prepare(self) -> None:
        """Make the data available under ``data_dir`` or raise ``DataError`` saying how to get it."""
        raise NotImplementedError

    def source(self, split: str) -> Sequence[dict[str, np.ndarray]]:
        """Random-access examples of ``split`` ("train", "val" or "test")."""
        raise NotImplementedError

    def head(self, features_dim: int, mlp_dim: int, *, rngs):
        """The classifier: one pooled encoding per entry of ``inputs`` -> float[B, num_classes]."""
        raise NotImplementedError

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


def family(name: str) -> type[Task]:
    return _REGISTRY.get(name)


def data_options(name: str) -> dict[str, Any]:
    """The task's data options (keyword arguments of its constructor) and their defaults."""
    params = inspect.signature(family(name).__init__).parameters
    return {p.name: p.default for p in params.values()
            if p.kind is p.KEYWORD_ONLY and p.name != "data_dir"}


def build(name: str, data_dir: Path, **options: Any) -> Task:
    return family(name)(Path(data_dir), **options)
