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

Options: ``block_size`` (50, LRA's default; LRA's image configs used 64).

Departure from the LRA code: LRA reshaped ``[B, L]`` to ``[B, block_size, L / block_size]`` and
attended over the ``block_size`` axis, so its "blocks" were the *strided* groups
{t : t mod (L / block_size) = const}, not contiguous runs, while its padding mask was reshaped the
other way (contiguously), so the mask did not line up with the groups: pads were hidden from the
wrong queries. We implement the contiguous blocks that the paper describes; LRA's Local-Attention
numbers (avg 46.06) come from the strided variant and should be read with that in mind.
"""

from __future__ import annotations

from typing import ClassVar

import jax
import jax.numpy as jnp
from flax import nnx

from attention import register
from attention._blocks import KeyGroup, attend, from_blocks, to_blocks
from attention._projections import HeadProjections, key_mask


def local_kernel(q: jax.Array, k: jax.Array, v: jax.Array, mask: jax.Array | None = None, *,
                 causal: bool = False, block_size: int = 50, dropout_rate: float = 0.0,
                 dropout_rng: jax.Array | None = None) -> jax.Array:
    """Softmax attention inside contiguous blocks of ``block_size``.

    q, k, v: float[B, L, H, Dh]; mask: bool[B, L] over keys (True = real).
    Returns float[B, L, H, Dh] in q's dtype.
    """
    if block_size < 1:
        raise ValueError(f"block_size must be >= 1, got {block_size}")
    length = q.shape[1]
    if mask is None:
        mask = jnp.ones(q.shape[:2], dtype=bool)
    qb, kb, vb = (to_blocks(a, block_size) for a in (q, k, v))
    allowed = to_blocks(mask, block_size)[:, None, :, None, :]  # [B, 1, N, 1, b]
    if causal:
        tri = jnp.tril(jnp.ones((block_size, block_size), dtype=bool))
        allowed = allowed & tri[None, None, None]
    out = attend(qb, [KeyGroup(kb, vb, allowed, "block")], dropout_rate=dropout_rate,
                 dropout_rng=dropout_rng)
    return from_blocks(out, length)


@register("local")
class LocalAttention(nnx.Module):
    """Multi-head softmax attention inside non-overlapping contiguous blocks."""

    paper = "Tay et al., ICLR 2021 (LRA baseline)"
    complexity = "O(L b d)"
    subquadratic = True
    contract_options: ClassVar[dict[str, int]] = {"block_size": 8}

    def __init__(self, dim: int, num_heads: int, *, qkv_dim: int | None = None,
                 causal: bool = False, dropout: float = 0.0, rngs: nnx.Rngs,
                 block_size: int = 50):
        if block_size < 1:
            raise ValueError(f"block_size must be >= 1, got {block_size}")
        self.proj = HeadProjections(dim, num_heads, qkv_dim, rngs=rngs)
        self.causal = causal
        self.dropout = dropout
        self.block_size = block_size
        self.rngs = rngs

    def __call__(self, x: jax.Array, mask: jax.Array | None = None, *,
                 deterministic: bool = True) -> jax.Array:
        q, k, v = self.proj.qkv(x)
        rng = None if deterministic or self.dropout == 0.0 else self.rngs.dropout()
        o = local_kernel(q, k, v, key_mask(mask, x), causal=self.causal,
                         block_size=self.block_size, dropout_rate=self.dropout, dropout_rng=rng)
        return self.proj.merge(o)
