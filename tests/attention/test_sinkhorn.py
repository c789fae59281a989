"""Sparse Sinkhorn attention against naive references (probability-space Sinkhorn, loops)."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from helpers import assert_head_groupings_agree, length_mask
from lra.attention.sinkhorn import sinkhorn_kernel as _kernel
from lra.attention.sinkhorn import sinkhorn_normalize

from lra import attention

B, L, H, DH, BS = 2, 37, 2, 8, 8  # L not a multiple of BS: internal padding is exercised
NB = -(-L // BS)
# One compilation per configuration instead of op-by-op dispatch: keeps the file fast.
sinkhorn_kernel = jax.jit(_kernel, static_argnames=("block_size",))
normalize = jax.jit(sinkhorn_normalize, static_argnames=("n_iters", "temperature"))


def padding_mask(n_real=L - 11):
    # batch 1 has 11 pads: its last block (32..36) is all padding, block 3 is partly padded
    return length_mask([L, n_real], L)


def naive_sinkhorn(logits, n_iters, temperature, valid_rows):
    """Probability-space Sinkhorn on the valid sub-matrix; zeros elsewhere."""
    idx = np.flatnonzero(valid_rows)
    a = np.exp(logits[np.ix_(idx, idx)] / temperature)
    for _ in range(n_iters):
        a = a / a.sum(1, keepdims=True)
        a = a / a.sum(0, keepdims=True)
    out = np.zeros_like(logits)
    out[np.ix_(idx, idx)] = a
    return out


def test_enough_iterations_make_rows_and_columns_sum_to_one():
    logits = np.asarray(jax.random.normal(jax.random.key(0), (2, 3, 6, 6))) * 3
    p = np.asarray(normalize(jnp.asarray(logits), n_iters=60))
    np.testing.assert_allclose(p.sum(-1), 1.0, atol=1e-4)
    np.testing.assert_allclose(p.sum(-2), 1.0, atol=1e-4)
    assert (p >= 0).all()
    # one iteration ends on a column normalisation: columns are exact, rows are not yet
    p1 = np.asarray(normalize(jnp.asarray(logits), n_iters=1))
    np.testing.assert_allclose(p1.sum(-2), 1.0, atol=1e-5)
    assert np.abs(p1.sum(-1) - 1.0).max() > 1e-2
    # zero iterations: LRA's row softmax
    p0 = np.asarray(normalize(jnp.asarray(logits), n_iters=0))
    np.testing.assert_allclose(p0, np.asarray(jax.nn.softmax(logits, -1)), atol=1e-6)


@pytest.mark.parametrize(("n_iters", "temperature"), [(1, 1.0), (5, 0.75)])
def test_log_space_sinkhorn_matches_probability_space_on_valid_blocks(n_iters, temperature):
    logits = np.asarray(jax.random.normal(jax.random.key(1), (5, 5)))
    valid_rows = np.array([True, True, False, True, False])
    valid = valid_rows[:, None] & valid_rows[None, :]
    got = np.asarray(normalize(jnp.asarray(logits), n_iters=n_iters, temperature=temperature,
                               valid=jnp.asarray(valid)))
    np.testing.assert_allclose(got, naive_sinkhorn(logits, n_iters, temperature, valid_rows),
                               atol=1e-6)


def naive_block_attention(q, k, v, perm, mask, block):
    """Each real query: softmax over its block's real keys and its P-mixed block's real slots."""
    out = np.zeros_like(q)
    n_blocks = perm.shape[-1]
    for b in range(q.shape[0]):
        for h in range(q.shape[2]):
            def at(arr, j, s, b=b, h=h):
                t = j * BS + s
                real = t < L and mask[b, t]
                return (arr[b, t, h] if real else np.zeros(DH)), float(real)

            for i in range(L):
                if not mask[b, i]:
                    continue
                blk = i // BS
                keys, vals = [], []
                for s in range(BS):  # own block
                    t = blk * BS + s
                    if t < L and mask[b, t]:
                        keys.append(k[b, t, h])
                        vals.append(v[b, t, h])
                for s in range(BS):  # sorted block: P-weighted mixture of offset s of every block
                    mass = sum(perm[b, h, blk, j] * at(k, j, s)[1] for j in range(n_blocks))
                    if mass > 0:
                        keys.append(sum(perm[b, h, blk, j] * at(k, j, s)[0]
                                        for j in range(n_blocks)))
                        vals.append(sum(perm[b, h, blk, j] * at(v, j, s)[0]
                                        for j in range(n_blocks)))
                logits = np.array([q[b, i, h] @ kk for kk in keys]) / math.sqrt(DH)
                w = np.exp(logits - logits.max())
                out[b, i, h] = (w / w.sum()) @ np.stack(vals)
    return out


def random_qkv(seed):
    keys = jax.random.split(jax.random.key(seed), 3)
    return [np.asarray(jax.random.normal(kk, (B, L, H, DH))) for kk in keys]


def test_block_attention_matches_naive_reference_from_the_same_permutation():
    q, k, v = random_qkv(2)
    mask = padding_mask()
    valid_rows = np.stack([[mask[b, j * BS:(j + 1) * BS].any() for j in range(NB)]
                           for b in range(B)])
    logits = np.asarray(jax.random.normal(jax.random.key(3), (B, H, NB, NB)))
    valid = valid_rows[:, None, :, None] & valid_rows[:, None, None, :]
    perm = np.asarray(normalize(jnp.asarray(logits), n_iters=3, valid=jnp.asarray(valid)))
    got = np.asarray(sinkhorn_kernel(*map(jnp.asarray, (q, k, v)), jnp.asarray(mask),
                                     perm=jnp.asarray(perm), block_size=BS))
    want = naive_block_attention(q, k, v, perm, mask, BS)
    np.testing.assert_allclose(got[mask], want[mask], atol=1e-5, rtol=1e-5)
    # the sorted block matters: with P = identity (own block twice) the numbers differ
    eye = np.broadcast_to(np.eye(NB), perm.shape)
    local = np.asarray(sinkhorn_kernel(*map(jnp.asarray, (q, k, v)), jnp.asarray(mask),
                                       perm=jnp.asarray(eye), block_size=BS))
    assert np.abs(got - local)[mask].max() > 1e-2


def make(seed=0, **opts):
    opts = {"block_size": BS, "sinkhorn_iters": 4, "temperature": 0.75, **opts}
    return attention.build("sinkhorn", dim=16, num_heads=H, qkv_dim=16, max_len=48,
                           rngs=nnx.Rngs(seed), **opts)


def test_module_is_sortnet_then_sinkhorn_then_block_attention():
    """End to end from the module's own parameters, every step written out naively."""
    module = make()
    x = jax.random.normal(jax.random.key(4), (B, L, 16))
    mask = padding_mask()
    got = np.asarray(module(x, jnp.asarray(mask)))

    q, k, v = (np.asarray(a) for a in module.proj.qkv(x))
    w_sort = np.asarray(module.sort_kernel[...])
    perm = np.zeros((B, H, NB, NB))
    for b in range(B):
        valid_rows = np.array([mask[b, j * BS:(j + 1) * BS].any() for j in range(NB)])
        for h in range(H):
            sums = np.stack([sum((k[b, t, h] for t in range(j * BS, min(L, (j + 1) * BS))
                                  if mask[b, t]), np.zeros(DH)) for j in range(NB)])
            perm[b, h] = naive_sinkhorn(sums @ w_sort[:, :NB], 4, 0.75, valid_rows)
    np.testing.assert_allclose(np.asarray(module.permutation(jnp.asarray(k), jnp.asarray(mask))),
                               perm, atol=1e-5)
    o = naive_block_attention(q, k, v, perm, mask, BS)
    want = np.asarray(module.proj.merge(jnp.asarray(o, jnp.float32)))
    np.testing.assert_allclose(got[mask], want[mask], atol=1e-4, rtol=1e-4)


