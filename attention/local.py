"""Local (block) attention: softmax attention inside non-overlapping contiguous blocks.

The baseline "Local Attention" of the Long-Range Arena (Tay et al., ICLR 2021, arXiv 2011.04006);
the idea goes back to blockwise/local self-attention (e.g. Parmar et al., "Image Transformer",
ICML 2018, arXiv 1802.05751).

The sequence is cut into contiguous blocks of ``b = block_size`` positions; query i attends only to
keys j in its own block::

    allowed(i, j) = floor(i / b) == floor(j / b)  and  m_j   (and j <= i if causal)
    out_i = softmax_j(q_i . k_j / sqrt(d) over allowed j) v_j

Computed block-wise: queries, keys and values are reshaped to ``[B, L/b, b, H, d]`` and each block
runs full softmax attention (float32 logits and softmax), so memory is O(L b) per head and time
O(L b d). A length that is not a multiple of b is padded internally; the pads are masked keys.
Causal mode is lower-triangular inside each block.

``global_tokens`` = G leading positions are global (``attention/_blocks.with_global_tokens``): they
attend to every key and every position attends to them; the blocks are laid over positions G, G+1,
... With CLS pooling the encoder puts CLS at position 0, and ``lra.config`` sets ``global_tokens=1``
whenever a family has this option and the model pools by CLS: without it, CLS would only ever see
the first block (positions 0..b-1) in every layer, and the task would be classified from its first
b - 1 tokens.

Options: ``block_size`` (50, LRA's default; LRA's image configs used 64), ``global_tokens`` (0).

Departure from the LRA code: LRA reshaped ``[B, L]`` to ``[B, block_size, L / block_size]`` and
attended over the ``block_size`` axis, so its "blocks" were the *strided* groups
{t : t mod (L / block_size) = const}, not contiguous runs, while its padding mask was reshaped the
other way (contiguously), so the mask did not line up with the groups: pads were hidden from the
wrong queries. We implement the contiguous blocks that the paper describes; LRA's Local-Attention
numbers (avg 46.06) come from the strided variant and should be read with that in mind. With
strided groups and no global token, LRA's CLS saw every (L / b)-th token; our global CLS token sees
every token (a departure in the model's favour on CLS-pooled tasks; README "Comparability").
"""

from __future__ import annotations

from typing import ClassVar

import jax
import jax.numpy as jnp
from flax import nnx

from attention import register
from attention._blocks import KeyGroup, attend, from_blocks, to_blocks, with_global_tokens
from attention._projections import HeadProjections, key_mask


def local_kernel(q: jax.Array, k: jax.Array, v: jax.Array, mask: jax.Array | None = None, *,
                 causal: bool = False, block_size: int = 50, global_tokens: int = 0,
                 dropout_rate: float = 0.0, dropout_rng: jax.Array | None = None) -> jax.Array:
    """Softmax attention inside contiguous blocks of ``block_size``, after ``global_tokens``
    leading global positions.

    q, k, v: float[B, L, H, Dh]; mask: bool[B, L] over keys (True = real).
    Returns float[B, L, H, Dh] in q's dtype.
    """
    _check(block_size, global_tokens)
    if mask is None:
        mask = jnp.ones(q.shape[:2], dtype=bool)

    def structured(q, k, v, mask, extra, rng):
        qb, kb, vb = (to_blocks(a, block_size) for a in (q, k, v))
        allowed = to_blocks(mask, block_size)[:, None, :, None, :]  # [B, 1, N, 1, b]
        if causal:
            tri = jnp.tril(jnp.ones((block_size, block_size), dtype=bool))
            allowed = allowed & tri[None, None, None]
        out = attend(qb, [KeyGroup(kb, vb, allowed, "block"), *extra], dropout_rate=dropout_rate,
                     dropout_rng=rng)
        return from_blocks(out, q.shape[1])

    return with_global_tokens(structured, q, k, v, mask, global_tokens=global_tokens,
                              causal=causal, dropout_rate=dropout_rate, dropout_rng=dropout_rng)


def _check(block_size: int, global_tokens: int) -> None:
    if block_size < 1:
        raise ValueError(f"block_size must be >= 1, got {block_size}")
    if global_tokens < 0:
        raise ValueError(f"global_tokens must be >= 0, got {global_tokens}")


@register("local")
class LocalAttention(nnx.Module):
    """Multi-head softmax attention inside non-overlapping contiguous blocks."""

    paper = "Tay et al., ICLR 2021 (LRA baseline)"
    complexity = "O(L b d)"
    subquadratic = True
    contract_options: ClassVar[dict[str, int]] = {"block_size": 8}

    def __init__(self, dim: int, num_heads: int, *, qkv_dim: int | None = None,
                 causal: bool = False, dropout: float = 0.0, rngs: nnx.Rngs,
                 block_size: int = 50, global_tokens: int = 0):
        _check(block_size, global_tokens)
        self.proj = HeadProjections(dim, num_heads, qkv_dim, rngs=rngs)
        self.causal = causal
        self.dropout = dropout
        self.block_size = block_size
        self.global_tokens = global_tokens
        self.rngs = rngs

    def __call__(self, x: jax.Array, mask: jax.Array | None = None, *,
                 deterministic: bool = True) -> jax.Array:
        q, k, v = self.proj.qkv(x)
        rng = None if deterministic or self.dropout == 0.0 else self.rngs.dropout()
        o = local_kernel(q, k, v, key_mask(mask, x), causal=self.causal,
                         block_size=self.block_size, global_tokens=self.global_tokens,
                         dropout_rate=self.dropout, dropout_rng=rng)
        return self.proj.merge(o)
