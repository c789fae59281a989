"""RetNet: Sun, Dong, Huang, Ma, Xia, Xue, Wang and Wei, "Retentive Network: A Successor to Transformer
for Large Language Models", arXiv 2307.08621 (2023). Multi-scale retention.

Per head h, a fixed decay gamma_h = 1 - 2^(-5-h) (the same in every layer), state S in R^{K x V}::

    S_t = gamma_h S_{t-1} + k_t v_t^T,        o_t = S_t^T q_t        (q, k rotated by position)
    out = W_o (SiLU(x W_g) (.) GroupNorm_h(o))

computed by the chunked kernel with a scalar log-decay log gamma_h (attention/_chunked.py; the
paper's chunkwise form with cross-chunk decay gamma^C; chunk 64). q is scaled by K^-1/2. Positions
enter as rotary rotations of q and k, pair i turning by angle t base^(-2i/K) with base 10000, the
frequencies of fla-org/flash-linear-attention@bc3b101 (fla/modules/rotary.py ``_compute_inv_freq``,
lines 401-404; fla/layers/multiscale_retention.py builds it, line 169); xPos's extra length scaling
is left out. The pairing differs from fla's: ``rotary`` turns interleaved pairs (x_2i, x_2i+1), the
GPT-J form (fla's ``interleaved=True``; torchscale's ``rotate_every_two``), while fla's
``RotaryEmbedding`` defaults to ``interleaved=False`` (rotary.py line 343), pairing x_i with
x_{i+K/2}, the GPT-NeoX form. The two are the same rotation after one fixed permutation of the K
channels of q and k (ours 2i, 2i+1 = fla's i, i + K/2), and q . k is unchanged when both are
permuted alike, so the learned W_q, W_k absorb it: same model class, same outputs for permuted
weights. (RetNet's own code, microsoft/torchscale@4d1e0e8, pairs as ours but spaces its
frequencies as 10000^(-linspace(0, 1, K/2)): torchscale/architecture/retnet.py line 25.)
GroupNorm with H groups is a LayerNorm within each head (the paper: its scale invariance cancels
retention's normalisation factors); fla's layer and torchscale both normalise each head with an
RMSNorm instead (multiscale_retention.py lines 148-160; torchscale/component/
multiscale_retention.py line 66). Widths as fla: key ``expand_k`` x qkv_dim (1), value ``expand_v``
x qkv_dim (2) (multiscale_retention.py lines 74-75).

Bidirectional (``causal=False``): summed directions with shared parameters (attention/_mixers.py):
the kernel on (q, k, v) and on their reversal within each example's true length; rotations are
applied at the original positions first, so q_t . k_s keeps its dependence on t - s. This equals
LION-D's mask gamma^|t-s| with the diagonal counted twice (LION, Afzal et al., arXiv 2502.16249).
``causal=True``: the forward direction.

Padding: k = 0 and log gamma = 0 at pads.

``dropout`` is accepted and not used. Options: ``expand_k`` (1.0), ``expand_v`` (2.0), ``chunk_size``
(64).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx
from lra.attention import register
from lra.attention._chunked import chunked_decay_attention
from lra.attention._mixers import HeadNorm, both_directions, real_mask, zero_pads
from lra.attention._projections import Dense, head_dim


def retention_decays(num_heads: int) -> jax.Array:
    """float32[H]: gamma_h = 1 - 2^(-5-h), h = 0 .. H-1 (RetNet section 2.2)."""
    return 1.0 - 2.0 ** (-5.0 - jnp.arange(num_heads, dtype=jnp.float32))


def rotary(x: jax.Array, base: float = 10000.0) -> jax.Array:
    """x float32[B, L, H, K] (K even) rotated pairwise (x_2i, x_2i+1) by angle t base^(-2i/K).

    Interleaved pairs (GPT-J); fla's default pairs x_i with x_{i+K/2}: the module docstring says why
    the two are interchangeable here."""
    length, width = x.shape[1], x.shape[-1]
    freq = base ** (-jnp.arange(0, width, 2, dtype=jnp.float32) / width)       # [K/2]
    angle = jnp.arange(length, dtype=jnp.float32)[:, None] * freq[None, :]     # [L, K/2]
    cos, sin = jnp.cos(angle)[None, :, None, :], jnp.sin(angle)[None, :, None, :]
    x1, x2 = x[..., 0::2], x[..., 1::2]
    return jnp.stack([x1 * cos - x2 * sin, x1 * sin + x2 * cos], axis=-1).reshape(x.shape)


@register("retnet")
class RetNet(nnx.Module):
    """Multi-scale retention (fixed decay per head) by the chunked kernel."""

    display_name = "RetNet"
    kind = "2023-25 mixer"
    paper = "Sun et al., arXiv 2307.08621 (2023)"
    complexity = "O(L C d + L d^2 / H)"
    subquadratic = True
    recurrent_state = "int(qkv_dim * expand_k) * int(qkv_dim * expand_v) // heads"
    """Per head S (K x V), K = expand_k qkv_dim / H, V = expand_v qkv_dim / H; the position is a
    counter."""
    length_options = ("chunk_size",)
    attention_dropout = False  # the retention weights are never formed
    parameter_note = ("RetNet's value and gate widths are 2x qkv_dim (the paper's d_v = 2 d), so "
                      "W_v, W_g and W_o are twice softmax's")

    def __init__(self, dim: int, num_heads: int, *, qkv_dim: int | None = None,
                 causal: bool = False, dropout: float = 0.0, rngs: nnx.Rngs,
                 expand_k: float = 1.0, expand_v: float = 2.0, chunk_size: int = 64):
        del dropout
        qkv_dim = qkv_dim or dim
        key_dim, value_dim = int(qkv_dim * expand_k), int(qkv_dim * expand_v)
        self.k_head = head_dim(key_dim, num_heads)
        self.v_head = head_dim(value_dim, num_heads)
        if self.k_head % 2:
            raise ValueError(f"retnet: the key width per head must be even, got {self.k_head}")
        self.dim, self.heads, self.causal, self.chunk_size = dim, num_heads, causal, chunk_size
        self.q_proj = Dense(dim, key_dim, rngs=rngs)
        self.k_proj = Dense(dim, key_dim, rngs=rngs)
        self.v_proj = Dense(dim, value_dim, rngs=rngs)
        self.g_proj = Dense(dim, value_dim, rngs=rngs)
        self.norm = HeadNorm(num_heads, self.v_head, kind="group")
        self.o_proj = Dense(value_dim, dim, rngs=rngs)

    def features(self, x: jax.Array, mask: jax.Array):
        """q, k float32[B, L, H, K] (rotated; k = 0 at pads), v float32[B, L, H, V], log gamma [B, L, H]."""
        shape = (*x.shape[:2], self.heads)
        q = rotary(self.q_proj(x).reshape(*shape, self.k_head).astype(jnp.float32))
        k = rotary(self.k_proj(x).reshape(*shape, self.k_head).astype(jnp.float32))
        v = self.v_proj(x).reshape(*shape, self.v_head).astype(jnp.float32)
        log_g = jnp.broadcast_to(jnp.log(retention_decays(self.heads))[None, None, :], shape)
        return q * (self.k_head ** -0.5), zero_pads(k, mask), v, zero_pads(log_g, mask)

    def _direction(self, q, k, v, log_g, mask):
        return chunked_decay_attention(q, k, v, log_g, chunk_size=self.chunk_size)

    def __call__(self, x: jax.Array, mask: jax.Array | None = None, *,
                 deterministic: bool = True) -> jax.Array:
        if x.shape[-1] != self.dim:
            raise ValueError(f"retnet: input width {x.shape[-1]} != dim={self.dim}")
        mask = real_mask(mask, x)
        o = self.norm(both_directions(self._direction, self.features(x, mask), mask, self.causal))
        o = o.reshape(*o.shape[:2], -1) * jax.nn.silu(self.g_proj(x).astype(jnp.float32))
        return self.o_proj(o.astype(x.dtype))
