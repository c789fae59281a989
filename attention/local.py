"""Local (block) attention: softmax attention inside non-overlapping contiguous blocks.

The baseline "Local Attention" of the Long-Range Arena (Tay et al., ICLR 2021, arXiv 2011.04006);
the idea goes back to blockwise/local self-attention (e.g. Parmar et al., "Image Transformer",
ICML 2018, arXiv 1802.05751).

The sequence is cut into contiguous blocks of ``b = block_size`` positions; query i attends only to
keys j in its own block::

    allowed(i, j) = floor(i / b) == floor(j / b)  and  m_j   (and j <= i if causal)
    out_i = softmax_j(q_i . k_j / sqrt(d) over allowed j) v_j

Computed block-wise: queries, keys and values are reshaped to ``[B, H, L/b, b, d]`` and each block
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
every token (a departure in the model's favour on CLS-pooled tasks; docs/families-and-protocols.md
"Comparability with LRA's Table 1").

LRA also always appended ``block_size - L % block_size`` positions of zeros (a whole block when L is
a multiple of b) and padded their mask with -1e9 (``local_attention.py`` lines 228-237); the mask
is then used as a float, so those positions count as real keys: queries attend to zero keys and
values that are not in the input. Ours masks every pad it adds.
"""

from __future__ import annotations

from typing import ClassVar

import jax
import jax.numpy as jnp
from flax import nnx
from lra.attention import register
from lra.attention._blocks import (
    MASKED_LOGIT,
    from_head_blocks,
    head_groups,
    to_blocks,
    to_head_blocks,
    with_global_tokens,
)
from lra.attention._projections import HeadProjections, key_mask


def local_kernel(q: jax.Array, k: jax.Array, v: jax.Array, mask: jax.Array | None = None, *,
                 causal: bool = False, block_size: int = 50, global_tokens: int = 0,
                 dropout_rate: float = 0.0, dropout_rng: jax.Array | None = None,
                 groups: int | None = None) -> jax.Array:
    """Softmax attention inside contiguous blocks of ``block_size``, after ``global_tokens``
    leading global positions.

    q, k, v: float[B, L, H, Dh]; mask: bool[B, L] over keys (True = real).
    Returns float[B, L, H, Dh] in q's dtype. ``groups``: the heads are computed in this many
    independent groups (``attention._blocks.head_groups``, the default); the values do not
    depend on it.

    Heads first ([B, H, N, b, Dh], attention/_blocks.py), so that both products are batched
    matmuls with leading batch dimensions; q is scaled by 1/sqrt(Dh) before the product, and the
    softmax is normalised after the value product (b values per query instead of b weights). The
    global columns, when there are any, stay a separate [b, G] tile of logits sharing the block's
    max and sum instead of being copied into every block's keys. Measured fwd+bwd of the kernel
    (B=4, H=8, Dh=64, block 128, one process, XLA:CPU YNN fusions on, median of 7) at 1K / 2K /
    4K: 75.6 / 176.0 / 431.3 ms in the [B, N, b, H, Dh] layout of ``attention._blocks.attend``,
    51 / 124 / 239 ms heads first in two head groups.
    """
    _check(block_size, global_tokens)
    if mask is None:
        mask = jnp.ones(q.shape[:2], dtype=bool)
    groups = head_groups(q.shape[2]) if groups is None else groups
    if groups < 1 or q.shape[2] % groups:
        raise ValueError(f"local_kernel: groups={groups} must divide the {q.shape[2]} heads")

    def structured(q, k, v, mask, extra, rng):
        scale = (1.0 / jnp.sqrt(jnp.float32(q.shape[-1]))).astype(q.dtype)
        qb = to_head_blocks(q, block_size) * scale
        kb, vb = to_head_blocks(k, block_size), to_head_blocks(v, block_size)
        allowed = to_blocks(mask, block_size)[:, None, :, None, :]  # [B, 1, N, 1, b]
        if causal:
            tri = jnp.tril(jnp.ones((block_size, block_size), dtype=bool))
            allowed = allowed & tri[None, None, None]
        # the global columns ([B, G, H, Dh], kind "shared"), heads first: [B, H, G, Dh]
        shared = [(g.k.transpose(0, 2, 1, 3), g.v.transpose(0, 2, 1, 3), g.allowed)
                  for g in extra]
        keeps = None
        if rng is not None and dropout_rate > 0.0:  # drawn for all heads: independent of groups
            shapes = [(*qb.shape[:4], block_size)] + [(*qb.shape[:4], kg.shape[2])
                                                      for kg, _, _ in shared]
            keeps = [jax.random.bernoulli(r, 1.0 - dropout_rate, shape)
                     for r, shape in zip(jax.random.split(rng, len(shapes)), shapes)]
        per = q.shape[2] // groups
        outs = []
        for i in range(groups):
            h = slice(i * per, (i + 1) * per)
            tiles = [(qb[:, h], kb[:, h], vb[:, h], allowed, "bhnqd,bhnkd->bhnqk",
                      "bhnqk,bhnkd->bhnqd")]
            tiles += [(qb[:, h], kg[:, h], vg[:, h], a, "bhnqd,bhkd->bhnqk", "bhnqk,bhkd->bhnqd")
                      for kg, vg, a in shared]
            outs.append(_attend_tiles(tiles, None if keeps is None else [m[:, h] for m in keeps],
                                      dropout_rate))
        out = outs[0] if groups == 1 else jnp.concatenate(outs, axis=1)
        return from_head_blocks(out, q.shape[1]).astype(q.dtype)

    return with_global_tokens(structured, q, k, v, mask, global_tokens=global_tokens,
                              causal=causal, dropout_rate=dropout_rate, dropout_rng=dropout_rng)


