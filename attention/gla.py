"""Gated linear attention (GLA): Yang, Wang, Shen, Panda and Kim, "Gated Linear Attention Transformers
with Hardware-Efficient Training", ICML 2024 (arXiv 2312.06635); with ``variant="hgrn2"``, HGRN2: Qin,
Yang, Sun, Shen, Li, Sun and Zhong, "HGRN2: Gated Linear RNNs with State Expansion", COLM 2024 (arXiv
2404.07904).

Both are linear attention with a data-dependent decay vector over the key channels (per head,
state S in R^{K x V})::

    S_t = diag(alpha_t) S_{t-1} + k_t v_t^T,        o_t = S_t^T q_t

computed by the chunked kernel with vector log-decays (attention/_chunked.py; chunk 16).

``variant="gla"`` (the GLA paper; layer defaults of fla-org/flash-linear-attention@bc3b101
fla/layers/gla.py): q, k = x W_q, x W_k (key width ``expand_k`` * qkv_dim, default 1/2), v = x W_v
(qkv_dim), scale K^-1/2; the gate is low rank,
alpha_t = exp(logsigmoid(x W_1 W_2 + b) / 16) (rank 16, normaliser 16: decays start near 1);
out = W_o (RMSNorm_head(o) (.) SiLU(x W_g)).

``variant="hgrn2"`` (the HGRN2 paper; fla fla/layers/hgrn2.py): the forget gate f plays the decay and
its complement the key, the output gate the query, no separate key or value projection::

    f_t = lb + (1 - lb) sigmoid(x W_f)   (log f by logaddexp; lb = ``lower_bound``)
    q_t = SiLU(x W_q),  k_t = 1 - f_t,  v_t = x W_i,  out = W_o RMSNorm_head(o)

with K = V = qkv_dim / H (the state expansion). The RMSNorm is per head, as in the gla variant; fla's
HGRN2 layer normalises o with one RMSNorm over its whole width (fla/layers/hgrn2.py, ``g_norm``,
line 100, applied at line 211). HGRN's lower bound is layer-wise and learned (a
cumulative softmax over the depth, zero in the first layer); the mixer contract does not tell a layer
its depth, so here ``lower_bound`` is one fixed value for every layer (default 0: the first layer's).

Bidirectional (``causal=False``): summed directions with shared parameters, as HGRN/HGRN2 ran LRA
(Doraemonzzz/hgru-pytorch@0d55662 hgru1d.py, lines 69-73; attention/_mixers.py): the kernel on (q, k,
v, log alpha) and on their reversal within each example's true length. HGRN's reverse scan flips the
whole padded sequence instead (hgru1d.py lines 83-92), so there the pads enter its state first.
(HGRN2's published image-task rows scan the pixel grid in 2-D, four directions; this is the 1-D
form.) ``causal=True``: the forward direction.

Padding: k = 0 and log alpha = 0 (decay 1) at pads: nothing enters the state.

``dropout`` is accepted for the shared signature and not used (no attention weights). Options:
``variant`` ("gla" or "hgrn2"), ``expand_k`` (0.5, gla), ``gate_rank`` (16, gla),
``gate_normalizer`` (16, gla), ``lower_bound`` (0.0, hgrn2), ``chunk_size`` (16).
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
from flax import nnx
from lra.attention import register
from lra.attention._chunked import chunked_decay_attention
from lra.attention._mixers import HeadNorm, Linear, both_directions, real_mask, zero_pads
from lra.attention._projections import Dense, head_dim

VARIANTS = ("gla", "hgrn2")


@register("gla")
class GLA(nnx.Module):
    """Gated linear attention (vector decay over the key dimension); HGRN2 as ``variant="hgrn2"``."""

    display_name = "GLA"
    kind = "2023-25 mixer"
    paper = "Yang et al., ICML 2024; HGRN2: Qin et al., COLM 2024"
    complexity = "O(L C d + L d^2 / H)"
    subquadratic = True
    recurrent_state = "(int(qkv_dim * expand_k) if variant == 'gla' else qkv_dim) * qkv_dim // heads"
    """Per head S (K x V): K = expand_k qkv_dim / H (gla) or qkv_dim / H (hgrn2), V = qkv_dim / H."""
    length_options = ("chunk_size",)
    attention_dropout = False  # the attention weights are never formed

    def __init__(self, dim: int, num_heads: int, *, qkv_dim: int | None = None,
                 causal: bool = False, dropout: float = 0.0, rngs: nnx.Rngs,
                 variant: str = "gla", expand_k: float = 0.5, gate_rank: int = 16,
                 gate_normalizer: float = 16.0, lower_bound: float = 0.0, chunk_size: int = 16):
        del dropout
        if variant not in VARIANTS:
            raise ValueError(f"gla: variant must be one of {', '.join(VARIANTS)}, got {variant!r}")
        if not 0.0 <= lower_bound < 1.0:
            raise ValueError(f"gla: lower_bound must be in [0, 1), got {lower_bound}")
        qkv_dim = qkv_dim or dim
        self.dim, self.heads, self.variant, self.causal = dim, num_heads, variant, causal
        self.chunk_size, self.gate_normalizer, self.lower_bound = chunk_size, gate_normalizer, lower_bound
        if variant == "gla":
            key_dim = int(qkv_dim * expand_k)
            self.k_head = head_dim(key_dim, num_heads)
            self.v_head = head_dim(qkv_dim, num_heads)
            self.q_proj = Dense(dim, key_dim, rngs=rngs)
            self.k_proj = Dense(dim, key_dim, rngs=rngs)
            self.v_proj = Dense(dim, qkv_dim, rngs=rngs)
            self.g_proj = Dense(dim, qkv_dim, rngs=rngs)
            self.gate_down = Dense(dim, gate_rank, rngs=rngs)
            self.gate_up = Linear(gate_rank, key_dim, rngs=rngs)
        else:
            self.k_head = self.v_head = head_dim(qkv_dim, num_heads)
            self.q_proj = Dense(dim, qkv_dim, rngs=rngs)
            self.f_proj = Dense(dim, qkv_dim, rngs=rngs)
            self.i_proj = Dense(dim, qkv_dim, rngs=rngs)
        self.norm = HeadNorm(num_heads, self.v_head, kind="rms")
        self.o_proj = Dense(qkv_dim, dim, rngs=rngs)

    def _heads(self, y: jax.Array, width: int) -> jax.Array:
        return y.reshape(*y.shape[:2], self.heads, width).astype(jnp.float32)

    def features(self, x: jax.Array, mask: jax.Array):
        """q, k float32[B, L, H, K], v float32[B, L, H, V], log alpha float32[B, L, H, K] (pads: k = 0,
        log alpha = 0)."""
        kh, vh = self.k_head, self.v_head
        if self.variant == "gla":
            q = self._heads(self.q_proj(x), kh) * (kh ** -0.5)
            k = self._heads(self.k_proj(x), kh)
            v = self._heads(self.v_proj(x), vh)
            log_a = jax.nn.log_sigmoid(self.gate_up(self.gate_down(x))) / self.gate_normalizer
            log_a = self._heads(log_a, kh)
        else:
            q = jax.nn.silu(self._heads(self.q_proj(x), kh))
            log_a = jax.nn.log_sigmoid(self._heads(self.f_proj(x), kh))
            if self.lower_bound > 0:
                lb = self.lower_bound
                log_a = jnp.logaddexp(math.log(lb), math.log1p(-lb) + log_a)
            k = -jnp.expm1(log_a)
            v = self._heads(self.i_proj(x), vh)
        return q, zero_pads(k, mask), v, zero_pads(log_a, mask)

    def _direction(self, q, k, v, log_a, mask):
        return chunked_decay_attention(q, k, v, log_a, chunk_size=self.chunk_size)

    def __call__(self, x: jax.Array, mask: jax.Array | None = None, *,
                 deterministic: bool = True) -> jax.Array:
        if x.shape[-1] != self.dim:
            raise ValueError(f"gla: input width {x.shape[-1]} != dim={self.dim}")
        mask = real_mask(mask, x)
        o = both_directions(self._direction, self.features(x, mask), mask, self.causal)
        o = self.norm(o)
        o = o.reshape(*o.shape[:2], -1)
        if self.variant == "gla":
            o = o * jax.nn.silu(self.g_proj(x).astype(jnp.float32))
        return self.o_proj(o.astype(x.dtype))
