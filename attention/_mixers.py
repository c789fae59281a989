"""Pieces shared by the 2023-25 sequence mixers (mamba, mamba2, gla, retnet, gated_deltanet, mlstm):
the masked short convolution, per-head normalisation, the Mamba step-size initialisation and the
two-direction runner. The chunked kernel itself is attention/_chunked.py.

Padding rules these pieces enforce (right padding, mask True = real): a short convolution sees zeros
at pads and its output is zeroed there again (its bias would make pad outputs non-zero; the recipe of
state-spaces/mamba#66); the reverse direction runs over each example reversed within its true length
(``both_directions``), so it meets the real tokens first and the pads last. (HGRN's two-direction
scheme on LRA, which these families follow, flips the whole padded sequence instead:
Doraemonzzz/hgru-pytorch@0d55662 hgru/hgru1d.py, lines 83-92.) What enters the state at
pads (write gate, step size, key or beta = 0; decay 1) is each family's own business, stated in its
docstring.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import jax
import jax.numpy as jnp
from flax import nnx
from lra.attention._chunked import flip_within_length, lengths_of


def real_mask(mask: jax.Array | None, x: jax.Array) -> jax.Array:
    """The contract's ``mask`` (bool[B, L] or None) as a concrete bool[B, L]."""
    if mask is None:
        return jnp.ones(x.shape[:2], bool)
    if mask.shape != x.shape[:2]:
        raise ValueError(f"mask shape {mask.shape} does not match x's [batch, length] {x.shape[:2]}")
    return mask.astype(bool)


def zero_pads(x: jax.Array, mask: jax.Array) -> jax.Array:
    """x float[B, L, ...] with every padded position set to 0."""
    return jnp.where(mask.reshape(mask.shape + (1,) * (x.ndim - 2)), x, jnp.zeros((), x.dtype))


def both_directions(core: Callable[..., jax.Array], arrays: tuple[jax.Array, ...], mask: jax.Array,
                    causal: bool) -> jax.Array:
    """``core(*arrays, mask)`` (causal in time), plus, unless ``causal``, the same core run on every
    array reversed within each example's true length and flipped back: summed directions with shared
    parameters, the scheme of HGRN on LRA (Qin et al., NeurIPS 2023, arXiv 2311.04823). The mask is
    flipped alike (a no-op for right padding, kept so that the pad rules are testable under a
    whole-sequence flip: tests/attention/test_mixers_padding.py)."""
    y = core(*arrays, mask)
    if causal:
        return y
    n = lengths_of(mask, mask.shape[0], mask.shape[1])
    back = core(*(flip_within_length(a, n) for a in arrays), flip_within_length(mask, n))
    return y + flip_within_length(back, n)


class ShortConv(nnx.Module):
    """Depthwise causal conv1d of width ``kernel_size`` with bias (PyTorch Conv1d's default init,
    U(+-1/sqrt(kernel_size))), zero at pads on its input and its output. float[B, L, C] -> float32."""

    def __init__(self, channels: int, kernel_size: int = 4, *, rngs: nnx.Rngs):
        bound = 1.0 / math.sqrt(kernel_size)
        self.kernel_size = kernel_size
        self.weight = nnx.Param(jax.random.uniform(rngs.params(), (kernel_size, channels),
                                                   jnp.float32, -bound, bound))
        self.bias = nnx.Param(jax.random.uniform(rngs.params(), (channels,), jnp.float32,
                                                 -bound, bound))

    def __call__(self, x: jax.Array, mask: jax.Array) -> jax.Array:
        length, width = x.shape[1], self.kernel_size
        x = zero_pads(x.astype(jnp.float32), mask)
        xp = jnp.pad(x, [(0, 0), (width - 1, 0), (0, 0)])
        w = self.weight[...]
        y = sum(xp[:, j:j + length] * w[j][None, None, :] for j in range(width))
        return zero_pads(y + self.bias[...][None, None, :], mask)


class HeadNorm(nnx.Module):
    """Normalisation within each head of o float[B, L, H, V] (float32): RMSNorm (``kind="rms"``, fla's
    ``g_norm``) or LayerNorm per head = GroupNorm with H groups (``kind="group"``, RetNet), with a
    per-channel scale (and bias for GroupNorm)."""

    def __init__(self, heads: int, width: int, *, kind: str = "rms", eps: float = 1e-5):
        if kind not in ("rms", "group"):
            raise ValueError(f"head norm kind must be 'rms' or 'group', got {kind!r}")
        self.kind, self.eps = kind, eps
        self.scale = nnx.Param(jnp.ones((heads, width), jnp.float32))
        self.bias = nnx.Param(jnp.zeros((heads, width), jnp.float32)) if kind == "group" else None

    def __call__(self, o: jax.Array) -> jax.Array:
        o = o.astype(jnp.float32)
        if self.kind == "group":
            o = o - jnp.mean(o, axis=-1, keepdims=True)
        o = o * jax.lax.rsqrt(jnp.mean(o * o, axis=-1, keepdims=True) + self.eps)
        o = o * self.scale[...][None, None]
        return o + self.bias[...][None, None] if self.bias is not None else o


def inverse_softplus(y: jax.Array) -> jax.Array:
    """x with softplus(x) = y (y > 0)."""
    return y + jnp.log(-jnp.expm1(-y))


def dt_bias_init(key: jax.Array, shape: tuple[int, ...], dt_min: float = 1e-3, dt_max: float = 0.1,
                 floor: float = 1e-4) -> jax.Array:
    """Mamba's step-size bias (Gu and Dao, arXiv 2312.00752, section 3.6; mamba_simple.py): dt drawn
    log-uniformly in [dt_min, dt_max], floored at ``floor``, stored as softplus^-1(dt), so that
    softplus(bias) is dt at initialisation."""
    if not 0 < dt_min <= dt_max:
        raise ValueError(f"need 0 < dt_min <= dt_max, got {dt_min}, {dt_max}")
    u = jax.random.uniform(key, shape, jnp.float32)
    dt = jnp.exp(u * (math.log(dt_max) - math.log(dt_min)) + math.log(dt_min))
    return inverse_softplus(jnp.maximum(dt, floor))


class Linear(nnx.Module):
    """``x @ W + b`` in float32 (gate and step-size pre-activations), W Xavier-uniform or given."""

    def __init__(self, d_in: int, d_out: int, *, rngs: nnx.Rngs, bias: jax.Array | None = None,
                 kernel: jax.Array | None = None):
        if kernel is None:
            kernel = nnx.initializers.xavier_uniform()(rngs.params(), (d_in, d_out), jnp.float32)
        self.kernel = nnx.Param(kernel)
        self.bias = nnx.Param(jnp.zeros((d_out,), jnp.float32) if bias is None else bias)

    def __call__(self, x: jax.Array) -> jax.Array:
        y = x.astype(jnp.float32) @ self.kernel[...]
        return y + self.bias[...].reshape((1,) * (y.ndim - 1) + (-1,))
