"""Block-wise sparse attention: the machinery shared by the local, sparse, longformer and bigbird families.

Every block-sparse family here has the same shape of computation:

1. pad the length to a multiple of the block size ``b`` (pads become masked keys) and reshape
   queries to ``[B, N, b, H, Dh]`` (N = number of blocks);
2. collect, for each query block, the keys it may see as one or more *key groups*;
3. compute the logits of every group, mask them (pattern, key padding, causality), take ONE softmax in
   float32 over the concatenation of all groups, and sum the groups' weighted values.

No dense ``L x L`` logit or mask array is ever formed; memory is ``O(B H N b K)`` where K is the
number of keys a query block gathers. A key must appear in at most one group (or be masked in all
but one), otherwise it would be counted twice: callers guarantee this.

Key group kinds (``KeyGroup.kind``), with ``q`` blocks float[B, N, bq, H, Dh]:

* ``"block"``: keys float[B, N, K, H, Dh], a separate key set per query block (own block,
  neighbouring blocks, gathered random blocks).
* ``"shared"``: keys float[B, K, H, Dh], one key set seen by every query block (summary columns,
  global tokens, or every key for a dense global row).
* ``"strided"``: keys float[B, M, bq, H, Dh]: query (n, r) sees key (m, r) for every block m, i.e. the
  keys at the same offset inside every block (the Sparse Transformer's strided pattern).

``allowed`` is always bool of rank 5, ``[B or 1, H or 1, N or 1, bq or 1, K]``, broadcast explicitly.

Heads-first form (``to_head_blocks``, ``attend_heads``, ``from_head_blocks``): blocks laid out
``[B, H, N, b, Dh]`` with the keys of each query block gathered into one ``[B, H, N, K, Dh]`` array,
so that every product is a batched matmul whose batch dimensions lead (B, H, N) and XLA:CPU needs no
transposes inside the attention. Local, Longformer, BigBird and Sinkhorn use it. Measured (fwd+bwd
of one layer's kernel, B=4 H=4 Dh=64, 2 cores, one process timing both forms in turn, median of 9): longformer
(window 512, 1 global token) 0.79x the [B, N, b, H, Dh] form's time at 1024 and 0.75x at 2048, with
its smaller blocks; bigbird 0.99-1.01x with XLA:CPU's YNN fusions off (as ``lra.bench`` runs) and
0.73x with them on (the default, as ``lra.run`` trains), where the old form's gather of every key
block (a scatter-add in the backward pass) was the slow part; the new one gathers only the random
blocks, by a one-hot product; sinkhorn (block 64, H=8) 0.96x at 1024 and 0.94x at 2048.

What is left is XLA:CPU's batched matmul on small matrices: a batch of 2048 [64 x 64] x [64 x 128]
products (the logits of B=4, H=8, L=1024 in blocks of 64 against 128 keys) runs at 19 GFLOP/s, 7.6x
the time of PyTorch's ``bmm`` on the same 2-core host, while one large product is at parity
(``python -m lra.bench.peers --gemm``, docs/efficiency.md "Against third-party implementations").
Regrouping the blocks
(a ``lax.map`` over them, or several blocks per product with the waste masked) was measured and did
not pay.

Masked logits are set to the finite ``MASKED_LOGIT``, -1e30 (attention/_projections.py): a query
with no allowed key gets a finite, uniform average over its gathered keys instead of NaN; a query
with at least one allowed key gives exactly zero weight to every disallowed one, so nothing leaks
through them.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
from lra.attention import _platform
from lra.attention._projections import MASKED_LOGIT, dropout_probs

_SPECS = {
    "block": ("bnqhd,bnkhd->bhnqk", "bhnqk,bnkhd->bnqhd"),
    "shared": ("bnqhd,bkhd->bhnqk", "bhnqk,bkhd->bnqhd"),
    "strided": ("bnqhd,bmqhd->bhnqm", "bhnqm,bmqhd->bnqhd"),
}


class KeyGroup(NamedTuple):
    """Keys, values and the allowed pattern of one group (see the module docstring for shapes)."""

    k: jax.Array
    v: jax.Array
    allowed: jax.Array
    kind: str = "block"


def num_blocks(length: int, block: int) -> int:
    """Number of blocks of size ``block`` needed to cover ``length`` positions."""
    return -(-length // block)


def pad_length(x: jax.Array, length: int) -> jax.Array:
    """Pad axis 1 of ``x`` with zeros (False for bool) up to ``length``."""
    pad = length - x.shape[1]
    if pad == 0:
        return x
    return jnp.pad(x, [(0, 0), (0, pad)] + [(0, 0)] * (x.ndim - 2))


def to_blocks(x: jax.Array, block: int) -> jax.Array:
    """x: [B, L, ...] -> [B, N, block, ...], zero-padded (False for a bool mask) at the end."""
    n = num_blocks(x.shape[1], block)
    x = pad_length(x, n * block)
    return x.reshape(x.shape[0], n, block, *x.shape[2:])


def from_blocks(xb: jax.Array, length: int) -> jax.Array:
    """xb: [B, N, b, ...] -> [B, length, ...] (drops the internal padding)."""
    b, n, blk = xb.shape[:3]
    return xb.reshape(b, n * blk, *xb.shape[3:])[:, :length]


def neighbours(xb: jax.Array, offsets: tuple[int, ...], axis: int = 1) -> jax.Array:
    """Block n gets blocks n + o, o in offsets, concatenated along the block-slot axis ``axis + 1``.

    xb: [B, N, b, ...] -> [B, N, len(offsets) * b, ...] (``axis`` = 1), or with the blocks on another
    ``axis`` (2 for heads-first [B, H, N, b, Dh]). Blocks outside [0, N) are zeros (False for a bool
    mask); slicing, not a gather, so it stays cheap and its gradient is a sum of shifted slices.
    """
    n = xb.shape[axis]
    lo, hi = max(0, -min(offsets)), max(0, max(offsets))
    pad = [(0, 0)] * xb.ndim
    pad[axis] = (lo, hi)
    xp = jnp.pad(xb, pad)
    return jnp.concatenate([jax.lax.slice_in_dim(xp, lo + o, lo + o + n, axis=axis)
                            for o in offsets], axis=axis + 1)


def neighbour_positions(n: int, block: int, offsets: tuple[int, ...]) -> jax.Array:
    """int32[N, len(offsets) * block]: the absolute key positions ``neighbours`` gathers.

    Positions of blocks outside [0, N) come out < 0 or >= N * block; the gathered key mask is False
    there anyway.
    """
    start = (jnp.arange(n)[:, None] + jnp.asarray(offsets)[None, :]) * block  # [N, S]
    pos = start[:, :, None] + jnp.arange(block)[None, None, :]
    return pos.reshape(n, len(offsets) * block)


def block_positions(n: int, block: int) -> jax.Array:
    """int32[N, block]: absolute position of every slot of every block."""
    return jnp.arange(n * block).reshape(n, block)


def _masked_logits(spec: str, q: jax.Array, k: jax.Array, allowed: jax.Array) -> jax.Array:
    """float32 q.k / sqrt(Dh) by the einsum ``spec``, MASKED_LOGIT where ``allowed`` is False."""
    scale = 1.0 / jnp.sqrt(jnp.float32(q.shape[-1]))
    s = jnp.einsum(spec, q, k, preferred_element_type=jnp.float32) * scale
    return jnp.where(allowed, s, MASKED_LOGIT)


def attend(qb: jax.Array, groups: list[KeyGroup], *, dropout_rate: float = 0.0,
           dropout_rng: jax.Array | None = None) -> jax.Array:
    """One masked softmax over all key groups of each query.

    qb: float[B, N, bq, H, Dh] query blocks; groups: see the module docstring.
    Returns float[B, N, bq, H, Dh] in qb's dtype. Logits, softmax and the value sums are float32.
    """
    logits = [_masked_logits(_SPECS[g.kind][0], qb, g.k, g.allowed) for g in groups]
    sizes = [s.shape[-1] for s in logits]
    probs = jax.nn.softmax(jnp.concatenate(logits, axis=-1), axis=-1)
    probs = dropout_probs(probs, dropout_rate, dropout_rng)
    out = None
    start = 0
    for g, size in zip(groups, sizes):
        p = probs[..., start: start + size].astype(g.v.dtype)
        start += size
        o = jnp.einsum(_SPECS[g.kind][1], p, g.v, preferred_element_type=jnp.float32)
        out = o if out is None else out + o
    return out.astype(qb.dtype)


def head_groups(num_heads: int, platform: str | None = None) -> int:
    """How many independent head groups a heads-first block kernel (``sinkhorn_kernel``,
    ``local_kernel``) splits its work into by default: 2 on CPU when ``num_heads`` is even, else 1.

    XLA:CPU runs one batched matmul of many small products ([64 x 64] x [64 x 64] blocks) on
    about one core, and runs independent operations at the same time, so two independent head
    groups keep both cores of a 2-core host busy. Measured fwd+bwd (B=4, H=8, Dh=64, one process,
    XLA:CPU YNN fusions on, median of 5 to 7): sinkhorn's kernel (block 64) at 1K / 2K / 4K, 77 /
    147 / 436 ms in one group against 68 / 134 / 295 ms in two (four: 61 / 124 / 270); inside the
    whole module, where the projections' matmuls already run beside the kernel, the gain shrinks
    to a few percent, and four groups were slower than two there. Local's kernel (block 128):
    70 / 151 / 271 ms in one group, 51 / 124 / 239 in two, 50 / 127 / 269 in four. On an
    accelerator one batched matmul already fills the device. The values do not depend on the
    grouping beyond float32 rounding (XLA:CPU may order a grouping's sums otherwise: 1 ulp on an
    AMD EPYC host, equal bits on an Intel Xeon; tests/helpers.py ``assert_head_groupings_agree``).
    """
    if (platform or _platform.platform()) != "cpu":
        return 1
    return 2 if num_heads % 2 == 0 else 1


def to_head_blocks(x: jax.Array, block: int) -> jax.Array:
    """x: float[B, L, H, Dh] -> float[B, H, N, block, Dh], zero-padded at the end (heads first)."""
    n = num_blocks(x.shape[1], block)
    x = pad_length(x, n * block).transpose(0, 2, 1, 3)
    return x.reshape(x.shape[0], x.shape[1], n, block, x.shape[3])


def from_head_blocks(xb: jax.Array, length: int) -> jax.Array:
    """xb: float[B, H, N, b, Dh] -> float[B, length, H, Dh] (drops the internal padding)."""
    b, h, n, blk, d = xb.shape
    return xb.reshape(b, h, n * blk, d)[:, :, :length].transpose(0, 2, 1, 3)


def attend_heads(qb: jax.Array, k: jax.Array, v: jax.Array, allowed: jax.Array, *,
                 dropout_rate: float = 0.0, dropout_rng: jax.Array | None = None) -> jax.Array:
    """Masked softmax attention of each query block over its own gathered keys, heads first.

    qb: float[B, H, N, bq, Dh]; k, v: float[B, H, N, K, Dh]; allowed: bool broadcastable to
    [B, H, N, bq, K]. Returns float32[B, H, N, bq, Dh]: the caller casts once, after assembling.
    """
    logits = _masked_logits("bhnqd,bhnkd->bhnqk", qb, k, allowed)
    probs = dropout_probs(jax.nn.softmax(logits, axis=-1), dropout_rate, dropout_rng)
    return jnp.einsum("bhnqk,bhnkd->bhnqd", probs.astype(v.dtype), v,
                      preferred_element_type=jnp.float32)


def global_rows(q: jax.Array, k: jax.Array, v: jax.Array, mask: jax.Array, *, causal: bool,
                dropout_rate: float = 0.0, dropout_rng: jax.Array | None = None) -> jax.Array:
    """Dense attention of a few global queries over every key.

    q: float[B, G, H, Dh] (the first G positions); k, v: float[B, L, H, Dh]; mask: bool[B, L].
    Causal: query i (0-based, i < G) sees keys j <= i. Returns float[B, G, H, Dh]. Cost O(G L d).
    """
    length, g = k.shape[1], q.shape[1]
    allowed = mask[:, None, None, None, :]  # [B, 1, 1, 1, L]
    if causal:
        tri = jnp.arange(length)[None, :] <= jnp.arange(g)[:, None]  # [G, L]
        allowed = allowed & tri[None, None, None]
    out = attend(q[:, None], [KeyGroup(k, v, allowed, "shared")], dropout_rate=dropout_rate,
                 dropout_rng=dropout_rng)
    return out[:, 0]


def global_columns(k: jax.Array, v: jax.Array, mask: jax.Array) -> KeyGroup:
    """The first G keys as a group every (non-global) query block sees.

    k, v: float[B, G, H, Dh]; mask: bool[B, G]. The non-global queries all sit after the global
    positions, so causality never hides a global key from them.
    """
    return KeyGroup(k, v, mask[:, None, None, None, :], "shared")


def split_rng(rng: jax.Array | None, n: int) -> list[jax.Array | None]:
    """n independent dropout keys, or n Nones."""
    if rng is None:
        return [None] * n
    return list(jax.random.split(rng, n))


def with_global_tokens(structured, q, k, v, mask, *, global_tokens: int, causal: bool,
                       global_qkv=None, dropout_rate: float = 0.0, dropout_rng=None):
    """Add ``global_tokens`` leading global positions around a block-sparse pattern.

    The first G positions attend to every key (``global_rows``, with ``global_qkv`` =
    (q_g, k_g, v_g) if given, else q, k, v) and are attended by every other query
    (``global_columns``). The remaining positions run ``structured(q, k, v, mask, extra_groups,
    dropout_rng)`` on the sequence *after* the global positions, with the global columns passed as
    an extra key group; pattern positions are therefore counted from G. Because global keys are
    visible to everyone, this split is exact: no key is counted twice.

    q, k, v: float[B, L, H, Dh]; mask: bool[B, L]. Returns float[B, L, H, Dh].
    """
    g = min(global_tokens, q.shape[1])
    if g == 0:
        return structured(q, k, v, mask, [], dropout_rng)
    rng_rows, rng_rest = split_rng(dropout_rng, 2)
    qg, kg, vg = global_qkv if global_qkv is not None else (q, k, v)
    rows = global_rows(qg[:, :g], kg, vg, mask, causal=causal, dropout_rate=dropout_rate,
                       dropout_rng=rng_rows)
    if g == q.shape[1]:
        return rows
    extra = [global_columns(k[:, :g], v[:, :g], mask[:, :g])]
    rest = structured(q[:, g:], k[:, g:], v[:, g:], mask[:, g:], extra, rng_rest)
    return jnp.concatenate([rows.astype(rest.dtype), rest], axis=1)
