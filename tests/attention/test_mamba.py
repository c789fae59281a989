"""Mamba (attention/mamba.py): the chunked selective scan against a plain loop, the block against the
same block with a step-by-step scan, and the paper's initialisation."""

import math

import jax
import jax.numpy as jnp
import lra.attention.mamba as mamba_module
import numpy as np
import pytest
from flax import nnx
from helpers import padded_inputs
from lra.attention._mixers import inverse_softplus
from lra.attention.mamba import selective_scan
from recurrences import outputs_with, selective_recurrence

from lra import attention

B, L, D, E, N = 2, 11, 8, 6, 3


def plain_loop(x, delta, a, b, c):
    """float64 numpy, one channel, one state and one step at a time."""
    x, delta, a, b, c = (np.asarray(t, np.float64) for t in (x, delta, a, b, c))
    y = np.zeros(x.shape)
    for i in range(x.shape[0]):
        h = np.zeros(a.shape)
        for t in range(x.shape[1]):
            h = np.exp(delta[i, t][:, None] * a) * h + (delta[i, t] * x[i, t])[:, None] * b[i, t][None, :]
            y[i, t] = h @ c[i, t]
    return y


@pytest.mark.parametrize("chunk", [1, 4, 16])  # 4 does not divide 11
def test_selective_scan_equals_a_plain_loop(chunk):
    ks = jax.random.split(jax.random.key(0), 5)
    x = jax.random.normal(ks[0], (B, L, E))
    delta = jax.nn.softplus(jax.random.normal(ks[1], (B, L, E)))
    a = -jnp.exp(jax.random.normal(ks[2], (E, N)))
    b, c = jax.random.normal(ks[3], (B, L, N)), jax.random.normal(ks[4], (B, L, N))
    got = jax.jit(lambda *t: selective_scan(*t, chunk_size=chunk))(x, delta, a, b, c)
    np.testing.assert_allclose(np.asarray(got), plain_loop(x, delta, a, b, c), atol=1e-4, rtol=1e-4)
    # and the gradients of the chunked (checkpointed) scan equal those of a step-by-step scan
    def grad(f):
        return jax.grad(lambda *t: jnp.sum(f(*t) ** 2), argnums=(0, 1, 2, 3, 4))(x, delta, a, b, c)

    grads = [grad(lambda *t: selective_scan(*t, chunk_size=chunk)), grad(selective_recurrence)]
    for g1, g2 in zip(*grads, strict=True):
        np.testing.assert_allclose(np.asarray(g1), np.asarray(g2), atol=1e-3, rtol=1e-3)


@pytest.mark.parametrize("causal", [False, True])
def test_block_equals_the_step_by_step_block(causal, monkeypatch):
    module = attention.build("mamba", dim=D, num_heads=1, causal=causal, rngs=nnx.Rngs(0),
                             state_size=N, chunk_size=4)
    x, mask = padded_inputs([L, L - 4], L, D, seed=2)
    got, want = outputs_with(monkeypatch, mamba_module, "selective_scan", selective_recurrence,
                             module, jnp.asarray(x), jnp.asarray(mask))
    np.testing.assert_allclose(got[mask], want[mask], atol=1e-5, rtol=1e-4)


def test_initialisation_follows_the_paper():
    module = attention.build("mamba", dim=64, num_heads=1, rngs=nnx.Rngs(0), dt_min=1e-3, dt_max=0.1)
    width, rank = 128, math.ceil(64 / 16)
    a_log = np.asarray(module.A_log[...])
    assert a_log.shape == (width, 16)
    np.testing.assert_allclose(np.exp(a_log), np.broadcast_to(np.arange(1, 17), (width, 16)), rtol=1e-6)
    np.testing.assert_array_equal(np.asarray(module.D[...]), np.ones(width))
    dt = np.asarray(jax.nn.softplus(module.dt_proj.bias[...]))
    assert dt.min() >= 1e-3 * (1 - 1e-4) and dt.max() <= 0.1 * (1 + 1e-4)
    assert dt.min() < 2e-3 and dt.max() > 0.05  # log-uniform over the whole range
    # log dt is uniform: its mean is the midpoint of [log 1e-3, log 0.1]
    assert abs(np.log(dt).mean() - 0.5 * (math.log(1e-3) + math.log(0.1))) < 0.3
    np.testing.assert_allclose(np.asarray(inverse_softplus(jnp.asarray(dt))),
                               np.asarray(module.dt_proj.bias[...]), rtol=1e-4, atol=1e-4)
    w = np.asarray(module.dt_proj.kernel[...])
    assert w.shape == (rank, width) and np.abs(w).max() <= rank ** -0.5
    assert module.A_log.get_metadata().get("optimizer_group") == "ssm"
