"""Local attention against an independent dense reference (explicit L x L block mask, numpy)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from helpers import assert_head_groupings_agree, assert_module_matches_dense, length_mask
from lra.attention.local import local_kernel
from reference import dense_reference

from lra import attention

B, H, DH = 2, 2, 4


def qkv_and_mask(length, seed=0):
    rng = np.random.default_rng(seed)
    q, k, v = (rng.normal(size=(B, length, H, DH)).astype(np.float32) for _ in range(3))
    mask = np.ones((B, length), bool)
    mask[1, 2 * length // 3:] = False  # right padding
    mask[0, 5] = False  # a hole inside a block
    return q, k, v, mask


def block_pattern(length, block, causal):
    i, j = np.arange(length)[:, None], np.arange(length)[None, :]
    allowed = i // block == j // block
    return allowed & (j <= i) if causal else allowed


# jitted: one compilation per configuration is much cheaper than eager op-by-op dispatch
_kernel = jax.jit(local_kernel, static_argnames=("causal", "block_size", "global_tokens"))


def run(q, k, v, mask, **kw):
    return np.asarray(_kernel(*(jnp.asarray(a) for a in (q, k, v, mask)), **kw))


def compare(out, ref, allowed, atol=2e-5):
    rows = allowed.any(-1).any(1)  # [B, L]: queries with at least one allowed key
    np.testing.assert_allclose(out[rows], ref[rows], atol=atol, rtol=1e-4)
    assert np.isfinite(out).all()


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("length,block", [(64, 8), (61, 8), (100, 50), (30, 50)])
def test_kernel_matches_dense_block_mask(length, block, causal):
    q, k, v, mask = qkv_and_mask(length)
    allowed = block_pattern(length, block, causal)[None, None] & mask[:, None, None, :]
    out = run(q, k, v, mask, causal=causal, block_size=block)
    compare(out, dense_reference(q, k, v, allowed), allowed)


def test_blocks_are_contiguous_not_strided_as_in_lra():
    # LRA reshaped [L] -> [b, L/b] and attended over b: groups {t : t mod (L/b) = const}.
    length, block = 64, 8
    q, k, v, mask = qkv_and_mask(length)
    out = run(q, k, v, mask, block_size=block)
    t = np.arange(length)
    strided = (t[:, None] % (length // block)) == (t[None, :] % (length // block))
    wrong = dense_reference(q, k, v, strided[None, None] & mask[:, None, None, :])
    real = mask
    assert np.abs(out - wrong)[real].max() > 1e-2
    # and a change in the next block does not reach block 0 (contiguous blocks are independent)
    k2 = k.copy()
    k2[:, block:] += 3.0
    np.testing.assert_allclose(run(q, k2, v, mask, block_size=block)[:, :block], out[:, :block],
                               atol=1e-6)


def global_block_pattern(length, block, g, causal):
    """Blocks laid over positions g, g+1, ...; the first g rows and columns are dense."""
    i, j = np.arange(length)[:, None], np.arange(length)[None, :]
    allowed = ((i - g) // block == (j - g) // block) | (i < g) | (j < g)
    return allowed & (j <= i) if causal else allowed


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("length,block,g", [(41, 8, 1), (30, 50, 1), (37, 8, 3)])
def test_global_tokens_match_dense_mask(length, block, g, causal):
    q, k, v, mask = qkv_and_mask(length)
    allowed = global_block_pattern(length, block, g, causal)[None, None] & mask[:, None, None, :]
    out = run(q, k, v, mask, causal=causal, block_size=block, global_tokens=g)
    compare(out, dense_reference(q, k, v, allowed), allowed)


def test_global_token_sees_and_is_seen_by_every_block():
    length, block = 40, 8
    q, k, v, mask = qkv_and_mask(length)
    base = run(q, k, v, mask, block_size=block, global_tokens=1)
    v2 = v.copy()
    v2[:, length - 1] += 5.0  # the last position (a real token in example 0)
    changed = run(q, k, v2, mask, block_size=block, global_tokens=1)
    assert np.abs(changed[0, 0] - base[0, 0]).max() > 1e-3  # CLS sees the last block
    no_global = run(q, k, v2, mask, block_size=block)
    np.testing.assert_allclose(no_global[0, 0], run(q, k, v, mask, block_size=block)[0, 0])


def test_query_without_real_keys_is_finite():
    length, block = 32, 8
    q, k, v, mask = qkv_and_mask(length)
    mask[0, 8:16] = False  # a whole block of padding: its queries see no real key
    allowed = block_pattern(length, block, False)[None, None] & mask[:, None, None, :]
    out = run(q, k, v, mask, block_size=block)
    assert np.isfinite(out).all()
    compare(out, dense_reference(q, k, v, allowed), allowed)


def test_module_matches_dense_reference():
    dim, length, block = 16, 40, 8
    module = attention.build("local", dim=dim, num_heads=H, qkv_dim=H * DH, causal=True,
                             rngs=nnx.Rngs(0), block_size=block)
    x = jax.random.normal(jax.random.key(1), (B, length, dim))
    assert_module_matches_dense(module, x, length_mask([length, 29], length),
                                block_pattern(length, block, True))


def test_dropout_only_when_not_deterministic():
    module = attention.build("local", dim=16, num_heads=H, qkv_dim=8, dropout=0.5,
                             rngs=nnx.Rngs(0), block_size=8)
    x = jax.random.normal(jax.random.key(1), (B, 32, 16))
    a = nnx.jit(lambda m, x: m(x))(module, x)
    b = nnx.jit(lambda m, x: m(x, deterministic=False))(module, x)
    assert np.isfinite(np.asarray(b)).all()
    assert np.abs(np.asarray(a - b)).max() > 1e-3


def test_bad_block_size():
    with pytest.raises(ValueError, match="block_size"):
        attention.build("local", dim=16, num_heads=2, rngs=nnx.Rngs(0), block_size=0)
    with pytest.raises(ValueError, match="global_tokens"):
        attention.build("local", dim=16, num_heads=2, rngs=nnx.Rngs(0), global_tokens=-1)


@pytest.mark.parametrize("global_tokens,causal", [(0, False), (2, True)])
def test_head_groups_change_neither_values_nor_gradients_nor_dropout_masks(global_tokens, causal):
    """The kernel computes its heads in independent groups (two on CPU); any grouping must give
    the one-group result up to float32 rounding (helpers.assert_head_groupings_agree), padding,
    global columns, dropout and gradients included."""
    heads, length = 4, 37
    ks = jax.random.split(jax.random.key(5), 4)
    q, k, v = (jax.random.normal(kk, (B, length, heads, DH)) for kk in ks[:3])
    mask = jnp.asarray(length_mask([length, 25], length))

    assert_head_groupings_agree(
        lambda q, k, v, groups: local_kernel(q, k, v, mask, causal=causal, block_size=8,
                                             global_tokens=global_tokens, dropout_rate=0.3,
                                             dropout_rng=ks[3], groups=groups), (q, k, v))
    with pytest.raises(ValueError, match="must divide"):
        local_kernel(q, k, v, mask, block_size=8, groups=3)


def test_dropout_acts_on_normalised_weights():
    """Inverted dropout on the softmax weights (block and global tiles alike) leaves the
    expected output unchanged: the mean over many draws approaches the deterministic output.
    Dropping the unnormalised weights before summing them would not."""
    length = 24
    q, k, v, mask = (jnp.asarray(a) for a in qkv_and_mask(length))
    want = local_kernel(q, k, v, mask, block_size=8, global_tokens=1)
    draws = jax.jit(jax.vmap(lambda r: local_kernel(q, k, v, mask, block_size=8, global_tokens=1,
                                                    dropout_rate=0.3, dropout_rng=r)))
    got = draws(jax.random.split(jax.random.key(0), 4000)).mean(0)
    rows = np.asarray(mask)
    assert np.abs(np.asarray(got - want))[rows].max() < 0.06
    assert np.abs(np.asarray(draws(jax.random.split(jax.random.key(1), 2))[0] - want)).max() > 0.1
