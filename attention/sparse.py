"""Sparse Transformer attention: Child, Gray, Radford and Sutskever, "Generating Long Sequences with
Sparse Transformers", arXiv 1904.10509 (2019).

Softmax attention restricted to a fixed sparsity pattern (``m`` = key mask, ``l = block_size``,
``c = num_summary``), merged into one head as in the paper's "merged" variant:

* ``pattern="fixed"`` (LRA's choice)::

      allowed(i, j) = [floor(j / l) == floor(i / l)]  or  [j mod l >= l - c]

  each position sees its own block, and every block's last c positions are "summary" columns seen
  by everyone.
* ``pattern="strided"``::

      allowed(i, j) = [|i - j| < l]  or  [(i - j) mod l == 0]

  a band of half-width l plus every l-th position at the same offset.

In both, ``allowed &= m_j``, and causal mode additionally requires j <= i (so the band becomes
``0 <= i - j < l``). ``out_i = softmax_j(q_i . k_j / sqrt(d) over allowed j) v_j``.

Computed block-wise, never with an ``L x L`` mask: queries are cut into blocks of l;

* fixed: each block attends to its own block (l keys) plus the gathered summary set (the last c
  slots of every block, L c / l keys, shared by all blocks; a block's own summary slots are masked
  in the shared set because they are already in its own block). Cost O(L (l + L c / l) d).
* strided: each block attends to its 3 neighbouring blocks (2 if causal) masked to the exact band,
  plus, for query offset r, the keys at offset r of every *other* block (the only strided key
  inside the band is the query itself). Cost O(L (3 l + L / l) d).

With LRA's fixed l = 50, c = 10 the summary set grows with L, so memory is ~L^2 c / l: five times
less than dense attention but still quadratic (hence ``subquadratic = False``). The paper's
O(L sqrt(L)) needs l ~ sqrt(L).

``global_tokens`` = G leading positions are global: they attend to every key (every earlier key if
causal) and every position attends to them; the sparse pattern is then laid over positions G,
G+1, ... (positions counted from G). This is what LRA did for its CLS token when pooling by CLS
(``use_cls_token``): it built the pattern over the L - 1 positions after CLS and unmasked CLS's
row and column. Default 0; configs that pool by CLS set 1 to match LRA.

Options: ``pattern`` ("fixed"), ``block_size`` l (50), ``num_summary`` c (10), ``global_tokens``
(0). Logits and softmax in float32.

Departures from the LRA code (lra_benchmarks/models/sparse_transformer), which emulated the pattern
with a dense mask (no saving in time or memory):

* LRA applied ``k <= q`` to *every* pattern, so its encoder was causal in all tasks (except the CLS
  row and column). We follow the paper's pattern and make causality the ``causal`` flag; LRA's
  behaviour is ``causal=True`` with ``global_tokens=1`` except that LRA's CLS row also saw the
  future, which a causal mode cannot allow.
* LRA's summary columns were ``j mod l == 0 or j mod l >= l - c`` (c + 1 columns: the paper's
  1-based set {l - c, ..., l} taken literally with 0-based positions). We use the c columns
  ``j mod l >= l - c``.
"""

from __future__ import annotations

from typing import ClassVar

import jax
import jax.numpy as jnp
from flax import nnx
from lra.attention import register
from lra.attention._blocks import (
    KeyGroup,
    attend,
    block_positions,
    from_blocks,
    neighbour_positions,
    neighbours,
    to_blocks,
    with_global_tokens,
)
from lra.attention._projections import HeadProjections, key_mask

PATTERNS = ("fixed", "strided")


def _check(pattern: str, block_size: int, num_summary: int, global_tokens: int) -> None:
    if pattern not in PATTERNS:
        raise ValueError(f"pattern must be one of {PATTERNS}, got {pattern!r}")
    if block_size < 1:
        raise ValueError(f"block_size must be >= 1, got {block_size}")
    if not 0 <= num_summary <= block_size:
        raise ValueError(f"num_summary must be in [0, block_size={block_size}], got {num_summary}")
    if global_tokens < 0:
        raise ValueError(f"global_tokens must be >= 0, got {global_tokens}")


