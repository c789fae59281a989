"""RetNet (attention/retnet.py): retention on the chunked kernel against a step-by-step recurrence,
the multi-scale decays, and the rotation's dependence on relative position only."""

import jax
import jax.numpy as jnp
import lra.attention.retnet as retnet_module
import numpy as np
import pytest
from flax import nnx
from helpers import padded_inputs
from lra.attention.retnet import retention_decays, rotary
from recurrences import decay_recurrence, outputs_with

from lra import attention

B, L, D, H = 2, 11, 8, 2


@pytest.mark.parametrize("causal", [False, True])
def test_layer_equals_the_step_by_step_layer(causal, monkeypatch):
    module = attention.build("retnet", dim=D, num_heads=H, qkv_dim=D, causal=causal,
                             rngs=nnx.Rngs(0), chunk_size=4)
    x, mask = padded_inputs([L, L - 4], L, D, seed=2)
    got, want = outputs_with(monkeypatch, retnet_module, "chunked_decay_attention", decay_recurrence,
                             module, jnp.asarray(x), jnp.asarray(mask))
    np.testing.assert_allclose(got[mask], want[mask], atol=1e-5, rtol=1e-4)


def test_multi_scale_decays():
    np.testing.assert_allclose(np.asarray(retention_decays(4)),
                               [1 - 2 ** -5, 1 - 2 ** -6, 1 - 2 ** -7, 1 - 2 ** -8], rtol=1e-7)


def test_rotation_depends_on_relative_position():
    q = jax.random.normal(jax.random.key(0), (1, 1, 1, 8))
    k = jax.random.normal(jax.random.key(1), (1, 1, 1, 8))
    rows = lambda a: rotary(jnp.broadcast_to(a, (1, 12, 1, 8)))[0, :, 0]  # noqa: E731
    s = np.asarray(rows(q) @ rows(k).T)
    np.testing.assert_allclose(s[3, 1], s[9, 7], rtol=1e-4)
    np.testing.assert_allclose(s[1, 3], s[7, 9], rtol=1e-4)
