"""GLA and HGRN2 (attention/gla.py): the layer on the chunked kernel against the same layer on a
step-by-step recurrence, the gates at initialisation, HGRN2's key/forget tying and lower bound."""

import jax
import jax.numpy as jnp
import lra.attention.gla as gla_module
import numpy as np
import pytest
from flax import nnx
from helpers import padded_inputs
from recurrences import decay_recurrence, outputs_with

from lra import attention

B, L, D, H = 2, 11, 8, 2


def make(causal=False, **opts):
    return attention.build("gla", dim=D, num_heads=H, qkv_dim=D, causal=causal, rngs=nnx.Rngs(0),
                           chunk_size=4, **opts)


@pytest.mark.parametrize("variant", ["gla", "hgrn2"])
@pytest.mark.parametrize("causal", [False, True])
def test_layer_equals_the_step_by_step_layer(variant, causal, monkeypatch):
    module = make(causal, variant=variant, lower_bound=0.3 if variant == "hgrn2" else 0.0)
    x, mask = padded_inputs([L, L - 4], L, D, seed=2)
    got, want = outputs_with(monkeypatch, gla_module, "chunked_decay_attention", decay_recurrence,
                             module, jnp.asarray(x), jnp.asarray(mask))
    np.testing.assert_allclose(got[mask], want[mask], atol=1e-5, rtol=1e-4)


def test_gla_decays_start_near_one():
    # alpha = exp(logsigmoid(.) / 16): with pre-activations of order 1, decays lie in ~(0.9, 1)
    module = attention.build("gla", dim=64, num_heads=4, rngs=nnx.Rngs(0))
    x = jax.random.normal(jax.random.key(0), (2, 32, 64))
    _, _, _, log_a = module.features(x, jnp.ones((2, 32), bool))
    alpha = np.exp(np.asarray(log_a))
    assert log_a.shape == (2, 32, 4, 8) and alpha.min() > 0.5 and np.median(alpha) > 0.95


def test_hgrn2_ties_key_to_forget_gate_and_bounds_it():
    module = make(variant="hgrn2", lower_bound=0.6)
    x = 5.0 * jax.random.normal(jax.random.key(0), (1, L, D))
    q, k, _, log_f = module.features(x, jnp.ones((1, L), bool))
    f = np.exp(np.asarray(log_f))
    np.testing.assert_allclose(np.asarray(k), 1.0 - f, atol=1e-6)
    assert f.min() >= 0.6 - 1e-6 and f.max() <= 1.0
    f_raw = np.asarray(jax.nn.sigmoid(module.f_proj(x))).reshape(f.shape)
    np.testing.assert_allclose(f, 0.6 + 0.4 * f_raw, atol=1e-5)
    assert bool(jnp.all(q > -0.3))  # SiLU output gate as the query
