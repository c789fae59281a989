"""XLA:CPU's YNN library fusions: on or off per compiled program, chosen by timing both.

XLA:CPU hands some matmuls and element-wise chains to YNNPACK ("YNN fusions"). Whether that helps
depends on the program: timed both ways in one process, some families' training steps run faster
without the fusions and others slower, so a process-wide flag would slow some families down. Every
record of a bench file holds both times (``xla_cpu_fusions.step_s``, ``off`` and ``on``, in
``results/efficiency/text__cpu-*.json`` from 20261202T065251Z on), so the measured ratios are read
there, not here.

So the trainer compiles its step both ways and keeps the faster (``auto``, the default on CPU), or
as told (``on``: XLA's default; ``off``). The choice is stored with the run (checkpoint metadata and
result file), and a resumed run keeps it: the two programs round differently, so switching halfway
would break exact resume. ``lra.bench`` makes the same choice the same way, so that it times the
program the trainer runs.

A setting of ``--xla_cpu_experimental_ynn_fusion_type`` in ``XLA_FLAGS`` wins: nothing is tuned and
the source is recorded as ``env``. Off CPU, or with several processes (every process must compile
the same program, and their timings differ), nothing is tuned either: XLA's default runs.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable
from typing import Any

import jax

CHOICES = ("auto", "on", "off")
FLAG = "xla_cpu_experimental_ynn_fusion_type"
# compiler_options of each variant (None: XLA's defaults, i.e. XLA_FLAGS and then XLA's own).
OPTIONS: dict[str, dict[str, str] | None] = {"on": None, "off": {FLAG: ""}}
# "off" must beat "on" by this fraction of the step time to be chosen: within noise, XLA's default.
MARGIN = 0.05


def env_setting() -> str | None:
    """The value ``XLA_FLAGS`` gives the YNN fusion flag, or None when it does not set it."""
    return env_setting_of(os.environ.get("XLA_FLAGS", ""))


def env_setting_of(xla_flags: str) -> str | None:
    """The value the flags string ``xla_flags`` gives the YNN fusion flag (None: not set)."""
    value = None
    for item in xla_flags.split():
        name, _, v = item.lstrip("-").partition("=")
        if name == FLAG:
            value = v
    return value


def resolve(requested: str, stored: str | None = None) -> tuple[str, str]:
    """(choice, source) before any timing: choice is "on", "off" or "auto" (time both).

    ``stored``: the choice a resumed run was made with (it is kept unless another is requested).
    """
    if requested not in CHOICES:
        raise ValueError(f"unknown XLA:CPU fusion choice {requested!r}; choose from "
                         f"{', '.join(CHOICES)}")
    if (env := env_setting()) is not None:
        return ("off" if env == "" else "on"), "env"
    if jax.default_backend() != "cpu":
        return "on", f"not tuned on {jax.default_backend()}"
    if requested != "auto":
        return requested, "requested"
    if stored in OPTIONS:
        return stored, "resumed"
    if jax.process_count() > 1:
        return "on", "not tuned with several processes"
    return "auto", "auto"


def pick(prepare: Callable[[str], Callable[[], Any]], rounds: int = 3
         ) -> tuple[str, dict[str, float]]:
    """Time the two variants in turn; return the faster and both medians (seconds per step).

    ``prepare(variant)`` does the untimed part (e.g. copying a state the step donates) and returns
    the call to time, which returns what to wait for. The first call of each variant (its
    compilation) is not timed; then ``rounds`` calls of each, alternating, so that drift hits both
    alike. "off" wins only when faster by more than ``MARGIN``.
    """
    for variant in OPTIONS:
        jax.block_until_ready(prepare(variant)())
    times: dict[str, list[float]] = {v: [] for v in OPTIONS}
    for _ in range(rounds):
        for variant in OPTIONS:
            run = prepare(variant)
            t0 = time.perf_counter()
            jax.block_until_ready(run())
            times[variant].append(time.perf_counter() - t0)
    medians = {v: round(statistics.median(ts), 6) for v, ts in times.items()}
    return ("off" if medians["off"] < (1.0 - MARGIN) * medians["on"] else "on"), medians


def pick_step(step: Callable[[str], Callable], state, *args) -> tuple[str, dict[str, float]]:
    """``pick`` for a training step that donates its state: ``step(variant)(state, *args)`` runs
    on a fresh copy of ``state`` each time, so the caller's state is never consumed."""
    def prepare(variant: str):
        copy = jax.block_until_ready(jax.tree.map(lambda a: a.copy(), state))
        return lambda: step(variant)(copy, *args)

    return pick(prepare)


def describe(record: dict[str, Any]) -> str:
    """One line for the log: 'off (auto: on 0.120 s/step, off 0.090 s/step)'."""
    out = f"{record['choice']} ({record['source']}"
    if record.get("step_s"):
        out += ": " + ", ".join(f"{v} {s:.3f} s/step" for v, s in record["step_s"].items())
    return out + ")"