def _fixed_groups(kb, vb, mb, pos, *, causal: bool, num_summary: int) -> list[KeyGroup]:
    """Own block plus the shared summary columns. kb, vb: [B, N, l, H, d]; mb: bool[B, N, l]."""
    b, n, l = mb.shape
    own = mb[:, None, :, None, :]  # [B, 1, N, 1, l]
    if causal:
        own = own & jnp.tril(jnp.ones((l, l), dtype=bool))[None, None, None]
    groups = [KeyGroup(kb, vb, own, "block")]
    c = num_summary
    if c == 0 or n == 1:  # one block: every summary column is already in the own block
        return groups
    ks = kb[:, :, l - c:].reshape(b, n * c, *kb.shape[3:])
    vs = vb[:, :, l - c:].reshape(b, n * c, *vb.shape[3:])
    spos = pos[:, l - c:].reshape(n * c)
    # a block's own summary slots are already in its own block: mask them here
    pattern = (spos[None, :] // l != jnp.arange(n)[:, None])[:, None, :]  # [N, 1, N c]
    if causal:
        pattern = pattern & (spos[None, None, :] <= pos[:, :, None])  # [N, l, N c]
    allowed = mb[:, :, l - c:].reshape(b, n * c)[:, None, None, None, :] & pattern[None, None]
    groups.append(KeyGroup(ks, vs, allowed, "shared"))
    return groups


def _strided_groups(kb, vb, mb, pos, *, causal: bool) -> list[KeyGroup]:
    """Band of half-width l from the neighbouring blocks, plus the same offset in other blocks."""
    n, l = mb.shape[1:]
    offsets = (-1, 0) if causal else (-1, 0, 1)
    kpos = neighbour_positions(n, l, offsets)  # [N, S l]
    diff = pos[:, :, None] - kpos[:, None, :]  # [N, l, S l]: i - j
    band = (diff >= 0) & (diff < l) if causal else (diff > -l) & (diff < l)
    allowed = neighbours(mb, offsets)[:, None, :, None, :] & band[None, None]
    groups = [KeyGroup(neighbours(kb, offsets), neighbours(vb, offsets), allowed, "block")]
    if n == 1:
        return groups
    q_block, k_block = jnp.arange(n)[:, None], jnp.arange(n)[None, :]
    # (i - j) mod l == 0 with j in block m: j == i when m == n, which the band already holds
    other = k_block < q_block if causal else k_block != q_block  # [N, M]
    allowed = mb.transpose(0, 2, 1)[:, None, None, :, :] & other[None, None, :, None, :]
    groups.append(KeyGroup(kb, vb, allowed, "strided"))
    return groups


def sparse_kernel(q: jax.Array, k: jax.Array, v: jax.Array, mask: jax.Array | None = None, *,
                  causal: bool = False, pattern: str = "fixed", block_size: int = 50,
                  num_summary: int = 10, global_tokens: int = 0, dropout_rate: float = 0.0,
                  dropout_rng: jax.Array | None = None) -> jax.Array:
    """Sparse Transformer attention (fixed or strided pattern), computed block-wise.

    q, k, v: float[B, L, H, Dh]; mask: bool[B, L] over keys (True = real).
    Returns float[B, L, H, Dh] in q's dtype.
    """
    _check(pattern, block_size, num_summary, global_tokens)
    if mask is None:
        mask = jnp.ones(q.shape[:2], dtype=bool)

    def structured(q, k, v, mask, extra, rng):
        qb, kb, vb = (to_blocks(a, block_size) for a in (q, k, v))
        mb = to_blocks(mask, block_size)
        pos = block_positions(qb.shape[1], block_size)
        if pattern == "fixed":
            groups = _fixed_groups(kb, vb, mb, pos, causal=causal, num_summary=num_summary)
        else:
            groups = _strided_groups(kb, vb, mb, pos, causal=causal)
        out = attend(qb, groups + extra, dropout_rate=dropout_rate, dropout_rng=rng)
        return from_blocks(out, q.shape[1])

    return with_global_tokens(structured, q, k, v, mask, global_tokens=global_tokens,
                              causal=causal, dropout_rate=dropout_rate, dropout_rng=dropout_rng)


@register("sparse")
class SparseAttention(nnx.Module):
    """Multi-head Sparse Transformer attention (fixed or strided pattern, merged in one head)."""

    display_name = "Sparse Transformer"
    kind = "2020 attention"
    paper = "Child et al., arXiv 2019 (1904.10509)"
    complexity = "O(L (l + L c / l) d)"
    subquadratic = False  # with LRA's fixed l and c the summary set grows with L
    recurrent_state = ("2 * qkv_dim * (L if pattern == 'strided' else min(L, global_tokens + block_size"
                       " + num_summary * ((L - global_tokens - 1) // block_size)))")
    """Fixed: keys and values of the global tokens, the current block so far and the summary columns of
    every earlier block (exact when L - global_tokens is a multiple of block_size, at most
    otherwise). Strided: every position so far (later queries read every residue class)."""
    length_options = ("block_size", "num_summary")
    peer_options: ClassVar[dict] = {}
    lra_departure = "non-causal fixed pattern (LRA: causal); c summary columns (LRA: c + 1)"
    contract_options: ClassVar[dict[str, int]] = {"block_size": 8, "num_summary": 2}

    def __init__(self, dim: int, num_heads: int, *, qkv_dim: int | None = None,
                 causal: bool = False, dropout: float = 0.0, rngs: nnx.Rngs,
                 pattern: str = "fixed", block_size: int = 50, num_summary: int = 10,
                 global_tokens: int = 0):
        _check(pattern, block_size, num_summary, global_tokens)
        self.proj = HeadProjections(dim, num_heads, qkv_dim, rngs=rngs)
        self.causal = causal
        self.dropout = dropout
        self.pattern = pattern
        self.block_size = block_size
        self.num_summary = num_summary
        self.global_tokens = global_tokens
        self.rngs = rngs

    def __call__(self, x: jax.Array, mask: jax.Array | None = None, *,
                 deterministic: bool = True) -> jax.Array:
        q, k, v = self.proj.qkv(x)
        rng = None if deterministic or self.dropout == 0.0 else self.rngs.dropout()
        o = sparse_kernel(q, k, v, key_mask(mask, x), causal=self.causal, pattern=self.pattern,
                          block_size=self.block_size, num_summary=self.num_summary,
                          global_tokens=self.global_tokens, dropout_rate=self.dropout,
                          dropout_rng=rng)
        return self.proj.merge(o)
