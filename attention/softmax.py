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
* ``"auto"``: ``select_impl``. On GPU: cuDNN where dtype (bfloat16/float16), head size (a multiple
  of 8, at most 128) and dropout (none) allow; else dense where the scores fit the device's free
  memory (``dense_fits``: LRA trains with attention dropout 0.1, which cuDNN's call cannot do, and
  dense attention in XLA runs at matmul speed where the blocked loop does not); else blocked. On
  CPU blocked from ``BLOCKED_MIN_LENGTH`` keys up (measured on the 2-core CPU, fwd+bwd B=4 H=8
  d=64: blocked 0.6x dense's time at 512, 0.5-0.6x at 1K and 2K; at 256 equal within noise), dense
  below. The platform and the free memory come from attention/_platform.py; each GPU choice is
  recorded (``decisions()``) and printed once to stderr.

Dense attention on GPU keeps only the float32 probabilities for the backward pass (a custom VJP
that draws the dropout mask again from the same key), so a layer holds 4 bytes per score instead
of the logits, probabilities, mask and dropped probabilities (``dense_bytes``). Values and
gradients are the plain dense form's up to float rounding.

``query_chunk`` > 0 (kept for configs/pathx.py and the out-of-memory hint of lra/run.py) means
``impl="blocked"`` with blocks of that many keys: the memory bound the former query chunks gave.
"""

from __future__ import annotations

from typing import ClassVar

import jax
from flax import nnx
from lra.attention import register
from lra.attention._projections import HeadProjections, key_mask
from lra.attention._softmax import BLOCK_SIZE, IMPLS, decisions, softmax_kernel

__all__ = ["SoftmaxAttention", "decisions", "softmax_kernel"]


@register("softmax")
class SoftmaxAttention(nnx.Module):
    """Multi-head softmax attention (the vanilla Transformer of LRA)."""

    display_name = "Transformer"
    kind = "2020 attention"
    paper = "Vaswani et al., NeurIPS 2017"
    complexity = "O(L^2 d)"
    subquadratic = False
    recurrent_state = "2 * L * qkv_dim"
    """The KV cache: the keys and values of every position so far."""
    length_options = ("query_chunk", "block_size")
    peer_options: ClassVar[dict] = {}
    peer_kernel = "softmax"

    @staticmethod
    def peer_matmuls(B: int, H: int, L: int, D: int) -> list[tuple[str, int, tuple]]:
        """The logits and the weighted sum of values (lra/bench/peers.py ``family_matmuls``)."""
        return [("logits", 1, (B * H, L, D, L)), ("values", 1, (B * H, L, L, D))]

    @staticmethod
    def memory_levers(options: dict) -> list[str]:
        """What to try first when a run runs out of memory (lra/run.py): the blocked path."""
        chunk = int(options.get("query_chunk", 0))
        smaller = 512 if chunk == 0 or chunk > 512 else max(chunk // 4, 16)
        return [f"--set attn.query_chunk={smaller} (the blocked online-softmax path with blocks of "
                f"{smaller}: same result, memory linear in the length)"]

    def __init__(self, dim: int, num_heads: int, *, qkv_dim: int | None = None,
                 causal: bool = False, dropout: float = 0.0, rngs: nnx.Rngs, query_chunk: int = 0,
                 impl: str = "auto", block_size: int = BLOCK_SIZE, layers_held: int = 1):
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
        self.layers_held = layers_held  # the encoder's: what the GPU memory rule counts
        self.rngs = rngs

    def __call__(self, x: jax.Array, mask: jax.Array | None = None, *,
                 deterministic: bool = True) -> jax.Array:
        q, k, v = self.proj.qkv(x)
        rng = None if deterministic or self.dropout == 0.0 else self.rngs.dropout()
        o = softmax_kernel(q, k, v, key_mask(mask, x), causal=self.causal,
                           dropout_rate=self.dropout, dropout_rng=rng, query_chunk=self.query_chunk,
                           impl=self.impl, block_size=self.block_size, layers=self.layers_held)
        return self.proj.merge(o)
