"""Sparse Transformer attention against an independent dense reference (explicit L x L masks)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from helpers import assert_module_matches_dense, length_mask
from lra.attention.sparse import sparse_kernel
from reference import dense_reference

from lra import attention

B, H, DH = 2, 2, 4
L_BLOCK, C = 8, 3


def qkv_and_mask(length, seed=0):
    rng = np.random.default_rng(seed)
    q, k, v = (rng.normal(size=(B, length, H, DH)).astype(np.float32) for _ in range(3))
    mask = np.ones((B, length), bool)
    mask[1, 2 * length // 3:] = False
    mask[0, [4, 7, 23]] = False  # holes, two of them summary columns
    return q, k, v, mask


def sparse_pattern(length, pattern, causal, l=L_BLOCK, c=C, global_tokens=0):
    """The Sparse Transformer patterns, written from the paper's definitions."""
    a, b = np.arange(length)[:, None], np.arange(length)[None, :]
    i, j = a - global_tokens, b - global_tokens  # the pattern is laid over positions >= G
    if pattern == "fixed":
        allowed = (i // l == j // l) | (j % l >= l - c)
    else:
        allowed = (np.abs(i - j) < l) | ((i - j) % l == 0)
    allowed = allowed | (a < global_tokens) | (b < global_tokens)
    return allowed & (b <= a) if causal else allowed


# jitted: one compilation per configuration is much cheaper than eager op-by-op dispatch
_kernel = jax.jit(sparse_kernel, static_argnames=("causal", "pattern", "block_size", "num_summary",
                                                  "global_tokens"))


def run(q, k, v, mask, **kw):
    return np.asarray(_kernel(*(jnp.asarray(a) for a in (q, k, v, mask)), **kw))


def compare(out, ref, allowed):
    rows = allowed.any(-1).any(1)
    np.testing.assert_allclose(out[rows], ref[rows], atol=2e-5, rtol=1e-4)
    assert np.isfinite(out).all()


@pytest.mark.parametrize("global_tokens", [0, 1])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("pattern", ["fixed", "strided"])
def test_kernel_matches_dense_pattern(pattern, causal, global_tokens):
    # 61: a partial last block; 65 with one global token: 64 patterned positions, 8 full blocks
    length = 65 if global_tokens else 61
    q, k, v, mask = qkv_and_mask(length)
    allowed = (sparse_pattern(length, pattern, causal, global_tokens=global_tokens)[None, None]
               & mask[:, None, None, :])
    out = run(q, k, v, mask, causal=causal, pattern=pattern, block_size=L_BLOCK, num_summary=C,
              global_tokens=global_tokens)
    compare(out, dense_reference(q, k, v, allowed), allowed)


def test_summary_columns_matter_and_lra_variant_differs():
    length = 64
    q, k, v, mask = qkv_and_mask(length)
    out = run(q, k, v, mask, block_size=L_BLOCK, num_summary=C)
    real = mask
    # without the summary columns (plain local blocks) the output is different...
    no_summary = sparse_pattern(length, "fixed", False, c=0)
    ref = dense_reference(q, k, v, no_summary[None, None] & mask[:, None, None, :])
    assert np.abs(out - ref)[real].max() > 1e-2
    # ...and so is LRA's variant with the extra column j mod l == 0
    j = np.arange(length)[None, :]
    lra = sparse_pattern(length, "fixed", False) | (j % L_BLOCK == 0)
    ref = dense_reference(q, k, v, lra[None, None] & mask[:, None, None, :])
    assert np.abs(out - ref)[real].max() > 1e-3
    # c = 0 is exactly local block attention
    np.testing.assert_allclose(
        run(q, k, v, mask, block_size=L_BLOCK, num_summary=0)[real],
        dense_reference(q, k, v, no_summary[None, None] & mask[:, None, None, :])[real],
        atol=2e-5)


def test_query_without_real_keys_is_finite():
    length = 32
    q, k, v, mask = qkv_and_mask(length)
    mask[0, :] = False  # a sequence of padding only
    for pattern in ("fixed", "strided"):
        assert np.isfinite(run(q, k, v, mask, pattern=pattern, block_size=L_BLOCK,
                               num_summary=C)).all()


def test_module_with_global_token_matches_dense_reference():
    dim, length = 16, 45
    module = attention.build("sparse", dim=dim, num_heads=H, qkv_dim=H * DH, rngs=nnx.Rngs(0),
                             block_size=L_BLOCK, num_summary=2, global_tokens=1)
    x = jax.random.normal(jax.random.key(1), (B, length, dim))
    assert_module_matches_dense(module, x, length_mask([length, 30], length),
                                sparse_pattern(length, "fixed", False, c=2, global_tokens=1))


@pytest.mark.parametrize("bad", [{"pattern": "dilated"}, {"block_size": 0},
                                 {"block_size": 4, "num_summary": 5}, {"global_tokens": -1}])
def test_bad_options(bad):
    with pytest.raises(ValueError):
        attention.build("sparse", dim=16, num_heads=2, rngs=nnx.Rngs(0), **bad)
