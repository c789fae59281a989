"""What the bench measures, one function each: FLOPs of a traced step, the device's matmul peak, free
memory, a process's RSS growth, a compiled step's memory and cost analyses, a step's wall time.

FLOPs: XLA's ``cost_analysis`` counts a while loop's body once whatever its trip count, so
``matmul_flops`` walks the jaxpr instead and multiplies every scan body by its length (dot_general:
2 x output elements x contracted size; convolution: 2 x output elements x kernel elements / output
features). Memory of a compiled step: arguments + outputs - donated aliases + temporaries.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import psutil


def matmul_flops(jaxpr) -> tuple[int, bool]:
    """FLOPs of every dot_general and convolution in ``jaxpr``, scan bodies times their length.

    Returns (flops, loops): ``loops`` is True if the step has a scan or while loop, whose body
    XLA's cost analysis counts once (a while loop's trip count is unknown here too: counted once).
    """
    total, loops = 0, False
    for eqn in jaxpr.eqns:
        name = eqn.primitive.name
        if name == "dot_general":
            (contract, _), _ = eqn.params["dimension_numbers"]
            lhs = eqn.invars[0].aval.shape
            total += 2 * math.prod(eqn.outvars[0].aval.shape) * math.prod(lhs[i] for i in contract)
        elif name == "conv_general_dilated":
            rhs = eqn.invars[1].aval.shape
            out_features = rhs[eqn.params["dimension_numbers"].rhs_spec[0]]
            total += 2 * math.prod(eqn.outvars[0].aval.shape) * math.prod(rhs) // out_features
        subs = [_inner(v) for v in eqn.params.values()]
        subs += [_inner(x) for v in eqn.params.values() if isinstance(v, tuple | list) for x in v]
        counted = [matmul_flops(s) for s in subs if s is not None]
        if not counted:
            continue
        loops |= name in ("while", "scan") or any(w for _, w in counted)
        if name == "cond":
            total += max(f for f, _ in counted)
        else:
            total += sum(f for f, _ in counted) * (eqn.params["length"] if name == "scan" else 1)
    return total, loops


def _inner(value):
    """The Jaxpr inside a parameter value (a Jaxpr or a ClosedJaxpr), else None."""
    if hasattr(value, "eqns"):
        return value
    if hasattr(value, "jaxpr") and hasattr(value.jaxpr, "eqns"):
        return value.jaxpr
    return None


def matmul_peak(dtype: str, size: int | None = None, repeats: int = 5) -> dict[str, Any]:
    """This device's matmul FLOP/s: the best of ``repeats`` runs of a jitted chain of n x n matmuls."""
    platform = jax.devices()[0].platform
    n = size or (2048 if platform == "cpu" else 8192)
    chain = 4 if platform == "cpu" else 20
    dt = jnp.dtype(dtype)
    a = jax.random.normal(jax.random.key(1), (n, n), dt)
    w = (jax.random.normal(jax.random.key(2), (n, n), jnp.float32) / math.sqrt(n)).astype(dt)
    f = jax.jit(lambda a, w: jax.lax.fori_loop(0, chain, lambda i, x: x @ w, a))
    f(a, w).block_until_ready()
    best = math.inf
    for _ in range(repeats):
        t0 = time.perf_counter()
        f(a, w).block_until_ready()
        best = min(best, time.perf_counter() - t0)
    flops = 2 * n**3 * chain
    return {"flops_per_s": flops / best, "n": n, "chain": chain, "dtype": dtype, "best_s": best,
            "method": f"best of {repeats}: jit fori_loop of {chain} [{n},{n}] @ [{n},{n}] {dtype}"}


def free_memory() -> tuple[int, str]:
    """Bytes this process could still allocate on the device it runs on, and where that comes from."""
    stats = jax.local_devices()[0].memory_stats()
    if stats and "bytes_limit" in stats:
        return (int(stats["bytes_limit"]) - int(stats.get("bytes_in_use", 0)),
                "device bytes_limit - bytes_in_use")
    return int(psutil.virtual_memory().available), "host available memory (psutil)"


def device_peak() -> int | None:
    """The device's ``peak_bytes_in_use`` (a process-wide high-water mark), None where not reported."""
    stats = jax.local_devices()[0].memory_stats() or {}
    return int(stats["peak_bytes_in_use"]) if "peak_bytes_in_use" in stats else None


class RssSampler:
    """Peak growth of this process's resident set while the block runs (sampled every ~1 ms)."""

    def __init__(self):
        self._proc = psutil.Process()
        self._stop = threading.Event()
        self.base = self.peak = self._proc.memory_info().rss
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self._stop.is_set():
            self.peak = max(self.peak, self._proc.memory_info().rss)
            time.sleep(0.001)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self._proc.memory_info().rss)

    @property
    def growth(self) -> int:
        return self.peak - self.base


def compiled_memory(compiled) -> dict[str, int]:
    """XLA's memory analysis of a compiled step in bytes: argument, output, alias (outputs written
    into donated inputs), temp, xla_peak, and total = argument + output - alias + temp."""
    m = compiled.memory_analysis()
    c = {"argument": int(m.argument_size_in_bytes), "output": int(m.output_size_in_bytes),
         "alias": int(m.alias_size_in_bytes), "temp": int(m.temp_size_in_bytes),
         "xla_peak": int(getattr(m, "peak_memory_in_bytes", 0) or 0)}
    c["total"] = c["argument"] + c["output"] - c["alias"] + c["temp"]
    return c


def xla_flops(compiled) -> float:
    """FLOPs of a compiled step by XLA's cost analysis (loop bodies counted once; 0 if unknown)."""
    cost = compiled.cost_analysis()
    cost = cost[0] if isinstance(cost, list | tuple) else cost
    return float(cost.get("flops", 0.0)) if cost else 0.0


def timed(fn: Callable, *args) -> tuple[Any, float]:
    """(fn(*args), wall seconds), waiting for every output array to be ready."""
    t0 = time.perf_counter()
    out = fn(*args)
    jax.block_until_ready(out)
    return out, time.perf_counter() - t0
