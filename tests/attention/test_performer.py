"""Performer (attention/performer.py): quadratic kernel form, exact softmax, feature redraw."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from helpers import length_mask, random_qkv
from lra.attention.performer import RandomFeatures, draw_orthogonal_features, performer_kernel
from lra.attention.softmax import softmax_kernel  # exact attention, tested in test_attention_kernels

from lra import attention

B, L, H, DH = 2, 37, 3, 8


def qkv(seed=0, length=L, scale=1.0):
    q, k, v = random_qkv((B, length, H, DH), seed)
    return scale * q, scale * k, v


def padding_mask(length=L):
    return length_mask([length, length - 11], length)


def naive_features(x, w, kernel):
    """Unstabilised features in float64: x float[..., d] -> float[..., m]."""
    x = np.asarray(x, np.float64)
    if kernel == "relu":
        return np.maximum(x, 0.0) + 1e-3
    x = x / x.shape[-1] ** 0.25
    w = np.asarray(w, np.float64)
    return np.exp(x @ w.T - 0.5 * np.sum(x * x, -1, keepdims=True)) / math.sqrt(w.shape[0])


def naive_performer(q, k, v, mask, causal, w=None, kernel="softmax", stabilizer=1e-6,
                    key_features=None):
    """(phi(Q) phi(K)^T masked) V, each row divided by its sum (plus Google's rule), dense."""
    phi_q = naive_features(q, w, kernel)  # [B, L, H, m]
    phi_k = naive_features(k, w, kernel) if key_features is None else key_features
    scores = np.einsum("bihm,bjhm->bhij", phi_q, phi_k)
    allowed = np.ones(scores.shape[-2:], bool)
    if causal:
        allowed = np.tril(allowed)
    allowed = allowed[None, None] & (np.ones((B, L), bool) if mask is None else mask)[:, None, None]
    scores = np.where(allowed, scores, 0.0)
    den = scores.sum(-1)
    den = den + 2 * stabilizer * (np.abs(den) <= stabilizer)
    return np.einsum("bhij,bjhd->bihd", scores / den[..., None], np.asarray(v, np.float64))


def run(q, k, v, mask, **kw):
    return np.asarray(performer_kernel(jnp.asarray(q), jnp.asarray(k), jnp.asarray(v),
                                       None if mask is None else jnp.asarray(mask), **kw))


W20 = draw_orthogonal_features(jax.random.key(42), 20, DH)  # two full blocks and 4 rows


@pytest.mark.parametrize("kernel", ["softmax", "relu"])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("masked", [False, True])
def test_matches_quadratic_kernel_form(masked, causal, kernel):
    q, k, v = qkv()
    mask = padding_mask() if masked else None
    got = run(q, k, v, mask, causal=causal, kernel=kernel, features=W20, chunk_size=8)
    want = naive_performer(q, k, v, mask, causal, W20, kernel)
    real = np.ones((B, L), bool) if mask is None else mask
    np.testing.assert_allclose(got[real], want[real], atol=1e-5, rtol=1e-4)
    wrong = naive_performer(q, k, v, mask, not causal, W20, kernel)
    assert np.abs(wrong - want)[real].max() > 1e-3
    if masked and not causal:  # (causally, the trailing pads are all in the future anyway)
        assert np.abs(naive_performer(q, k, v, None, causal, W20, kernel) - want)[real].max() > 1e-3


@pytest.mark.parametrize("causal", [False, True])
def test_stabilisers_are_exact_where_plain_exp_underflows(causal):
    """Large-norm q, k: unshifted float32 features underflow, the shifted kernel still matches."""
    q, k, v = qkv(seed=3, scale=8.0)
    mask = padding_mask()
    real = mask
    want = naive_performer(q, k, v, mask, causal, W20, stabilizer=0.0)
    raw = naive_features(k, W20, "softmax")
    # For over 10% of the real keys every feature is below float32's smallest subnormal.
    assert (raw[real].max(-1) < 1e-45).mean() > 0.1
    got = run(q, k, v, mask, causal=causal, features=W20, chunk_size=8, stabilizer=0.0)
    np.testing.assert_allclose(got[real], want[real], atol=1e-4, rtol=1e-3)
    # A plain per-key shift (each key by its own max, uncorrected) reweights keys: it differs.
    per_key = raw / raw.max(-1, keepdims=True)
    biased = naive_performer(q, k, v, mask, causal, W20, stabilizer=0.0, key_features=per_key)
    assert np.abs(biased - want)[real].max() > 1e-2


def test_gradients_match_the_quadratic_form():
    """The shifts carry no gradient; since they cancel, gradients equal the unshifted form's."""
    q, k, v = (jnp.asarray(a) for a in qkv(seed=2))
    mask = jnp.asarray(padding_mask())
    w = jnp.asarray(W20)

    def phi(x):
        x = x / DH**0.25
        return jnp.exp(jnp.einsum("blhd,md->blhm", x, w)
                       - 0.5 * jnp.sum(x * x, -1, keepdims=True)) / math.sqrt(w.shape[0])

    def quadratic(q, k, v):
        s = jnp.einsum("bihm,bjhm->bhij", phi(q), phi(k))
        s = jnp.where(mask[:, None, None, :] & jnp.tril(jnp.ones((L, L), bool))[None, None], s, 0)
        return jnp.einsum("bhij,bjhd->bihd", s / s.sum(-1, keepdims=True), v)

    def fast(q, k, v):
        return performer_kernel(q, k, v, mask, causal=True, features=w, chunk_size=8)

    real = mask[:, :, None, None]
    grads = [jax.jit(jax.grad(lambda *a, f=f: jnp.sum(jnp.where(real, jnp.sin(f(*a)), 0.0)),
                              argnums=(0, 1, 2)))(q, k, v) for f in (fast, quadratic)]
    for got, want in zip(*grads):
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), atol=1e-4, rtol=1e-3)


