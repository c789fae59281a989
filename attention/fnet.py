"""FNet: Lee-Thorp et al., "FNet: Mixing Tokens with Fourier Transforms", NAACL 2022
(arXiv 2105.03824).

The attention sublayer is replaced by a parameter-free 2D discrete Fourier transform, keeping the
real part::

    Y = Re(DFT_seq(DFT_hidden(X)))
    Y_tc = Re sum_{s,e} X_se exp(-2 pi i (t s / L + c e / D))

with L the (padded) sequence length and D the model width. Cost O(L D log(L D)); no parameters
(``has_parameters = False``, read by the contract test), no causal mode. ``qkv_dim``, ``num_heads``
and ``dropout`` are accepted for the shared signature and ignored (the paper's Fourier sublayer has
no heads and no dropout of its own).

Padding: padded positions are zeroed before the transform, so outputs at real positions do not
depend on pad *contents*. They still depend on the padded *length* L: the DFT frequencies are
t s / L, so the same sequence padded to a different length mixes differently (unlike every
attention family here). A fixed padded length per task, as LRA uses, keeps this consistent between
training and evaluation. The paper does not mask pads at all.

The FFT runs in float32 (complex64) whatever the input dtype, and the result is cast back to the
input dtype. The paper's TPU code replaces the FFT by DFT matrix multiplications for short
sequences; that is a speed choice with the same result.
"""

from __future__ import annotations

from typing import ClassVar

import jax
import jax.numpy as jnp
from flax import nnx
from lra.attention import register
from lra.attention._projections import key_mask


def fnet_mix(x: jax.Array, mask: jax.Array | None = None) -> jax.Array:
    """Re(FFT over sequence and hidden axes). x: float[B, L, D]; mask: bool[B, L]. Like x."""
    xf = x.astype(jnp.float32)
    if mask is not None:
        xf = jnp.where(mask[..., None], xf, 0.0)
    return jnp.fft.fft2(xf, axes=(-2, -1)).real.astype(x.dtype)


@register("fnet")
class FNetMixing(nnx.Module):
    """FNet's Fourier token mixing in the place of attention (no parameters)."""

    display_name = "FNet"
    kind = "2020 attention"
    paper = "Lee-Thorp et al., NAACL 2022"
    complexity = "O(L d log(L d))"
    subquadratic = True
    recurrent_state = "L * dim"
    """No causal form and no summary: every output mixes the whole input (L x D)."""
    peer_options: ClassVar[dict] = {}
    attention_dropout = False  # a Fourier transform has no attention weights to drop
    parameter_note = "the Fourier mixing has no parameters (no q, k, v or output projection)"
    has_parameters = False

    def __init__(self, dim: int, num_heads: int, *, qkv_dim: int | None = None,
                 dropout: float = 0.0, rngs: nnx.Rngs):
        del num_heads, qkv_dim, dropout, rngs
        self.dim = dim

    def __call__(self, x: jax.Array, mask: jax.Array | None = None, *,
                 deterministic: bool = True) -> jax.Array:
        if x.shape[-1] != self.dim:
            raise ValueError(f"fnet: input width {x.shape[-1]} != dim={self.dim}")
        return fnet_mix(x, key_mask(mask, x))
