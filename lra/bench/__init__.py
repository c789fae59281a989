"""Measuring the suite: speed, memory and FLOPs of a training step, and the accelerator check.

    python -m lra.bench ...                # one training step per family and length (steps.py)
    python -m lra.bench.peers ...          # our layers next to third-party implementations
    python -m lra.bench.device_check ...   # the first-accelerator check

``steps`` is the bench itself, ``measure`` what it measures with (time, memory, FLOPs, the matmul
peak), ``efficiency`` the bench file's format and the scaling fit (read by the leaderboard too, so
it and this file import no JAX), ``peers`` and ``device_check`` the two other commands. This package
imports the core (``lra.train``, ``lra.config``, ``lra.attention``); nothing in the core imports it.
"""

import lra._guard  # noqa: F401  (first: one line where lra was found only in part)
