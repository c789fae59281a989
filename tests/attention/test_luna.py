"""Luna against its pack/unpack formula written out naively in numpy with the module's weights."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from helpers import length_mask

from lra import attention

B, L, D, H, PLEN = 2, 20, 16, 2, 6
DH = D // H
apply = nnx.jit(lambda module, x, mask: module(x, mask))


def weights(dense):
    return np.asarray(dense.kernel[...], np.float64)


def attend(queries, keys, values, allowed):
    """One head: rows of softmax(queries keys^T / sqrt(d)) over allowed keys, times values."""
    out = np.zeros((len(queries), values.shape[1]))
    for i, qi in enumerate(queries):
        idx = [j for j in range(len(keys)) if allowed[j]]
        logits = np.array([qi @ keys[j] for j in idx]) / math.sqrt(len(qi))
        w = np.exp(logits - logits.max())
        out[i] = (w / w.sum()) @ values[idx]
    return out


def naive_luna(module, x, mask):
    tied = module.tie_kv
    p = np.asarray(module.packed[...], np.float64)
    out = np.zeros((x.shape[0], x.shape[1], D))
    for b in range(x.shape[0]):
        xb = x[b].astype(np.float64)
        pq = p @ weights(module.pack_query)
        pk = xb @ weights(module.pack_context if tied else module.pack_key)
        pv = xb @ weights(module.pack_context if tied else module.pack_value)
        packed = np.concatenate([attend(pq[:, s], pk[:, s], pv[:, s], mask[b])
                                 for s in (slice(h * DH, (h + 1) * DH) for h in range(H))], 1)
        q = xb @ weights(module.query)
        k = packed @ weights(module.context if tied else module.key)
        v = packed @ weights(module.context if tied else module.value)
        y = np.concatenate([attend(q[:, s], k[:, s], v[:, s], np.ones(PLEN, bool))
                            for s in (slice(h * DH, (h + 1) * DH) for h in range(H))], 1)
        out[b] = y @ weights(module.out)
    return out


def inputs(seed=0):
    x = np.random.default_rng(seed).standard_normal((B, L, D)).astype(np.float32)
    mask = length_mask([L, L - 7], L)
    return x, mask


@pytest.mark.parametrize("tie_kv", [True, False])
def test_matches_naive_pack_unpack(tie_kv):
    module = attention.build("luna", dim=D, num_heads=H, rngs=nnx.Rngs(0), packed_len=PLEN,
                             tie_kv=tie_kv)
    x, mask = inputs()
    got = np.asarray(apply(module, jnp.asarray(x), jnp.asarray(mask)))
    want = naive_luna(module, x, mask)
    np.testing.assert_allclose(got, want, atol=1e-5, rtol=1e-4)
    # the reference sees the mask: packing over the pads too would give other numbers
    assert np.abs(naive_luna(module, x, np.ones_like(mask)) - want)[1].max() > 1e-3


def test_padded_input_equals_unpadded_input():
    module = attention.build("luna", dim=D, num_heads=H, rngs=nnx.Rngs(1), packed_len=PLEN)
    n = 13
    x = jax.random.normal(jax.random.key(0), (1, n, D))
    pads = 40.0 * jax.random.normal(jax.random.key(1), (1, L - n, D))
    padded = jnp.concatenate([x, pads], axis=1)
    mask = jnp.arange(L)[None, :] < n
    short = np.asarray(apply(module, x, jnp.ones((1, n), bool)))
    np.testing.assert_allclose(np.asarray(apply(module, padded, mask))[:, :n], short, atol=1e-5)
    unmasked = np.asarray(apply(module, padded, jnp.ones((1, L), bool)))[:, :n]
    assert np.abs(unmasked - short).max() > 1e-2


def test_each_layer_owns_a_learned_packed_sequence():
    module = attention.build("luna", dim=D, num_heads=H, rngs=nnx.Rngs(0))
    assert module.packed[...].shape == (16, D)
    assert attention.options("luna") == {"packed_len": 16, "tie_kv": True}
    x = jax.random.normal(jax.random.key(0), (1, 5, D))
    grads = nnx.jit(nnx.grad(lambda m: jnp.sum(m(x) ** 2)))(module)
    assert float(jnp.abs(grads.packed[...]).max()) > 0
    with pytest.raises(ValueError, match="no causal mode"):
        attention.build("luna", dim=D, num_heads=H, causal=True, rngs=nnx.Rngs(0))
