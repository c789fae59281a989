"""Softmax (vanilla) multi-head attention: Vaswani et al., "Attention Is All You Need", 2017.

Per head, with q, k, v in R^{L x d} and key mask m (1 = real)::

    A = softmax(q k^T / sqrt(d) + B),   B_ij = -1e30 where m_j = 0 (and where j > i if causal)
    out = A v

Masked logits are replaced by a finite large negative number, not -inf, so a query whose keys are
all masked gets a uniform (finite) distribution instead of NaN. Logits and the softmax are computed
in float32 whatever the input dtype; the weighted sum returns to the input dtype.

Cost: O(L^2 d) time per head; memory O(L^2) dense, O(L block_size) blocked.

Implementations (option ``impl``, default ``"auto"``; all give the same result up to float rounding,
dropout masks aside):

* ``"dense"``: the [B, H, L, L] scores at once, LRA's form. O(L^2) memory.
* ``"blocked"``: the FlashAttention algorithm in JAX (attention/_flash.py): key blocks of
  ``block_size`` positions with a running max and sum, the backward recomputing each block under a
  custom VJP. O(L block_size) memory per head in both passes. It is what lets quadratic attention
  run at Path-X's 16,384 tokens at all.
* ``"cudnn"``: ``jax.nn.dot_product_attention(implementation="cudnn")`` (GPU only): fused kernel,
  padding passed as per-example key lengths, which assumes the real tokens of each row come first
  (LRA pads at the end); a mask that is not of that form turns the output into NaN, so it cannot go
  unnoticed. No attention dropout (the cuDNN call has none).
* ``"auto"``: ``select_impl``: on GPU cuDNN where dtype (bfloat16/float16), head size (a multiple of
  8, at most 128) and dropout (none) allow, else blocked; on CPU blocked from ``BLOCKED_MIN_LENGTH``
  keys up (measured on the 2-core CPU, fwd+bwd B=4 H=8 d=64: blocked 0.6x dense's time at 512,
  0.5-0.6x at 1K and 2K; at 256 equal within noise), dense below.

``query_chunk`` > 0 (kept for configs/pathx.py and the out-of-memory hint of lra/run.py) means
``impl="blocked"`` with blocks of that many keys: the memory bound the former query chunks gave.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx

from attention import register
from attention._flash import blocked_attention
from attention._projections import HeadProjections, dropout_probs, key_mask

MASKED_LOGIT = -1e30
IMPLS = ("auto", "dense", "blocked", "cudnn")
BLOCK_SIZE = 128          # keys per block of the blocked path (128-512 measured alike on this CPU)
BLOCKED_MIN_LENGTH = 512  # CPU: from this many keys up the blocked path is the faster one
CUDNN_DTYPES = (jnp.bfloat16, jnp.float16)


def select_impl(impl: str, *, platform: str, dtype, head_dim: int, length: int,
                dropout: bool) -> str:
    """The implementation ``impl`` resolves to ("dense", "blocked" or "cudnn").

    ``platform``: ``jax.default_backend()`` ("cpu", "gpu", "tpu"); a parameter so that the GPU rule
    can be tested on a CPU. ``dropout``: whether attention dropout is active in this call.
    """
    if impl not in IMPLS:
        raise ValueError(f"softmax: impl must be one of {', '.join(IMPLS)}, got {impl!r}")
    cudnn_ok = (platform == "gpu" and jnp.dtype(dtype) in CUDNN_DTYPES and head_dim % 8 == 0
                and head_dim <= 128 and not dropout)
    if impl == "cudnn" and not cudnn_ok:
        raise ValueError(f"softmax: impl='cudnn' needs a GPU, bfloat16/float16, head size a multiple "
                         f"of 8 up to 128 and no attention dropout; got platform={platform}, "
                         f"dtype={jnp.dtype(dtype).name}, head size {head_dim}, dropout={dropout}")
    if impl != "auto":
        return impl
    if platform == "gpu":
        return "cudnn" if cudnn_ok else "blocked"
    return "blocked" if length >= BLOCKED_MIN_LENGTH else "dense"


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
                   dropout_rng: jax.Array | None = None, query_chunk: int = 0, impl: str = "auto",
                   block_size: int = BLOCK_SIZE, platform: str | None = None) -> jax.Array:
    """Masked softmax attention.

    q: float[B, Lq, H, Dh]; k, v: float[B, Lk, H, Dh]; mask: bool[B, Lk] over keys (True = real).
    Returns float[B, Lq, H, Dh] in q's dtype. ``impl`` and ``query_chunk``: see the module
    docstring; ``platform`` defaults to ``jax.default_backend()``.
    """
    if query_chunk < 0:
        raise ValueError(f"softmax: query_chunk must be >= 0 (0 = off), got {query_chunk}")
    if query_chunk > 0:
        impl, block_size = "blocked", query_chunk
    dropout = dropout_rng is not None and dropout_rate > 0.0
    chosen = select_impl(impl, platform=platform or jax.default_backend(), dtype=q.dtype,
                         head_dim=q.shape[-1], length=k.shape[1], dropout=dropout)
    if chosen == "blocked":
        return blocked_attention(q, k, v, mask, causal=causal, block=block_size,
                                 dropout_rate=dropout_rate, dropout_rng=dropout_rng)
    if chosen == "cudnn":
        return _cudnn(q, k, v, mask, causal=causal)
    return _dense(q, k, v, mask, causal=causal, dropout_rate=dropout_rate, dropout_rng=dropout_rng)


def _cudnn(q, k, v, mask, *, causal):
    """``jax.nn.dot_product_attention`` on cuDNN, the mask as per-example key lengths."""
    if mask is None:
        return jax.nn.dot_product_attention(q, k, v, is_causal=causal, implementation="cudnn")
    lengths = mask.sum(-1, dtype=jnp.int32)
    out = jax.nn.dot_product_attention(q, k, v, key_value_seq_lengths=lengths, is_causal=causal,
                                       implementation="cudnn")
    # Lengths only describe masks whose real keys come first; poison any other mask's rows.
    prefix = jnp.all(mask == (jnp.arange(mask.shape[1])[None, :] < lengths[:, None]), axis=1)
    return jnp.where(prefix[:, None, None, None], out, jnp.nan).astype(q.dtype)


def _dense(q, k, v, mask, *, causal, dropout_rate, dropout_rng, query_offset=0):
    scale = 1.0 / jnp.sqrt(jnp.float32(q.shape[-1]))
    logits = jnp.einsum("bqhd,bkhd->bhqk", q, k, preferred_element_type=jnp.float32) * scale
    return attend(logits, v, mask, causal=causal, dropout_rate=dropout_rate, dropout_rng=dropout_rng,
                  query_offset=query_offset)


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

    display_name = "Transformer"
    kind = "2020 attention"
    paper = "Vaswani et al., NeurIPS 2017"
    complexity = "O(L^2 d)"
    subquadratic = False

    def __init__(self, dim: int, num_heads: int, *, qkv_dim: int | None = None,
                 causal: bool = False, dropout: float = 0.0, rngs: nnx.Rngs, query_chunk: int = 0,
                 impl: str = "auto", block_size: int = BLOCK_SIZE):
        if query_chunk < 0:
            raise ValueError(f"softmax: query_chunk must be >= 0 (0 = off), got {query_chunk}")
        if impl not in IMPLS:
            raise ValueError(f"softmax: impl must be one of {', '.join(IMPLS)}, got {impl!r}")
        if block_size < 1:
            raise ValueError(f"softmax: block_size must be >= 1, got {block_size}")
        self.proj = HeadProjections(dim, num_heads, qkv_dim, rngs=rngs)
        self.causal = causal
        self.dropout = dropout
        self.query_chunk = query_chunk
        self.impl = impl
        self.block_size = block_size
        self.rngs = rngs

    def __call__(self, x: jax.Array, mask: jax.Array | None = None, *,
                 deterministic: bool = True) -> jax.Array:
        q, k, v = self.proj.qkv(x)
        rng = None if deterministic or self.dropout == 0.0 else self.rngs.dropout()
        o = softmax_kernel(q, k, v, key_mask(mask, x), causal=self.causal,
                           dropout_rate=self.dropout, dropout_rng=rng, query_chunk=self.query_chunk,
                           impl=self.impl, block_size=self.block_size)
        return self.proj.merge(o)
