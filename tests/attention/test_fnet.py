"""FNet against numpy's fft2, and what padding does and does not change."""

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
from helpers import length_mask

from lra import attention

B, L, D = 2, 24, 12


def make():
    return attention.build("fnet", dim=D, num_heads=2, rngs=nnx.Rngs(0))


def inputs(seed=0):
    x = np.random.default_rng(seed).standard_normal((B, L, D)).astype(np.float32)
    mask = length_mask([L, L - 9], L)
    return x, mask


def naive_dft2(x):
    """Re sum_{s,e} x[s, e] exp(-2 pi i (t s / L + c e / D)), as explicit DFT matrices."""
    n, d = x.shape[-2:]
    fl = np.exp(-2j * np.pi * np.outer(np.arange(n), np.arange(n)) / n)
    fd = np.exp(-2j * np.pi * np.outer(np.arange(d), np.arange(d)) / d)
    return np.real(fl @ x.astype(np.float64) @ fd.T)


def test_matches_numpy_fft2_with_pads_zeroed():
    x, mask = inputs()
    got = np.asarray(make()(jnp.asarray(x), jnp.asarray(mask)))
    zeroed = np.where(mask[..., None], x, 0.0).astype(np.float64)
    want = np.real(np.fft.fft2(zeroed, axes=(-2, -1)))
    np.testing.assert_allclose(got, want, atol=2e-4, rtol=1e-4)
    # numpy's fft2 is the 2D DFT of the docstring (and not its inverse or a 1D transform)
    np.testing.assert_allclose(want, naive_dft2(zeroed), atol=1e-9)
    assert np.abs(np.real(np.fft.fft(zeroed, axis=-2)) - want).max() > 1.0
    # without the mask every value changes for sequence 1
    assert np.abs(np.asarray(make()(jnp.asarray(x))) - want)[1].max() > 1.0


def test_outputs_ignore_pad_contents_but_not_padded_length():
    x, mask = inputs(1)
    module = make()
    noise = 100.0 * np.random.default_rng(2).standard_normal(x.shape).astype(np.float32)
    y = np.asarray(module(jnp.asarray(x), jnp.asarray(mask)))
    x_noise = np.where(mask[..., None], x, noise)
    y_noise = np.asarray(module(jnp.asarray(x_noise), jnp.asarray(mask)))
    np.testing.assert_allclose(y[mask], y_noise[mask], atol=1e-4)
    # documented limitation: the same sequence padded to another length mixes differently
    n = L - 9
    short = np.asarray(module(jnp.asarray(x[1:, :n])))
    assert np.abs(short[0] - y[1, :n]).max() > 1e-2


def test_parameter_free_and_keeps_dtype():
    module = make()
    assert attention.family("fnet").has_parameters is False
    assert not jax.tree.leaves(nnx.state(module, nnx.Param))
    x, mask = inputs()
    y = module(jnp.asarray(x, jnp.bfloat16), jnp.asarray(mask))
    assert y.dtype == jnp.bfloat16
    ref = np.real(np.fft.fft2(np.where(mask[..., None], np.asarray(jnp.asarray(x, jnp.bfloat16),
                                                                   np.float32), 0.0)))
    np.testing.assert_allclose(np.asarray(y, np.float32), ref, atol=0.1 + 0.01 * np.abs(ref).max())