def _attend_tiles(tiles, keeps, rate: float) -> jax.Array:
    """One softmax over several tiles of logits, without joining them.

    tiles: (q, k, v, allowed, logits spec, values spec) per key group, q pre-scaled; keeps: one
    bool dropout keep mask per tile, or None. Returns float32[B, h, N, b, Dh].
    """
    logits = []
    for q, k, _, allowed, spec, _ in tiles:
        s = jnp.einsum(spec, q, k, preferred_element_type=jnp.float32)
        logits.append(jnp.where(allowed, s, MASKED_LOGIT))
    # the shift only keeps exp in range: the softmax does not depend on it, nor does its gradient
    top = logits[0].max(-1, keepdims=True)
    for s in logits[1:]:
        top = jnp.maximum(top, s.max(-1, keepdims=True))
    top = jax.lax.stop_gradient(top)
    weights = [jnp.exp(s - top) for s in logits]
    z = sum(w.sum(-1, keepdims=True) for w in weights)
    if keeps is not None:  # dropout acts on the normalised weights (inverted dropout)
        weights = [jnp.where(m, w / z / (1.0 - rate), 0.0) for w, m in zip(weights, keeps)]
    out = None
    for (_, _, v, _, _, spec), w in zip(tiles, weights):
        o = jnp.einsum(spec, w.astype(v.dtype), v, preferred_element_type=jnp.float32)
        out = o if out is None else out + o
    return out if keeps is not None else out / z


def _check(block_size: int, global_tokens: int) -> None:
    if block_size < 1:
        raise ValueError(f"block_size must be >= 1, got {block_size}")
    if global_tokens < 0:
        raise ValueError(f"global_tokens must be >= 0, got {global_tokens}")


@register("local")
class LocalAttention(nnx.Module):
    """Multi-head softmax attention inside non-overlapping contiguous blocks."""

    display_name = "Local Attention"
    kind = "2020 attention"
    paper = "Tay et al., ICLR 2021 (LRA baseline)"
    complexity = "O(L b d)"
    subquadratic = True
    recurrent_state = "2 * qkv_dim * min(L, global_tokens + block_size)"
    """Keys and values of the global tokens and of the current block so far (no later query reads an
    earlier block)."""
    length_options = ("block_size",)
    peer_options: ClassVar[dict] = {"block_size": 128}
    peer_mechanism = "local/block"
    lra_departure = "contiguous blocks (LRA: strided groups); CLS global on CLS-pooled tasks"
    contract_options: ClassVar[dict[str, int]] = {"block_size": 8}

    @staticmethod
    def peer_matmuls(B: int, H: int, L: int, D: int) -> list[tuple[str, int, tuple]]:
        """Blocks of 128 (lra/bench/peers.py ``family_matmuls``)."""
        n = L // 128
        return [("block logits", 1, (B * H * n, 128, D, 128)), ("block values", 1, (B * H * n, 128, 128, D))]

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
