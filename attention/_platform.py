"""The one place where the attention code's per-platform rules learn which platform they plan for.

Some choices depend on the device a program is traced for: softmax's implementation
(attention/softmax.py: cuDNN, dense or blocked, the dense one only where the device's free memory
holds the scores), the causal linear scan's kernel (attention/_linear_scan.py: the Pallas kernel on
GPU) and the head groups of the block kernels (attention/_blocks.py: two on CPU). Each reads the
platform through ``platform()`` and the free device memory through ``memory_free()``; nothing else in
the package asks JAX which backend runs.

By default both describe the default backend. ``target(platform, memory_free=...)`` makes every rule
traced inside it plan for another device: that is how a CPU host lowers the exact program a GPU
would run (tests/attention/test_gpu_lowering.py), and how a test feeds the rules a value only a GPU has (its
free memory). The values are read when a function is traced, so a jitted function traced before
entering ``target`` keeps the program it has.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from dataclasses import dataclass

import jax

PLATFORMS = ("cpu", "gpu", "tpu")


@dataclass(frozen=True)
class Target:
    """What the rules plan for: a platform ("cpu", "gpu", "tpu") and the free device memory in bytes
    (``None``: unknown, and then no rule counts on having any)."""

    platform: str
    memory_free: int | None = None


_TARGET: contextvars.ContextVar[Target | None] = contextvars.ContextVar("attention_target",
                                                                        default=None)


def platform() -> str:
    """The platform the rules plan for: ``target``'s, else ``jax.default_backend()``."""
    t = _TARGET.get()
    return t.platform if t is not None else jax.default_backend()


def memory_free() -> int | None:
    """Bytes free on the first local device: ``target``'s value, else the device's own count
    (``memory_stats()``: ``bytes_limit - bytes_in_use``), or ``None`` where the device keeps no such
    count (XLA:CPU)."""
    t = _TARGET.get()
    if t is not None:
        return t.memory_free
    stats = jax.local_devices()[0].memory_stats() or {}
    if "bytes_limit" not in stats:
        return None
    return int(stats["bytes_limit"]) - int(stats.get("bytes_in_use", 0))


@contextlib.contextmanager
def target(platform: str, *, memory_free: int | None = None) -> Iterator[Target]:
    """Plan for ``platform`` with ``memory_free`` bytes free (``None``: unknown) in code traced inside."""
    if platform not in PLATFORMS:
        raise ValueError(f"target platform must be one of {', '.join(PLATFORMS)}, got {platform!r}")
    if memory_free is not None and memory_free < 0:
        raise ValueError(f"memory_free must be >= 0 bytes, got {memory_free}")
    chosen = Target(platform, None if memory_free is None else int(memory_free))
    token = _TARGET.set(chosen)
    try:
        yield chosen
    finally:
        _TARGET.reset(token)