def test_padding_is_safe_whatever_the_number_of_pads():
    """Real outputs with 11 trailing pads (one whole padded block) equal the unpadded outputs."""
    module = make()
    call = nnx.jit(lambda m, x, mask: m(x, mask))
    n = L - 11
    x = jax.random.normal(jax.random.key(5), (1, L, 16))
    mask = jnp.arange(L)[None] < n
    noisy = jnp.where(mask[..., None], x, 50.0 * jax.random.normal(jax.random.key(6), x.shape))
    padded = np.asarray(call(module, noisy, mask))[0, :n]
    short = np.asarray(call(module, x[:, :n], jnp.ones((1, n), bool)))[0]
    np.testing.assert_allclose(padded, short, atol=1e-5, rtol=1e-5)


def test_max_len_is_required_and_enforced():
    with pytest.raises(ValueError, match="max_len"):
        attention.build("sinkhorn", dim=16, num_heads=H, rngs=nnx.Rngs(0))
    with pytest.raises(ValueError, match="max_len=48"):
        make()(jnp.zeros((1, 49, 16)))


def test_head_groups_change_neither_values_nor_gradients_nor_dropout_masks():
    """The kernel computes its heads in independent groups (two on CPU); any grouping must give
    the one-group result up to float32 rounding (helpers.assert_head_groupings_agree), padding,
    dropout and gradients included."""
    heads = 4
    ks = jax.random.split(jax.random.PRNGKey(5), 5)
    q, k, v = (jax.random.normal(kk, (B, L, heads, DH)) for kk in ks[:3])
    perm = normalize(jax.random.normal(ks[3], (B, heads, NB, NB)), n_iters=1)
    mask = padding_mask()

    assert_head_groupings_agree(
        lambda q, k, v, p, groups: _kernel(q, k, v, mask, perm=p, block_size=BS, dropout_rate=0.3,
                                           dropout_rng=ks[4], groups=groups), (q, k, v, perm))
    with pytest.raises(ValueError, match="must divide"):
        _kernel(q, k, v, mask, perm=perm, block_size=BS, groups=3)


def test_head_groups_default_two_on_cpu_one_elsewhere():
    from lra.attention.sinkhorn import head_groups

    assert head_groups(8, "cpu") == 2 and head_groups(3, "cpu") == 1
    assert head_groups(8, "gpu") == 1 and head_groups(8, "tpu") == 1
