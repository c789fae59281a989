"""attention/_chunked.py against the plain step-by-step ``lax.scan`` recurrences of
tests/recurrences.py: scalar and vector decays, the stabilised (mLSTM) path, the delta rule; causal
and bidirectional; chunk sizes that do and do not divide the length; values and gradients."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from lra.attention._chunked import chunked_decay_attention, chunked_delta_rule, flip_within_length, lengths_of
from recurrences import bidirectional, decay_recurrence, delta_recurrence

B, L, H, K, V = 2, 21, 2, 4, 3
LENGTHS = jnp.array([L, L - 6])


def draw(seed=0, vector=False, strong=False):
    ks = jax.random.split(jax.random.key(seed), 5)
    q = jax.random.normal(ks[0], (B, L, H, K))
    k = jax.random.normal(ks[1], (B, L, H, K))
    v = jax.random.normal(ks[2], (B, L, H, V))
    shape = (B, L, H, K) if vector else (B, L, H)
    # decays from ~0.9999 to ~0.02 per step (strong: down to exp(-40), to stress every exponent)
    scale = 40.0 if strong else 4.0
    log_a = -scale * jax.nn.sigmoid(jax.random.normal(ks[3], shape) * 3 - 3)
    return q, k, v, log_a, ks[4]


def check(fn, ref, arrays, cot_key, tol=2e-4):
    got, want = fn(*arrays), ref(*arrays)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), atol=tol, rtol=tol)
    cot = jax.random.normal(cot_key, want.shape)
    g_got = jax.grad(lambda *a: jnp.sum(fn(*a) * cot), argnums=tuple(range(len(arrays))))(*arrays)
    g_want = jax.grad(lambda *a: jnp.sum(ref(*a) * cot), argnums=tuple(range(len(arrays))))(*arrays)
    for a, b in zip(g_got, g_want, strict=True):
        assert bool(jnp.all(jnp.isfinite(a)))
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), atol=tol * 10, rtol=tol * 10)


@pytest.mark.parametrize("chunk", [7, 8, 32])  # 7 divides 21, 8 does not, 32 > L
@pytest.mark.parametrize("vector", [False, True])
@pytest.mark.parametrize("direction", ["causal", "bidirectional"])
@pytest.mark.slow
def test_decayed_attention_equals_the_recurrence(chunk, vector, direction):
    q, k, v, log_a, key = draw(chunk + 10 * vector, vector)
    fn = jax.jit(lambda q, k, v, la: chunked_decay_attention(q, k, v, la, chunk_size=chunk))
    if direction == "causal":
        check(fn, decay_recurrence, (q, k, v, log_a), key)
    else:
        check(lambda *a: bidirectional(fn, a, LENGTHS),
              lambda *a: bidirectional(decay_recurrence, a, LENGTHS), (q, k, v, log_a), key)


@pytest.mark.parametrize("vector", [False, True])
def test_strong_decays_stay_finite(vector):
    # per-step decays down to exp(-40): a factorised q e^{c}, k e^{-c} form would overflow here
    q, k, v, log_a, key = draw(3, vector, strong=True)
    fn = jax.jit(lambda q, k, v, la: chunked_decay_attention(q, k, v, la, chunk_size=16))
    check(fn, decay_recurrence, (q, k, v, log_a), key)


@pytest.mark.parametrize("chunk", [4, 8])
@pytest.mark.slow
def test_stabilised_input_gate_equals_the_recurrence(chunk):
    q, k, v, log_a, key = draw(5)
    log_i = 3.0 * jax.random.normal(jax.random.key(9), log_a.shape)

    def fn(q, k, v, la, li):
        o, m = chunked_decay_attention(q, k, v, la, chunk_size=chunk, log_input=li)
        return o * jnp.exp(m)[..., None]

    check(jax.jit(fn), decay_recurrence, (q, k, v, log_a, log_i), key, tol=5e-4)


def test_stabiliser_keeps_huge_input_gates_finite():
    q, k, v, log_a, _ = draw(6)
    log_i = 200.0 + 50.0 * jax.random.normal(jax.random.key(1), log_a.shape)  # e^i overflows fp32
    o, m = chunked_decay_attention(q, k, v, log_a, chunk_size=8, log_input=log_i)
    assert bool(jnp.all(jnp.isfinite(o))) and bool(jnp.all(jnp.isfinite(m)))
    # same result in float64 terms: shift every input gate by -200, rows scale by e^-200
    o2, m2 = chunked_decay_attention(q, k, v, log_a, chunk_size=8, log_input=log_i - 200.0)
    np.testing.assert_allclose(np.asarray(o), np.asarray(o2), atol=1e-4, rtol=1e-4)
    np.testing.assert_allclose(np.asarray(m - 200.0), np.asarray(m2), atol=1e-3)


@pytest.mark.parametrize("chunk", [7, 8])
@pytest.mark.parametrize("gated", [False, True])
@pytest.mark.parametrize("direction", ["causal", "bidirectional"])
@pytest.mark.slow
def test_delta_rule_equals_the_recurrence(chunk, gated, direction):
    q, k, v, log_a, key = draw(20 + chunk)
    k = k / jnp.linalg.norm(k, axis=-1, keepdims=True)
    beta = jax.nn.sigmoid(jax.random.normal(jax.random.key(4), log_a.shape))
    log_a = log_a if gated else jnp.zeros_like(log_a)
    fn = jax.jit(lambda q, k, v, b, la: chunked_delta_rule(q, k, v, b, la, chunk_size=chunk))
    arrays = (q, k, v, beta, log_a)
    if direction == "causal":
        check(fn, delta_recurrence, arrays, key)
    else:
        check(lambda *a: bidirectional(fn, a, LENGTHS),
              lambda *a: bidirectional(delta_recurrence, a, LENGTHS), arrays, key)


def test_bfloat16_inputs_compute_in_float32():
    q, k, v, log_a, _ = draw(7, True)
    want = decay_recurrence(q, k, v, log_a)
    got = chunked_decay_attention(*(a.astype(jnp.bfloat16) for a in (q, k, v)), log_a, chunk_size=8)
    assert got.dtype == jnp.float32
    err = float(jnp.abs(got - want).max() / jnp.abs(want).max())
    assert err < 3e-2


def test_flip_within_length():
    x = jnp.arange(2 * 5).reshape(2, 5) * 1.0
    got = flip_within_length(x, jnp.array([5, 3]))
    np.testing.assert_array_equal(np.asarray(got), [[4, 3, 2, 1, 0], [7, 6, 5, 8, 9]])
    np.testing.assert_array_equal(np.asarray(flip_within_length(got, jnp.array([5, 3]))), x)
    mask = jnp.array([[True] * 5, [True] * 3 + [False] * 2])
    np.testing.assert_array_equal(np.asarray(lengths_of(mask, 2, 5)), [5, 3])
