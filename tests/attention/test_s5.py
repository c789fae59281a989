"""S5 (attention/s5.py) against a step-by-step recurrence, its HiPPO-N initialisation, and padding."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from helpers import padded_inputs
from lra.attention.s5 import hippo_n, hippo_n_eig
from reference import diagonal_ssm_output

from lra import attention

B, L, D = 2, 13, 6
LENGTHS = np.array([L, L - 5])


def make(causal=False, **opts):
    opts = {"state_size": 8, "blocks": 2, **opts}
    return attention.build("s5", dim=D, num_heads=1, causal=causal, rngs=nnx.Rngs(0), **opts)


def inputs(seed=0, pad_scale=0.0):
    """x with real tokens N(0, 1) and pads N(0, pad_scale^2) (non-zero pad activations)."""
    return padded_inputs(LENGTHS, L, D, seed=seed, pad_scale=pad_scale)


def reference(module, x, *, naive=False):
    """y_t = k Re(C [x_fwd; x_bwd]) + D u_t with both scans written as plain loops (float64).

    naive=False: pads are never read (the reverse starts at each example's last real token);
    naive=True: the reverse runs over the whole padded sequence, pads included.
    """
    lbar, bbar = (np.asarray(a, np.complex128) for a in module.discrete())
    c = np.asarray(module.C[...], np.float64)
    c = c[..., 0] + 1j * c[..., 1]
    d = np.asarray(module.D[...], np.float64)
    return diagonal_ssm_output(lbar, bbar, c, d, x, [L] * B if naive else LENGTHS,
                               causal=module.causal, factor=2.0 if module.conj_sym else 1.0)


@pytest.mark.parametrize("conj_sym", [True, False])
@pytest.mark.parametrize("discretization", ["zoh", "bilinear"])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.slow
def test_scan_equals_the_step_by_step_recurrence(causal, discretization, conj_sym):
    module = make(causal, discretization=discretization, conj_sym=conj_sym)
    x, mask = inputs()
    got = np.asarray(module(jnp.asarray(x), jnp.asarray(mask)))
    want = reference(module, x)
    np.testing.assert_allclose(got[mask], want[mask], atol=1e-4, rtol=1e-4)


def test_non_zero_pads_a_naive_reverse_would_read_them():
    module = make()
    x, mask = inputs(1, pad_scale=3.0)
    got = np.asarray(module(jnp.asarray(x), jnp.asarray(mask)))
    np.testing.assert_allclose(got[mask], reference(module, x)[mask], atol=1e-4, rtol=1e-4)
    # Flipping the whole padded sequence carries the pads' state into the last real tokens.
    naive = reference(module, x, naive=True)
    assert np.abs(naive[mask] - got[mask]).max() > 1e-2
    # ... and the module really is fed non-zero pads: without the mask it matches the naive form
    unmasked = np.asarray(module(jnp.asarray(x)))
    np.testing.assert_allclose(unmasked, naive, atol=1e-4, rtol=1e-4)


def test_hippo_n_is_the_normal_part_of_hippo_legs():
    n = 6
    s = hippo_n(n)
    for i in range(n):
        for k in range(n):
            a = -np.sqrt(2 * i + 1) * np.sqrt(2 * k + 1) if i > k else (-(i + 1) if i == k else 0.0)
            assert s[i, k] == pytest.approx(a + np.sqrt(i + 0.5) * np.sqrt(k + 0.5))
    np.testing.assert_allclose(s + s.T, -np.eye(n), atol=1e-12)  # -1/2 I + skew-symmetric


@pytest.mark.parametrize("n", [4, 8, 16])
def test_eigenvalues_are_those_of_the_hippo_n_matrix(n):
    lam, v = hippo_n_eig(n)
    want = np.linalg.eigvals(hippo_n(n))
    key = lambda z: (round(z.imag, 6), round(z.real, 6))  # noqa: E731
    np.testing.assert_allclose(sorted(lam, key=key), sorted(want, key=key), atol=1e-8)
    np.testing.assert_allclose(lam.real, -0.5)
    np.testing.assert_allclose(v.conj().T @ v, np.eye(n), atol=1e-10)
    np.testing.assert_allclose(v @ np.diag(lam) @ v.conj().T, hippo_n(n), atol=1e-8)


@pytest.mark.slow
def test_module_initialisation_blocks_and_conjugate_symmetry():
    block = 8
    lam_n, _ = hippo_n_eig(block)
    module = make(state_size=3 * block, blocks=3, conj_sym=True)
    lam = np.asarray(module.Lambda_re[...]) + 1j * np.asarray(module.Lambda_im[...])
    kept = lam_n[: block // 2]
    assert np.all(kept.imag < 0)  # one of each conjugate pair
    np.testing.assert_allclose(np.sort_complex(np.concatenate([kept, kept.conj()])),
                               np.sort_complex(lam_n), atol=1e-6)
    np.testing.assert_allclose(lam, np.tile(kept, 3), atol=1e-6)
    assert module.B[...].shape == (3 * block // 2, D, 2)
    assert module.C[...].shape == (D, 3 * block, 2)  # bidirectional: [C1 | C2]
    assert make(causal=True, state_size=3 * block, blocks=3).C[...].shape == (D, 3 * block // 2, 2)
    full = make(state_size=2 * block, blocks=2, conj_sym=False)
    np.testing.assert_allclose(np.asarray(full.Lambda_im[...]), np.tile(lam_n.imag, 2), atol=1e-6)
    step = np.exp(np.asarray(module.log_step[...]))
    assert np.all((step >= 1e-3 * (1 - 1e-6)) & (step <= 0.1 * (1 + 1e-6)))


def test_bad_options_are_clear_errors():
    with pytest.raises(ValueError, match="multiple of blocks"):
        make(state_size=10, blocks=3)
    with pytest.raises(ValueError, match="even block size"):
        make(state_size=6, blocks=2)
    with pytest.raises(ValueError, match="discretization must be one of zoh, bilinear"):
        make(discretization="euler")
    with pytest.raises(ValueError, match="c_init must be one of"):
        make(c_init="zeros")


def test_initialises_under_jit():
    # The trainer builds the model under jit: the constructor may not pull random draws into numpy.
    abstract = nnx.eval_shape(lambda: make())
    concrete = make()
    shapes = lambda m: jax.tree.map(lambda a: a.shape, nnx.state(m, nnx.Param))  # noqa: E731
    assert shapes(abstract) == shapes(concrete)
