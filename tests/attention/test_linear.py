"""Linear Transformer (attention/linear.py) against its quadratic kernel form, written naively."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from helpers import length_mask, random_qkv
from lra.attention.linear import linear_kernel

from lra import attention

B, L, H, DH = 2, 37, 3, 8


def qkv(seed=0, length=L):
    return random_qkv((B, length, H, DH), seed)


def padding_mask(length=L):
    return length_mask([length, length - 11], length)


def phi(x):
    return np.where(x > 0, x + 1.0, np.exp(np.minimum(x, 0.0)))  # elu(x) + 1


def naive_linear(q, k, v, mask, causal, eps=1e-6):
    """out_i = sum_j (phi(q_i).phi(k_j)) v_j / (sum_j phi(q_i).phi(k_j) + eps), float64 loops."""
    q, k, v = (np.asarray(a, np.float64) for a in (q, k, v))
    out = np.zeros_like(q)
    for b in range(q.shape[0]):
        for h in range(q.shape[2]):
            for i in range(q.shape[1]):
                num, den = np.zeros(v.shape[-1]), 0.0
                for j in range(k.shape[1]):
                    if (mask is not None and not mask[b, j]) or (causal and j > i):
                        continue
                    s = phi(q[b, i, h]) @ phi(k[b, j, h])
                    num += s * v[b, j, h]
                    den += s
                out[b, i, h] = num / (den + eps)
    return out


@pytest.mark.parametrize("chunk_size", [8, 64])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("masked", [False, True])
def test_matches_quadratic_kernel_form(masked, causal, chunk_size):
    q, k, v = qkv()
    mask = padding_mask() if masked else None
    got = np.asarray(linear_kernel(jnp.asarray(q), jnp.asarray(k), jnp.asarray(v),
                                   None if mask is None else jnp.asarray(mask), causal=causal,
                                   chunk_size=chunk_size))
    want = naive_linear(q, k, v, mask, causal)
    real = np.ones((B, L), bool) if mask is None else mask
    np.testing.assert_allclose(got[real], want[real], atol=1e-5, rtol=1e-4)
    # The comparison can fail: dropping the mask or the causal restriction changes the answer.
    if masked and not causal:  # (causally, the trailing pads are all in the future anyway)
        assert np.abs(naive_linear(q, k, v, None, causal) - want)[real].max() > 1e-3
    wrong = naive_linear(q, k, v, mask, not causal)
    assert np.abs(wrong - want)[real].max() > 1e-3


@pytest.mark.parametrize("causal", [False, True])
def test_a_sequence_without_real_keys_gives_finite_zeros(causal):
    q, k, v = (jnp.asarray(a) for a in qkv())
    mask = jnp.asarray(padding_mask()).at[1].set(False)
    out = linear_kernel(q, k, v, mask, causal=causal, chunk_size=8)
    assert bool(jnp.all(jnp.isfinite(out)))
    np.testing.assert_array_equal(np.asarray(out[1]), 0.0)


def test_module_is_the_kernel_on_its_projections():
    module = attention.build("linear", dim=24, num_heads=H, qkv_dim=24, causal=True,
                             rngs=nnx.Rngs(0), chunk_size=8)
    x = jax.random.normal(jax.random.key(4), (B, L, 24))
    mask = jnp.asarray(padding_mask())
    q, k, v = module.proj.qkv(x)
    want = module.proj.merge(linear_kernel(q, k, v, mask, causal=True, chunk_size=8))
    np.testing.assert_allclose(np.asarray(module(x, mask)), np.asarray(want), atol=1e-6)


def test_causal_scan_never_builds_a_per_position_state():
    """fwd + bwd temp memory stays far below one float32[L, H, d, d] tensor of prefix sums."""
    length, heads, d = 2048, 2, 64

    def loss(q, k, v):
        return jnp.sum(linear_kernel(q, k, v, causal=True) ** 2)

    x = jax.ShapeDtypeStruct((1, length, heads, d), jnp.float32)
    compiled = jax.jit(jax.grad(loss, argnums=(0, 1, 2))).lower(x, x, x).compile()
    temp = compiled.memory_analysis().temp_size_in_bytes
    assert temp < length * heads * d * d * 4 / 4, f"{temp} bytes"
