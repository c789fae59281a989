"""Softmax (vanilla) multi-head attention: Vaswani et al., "Attention Is All You Need", 2017.

Per head, with q, k, v in R^{L x d} and key mask m (1 = real)::

    A = softmax(q k^T / sqrt(d) + B),   B_ij = -1e30 where m_j = 0 (and where j > i if causal)
    out = A v

Masked logits are replaced by a finite large negative number, not -inf, so a query whose keys are
all masked gets a uniform (finite) distribution instead of NaN. Logits and the softmax are computed
in float32 whatever the input dtype; the weighted sum returns to the input dtype.

Cost: O(L^2 d) time and O(L^2) memory per head.

Option ``query_chunk`` (default 0 = off, LRA's dense attention): compute the output for blocks of
that many queries at a time under ``jax.checkpoint``, so neither the forward nor the backward pass
holds more than one block's [chunk, L] scores. Same result (up to float rounding; dropout masks are
drawn per block), O(L^2 d) time, O(chunk L) memory per head. It is what lets quadratic attention
run at Path-X's 16,384 tokens at all (configs/pathx.py turns it on); the benchmark times the dense
form, as LRA did.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx

from attention import register
from attention._projections import HeadProjections, dropout_probs, key_mask

MASKED_LOGIT = -1e30


def attention_bias_mask(mask: jax.Array | None, length_q: int, length_k: int, *,
                        causal: bool, query_offset: jax.Array | int = 0) -> jax.Array | None:
    """bool[B or 1, 1, Lq, Lk] of allowed (query, key) pairs, or None if all are allowed.

    Query i sits at position ``query_offset + i`` (for a block of queries) in the causal mask."""
    allowed = None
    if mask is not None:
        allowed = mask[:, None, None, :].astype(bool)
    if causal:
        rows = jnp.arange(length_q)[:, None] + query_offset
        tri = (jnp.arange(length_k)[None, :] <= rows)[None, None]
        allowed = tri if allowed is None else allowed & tri
    return allowed


def softmax_kernel(q: jax.Array, k: jax.Array, v: jax.Array, mask: jax.Array | None = None, *,
                   causal: bool = False, dropout_rate: float = 0.0,
                   dropout_rng: jax.Array | None = None, query_chunk: int = 0) -> jax.Array:
    """Masked softmax attention.

    q: float[B, Lq, H, Dh]; k, v: float[B, Lk, H, Dh]; mask: bool[B, Lk] over keys (True = real).
    Returns float[B, Lq, H, Dh] in q's dtype. ``query_chunk`` > 0: blocks of that many queries, each
    recomputed in the backward pass (see the module docstring).
    """
    if 0 < query_chunk < q.shape[1]:
        return _chunked(q, k, v, mask, causal=causal, dropout_rate=dropout_rate,
                        dropout_rng=dropout_rng, chunk=query_chunk)
    return _dense(q, k, v, mask, causal=causal, dropout_rate=dropout_rate, dropout_rng=dropout_rng)


def _dense(q, k, v, mask, *, causal, dropout_rate, dropout_rng, query_offset=0):
    scale = 1.0 / jnp.sqrt(jnp.float32(q.shape[-1]))
    logits = jnp.einsum("bqhd,bkhd->bhqk", q, k, preferred_element_type=jnp.float32) * scale
    return attend(logits, v, mask, causal=causal, dropout_rate=dropout_rate, dropout_rng=dropout_rng,
                  query_offset=query_offset)


def _chunked(q, k, v, mask, *, causal, dropout_rate, dropout_rng, chunk):
    """``_dense`` over blocks of ``chunk`` queries (the last block zero-padded, then cut off)."""
    b, length, h, d = q.shape
    blocks = -(-length // chunk)
    padded = jnp.pad(q, ((0, 0), (0, blocks * chunk - length), (0, 0), (0, 0)))
    q_blocks = padded.reshape(b, blocks, chunk, h, d).swapaxes(0, 1)  # [blocks, B, chunk, H, Dh]

    @jax.checkpoint
    def block(q_block, index):
        rng = None if dropout_rng is None else jax.random.fold_in(dropout_rng, index)
        return _dense(q_block, k, v, mask, causal=causal, dropout_rate=dropout_rate,
                      dropout_rng=rng, query_offset=index * chunk)

    out = jax.lax.map(lambda args: block(*args), (q_blocks, jnp.arange(blocks)))
    return out.swapaxes(0, 1).reshape(b, blocks * chunk, h, d)[:, :length]


def attend(logits: jax.Array, v: jax.Array, mask: jax.Array | None = None, *, causal: bool = False,
           dropout_rate: float = 0.0, dropout_rng: jax.Array | None = None,
           query_offset: jax.Array | int = 0) -> jax.Array:
    """Masked float32 softmax over keys of ``logits`` float[B or 1, H, Lq, Lk], then the weighted sum.

    v: float[B, Lk, H, Dh]; mask: bool[B, Lk] over keys. ``query_offset``: the position of the first
    query (for the causal mask of a block of queries). Returns float[B, Lq, H, Dh] in v's dtype.
    """
    allowed = attention_bias_mask(mask, logits.shape[-2], logits.shape[-1], causal=causal,
                                  query_offset=query_offset)
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
                 causal: bool = False, dropout: float = 0.0, rngs: nnx.Rngs, query_chunk: int = 0):
        if query_chunk < 0:
            raise ValueError(f"softmax: query_chunk must be >= 0 (0 = dense), got {query_chunk}")
        self.proj = HeadProjections(dim, num_heads, qkv_dim, rngs=rngs)
        self.causal = causal
        self.dropout = dropout
        self.query_chunk = query_chunk
        self.rngs = rngs

    def __call__(self, x: jax.Array, mask: jax.Array | None = None, *,
                 deterministic: bool = True) -> jax.Array:
        q, k, v = self.proj.qkv(x)
        rng = None if deterministic or self.dropout == 0.0 else self.rngs.dropout()
        o = softmax_kernel(q, k, v, key_mask(mask, x), causal=self.causal,
                           dropout_rate=self.dropout, dropout_rng=rng, query_chunk=self.query_chunk)
        return self.proj.merge(o)
