"""S4D (attention/s4d.py): FFT kernel against the direct convolution sum and the recurrent view,
the S4D-Lin and S4D-Inv initialisations, and padding."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from helpers import padded_inputs
from reference import diagonal_recurrence

from lra import attention

B, L, D, N = 2, 13, 5, 8
LENGTHS = np.array([L, L - 5])


def make(causal=False, **opts):
    opts = {"state_size": N, **opts}
    return attention.build("s4d", dim=D, num_heads=1, causal=causal, rngs=nnx.Rngs(0), **opts)


def inputs(seed=0, pad_scale=0.0):
    """x with real tokens N(0, 1) and pads N(0, pad_scale^2) (non-zero pad activations)."""
    return padded_inputs(LENGTHS, L, D, seed=seed, pad_scale=pad_scale)


def params(module):
    """A complex[D, N/2], dt float[D], C complex[K, D, N/2], D float[D], all float64 / complex128."""
    a = -np.exp(np.asarray(module.log_A_real[...], np.float64)) + 1j * np.asarray(module.A_imag[...])
    a = np.tile(a, (D // a.shape[0], 1))  # n_ssm copies of A: channel h reads copy h mod n_ssm
    dt = np.exp(np.asarray(module.log_dt[...], np.float64))
    c = np.asarray(module.C[...], np.float64)
    return a, dt, c[..., 0] + 1j * c[..., 1], np.asarray(module.D[...], np.float64)


def discrete(a, dt, method):
    if method == "zoh":
        return np.exp(dt[:, None] * a), (np.exp(dt[:, None] * a) - 1) / a
    return ((1 + dt[:, None] * a / 2) / (1 - dt[:, None] * a / 2),
            dt[:, None] / (1 - dt[:, None] * a / 2))


def recurrent_reference(module, x, discretization, *, naive=False):
    """The recurrent view, per channel h: x_t = dA x_{t-1} + dB u_t, y_t = 2 Re(C x_t) + D u_t;
    the reverse direction is the same recurrence run backwards with the second C."""
    a, dt, c, d = params(module)
    da, db = discrete(a, dt, discretization)
    out = np.zeros(x.shape)
    for b in range(B):
        last = L if naive else LENGTHS[b]
        for h in range(D):
            u = x[b, :, h].astype(np.float64)
            bu = u[:, None] * db[h][None, :]
            y = 2 * (diagonal_recurrence(da[h], bu) @ c[0, h]).real
            if not module.causal:
                y += 2 * (diagonal_recurrence(da[h], bu, reverse=True, last=last) @ c[1, h]).real
            out[b, :, h] = y + d[h] * u
    return out


def direct_convolution(kernels, d, x, causal):
    """y_t = sum_{s<=t} k0[t-s] u_s (+ sum_{s>=t} k1[s-t] u_s) + D u_t, as explicit sums."""
    out = np.zeros(x.shape)
    for b in range(B):
        for h in range(D):
            u = x[b, :, h].astype(np.float64)
            for t in range(L):
                acc = sum(kernels[0, h, t - s] * u[s] for s in range(t + 1))
                if not causal:
                    acc += sum(kernels[1, h, s - t] * u[s] for s in range(t, L))
                out[b, t, h] = acc + d[h] * u[t]
    return out


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.slow
def test_fft_convolution_equals_the_direct_sum(causal):
    module = make(causal)
    x, mask = inputs()
    x = np.where(mask[..., None], x, 0.0)  # the module zeroes pads before the FFT
    got = np.asarray(module(jnp.asarray(x), jnp.asarray(mask)))
    k = np.asarray(module.kernels(L), np.float64)
    want = direct_convolution(k, np.asarray(module.D[...], np.float64), x, causal)
    np.testing.assert_allclose(got, want, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("discretization", ["zoh", "bilinear"])
def test_vandermonde_kernel_equals_the_powers_of_da(discretization):
    module = make(discretization=discretization, init="inv")
    a, dt, c, _ = params(module)
    da, db = discrete(a, dt, discretization)
    want = np.stack([[[2 * np.sum(c[k, h] * db[h] * da[h] ** n).real for n in range(L)]
                      for h in range(D)] for k in range(2)])
    np.testing.assert_allclose(np.asarray(module.kernels(L)), want, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("discretization", ["zoh", "bilinear"])
@pytest.mark.parametrize("causal", [False, True])
def test_convolution_equals_the_recurrent_view_with_padding(causal, discretization):
    module = make(causal, discretization=discretization)
    x, mask = inputs(2)
    got = np.asarray(module(jnp.asarray(x), jnp.asarray(mask)))
    want = recurrent_reference(module, x, discretization)
    np.testing.assert_allclose(got[mask], want[mask], atol=1e-4, rtol=1e-4)


def test_non_zero_pads_a_naive_reverse_would_read_them():
    module = make(dt_min=0.01, dt_max=0.02)  # slow decay: the pads' state survives several steps
    x, mask = inputs(1, pad_scale=3.0)
    got = np.asarray(module(jnp.asarray(x), jnp.asarray(mask)))
    np.testing.assert_allclose(got[mask], recurrent_reference(module, x, "zoh")[mask],
                               atol=1e-4, rtol=1e-4)
    naive = recurrent_reference(module, x, "zoh", naive=True)  # flip the whole padded sequence
    assert np.abs(naive[mask] - got[mask]).max() > 1e-2
    np.testing.assert_allclose(np.asarray(module(jnp.asarray(x))), naive, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("init", ["lin", "inv"])
def test_initialisations_follow_the_paper(init):
    n_state = 16
    module = make(state_size=n_state, init=init, dt_min=1e-3, dt_max=0.1)
    a = -np.exp(np.asarray(module.log_A_real[...], np.float64)) + 1j * np.asarray(module.A_imag[...])
    n = np.arange(n_state // 2)
    imag = math.pi * n if init == "lin" else (n_state / math.pi) * (n_state / (2 * n + 1) - 1)
    assert a.shape == (D, n_state // 2)
    np.testing.assert_allclose(a.real, -0.5, rtol=1e-6)
    np.testing.assert_allclose(a.imag, np.broadcast_to(imag, a.shape), rtol=1e-6)
    dt = np.exp(np.asarray(module.log_dt[...], np.float64))
    assert dt.shape == (D,) and np.all((dt >= 1e-3 * (1 - 1e-6)) & (dt <= 0.1 * (1 + 1e-6)))
    assert module.C[...].shape == (2, D, n_state // 2, 2)
    assert make(causal=True).C[...].shape == (1, D, N // 2, 2)


def test_one_shared_a_is_the_per_channel_form_with_a_tied():
    """``n_ssm=1`` (S4's LRA configs on ListOps, Text, Retrieval, Image): one A for every
    channel, dt, C and D per channel. It equals the per-channel module whose every channel holds
    that A, and the step-by-step recurrence."""
    shared = make(n_ssm=1)
    assert shared.log_A_real[...].shape == shared.A_imag[...].shape == (1, N // 2)
    assert shared.log_dt[...].shape == shared.D[...].shape == (D,)
    per_channel = make()
    for name in ("log_A_real", "A_imag"):
        getattr(per_channel, name)[...] = jnp.tile(getattr(shared, name)[...], (D, 1))
    for name in ("log_dt", "C", "D"):
        getattr(per_channel, name)[...] = getattr(shared, name)[...]
    x, mask = inputs(seed=3, pad_scale=1.0)
    y = np.asarray(shared(x, mask))
    real = np.asarray(mask)
    np.testing.assert_allclose(y[real], np.asarray(per_channel(x, mask))[real], rtol=1e-6, atol=1e-6)
    ref = recurrent_reference(shared, np.where(real[..., None], np.asarray(x), 0.0), "zoh")
    np.testing.assert_allclose(y[real], ref[real], rtol=1e-4, atol=1e-4)
    # one parameter: its gradient gathers every channel's
    grad = nnx.grad(lambda m: jnp.sum(m(x, mask) ** 2))(shared)
    assert grad.log_A_real[...].shape == (1, N // 2)


def test_bad_options_are_clear_errors():
    with pytest.raises(ValueError, match="init must be one of lin, inv"):
        make(init="legs")
    with pytest.raises(ValueError, match="state_size must be an even number"):
        make(state_size=7)
    with pytest.raises(ValueError, match="dt_min <= dt_max"):
        make(dt_min=0.1, dt_max=0.01)
    with pytest.raises(ValueError, match="n_ssm must be None or a positive divisor of dim=5"):
        make(n_ssm=2)


def test_initialises_under_jit():
    # The trainer builds the model under jit: the constructor may not pull random draws into numpy.
    abstract = nnx.eval_shape(lambda: make())
    concrete = make()
    shapes = lambda m: jax.tree.map(lambda a: a.shape, nnx.state(m, nnx.Param))  # noqa: E731
    assert shapes(abstract) == shapes(concrete)
