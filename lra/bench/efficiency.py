"""The efficiency result format that ``python -m lra.bench`` writes and ``python -m lra.leaderboard``
reads: its version and the one scaling fit both report.

A file's ``schema`` is ``SCHEMA``; the leaderboard refuses any other. The scaling exponent of a family
is the least-squares slope k of log(y) against log(length) for y ~ length^k (y: seconds per step or
peak bytes): 2 is quadratic, 1 linear. No jax here: the leaderboard runs without it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

SCHEMA = "lra.bench/1"


def loglog_slope(xs: Sequence[float], ys: Sequence[float]) -> float | None:
    """Least-squares slope of log(y) against log(x): the exponent k of y ~ x^k. None below 2 points."""
    if len(xs) < 2 or len(set(xs)) < 2:
        return None
    return float(np.polyfit(np.log(np.asarray(xs, float)), np.log(np.asarray(ys, float)), 1)[0])


def fit_slopes(records: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """{family: {lengths, time, memory}}: the time and memory exponents over the measured lengths."""
    out = {}
    for name in sorted({r["attention"] for r in records}):
        ok = [r for r in records if r["attention"] == name and r["status"] == "ok"]
        xs = [r["length"] for r in ok]
        out[name] = {"lengths": xs,
                     "time": loglog_slope(xs, [r["step_time_s"]["median"] for r in ok]),
                     "memory": loglog_slope(xs, [r["memory"]["bytes"] for r in ok])}
    return out
