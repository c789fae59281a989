"""Nystromformer: the pseudo-inverse iteration, the softmax limit, landmarks and padding."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from lra.attention.nystromformer import (
    depthwise_conv,
    iterative_pinv,
    landmark_weights,
    nystromformer_kernel,
)

from lra import attention

B, L, H, DH = 2, 32, 2, 8

# One compiled program per call instead of op-by-op dispatch keeps the file fast on 2 cores.
kernel = jax.jit(nystromformer_kernel, static_argnames=("num_landmarks", "pinv_iterations"))
pinv = jax.jit(iterative_pinv, static_argnums=1)
apply = nnx.jit(lambda module, x, mask: module(x, mask))


def softmax_rows(logits):
    w = np.exp(logits - logits.max(-1, keepdims=True))
    return w / w.sum(-1, keepdims=True)


def naive_softmax_attention(q, k, v, mask):
    out = np.zeros_like(q)
    for b in range(q.shape[0]):
        keys = [j for j in range(q.shape[1]) if mask[b, j]]
        for h in range(q.shape[2]):
            w = softmax_rows(np.array([[q[b, i, h] @ k[b, j, h] for j in keys]
                                       for i in range(q.shape[1])]) / math.sqrt(q.shape[-1]))
            out[b, :, h] = w @ v[b, keys, h]
    return out


def peaked(rng, shape, sharpness=6.0):
    """Rows of equal norm with q_i . q_i / sqrt(d) = sharpness: softmax(q q^T / sqrt(d)) puts
    about half of each row's weight on the diagonal, so it is well-conditioned (cond ~ 5)."""
    x = rng.standard_normal(shape)
    x *= math.sqrt(sharpness * math.sqrt(shape[-1])) / np.linalg.norm(x, axis=-1, keepdims=True)
    return x.astype(np.float32)


def peaked_qkv(seed=0, length=L):
    """q = k = peaked rows: with one landmark per token, A = softmax(q k^T) is well-conditioned."""
    rng = np.random.default_rng(seed)
    q = peaked(rng, (B, length, H, DH))
    return q, q.copy(), rng.standard_normal((B, length, H, DH)).astype(np.float32)


def test_pinv_iteration_matches_numpy_pinv():
    rng = np.random.default_rng(0)
    m = 16
    x = peaked(rng, (2, 3, m, DH))
    a = softmax_rows(np.einsum("...id,...jd->...ij", x, x) / math.sqrt(DH)).astype(np.float32)
    assert np.linalg.cond(a.astype(np.float64)).max() < 20  # well-conditioned by construction
    want = np.linalg.pinv(a.astype(np.float64))
    got = np.asarray(pinv(jnp.asarray(a), 6))
    np.testing.assert_allclose(got, want, atol=1e-4, rtol=1e-4)
    # and the comparison can fail: one iteration is far from converged
    assert np.abs(np.asarray(pinv(jnp.asarray(a), 1)) - want).max() > 1e-2


def test_pinv_initial_scale_is_per_head():
    """Scaling one head's matrix must not change another head's inverse (no batch-global max)."""
    rng = np.random.default_rng(1)
    a = (softmax_rows(3 * rng.standard_normal((2, 8, 8))) + np.eye(8)).astype(np.float32)
    scaled = a.copy()
    scaled[1] *= 50.0
    z = np.asarray(pinv(jnp.asarray(a), 6))
    z_scaled = np.asarray(pinv(jnp.asarray(scaled), 6))
    np.testing.assert_allclose(z_scaled[0], z[0], rtol=1e-6)
    np.testing.assert_allclose(z_scaled[1], z[1] / 50.0, rtol=1e-4)


def test_landmarks_are_means_of_real_segments():
    mask = np.zeros((2, 12), bool)
    mask[0, :10] = True
    mask[1, [1, 2, 4, 7, 8, 9, 11]] = True  # not a prefix: 7 real tokens
    w, valid = landmark_weights(jnp.asarray(mask), 3)
    w = np.asarray(w)
    # 10 real tokens in 3 segments: ranks [0..3], [4..6], [7..9] (floor(r * 3 / 10))
    want0 = np.zeros((12, 3))
    want0[0:4, 0], want0[4:7, 1], want0[7:10, 2] = 1 / 4, 1 / 3, 1 / 3
    np.testing.assert_allclose(w[0], want0)
    # 7 real tokens: ranks [0..2], [3, 4], [5, 6] -> positions {1,2,4}, {7,8}, {9,11}
    want1 = np.zeros((12, 3))
    want1[[1, 2, 4], 0], want1[[7, 8], 1], want1[[9, 11], 2] = 1 / 3, 1 / 2, 1 / 2
    np.testing.assert_allclose(w[1], want1)
    assert np.asarray(valid).all()
    # more landmarks than real tokens: one token per non-empty landmark, the rest empty
    w, valid = landmark_weights(jnp.asarray(mask), 11)
    assert np.asarray(valid).sum(-1).tolist() == [10, 7]
    np.testing.assert_allclose(np.asarray(w).sum(1)[np.asarray(valid)], 1.0)
    assert (np.asarray(w).max(-1) == mask).all()


