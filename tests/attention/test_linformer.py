"""Linformer against softmax(Q (E K)^T / sqrt(d)) (F V) written out naively in numpy."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from lra.attention.linformer import linformer_kernel

from lra import attention

B, L, H, DH, K, N = 2, 24, 2, 8, 5, 32  # n = max_len > L: only the first L columns are used


def arrays(seed=0):
    rng = np.random.default_rng(seed)
    q, k, v = (rng.standard_normal((B, L, H, DH)).astype(np.float32) for _ in range(3))
    e, f = (rng.standard_normal((K, N)).astype(np.float32) / math.sqrt(L) for _ in range(2))
    mask = np.arange(L)[None, :] < np.array([L, L - 9])[:, None]
    return q, k, v, e, f, mask


def naive_linformer(q, k, v, e, f, mask):
    out = np.zeros_like(q)
    for b in range(q.shape[0]):
        for h in range(q.shape[2]):
            # padded keys and values contribute nothing to the projections
            kk = np.array([k[b, j, h] if mask[b, j] else np.zeros(DH) for j in range(L)])
            vv = np.array([v[b, j, h] if mask[b, j] else np.zeros(DH) for j in range(L)])
            k_bar = e[:, :L] @ kk
            v_bar = f[:, :L] @ vv
            for i in range(L):
                logits = np.array([q[b, i, h] @ k_bar[r] for r in range(K)]) / math.sqrt(DH)
                w = np.exp(logits - logits.max())
                out[b, i, h] = (w / w.sum()) @ v_bar
    return out


@pytest.mark.parametrize("shared", [True, False])
def test_kernel_matches_naive_formula(shared):
    q, k, v, e, f, mask = arrays()
    f_used = e if shared else f
    got = linformer_kernel(q, k, v, jnp.asarray(e), None if shared else jnp.asarray(f),
                           jnp.asarray(mask))
    want = naive_linformer(q, k, v, e, f_used, mask)
    np.testing.assert_allclose(np.asarray(got), want, atol=1e-5, rtol=1e-5)
    # the reference is sharp enough to catch an unmasked projection
    unmasked = naive_linformer(q, k, v, e, f_used, np.ones_like(mask))
    assert np.abs(unmasked - want)[1].max() > 1e-3


def test_module_matches_naive_formula_with_its_parameters():
    dim = H * DH
    module = attention.build("linformer", dim=dim, num_heads=H, max_len=N, rngs=nnx.Rngs(0), k=K,
                             share_kv=False)
    x = np.random.default_rng(1).standard_normal((B, L, dim)).astype(np.float32)
    mask = np.arange(L)[None, :] < np.array([L, L - 9])[:, None]
    got = np.asarray(module(jnp.asarray(x), jnp.asarray(mask)))
    p = module.proj
    heads = lambda w: (x @ np.asarray(w.kernel[...])).reshape(B, L, H, DH)  # noqa: E731
    o = naive_linformer(heads(p.query), heads(p.key), heads(p.value), np.asarray(module.e[...]),
                        np.asarray(module.f[...]), mask)
    want = o.reshape(B, L, dim) @ np.asarray(p.out.kernel[...])
    np.testing.assert_allclose(got, want, atol=1e-5, rtol=1e-4)
    # share_kv=True has one projection per layer, False two
    shared = attention.build("linformer", dim=dim, num_heads=H, max_len=N, rngs=nnx.Rngs(0), k=K)
    assert shared.f is None and module.f is not None and module.e[...].shape == (K, N)


def test_padding_equals_the_unpadded_input():
    """Pads are zeroed before projecting: a padded input gives the unpadded input's outputs."""
    dim = H * DH
    module = attention.build("linformer", dim=dim, num_heads=H, max_len=N, rngs=nnx.Rngs(2), k=K)
    n = 15
    x = jax.random.normal(jax.random.key(0), (1, n, dim))
    padded = jnp.concatenate([x, 50.0 * jax.random.normal(jax.random.key(1), (1, L - n, dim))], 1)
    mask = jnp.arange(L)[None, :] < n
    short = np.asarray(module(x))
    np.testing.assert_allclose(np.asarray(module(padded, mask))[:, :n], short, atol=1e-5)
    # without the mask the pads do leak
    assert np.abs(np.asarray(module(padded))[:, :n] - short).max() > 1e-2


def test_max_len_is_required_and_enforced():
    with pytest.raises(ValueError, match="max_len"):
        attention.build("linformer", dim=16, num_heads=2, rngs=nnx.Rngs(0))
    module = attention.build("linformer", dim=16, num_heads=2, max_len=8, rngs=nnx.Rngs(0))
    with pytest.raises(ValueError, match="exceeds max_len=8"):
        module(jnp.zeros((1, 9, 16)))
    with pytest.raises(ValueError, match="no causal mode"):
        attention.build("linformer", dim=16, num_heads=2, max_len=8, causal=True,
                        rngs=nnx.Rngs(0))