def test_favor_estimate_approaches_softmax_attention():
    """Small-norm inputs; non-causal (the causal path computes the same estimator, tested above)."""
    length, d = 32, DH
    keys = jax.random.split(jax.random.key(5), 3)
    q, k = (0.5 * jax.random.normal(key, (B, length, H, d)) for key in keys[:2])
    v = jax.random.normal(keys[2], (B, length, H, d))
    mask = jnp.arange(length)[None] < jnp.array([length, length - 9])[:, None]
    want = np.asarray(softmax_kernel(q, k, v, mask))
    real = np.asarray(mask)

    @jax.jit
    def mean_error(ws):  # over independent draws ws: float[draws, m, d]
        got = jax.vmap(lambda w: performer_kernel(q, k, v, mask, features=w))(ws)
        return jnp.abs(got - want[None])[:, real].mean()

    # Four independent draws; the first 4 rows of a draw are a draw of 4 features.
    ws = jnp.stack([draw_orthogonal_features(jax.random.key(100 + i), 4096, d) for i in range(4)])
    many, few = float(mean_error(ws)), float(mean_error(ws[:, :4]))
    assert many < 0.015, many
    assert few > 4 * many, (few, many)


@pytest.mark.parametrize("m, d, seed", [(20, 8, 42), (2, 64, 7), (4096, 8, 100)])
def test_drawn_blocks_are_orthogonal_with_chi_norms(m, d, seed):
    w = np.asarray(draw_orthogonal_features(jax.random.key(seed), m, d), np.float64)
    assert w.shape == (m, d)
    norms = np.linalg.norm(w, axis=-1)
    unit = w / norms[:, None]
    for start in range(0, m, d):
        block = unit[start:start + d]
        np.testing.assert_allclose(block @ block.T, np.eye(len(block)), atol=1e-5)
    if m > d:  # distinct blocks are independent, not orthogonal to each other
        assert np.abs(unit[:d] @ unit[d:2 * d].T).max() > 0.1
    if m >= 64:  # chi_d norms: E|w|^2 = d, and they vary (not all sqrt(d))
        assert abs(np.mean(norms**2) / d - 1) < 0.1
        assert norms.std() > 0.2