def test_as_many_landmarks_as_tokens_approaches_softmax():
    q, k, v = peaked_qkv()
    mask = np.ones((B, L), bool)
    got = np.asarray(kernel(q, k, v, jnp.asarray(mask), num_landmarks=L))
    want = naive_softmax_attention(q, k, v, mask)
    np.testing.assert_allclose(got, want, atol=2e-3)
    # and few landmarks do approximate (so the test above is not vacuous)
    coarse = np.asarray(kernel(q, k, v, jnp.asarray(mask), num_landmarks=4))
    assert np.abs(coarse - want).max() > 0.1


def test_more_landmarks_than_real_tokens_excludes_empty_landmarks():
    """Sequence 1 has 21 real tokens for 32 landmarks: 11 landmarks are empty and must drop out."""
    q, k, v = peaked_qkv(seed=1)
    mask = np.arange(L)[None, :] < np.array([L, L - 11])[:, None]
    got = np.asarray(kernel(q, k, v, jnp.asarray(mask), num_landmarks=L))
    want = naive_softmax_attention(q, k, v, mask)
    real = mask
    np.testing.assert_allclose(got[real], want[real], atol=2e-3)


def test_padded_input_equals_unpadded_input():
    """Pads do not dilute landmarks: padding a sequence leaves its real outputs unchanged."""
    dim, n = H * DH, 21
    module = attention.build("nystromformer", dim=dim, num_heads=H, rngs=nnx.Rngs(0),
                             num_landmarks=4)
    x = jax.random.normal(jax.random.key(0), (1, n, dim))
    pads = 30.0 * jax.random.normal(jax.random.key(1), (1, L - n, dim))
    padded = jnp.concatenate([x, pads], axis=1)
    mask = jnp.arange(L)[None, :] < n
    short = np.asarray(apply(module, x, jnp.ones((1, n), bool)))
    np.testing.assert_allclose(np.asarray(apply(module, padded, mask))[:, :n], short, atol=2e-5)
    # the official masking (zero the pads, then average over the padded segments) would differ
    q = (np.asarray(padded) @ np.asarray(module.proj.query.kernel[...])).reshape(1, L, H, DH)
    q_l_official = (q * np.asarray(mask)[:, :, None, None]).reshape(1, 4, L // 4, H, DH).mean(2)
    w, _ = landmark_weights(mask, 4)
    q_l_ours = np.einsum("blm,blhd->bmhd", np.asarray(w), q)
    assert np.abs(q_l_official - q_l_ours).max() > 1e-2


@pytest.mark.parametrize("taps", [1, 4, 5, 35])
def test_depthwise_conv_matches_a_loop(taps):
    rng = np.random.default_rng(3)
    v = rng.standard_normal((B, 11, H, 3)).astype(np.float32)
    kern = rng.standard_normal((H, taps)).astype(np.float32)
    left = taps // 2
    want = np.zeros_like(v)
    for i in range(11):
        for t in range(taps):
            j = i + t - left
            if 0 <= j < 11:
                want[:, i] += kern[None, :, t, None] * v[:, j]
    np.testing.assert_allclose(np.asarray(depthwise_conv(jnp.asarray(v), jnp.asarray(kern))), want,
                               atol=1e-5)


def test_depthwise_conv_gradients_match_the_shifted_sum():
    """The FFT form's gradients (for v and for the kernel) against K shifted multiply-adds."""
    rng = np.random.default_rng(4)
    v = jnp.asarray(rng.standard_normal((B, 13, H, 3)).astype(np.float32))
    kern = jnp.asarray(rng.standard_normal((H, 6)).astype(np.float32))
    cot = jnp.asarray(rng.standard_normal(v.shape).astype(np.float32))

    def shifted(v, kern):
        taps = kern.shape[-1]
        padded = jnp.pad(v, ((0, 0), (taps // 2, (taps - 1) // 2), (0, 0), (0, 0)))
        return sum(padded[:, t:t + v.shape[1]] * kern[None, None, :, t, None] for t in range(taps))

    want = jax.grad(lambda v, k: jnp.sum(shifted(v, k) * cot), argnums=(0, 1))(v, kern)
    got = jax.grad(lambda v, k: jnp.sum(depthwise_conv(v, k) * cot), argnums=(0, 1))(v, kern)
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), atol=1e-4, rtol=1e-5)


def test_conv_option():
    dim = H * DH
    plain = attention.build("nystromformer", dim=dim, num_heads=H, rngs=nnx.Rngs(0),
                            conv_kernel=0, num_landmarks=4)
    conv = attention.build("nystromformer", dim=dim, num_heads=H, rngs=nnx.Rngs(0),
                           num_landmarks=4)
    assert plain.conv is None and conv.conv[...].shape == (H, 35)
    assert attention.options("nystromformer") == {"num_landmarks": 64, "conv_kernel": 35,
                                                  "pinv_iterations": 6}
    x = jax.random.normal(jax.random.key(0), (1, L, dim))
    mask = jnp.ones((1, L), bool)
    assert np.abs(np.asarray(apply(plain, x, mask)) - np.asarray(apply(conv, x, mask))).max() > 1e-3
