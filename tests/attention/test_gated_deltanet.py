"""Gated DeltaNet / DeltaNet (attention/gated_deltanet.py): the layer on the chunked delta rule against
the same layer on a step-by-step recurrence, the initialisation, and beta = 0 at pads."""

import jax
import jax.numpy as jnp
import lra.attention.gated_deltanet as gdn_module
import numpy as np
import pytest
from flax import nnx
from helpers import padded_inputs
from recurrences import delta_recurrence, outputs_with

from lra import attention

B, L, D, H = 2, 11, 8, 2


@pytest.mark.parametrize("gate", [True, False])
@pytest.mark.parametrize("causal", [False, True])
def test_layer_equals_the_step_by_step_layer(gate, causal, monkeypatch):
    module = attention.build("gated_deltanet", dim=D, num_heads=H, qkv_dim=D, causal=causal,
                             rngs=nnx.Rngs(0), gate=gate, chunk_size=4)
    x, mask = padded_inputs([L, L - 4], L, D, seed=2)
    got, want = outputs_with(monkeypatch, gdn_module, "chunked_delta_rule", delta_recurrence,
                             module, jnp.asarray(x), jnp.asarray(mask))
    np.testing.assert_allclose(got[mask], want[mask], atol=1e-5, rtol=1e-4)


def test_initialisation_follows_fla():
    module = attention.build("gated_deltanet", dim=16, num_heads=512, qkv_dim=512, rngs=nnx.Rngs(0))
    a = np.exp(np.asarray(module.A_log[...]))
    assert a.min() > 0 and a.max() <= 16.0 and a.mean() == pytest.approx(8.0, abs=1.0)  # U(0, 16)
    dt = np.asarray(jax.nn.softplus(module.dt_bias[...]))
    assert dt.min() >= 1e-3 * (1 - 1e-4) and dt.max() <= 0.1 * (1 + 1e-4)
    assert not hasattr(attention.build("gated_deltanet", dim=8, num_heads=2, rngs=nnx.Rngs(0),
                                       gate=False), "A_log")
