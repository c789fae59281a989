"""Helpers shared by several test files: random inputs, padding masks and the module-level dense
check for the attention tests, CLI subprocess environments and tiny run arguments.

Train-state construction is not here: lra/train.py owns it. conftest.py sets XLA_FLAGS for the test
process; ``cli_env`` passes the same flags on to a ``python -m lra...`` subprocess.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
from reference import dense_reference


def length_mask(lengths, length: int) -> np.ndarray:
    """bool[B, length], True at the first ``lengths[b]`` positions of row b (right padding)."""
    return np.arange(length)[None, :] < np.asarray(lengths)[:, None]


def random_qkv(shape: tuple[int, ...], seed: int = 0, n: int = 3) -> list[np.ndarray]:
    """``n`` float32 arrays of ``shape`` (e.g. [B, L, H, Dh]) drawn N(0, 1) from ``n`` keys split
    from ``jax.random.key(seed)``."""
    return [np.asarray(jax.random.normal(k, shape)) for k in jax.random.split(jax.random.key(seed), n)]


def padded_inputs(lengths, length: int, dim: int, *, seed: int = 0, pad_scale: float = 0.0):
    """x float32[B, length, dim] with real tokens N(0, 1) and pads N(0, pad_scale^2) (non-zero pad
    activations when ``pad_scale`` > 0), and mask bool[B, length] from ``lengths`` (int[B])."""
    rng = np.random.default_rng(seed)
    mask = length_mask(lengths, length)
    shape = (len(lengths), length, dim)
    x = rng.standard_normal(shape)
    x = np.where(mask[..., None], x, pad_scale * rng.standard_normal(shape))
    return x.astype(np.float32), mask


def assert_module_matches_dense(module, x, mask, pattern) -> None:
    """A family's output at real positions equals dense attention restricted to ``pattern``
    (bool[L, L] or per head [H, L, L], True = may attend) and to real keys, computed from the
    module's own q, k, v projections and merged by its own output projection."""
    mask = np.asarray(mask)
    pattern = np.asarray(pattern)
    allowed = (pattern[None] if pattern.ndim == 3 else pattern[None, None]) & mask[:, None, None, :]
    q, k, v = nnx.jit(lambda m, x: m.proj.qkv(x))(module, x)
    o = jnp.asarray(dense_reference(q, k, v, allowed), jnp.float32)
    ref = nnx.jit(lambda m, o: m.proj.merge(o))(module, o)
    out = nnx.jit(lambda m, x, mask: m(x, mask))(module, x, jnp.asarray(mask))
    np.testing.assert_allclose(np.asarray(out)[mask], np.asarray(ref)[mask], atol=2e-5, rtol=1e-4)


# Named variants of a registered family that tests parametrize by their own name (the family with
# the option that gives the variant): the fast lane (conftest.py) counts them as the family.
FAMILY_OF_VARIANT = {"hgrn2": "gla", "deltanet": "gated_deltanet"}


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


def wait_until_training(workdir, timeout: float = 300) -> None:
    """Wait until ``workdir``'s run has logged a training record (its loop is running; the header
    line of metrics.jsonl is written before the loop starts). Needs ``train.log_every=1``."""
    metrics = Path(workdir) / "metrics.jsonl"
    deadline = time.time() + timeout
    while time.time() < deadline:
        if metrics.exists() and '"split": "train"' in metrics.read_text():
            return
        time.sleep(0.1)
    raise AssertionError(f"{workdir}: no training record within {timeout:.0f} s")


@contextlib.contextmanager
def full_disk(where: Path, keep: tuple[str, ...] = ()) -> Iterator[Path]:
    """A 1 MiB tmpfs mounted on ``where`` (created) with the folders ``keep`` made in it, then
    filled up by ``where/filler`` (a real full disk: every write of a byte fails with ENOSPC,
    creating an empty file or a folder does not). Deleting the filler frees it. Skips the test
    where mounting is not allowed (not root)."""
    import pytest

    if os.geteuid() != 0 or not shutil.which("mount"):
        pytest.skip("a real full disk needs root to mount a small tmpfs")
    where = Path(where)
    where.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1M", "tmpfs", str(where)],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        for folder in keep:
            (where / folder).mkdir(parents=True)
        with contextlib.suppress(OSError), open(where / "filler", "wb") as f:
            while True:
                f.write(bytes(65536))
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], capture_output=True)


def assert_head_groupings_agree(call, arrays) -> None:
    """A heads-first block kernel (``groups=``, attention._blocks.head_groups): ``call(*arrays,
    groups=g)`` gives the one-group output and the gradients of every array bit for bit under
    every grouping of 4 heads (the caller's dropout included)."""
    def run(groups):
        def loss(*arrays):
            out = call(*arrays, groups=groups)
            return (out ** 2).sum(), out
        argnums = tuple(range(len(arrays)))
        (_, out), grads = jax.jit(jax.value_and_grad(loss, argnums=argnums, has_aux=True))(*arrays)
        return [out, *grads]

    reference = run(1)
    for groups in (2, 4, None):
        for got, want in zip(run(groups), reference):
            np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


def result_record(config: dict, *, val: float = 0.4, test: float = 0.4, fingerprint=None,
                  date: str = "2026-01-01T00:00:00Z", device: str = "cpu") -> dict:
    """A complete, valid result file (format 2) of the resolved ``config`` (``Config.to_dict()``),
    as ``lra.run`` writes it, with the given accuracies: what the one reader
    (``lra.leaderboard.reader``) counts. ``fingerprint``: the data's (``data_fingerprint``), else
    a made-up one."""
    import json

    from lra import config as config_lib
    from lra.results import config_overrides

    config = json.loads(json.dumps(config))
    overrides = config_overrides(config_lib.Config.from_dict(config))
    fp = fingerprint or {"sha256": "a" * 64, "generator": {"name": "test", "version": 1},
                         "files": {}}
    steps = config["train"]["num_steps"]
    return {
        "format_version": 2, "task": config["task"], "attention": config["attention"],
        "preset": config["preset"], "seed": config["seed"], "protocol": config.get("protocol", "lra"),
        "config": config, "overrides": overrides,
        "metrics": {"best_val_accuracy": val, "test_accuracy_at_best_val": test,
                    "test_accuracy_at_last": test, "final_val_accuracy": val, "steps": steps,
                    "best_val_step": steps, "wall_time_s": 1.0, "steps_per_s": 1.0},
        "data": {"evaluated": {"val": 1000, "test_at_last": 1000, "test_at_best_val": 1000},
                 "fingerprint": fp},
        "device": {"platform": device, "kind": device, "count": 1, "process_count": 1},
        "versions": {}, "git": {"commit": "0123456789abcdef", "dirty": False},
        "date": date, "status": "completed",
    }
