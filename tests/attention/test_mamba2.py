"""Mamba-2 (attention/mamba2.py): the block on the chunked kernel against the same block on a
step-by-step recurrence, and the paper's initialisation."""

import jax
import jax.numpy as jnp
import lra.attention.mamba2 as mamba2_module
import numpy as np
import pytest
from flax import nnx
from helpers import padded_inputs
from recurrences import decay_recurrence, outputs_with

from lra import attention

B, L, D, H = 2, 11, 8, 2


@pytest.mark.parametrize("causal", [False, True])
def test_block_equals_the_step_by_step_block(causal, monkeypatch):
    module = attention.build("mamba2", dim=D, num_heads=H, causal=causal, rngs=nnx.Rngs(0),
                             state_size=4, chunk_size=4)
    x, mask = padded_inputs([L, L - 4], L, D, seed=2)
    got, want = outputs_with(monkeypatch, mamba2_module, "chunked_decay_attention", decay_recurrence,
                             module, jnp.asarray(x), jnp.asarray(mask))
    np.testing.assert_allclose(got[mask], want[mask], atol=1e-5, rtol=1e-4)


def test_initialisation_follows_the_paper():
    module = attention.build("mamba2", dim=128, num_heads=256, rngs=nnx.Rngs(0))
    a = np.exp(np.asarray(module.A_log[...]))
    assert a.min() >= 1.0 and a.max() <= 16.0 and a.max() - a.min() > 12  # A ~ U[1, 16]
    dt = np.asarray(jax.nn.softplus(module.dt_bias[...]))
    assert dt.min() >= 1e-3 * (1 - 1e-4) and dt.max() <= 0.1 * (1 + 1e-4)
    np.testing.assert_array_equal(np.asarray(module.D[...]), np.ones(256))
    for name in ("A_log", "dt_bias", "D"):
        assert getattr(module, name).get_metadata().get("optimizer_group") == "ssm"
