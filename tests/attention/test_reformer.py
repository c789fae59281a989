"""Reformer LSH attention against naive references written with explicit loops and sets."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from helpers import length_mask, random_qkv
from lra.attention.reformer import HashRotations, lsh_buckets
from lra.attention.reformer import reformer_kernel as _kernel

from lra import attention

B, L, H, DH = 2, 37, 2, 8
SELF_LOGIT = -1e5
# One compilation per configuration instead of op-by-op dispatch: keeps the file fast.
reformer_kernel = jax.jit(_kernel, static_argnames=("causal", "chunk_size"))


def inputs(seed=0, length=L):
    qk, v = random_qkv((B, length, H, DH), seed, n=2)
    return qk, v


def rotations(n_hashes, n_buckets, seed=5):
    return np.asarray(jax.random.normal(jax.random.key(seed), (H, DH, n_hashes, n_buckets // 2)))


def padding_mask(length=L):
    return length_mask([length, length - 11], length)


def unit(x):
    return x / np.linalg.norm(x)


def attend(qk, v, i, keys):
    """Softmax of q_i . k_j / ||k_j|| over ``keys``, self excluded unless it is the only key.

    Returns (output, logsumexp); a self-only query gets the self logit's logsumexp.
    """
    others = [j for j in keys if j != i]
    if not others:
        return v[i], SELF_LOGIT
    logits = np.array([qk[i] @ unit(qk[j]) for j in others])
    top = logits.max()
    w = np.exp(logits - top)
    lse = top + math.log(w.sum())
    return (w / w.sum()) @ v[others], lse


def naive_buckets(x, rot):
    """Bucket of one vector for each round: argmax([x R; -x R])."""
    rotated = x @ rot.reshape(DH, -1)
    rotated = rotated.reshape(rot.shape[1], rot.shape[2])
    return np.argmax(np.concatenate([rotated, -rotated], axis=-1), axis=-1)


def naive_reformer(qk, v, rot, mask, *, causal, chunk):
    n_hashes, n_buckets = rot.shape[2], 2 * rot.shape[3]
    length = qk.shape[1]
    padded = -(-length // chunk) * chunk
    out = np.zeros_like(v)
    for b in range(qk.shape[0]):
        for h in range(qk.shape[2]):
            real = [t < length and (mask is None or bool(mask[b, t])) for t in range(padded)]
            bucket = np.array([naive_buckets(qk[b, t, h], rot[h]) if real[t]
                               else np.full(n_hashes, n_buckets) for t in range(padded)])
            outs, lses = [], []
            for r in range(n_hashes):
                order = sorted(range(padded), key=lambda t, r=r: (bucket[t, r], t))
                where = {t: s for s, t in enumerate(order)}
                o_r, lse_r = np.zeros((length, DH)), np.zeros(length)
                for i in range(length):
                    if not real[i]:
                        continue
                    ci = where[i] // chunk
                    keys = [j for j in range(padded) if real[j]
                            and where[j] // chunk in (ci, ci - 1)]
                    if causal:
                        keys = [j for j in keys if bucket[j, r] == bucket[i, r]
                                and 0 <= where[i] - where[j] <= chunk]
                    o_r[i], lse_r[i] = attend(qk[b, :, h], v[b, :, h], i, keys)
                outs.append(o_r)
                lses.append(lse_r)
            lses = np.stack(lses)
            w = np.exp(lses - lses.max(0))
            w /= w.sum(0)
            out[b, :, h] = np.einsum("rl,rld->ld", w, np.stack(outs))
    return out


def real_rows(a, mask):
    return a if mask is None else a[mask]


def test_buckets_are_argmax_of_rotated_vectors_and_pads_go_last():
    qk, _ = inputs()
    rot = rotations(3, 6)
    mask = padding_mask()
    got = np.asarray(jax.jit(lsh_buckets)(jnp.asarray(qk), jnp.asarray(rot), jnp.asarray(mask)))
    assert got.shape == (B, H, 3, L)
    for b in range(B):
        for h in range(H):
            for t in range(L):
                want = naive_buckets(qk[b, t, h], rot[h]) if mask[b, t] else np.full(3, 6)
                np.testing.assert_array_equal(got[b, h, :, t], want)
    assert set(np.unique(got[mask.nonzero()[0], :, :, mask.nonzero()[1]])) <= set(range(6))


@pytest.mark.parametrize(("n_hashes", "masked"), [(1, True), (2, False)])
def test_one_chunk_equals_masked_softmax_over_normalised_keys(n_hashes, masked):
    """With one chunk covering everything, LSH attention is dense shared-QK attention."""
    qk, v = inputs(seed=1)
    mask = padding_mask() if masked else None
    got = np.asarray(reformer_kernel(jnp.asarray(qk), jnp.asarray(v),
                                     jnp.asarray(rotations(n_hashes, 10)),
                                     None if mask is None else jnp.asarray(mask), chunk_size=64))
    want = np.zeros_like(v)
    for b in range(B):
        for h in range(H):
            keys = [j for j in range(L) if mask is None or mask[b, j]]
            for i in keys:
                want[b, i, h] = attend(qk[b, :, h], v[b, :, h], i, keys)[0]
    np.testing.assert_allclose(real_rows(got, mask), real_rows(want, mask), atol=1e-5, rtol=1e-5)

    # The test can fail: attending to oneself, or unnormalised keys, give other numbers.
    self_in = np.zeros_like(v)
    raw = np.zeros_like(v)
    for b in range(B):
        for h in range(H):
            keys = [j for j in range(L) if mask is None or mask[b, j]]
            q = qk[b, keys, h]
            for i in keys:
                for target, kk in ((self_in, np.stack([unit(x) for x in q])), (raw, q)):
                    lg = kk @ qk[b, i, h]
                    if target is raw:
                        lg = np.where(np.array(keys) == i, -np.inf, lg)
                    w = np.exp(lg - lg.max())
                    target[b, i, h] = (w / w.sum()) @ v[b, keys, h]
    assert np.abs(real_rows(got - self_in, mask)).max() > 1e-2
    assert np.abs(real_rows(got - raw, mask)).max() > 1e-2


@pytest.mark.parametrize(("causal", "masked"), [(False, True), (True, True), (False, False)])
def test_kernel_matches_naive_lsh_attention(causal, masked):
    qk, v = inputs(seed=2)
    rot = rotations(2, 4)
    mask = padding_mask() if masked else None
    got = np.asarray(reformer_kernel(jnp.asarray(qk), jnp.asarray(v), jnp.asarray(rot),
                                     None if mask is None else jnp.asarray(mask), causal=causal,
                                     chunk_size=4))
    want = naive_reformer(qk, v, rot, mask, causal=causal, chunk=4)
    np.testing.assert_allclose(real_rows(got, mask), real_rows(want, mask), atol=1e-5, rtol=1e-5)
    # and the chunking matters: with one big chunk the result is different
    dense = np.asarray(reformer_kernel(jnp.asarray(qk), jnp.asarray(v), jnp.asarray(rot),
                                       None if mask is None else jnp.asarray(mask),
                                       causal=causal, chunk_size=64))
    assert np.abs(real_rows(got - dense, mask)).max() > 1e-2


def test_causal_first_token_of_a_bucket_attends_to_itself():
    qk, v = inputs(seed=3)
    got = np.asarray(reformer_kernel(jnp.asarray(qk), jnp.asarray(v),
                                     jnp.asarray(rotations(1, 4)), causal=True, chunk_size=4))
    np.testing.assert_allclose(got[:, 0], v[:, 0], atol=1e-6)
    assert np.isfinite(got).all()


def make(seed=0, causal=False, **opts):
    opts = {"chunk_size": 4, "n_buckets": 4, "n_hashes": 2, **opts}
    return attention.build("reformer", dim=16, num_heads=H, qkv_dim=16, causal=causal,
                           rngs=nnx.Rngs(seed), **opts)


@pytest.mark.parametrize("causal", [False, True])
def test_padding_is_safe_whatever_the_number_of_pads(causal):
    """Real outputs with 11 trailing pads equal the outputs of the unpadded sequence."""
    module = make(causal=causal)
    x = jax.random.normal(jax.random.key(4), (1, L, 16))
    n = L - 11
    mask = jnp.arange(L)[None] < n
    noisy = jnp.where(mask[..., None], x, 50.0 * jax.random.normal(jax.random.key(5), x.shape))
    call = nnx.jit(lambda m, x, mask: m(x, mask))
    padded = np.asarray(call(module, noisy, mask))[0, :n]
    short = np.asarray(call(module, x[:, :n], jnp.ones((1, n), bool)))[0]
    np.testing.assert_allclose(padded, short, atol=1e-5, rtol=1e-5)


def test_rotations_are_fixed_per_layer_and_not_trained():
    a, b = make(seed=0), make(seed=1)
    assert isinstance(a.rotations, HashRotations)
    params = nnx.state(a, nnx.Param)
    assert all("rotations" not in str(path) for path, _ in jax.tree_util.tree_flatten_with_path(
        params)[0])
    assert not np.allclose(np.asarray(a.rotations[...]), np.asarray(b.rotations[...]))
    x = jax.random.normal(jax.random.key(6), (2, 16, 16))
    call = nnx.jit(lambda m, x: m(x))
    np.testing.assert_array_equal(np.asarray(call(a, x)), np.asarray(call(a, x)))


def test_odd_bucket_count_is_rejected():
    with pytest.raises(ValueError, match="even"):
        make(n_buckets=5)