def make(kernel="softmax", redraw=True, causal=False):
    return attention.build("performer", dim=24, num_heads=H, qkv_dim=24, causal=causal,
                           rngs=nnx.Rngs(0), kernel=kernel, redraw=redraw, nb_features=20,
                           chunk_size=8)


def test_evaluation_is_deterministic_and_training_redraws():
    module = make()
    x = jax.random.normal(jax.random.key(4), (B, L, 24))
    mask = jnp.asarray(padding_mask())
    w0 = np.asarray(module.features[...])
    assert w0.shape == (20, DH)
    assert "features" in nnx.state(module, RandomFeatures)
    assert "features" not in nnx.state(module, nnx.Param)  # never trained
    e1, e2 = module(x, mask), module(x, mask)
    np.testing.assert_array_equal(np.asarray(e1), np.asarray(e2))
    np.testing.assert_array_equal(np.asarray(module.features[...]), w0)
    t1 = module(x, mask, deterministic=False)
    w1 = np.asarray(module.features[...])
    assert np.abs(w1 - w0).max() > 1e-3
    assert np.abs(np.asarray(t1) - np.asarray(e1)).max() > 1e-4
    # evaluation after training uses the stored (latest) features, deterministically
    np.testing.assert_array_equal(np.asarray(module(x, mask)), np.asarray(t1))
    module(x, mask, deterministic=False)
    assert np.abs(np.asarray(module.features[...]) - w1).max() > 1e-3


def test_redraw_inside_jit_updates_the_stored_features():
    module = make()
    x = jax.random.normal(jax.random.key(4), (B, L, 24))
    w0 = np.asarray(module.features[...])
    nnx.jit(lambda m, a: m(a, deterministic=False))(module, x)
    assert np.abs(np.asarray(module.features[...]) - w0).max() > 1e-3


@pytest.mark.parametrize("kernel, redraw", [("softmax", False), ("relu", True)])
def test_fixed_features_do_not_change_in_training(kernel, redraw):
    module = make(kernel=kernel, redraw=redraw)
    x = jax.random.normal(jax.random.key(4), (B, L, 24))
    before = None if module.features is None else np.asarray(module.features[...])
    a = module(x, deterministic=False)
    np.testing.assert_array_equal(np.asarray(a), np.asarray(module(x)))
    if kernel == "relu":
        assert module.features is None
    else:
        np.testing.assert_array_equal(np.asarray(module.features[...]), before)


def test_unknown_kernel_is_an_error():
    with pytest.raises(ValueError, match="unknown performer kernel 'cosine'"):
        make(kernel="cosine")
    with pytest.raises(ValueError, match="needs features"):
        performer_kernel(*(jnp.zeros((1, 4, 1, 2)),) * 3)


def test_causal_scan_never_builds_a_per_position_state():
    """fwd + bwd temp memory stays far below one float32[L, H, m, d] tensor of prefix sums."""
    length, heads, m, d = 2048, 2, 256, 64
    w = jax.random.normal(jax.random.key(0), (m, d))  # any matrix: only shapes matter here

    def loss(q, k, v):
        return jnp.sum(performer_kernel(q, k, v, causal=True, features=w) ** 2)

    x = jax.ShapeDtypeStruct((1, length, heads, d), jnp.float32)
    compiled = jax.jit(jax.grad(loss, argnums=(0, 1, 2))).lower(x, x, x).compile()
    temp = compiled.memory_analysis().temp_size_in_bytes
    assert temp < length * heads * m * d * 4 / 4, f"{temp} bytes"
