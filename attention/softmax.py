"""Softmax (vanilla) multi-head attention: Vaswani et al., "Attention Is All You Need", 2017.

Per head, with q, k, v in R^{L x d} and key mask m (1 = real)::

    A = softmax(q k^T / sqrt(d) + B),   B_ij = -1e30 where m_j = 0 (and where j > i if causal)
    out = A v

Masked logits are replaced by a finite large negative number, not -inf, so a query whose keys are
all masked gets a uniform (finite) distribution instead of NaN. Logits and the softmax are computed
in float32 whatever the input dtype; the weighted sum returns to the input dtype.

Cost: O(L^2 d) time and O(L^2) memory per head. No options.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx

from attention import register
from attention._projections import HeadProjections, dropout_probs, key_mask

MASKED_LOGIT = -1e30


def attention_bias_mask(mask: jax.Array | None, length_q: int, length_k: int, *,
                        causal: bool) -> jax.Array | None:
    """bool[B or 1, 1, Lq, Lk] of allowed (query, key) pairs, or None if all are allowed."""
    allowed = None
    if mask is not None:
        allowed = mask[:, None, None, :].astype(bool)
    if causal:
        tri = jnp.tril(jnp.ones((length_q, length_k), dtype=bool))[None, None]
        allowed = tri if allowed is None else allowed & tri
    return allowed


def softmax_kernel(q: jax.Array, k: jax.Array, v: jax.Array, mask: jax.Array | None = None, *,
                   causal: bool = False, dropout_rate: float = 0.0,
                   dropout_rng: jax.Array | None = None) -> jax.Array:
    """Masked softmax attention.

    q: float[B, Lq, H, Dh]; k, v: float[B, Lk, H, Dh]; mask: bool[B, Lk] over keys (True = real).
    Returns float[B, Lq, H, Dh] in q's dtype.
    """
    scale = 1.0 / jnp.sqrt(jnp.float32(q.shape[-1]))
    logits = jnp.einsum("bqhd,bkhd->bhqk", q, k, preferred_element_type=jnp.float32) * scale
    return attend(logits, v, mask, causal=causal, dropout_rate=dropout_rate, dropout_rng=dropout_rng)


def attend(logits: jax.Array, v: jax.Array, mask: jax.Array | None = None, *, causal: bool = False,
           dropout_rate: float = 0.0, dropout_rng: jax.Array | None = None) -> jax.Array:
    """Masked float32 softmax over keys of ``logits`` float[B or 1, H, Lq, Lk], then the weighted sum.

    v: float[B, Lk, H, Dh]; mask: bool[B, Lk] over keys. Returns float[B, Lq, H, Dh] in v's dtype.
    """
    allowed = attention_bias_mask(mask, logits.shape[-2], logits.shape[-1], causal=causal)
    logits = logits.astype(jnp.float32)
    if allowed is not None:
        logits = jnp.where(allowed, logits, MASKED_LOGIT)
    probs = jax.nn.softmax(logits, axis=-1)
    probs = dropout_probs(probs, dropout_rate, dropout_rng)
    return jnp.einsum("bhqk,bkhd->bqhd", probs.astype(v.dtype), v)


@register("softmax")
class SoftmaxAttention(nnx.Module):
    """Multi-head softmax attention (the vanilla Transformer of LRA)."""

    paper = "Vaswani et al., NeurIPS 2017"
    complexity = "O(L^2 d)"
    subquadratic = False

    def __init__(self, dim: int, num_heads: int, *, qkv_dim: int | None = None,
                 causal: bool = False, dropout: float = 0.0, rngs: nnx.Rngs):
        self.proj = HeadProjections(dim, num_heads, qkv_dim, rngs=rngs)
        self.causal = causal
        self.dropout = dropout
        self.rngs = rngs

    def __call__(self, x: jax.Array, mask: jax.Array | None = None, *,
                 deterministic: bool = True) -> jax.Array:
        q, k, v = self.proj.qkv(x)
        rng = None if deterministic or self.dropout == 0.0 else self.rngs.dropout()
        o = softmax_kernel(q, k, v, key_mask(mask, x), causal=self.causal,
                           dropout_rate=self.dropout, dropout_rng=rng)
        return self.proj.merge(o)
