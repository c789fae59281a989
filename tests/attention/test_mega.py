"""Mega (attention/mega.py): the damped EMA against its recurrence, the chunked gated attention against
a dense loop, padding and causality with full attention, and Mega-chunk's linear memory."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from helpers import LONG, SHORT, padded_inputs, train_temp_bytes
from lra.attention._ssm import masked_input
from lra.attention.mega import laplace, mega_attention
from reference import diagonal_recurrence

from lra import attention

B, L, D, NDIM = 2, 13, 6, 4
LENGTHS = np.array([L, L - 5])


def make(causal=False, dim=D, max_len=L, **opts):
    opts = {"ndim": NDIM, "z_dim": 8, **opts}
    return attention.build("mega", dim=dim, num_heads=1, causal=causal, max_len=max_len,
                           rngs=nnx.Rngs(0), **opts)


def inputs(seed=0, pad_scale=0.0):
    """x with real tokens N(0, 1) and pads N(0, pad_scale^2) (non-zero pad activations)."""
    return padded_inputs(LENGTHS, L, D, seed=seed, pad_scale=pad_scale)


def sigmoid(x):
    return 1 / (1 + np.exp(-x))


def ema_reference(ema, x, *, naive=False):
    """Paper's letters, per channel d and EMA dim j: s_t = alpha beta x_t + (1 - alpha delta) s_{t-1},
    ema_t = sum_j eta_j s_t,j / sqrt(h); the reverse direction is the same run backwards with its own
    parameters (rows D..2D-1). naive=True runs the reverse over the whole padded sequence."""
    p = {k: np.asarray(getattr(ema, k)[...], np.float64) for k in ("delta", "alpha", "beta", "eta")}
    alpha, delta = sigmoid(p["delta"]), sigmoid(p["alpha"])  # the code's names are swapped
    h = p["eta"].shape[1]
    out = np.zeros(x.shape)
    for b in range(B):
        last = L if naive else LENGTHS[b]
        for d in range(D):
            u = x[b, :, d].astype(np.float64)
            rows = [(d, False)] + ([] if ema.causal else [(D + d, True)])
            for row, reverse in rows:
                bu = u[:, None] * (alpha[row] * p["beta"][row])[None, :]
                s = diagonal_recurrence(1 - alpha[row] * delta[row], bu, reverse=reverse, last=last)
                out[b, :, d] += (s @ p["eta"][row]).real / math.sqrt(h)
    return out


@pytest.mark.parametrize("causal", [False, True])
def test_ema_by_fft_equals_the_step_by_step_recurrence(causal):
    ema = make(causal).ema
    x, mask = inputs()
    got = np.asarray(ema.linear(masked_input(jnp.asarray(x), jnp.asarray(mask))))
    np.testing.assert_allclose(got[mask], ema_reference(ema, x)[mask], atol=1e-4, rtol=1e-4)


def test_non_zero_pads_a_naive_reverse_would_read_them():
    ema = make().ema
    x, mask = inputs(1, pad_scale=3.0)
    got = np.asarray(ema.linear(masked_input(jnp.asarray(x), jnp.asarray(mask))))
    np.testing.assert_allclose(got[mask], ema_reference(ema, x)[mask], atol=1e-4, rtol=1e-4)
    naive = ema_reference(ema, x, naive=True)  # flip the whole padded sequence
    assert np.abs(naive[mask] - got[mask]).max() > 1e-2
    np.testing.assert_allclose(np.asarray(ema.linear(jnp.asarray(x))), naive, atol=1e-4, rtol=1e-4)
    # the mixer itself feeds the EMA the masked input: its real outputs ignore the pads
    module = make()
    x0 = np.where(mask[..., None], x, 0.0)
    y, y0 = (np.asarray(module(jnp.asarray(a), jnp.asarray(mask))) for a in (x, x0))
    np.testing.assert_allclose(y[mask], y0[mask], atol=1e-5)


def dense_attention(q, k, v, mask, table, attn_fn, causal, chunk):
    """Loops over (b, i, j): keys in i's chunk, real, and j <= i if causal; float64."""
    q, k, v, table = (np.asarray(a, np.float64) for a in (q, k, v, table))
    m = (table.shape[0] + 1) // 2
    c = chunk or L
    out = np.zeros((B, L, v.shape[-1]))
    for b in range(B):
        for i in range(L):
            keys = [j for j in range(L) if j // c == i // c and mask[b, j] and (not causal or j <= i)]
            s = np.array([q[b, i] @ k[b, j] for j in keys])
            bias = np.array([table[(j - i) + m - 1] for j in keys])
            if attn_fn == "softmax":
                w = np.exp(s / math.sqrt(q.shape[-1]) + bias)
                w /= w.sum()
            else:
                w = np.array([0.5 * (1 + math.erf((x - math.sqrt(0.5)) / (math.sqrt(1 / (4 * math.pi))
                                                                          * math.sqrt(2))))
                              for x in s / len(keys) + bias])
            out[b, i] = w @ v[b, keys]
    return out


@pytest.mark.parametrize("chunk", [0, 4])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("attn_fn", ["softmax", "laplace"])
def test_chunked_attention_equals_a_dense_loop(attn_fn, causal, chunk):
    keys = jax.random.split(jax.random.key(0), 4)
    q, k = (jax.random.normal(kk, (B, L, 5)) for kk in keys[:2])
    v = jax.random.normal(keys[2], (B, L, 3))
    table = jax.random.normal(keys[3], (2 * (chunk or L) - 1,))
    _, mask = inputs()
    got = np.asarray(mega_attention(q, k, v, jnp.asarray(mask), table, attn_fn=attn_fn,
                                    causal=causal, chunk_size=chunk))
    want = dense_attention(q, k, v, mask, table, attn_fn, causal, chunk)
    np.testing.assert_allclose(got[mask], want[mask], atol=1e-5, rtol=1e-4)


def test_laplace_is_the_papers_normal_cdf():
    x = np.linspace(-2, 3, 11)
    want = [0.5 * (1 + math.erf((t - math.sqrt(0.5)) / math.sqrt(1 / (2 * math.pi)))) for t in x]
    np.testing.assert_allclose(np.asarray(laplace(jnp.asarray(x, jnp.float32))), want, atol=1e-6)
    assert float(laplace(jnp.float32(math.sqrt(0.5)))) == pytest.approx(0.5)


@pytest.mark.parametrize("attn_fn", ["softmax", "laplace"])
@pytest.mark.parametrize("causal", [False, True])
def test_full_attention_pads_and_future_cannot_leak(causal, attn_fn):
    # The shared contract tests run Mega chunked (contract_options); this is its full-attention form.
    module = make(causal, attn_fn=attn_fn)
    x, mask = inputs(3)
    noisy = np.where(mask[..., None], x, 100.0 * np.random.default_rng(4).standard_normal(x.shape))
    y, y_noisy = (np.asarray(module(jnp.asarray(a), jnp.asarray(mask))) for a in (x, noisy))
    np.testing.assert_allclose(y[mask], y_noisy[mask], atol=1e-4)
    if causal:
        t = 5
        future = x.copy()
        future[:, t + 1:] += 1.0
        y_future = np.asarray(module(jnp.asarray(future)))
        y_all = np.asarray(module(jnp.asarray(x)))
        np.testing.assert_allclose(y_future[:, : t + 1], y_all[:, : t + 1], atol=1e-5)
        assert np.abs(y_future[:, t + 1:] - y_all[:, t + 1:]).max() > 1e-4


@pytest.mark.slow
def test_chunking_makes_memory_linear_and_full_attention_is_quadratic():
    small = train_temp_bytes("mega", SHORT, chunk_size=128)
    big = train_temp_bytes("mega", LONG, chunk_size=128)
    assert big / small < 8, f"chunked: temp bytes {small} -> {big} ({big / small:.1f}x for 4x length)"
    full_small, full_big = train_temp_bytes("mega", SHORT), train_temp_bytes("mega", LONG)
    # why the family is not marked subquadratic (the [L, L] scores dominate at 4096; linear parts
    # still weigh at 1024, so the ratio sits below the 16x of pure L^2)
    assert full_big / full_small > 9 and full_big > 4 * big


def test_bad_options_are_clear_errors():
    with pytest.raises(ValueError, match="attn_fn must be one of softmax, laplace"):
        make(attn_fn="relu")
    with pytest.raises(ValueError, match="needs max_len"):
        make(max_len=None)
    with pytest.raises(ValueError, match="exceeds max_len=8"):
        make(max_len=8)(jnp.zeros((1, 9, D)))


def test_initialises_under_jit():
    # The trainer builds the model under jit: the constructor may not pull random draws into numpy.
    abstract = nnx.eval_shape(lambda: make())
    concrete = make()
    shapes = lambda m: jax.tree.map(lambda a: a.shape, nnx.state(m, nnx.Param))  # noqa: E731
    assert shapes(abstract) == shapes(concrete)
