"""Synthesizer modes against their formulas, computed naively from the module's own parameters."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from helpers import length_mask

from lra import attention

B, L, D, H, MAX_LEN = 2, 13, 16, 2, 20  # L < max_len: the top-left block of R is used
DH = D // H


def make(mode, mix, causal=False, seed=0, **opts):
    return attention.build("synthesizer", dim=D, num_heads=H, qkv_dim=D, causal=causal,
                           max_len=MAX_LEN, rngs=nnx.Rngs(seed), mode=mode, mix_dot_product=mix,
                           k=3, **opts)


def padding_mask():
    return length_mask([L, L - 5], L)


def w(dense):
    return np.asarray(dense.kernel[...])


def naive_synthetic(module, x):
    """S[b, h, i, j] from the formulas of the paper, with explicit loops."""
    s = np.zeros((B, H, L, L))
    for b in range(B):
        for h in range(H):
            for i in range(L):
                if module.mode == "dense":
                    hidden = np.maximum(x[b, i] @ w(module.dense_in), 0)[h * DH:(h + 1) * DH]
                    row = hidden @ np.asarray(module.dense_out[...])[h]  # [max_len]
                elif module.mode == "random":
                    row = np.asarray(module.random[...])[h, i]
                else:
                    r1 = np.asarray(module.random_left[...])[h]
                    r2 = np.asarray(module.random_right[...])[h]
                    row = np.array([r1[i] @ r2[j] for j in range(MAX_LEN)])
                s[b, h, i] = row[:L]
    return s


def naive_synthesizer(module, x, mask, causal, synthetic):
    v = (x @ w(module.value)).reshape(B, L, H, DH)
    if module.query is not None:
        q = (x @ w(module.query)).reshape(B, L, H, DH)
        k = (x @ w(module.key)).reshape(B, L, H, DH)
    o = np.zeros((B, L, H, DH))
    for b in range(B):
        for h in range(H):
            for i in range(L):
                keys = [j for j in range(L) if mask[b, j] and (not causal or j <= i)]
                logits = np.array([synthetic[b, h, i, j]
                                   + (q[b, i, h] @ k[b, j, h] / math.sqrt(DH)
                                      if module.query is not None else 0.0) for j in keys])
                p = np.exp(logits - logits.max())
                o[b, i, h] = (p / p.sum()) @ v[b, keys, h]
    return o.reshape(B, L, D) @ w(module.out)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize(("mode", "mix"), [("dense", False), ("dense", True), ("random", False),
                                           ("random", True), ("factorized_random", False),
                                           ("factorized_random", True)])
def test_mode_matches_its_formula(mode, mix, causal):
    module = make(mode, mix, causal=causal)
    x = np.asarray(jax.random.normal(jax.random.key(1), (B, L, D)))
    mask = padding_mask()
    got = np.asarray(module(jnp.asarray(x), jnp.asarray(mask)))
    synthetic = naive_synthetic(module, x)
    want = naive_synthesizer(module, x, mask, causal, synthetic)
    np.testing.assert_allclose(got[mask], want[mask], atol=1e-5, rtol=1e-5)
    # The test can fail: the synthetic term matters, and it is the top-left block of R.
    assert np.abs(got - naive_synthesizer(module, x, mask, causal, 0 * synthetic))[mask].max() \
        > 1e-3
    if mode != "dense":
        if mode == "random":
            r = np.asarray(module.random[...])
        else:
            r = np.einsum("hik,hjk->hij", np.asarray(module.random_left[...]),
                          np.asarray(module.random_right[...]))
        shifted = np.broadcast_to(r[None, :, 1:L + 1, 1:L + 1], synthetic.shape)  # not top-left
        assert np.abs(got - naive_synthesizer(module, x, mask, causal, shifted))[mask].max() \
            > 1e-3


def test_default_is_lra_random_plus_dot_product():
    assert attention.options("synthesizer") == {"mode": "random", "mix_dot_product": True,
                                                "k": 32}
    module = attention.build("synthesizer", dim=D, num_heads=H, max_len=MAX_LEN,
                             rngs=nnx.Rngs(0))
    assert module.random.shape == (H, MAX_LEN, MAX_LEN) and module.query is not None
    assert make("random", False).query is None  # no unused q/k parameters


@pytest.mark.parametrize("mode", ["dense", "random", "factorized_random"])
def test_padding_is_safe_whatever_the_number_of_pads(mode):
    """Real outputs with 5 trailing noisy pads equal the outputs of the unpadded sequence."""
    module = make(mode, True)
    n = L - 5
    x = jax.random.normal(jax.random.key(2), (1, L, D))
    mask = jnp.arange(L)[None] < n
    noisy = jnp.where(mask[..., None], x, 50.0 * jax.random.normal(jax.random.key(3), x.shape))
    padded = np.asarray(module(noisy, mask))[0, :n]
    short = np.asarray(module(x[:, :n]))[0]
    np.testing.assert_allclose(padded, short, atol=1e-5, rtol=1e-5)


def test_max_len_and_mode_errors_are_clear():
    with pytest.raises(ValueError, match="needs max_len"):
        attention.build("synthesizer", dim=D, num_heads=H, rngs=nnx.Rngs(0))
    with pytest.raises(ValueError, match="mode must be one of"):
        make("dense+random", True)
    with pytest.raises(ValueError, match="max_len=20 got length 21"):
        make("random", True)(jnp.zeros((1, MAX_LEN + 1, D)))
