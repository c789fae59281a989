"""LRU (attention/lru.py) against a step-by-step recurrence, its ring initialisation, and padding."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from helpers import padded_inputs
from lra.attention._ssm import diagonal_scan
from reference import diagonal_ssm_output

from lra import attention

B, L, D, N = 2, 13, 6, 5
LENGTHS = np.array([L, L - 5])


def make(causal=False, seed=0, **opts):
    opts = {"state_size": N, **opts}
    return attention.build("lru", dim=D, num_heads=1, causal=causal, rngs=nnx.Rngs(seed), **opts)


def inputs(seed=0, pad_scale=0.0):
    """x with real tokens N(0, 1) and pads N(0, pad_scale^2) (non-zero pad activations)."""
    return padded_inputs(LENGTHS, L, D, seed=seed, pad_scale=pad_scale)


def reference(module, x, *, naive=False):
    """h_t = lambda h_{t-1} + gamma B u_t per direction, y_t = Re(C [h_fwd; h_bwd]) + D u_t (float64).

    lambda, gamma and B are rebuilt here from the raw parameters (exp(-exp(nu) + i exp(theta))).
    """
    p = {k: np.asarray(getattr(module, k)[...], np.float64)
         for k in ("nu_log", "theta_log", "gamma_log", "B_re", "B_im", "C_re", "C_im", "D")}
    lam = np.exp(-np.exp(p["nu_log"]) + 1j * np.exp(p["theta_log"]))
    b_mat = np.exp(p["gamma_log"])[:, None] * (p["B_re"] + 1j * p["B_im"])
    c = p["C_re"] + 1j * p["C_im"]
    return diagonal_ssm_output(lam, b_mat, c, p["D"], x, [L] * B if naive else LENGTHS,
                               causal=module.causal)


@pytest.mark.parametrize("causal", [False, True])
def test_scan_equals_the_step_by_step_recurrence(causal):
    module = make(causal, r_min=0.5, r_max=0.95)
    x, mask = inputs()
    got = np.asarray(module(jnp.asarray(x), jnp.asarray(mask)))
    np.testing.assert_allclose(got[mask], reference(module, x)[mask], atol=1e-4, rtol=1e-4)


def test_non_zero_pads_a_naive_reverse_would_read_them():
    module = make(r_min=0.8, r_max=0.99)
    x, mask = inputs(1, pad_scale=3.0)
    got = np.asarray(module(jnp.asarray(x), jnp.asarray(mask)))
    np.testing.assert_allclose(got[mask], reference(module, x)[mask], atol=1e-4, rtol=1e-4)
    naive = reference(module, x, naive=True)
    assert np.abs(naive[mask] - got[mask]).max() > 1e-2
    np.testing.assert_allclose(np.asarray(module(jnp.asarray(x))), naive, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize(("r_min", "r_max", "max_phase"),
                         [(0.0, 0.99, 2 * math.pi), (0.5, 0.9, 2 * math.pi),
                          (0.999, 0.9999, math.pi / 10)])
def test_ring_initialisation(r_min, r_max, max_phase):
    module = make(state_size=4096, r_min=r_min, r_max=r_max, max_phase=max_phase)
    lam = np.asarray(module.eigenvalues(), np.complex128)
    r = np.abs(lam)
    assert r.min() >= r_min * (1 - 1e-6) and r.max() <= r_max * (1 + 1e-6)
    # |lambda|^2 is uniform on [r_min^2, r_max^2]: mean and spread of that uniform law
    r2 = r**2
    lo, hi = r_min**2, r_max**2
    assert abs(r2.mean() - (lo + hi) / 2) < 0.05 * (hi - lo)
    assert r2.min() < lo + 0.01 * (hi - lo) and r2.max() > hi - 0.01 * (hi - lo)
    phase = np.angle(lam) % (2 * np.pi)
    assert phase.max() <= max_phase * (1 + 1e-5) and phase.max() > 0.95 * max_phase
    # gamma normalisation: gamma = sqrt(1 - |lambda|^2)
    gamma = np.exp(np.asarray(module.gamma_log[...], np.float64))
    np.testing.assert_allclose(gamma, np.sqrt(1 - r2), rtol=2e-3, atol=1e-6)
    assert np.all(np.isfinite(np.asarray(module.nu_log[...])))


def test_input_and_output_matrix_scales():
    module = make(state_size=512)
    b = np.asarray(module.B_re[...])
    c = np.asarray(module.C_re[...])
    assert b.std() == pytest.approx(1 / math.sqrt(2 * D), rel=0.1)
    assert c.std() == pytest.approx(1 / math.sqrt(512), rel=0.1)
    assert module.C_re[...].shape == (D, 2 * 512)  # bidirectional: [C_fwd | C_bwd]


def test_gamma_normalisation_keeps_the_state_variance_near_the_input_variance():
    # White-noise input: E|h|^2 = gamma^2 E|B u|^2 / (1 - |lambda|^2) = E|B u|^2 once gamma is
    # sqrt(1 - |lambda|^2); without it the state would be 1 / (1 - |lambda|^2) (5x to 50x) larger.
    module = make(causal=True, state_size=16, r_min=0.9, r_max=0.99)
    u = jax.random.normal(jax.random.key(0), (1, 2048, D)).astype(jnp.complex64)
    raw_bu = u @ (module.B_re[...] + 1j * module.B_im[...]).T
    states = jax.jit(diagonal_scan)(module.eigenvalues(), u @ module.input_matrix().T)[0, 1024:]
    ratio = np.asarray(jnp.mean(jnp.abs(states) ** 2, 0) / jnp.mean(jnp.abs(raw_bu[0]) ** 2, 0))
    assert 0.6 < np.median(ratio) < 1.6


def test_bad_options_are_clear_errors():
    with pytest.raises(ValueError, match="0 <= r_min < r_max <= 1"):
        make(r_min=0.9, r_max=0.5)
    with pytest.raises(ValueError, match="max_phase must be > 0"):
        make(max_phase=0.0)


def test_initialises_under_jit():
    # The trainer builds the model under jit: the constructor may not pull random draws into numpy.
    abstract = nnx.eval_shape(lambda: make())
    concrete = make()
    shapes = lambda m: jax.tree.map(lambda a: a.shape, nnx.state(m, nnx.Param))  # noqa: E731
    assert shapes(abstract) == shapes(concrete)
