"""Helpers shared by several test files: CLI subprocess environments and tiny run arguments.

Train-state construction is not here: lra/train.py owns it. conftest.py sets XLA_FLAGS for the test
process; ``cli_env`` passes the same flags on to a ``python -m lra...`` subprocess.
"""

from __future__ import annotations

import os

# Tiny ListOps splits for end-to-end runs of the tiny preset (`--set` arguments).
SMALL_LISTOPS = ["--set", "data.train_size=128", "--set", "data.val_size=32",
                 "--set", "data.test_size=32"]


def cli_env(devices: int | None = None, **extra: str) -> dict[str, str]:
    """The environment for a CLI subprocess: this session's XLA flags (conftest.py), one CPU device
    unless ``devices`` forces that many host devices, plus ``extra`` variables."""
    env = dict(os.environ)
    env.pop("JAX_NUM_CPU_DEVICES", None)
    if devices is not None:
        env["XLA_FLAGS"] = f"{env.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count={devices}"
    env.update(extra)
    return env
