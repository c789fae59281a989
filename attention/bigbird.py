"""BigBird block-sparse attention: Zaheer et al., "Big Bird: Transformers for Longer Sequences",
NeurIPS 2020 (arXiv 2007.14062), the ITC variant (global tokens taken from the sequence).

The sequence is cut into N = ceil(L / b) blocks of ``b = block_size``. At block level, query block n
may see key block m when::

    |n - m| <= 1                 (3 window blocks: its own and its neighbours)
    or n in {0, N - 1}           (the first and last blocks are global: they see everything...)
    or m in {0, N - 1}           (...and everything sees them)
    or m in R[h, n]              (r = num_random_blocks random blocks, per head h)

and token-level ``allowed(i, j) = block_allowed(i // b, j // b) and m_j``;
``out_i = softmax_j(q_i . k_j / sqrt(d) over allowed j) v_j``.

Random blocks: for each head and query block, r blocks drawn uniformly without replacement from the
blocks *not* already covered (not in the window, not global). They are fixed per layer: ``__init__``
draws, from the ``random_blocks`` rng stream (nnx falls back to the default stream), a random
priority for every (head, query block, key block) over ``ceil(max_len / b)`` blocks and stores it as
a non-trainable ``RandomBlockPriority`` variable (saved with checkpoints); a call with N blocks takes,
for each query block, the r eligible key blocks of highest priority among the first N. At
``max_len`` that is exactly a uniform draw; shorter sequences use the restriction of the same draw.
When fewer than r blocks are eligible (few blocks) the pattern already covers everything and the
surplus picks are dropped; any length works, down to a single block.

Computed block-wise, never with an ``L x L`` mask: the N - 2 middle query blocks each gather
3 + 2 + r key blocks (duplicates masked, e.g. block 1's left neighbour is the global block 0) and
the 2 global query blocks attend densely to all L keys. Cost O(L b (5 + r) d + 2 b L d); memory
O(L b (5 + r)). A length that is not a multiple of b is padded internally; the pads are masked
keys, and the last (global) block is the block holding position L - 1. Logits and softmax in float32.
Encoder only: there is no causal mode (as in LRA, which fell back to dense attention when causal).

Options: ``block_size`` b (64), ``num_random_blocks`` r (3): LRA's values. Needs ``max_len``.

Departures from the LRA code (lra_benchmarks/models/bigbird):

* LRA seeded numpy with ``hash(module path) % 2**32`` for its per-head random blocks; Python salts
  string hashes per process, so the pattern changed from one process to the next (e.g. between
  training and a later evaluation from a checkpoint). Ours live in the module state.
* LRA drew random blocks only among the blocks of the first 1024 positions
  (``last_idx=min(seq_length, 1024)``); we draw from all eligible blocks.
* LRA needed at least about 5 + 2 r blocks and always appended a whole pad block (even when L was
  a multiple of b); we pad only up to the next multiple and handle any number of blocks.
* LRA's block-sparse path applied no attention dropout; we apply the configured ``dropout`` to the
  attention weights like every other family here.
"""

from __future__ import annotations

from typing import ClassVar

import jax
import jax.numpy as jnp
from flax import nnx

from attention import register
from attention._blocks import KeyGroup, attend, from_blocks, num_blocks, split_rng, to_blocks
from attention._projections import HeadProjections, key_mask


class RandomBlockPriority(nnx.Variable):
    """Non-trainable int32[H, N_max, N_max]: fixes BigBird's random key blocks per layer."""


def select_random_blocks(priority: jax.Array, n: int, r: int) -> jax.Array:
    """int32[H, n, min(r, n)]: for each head and query block, its r random key blocks.

    priority: int32[H, >= n, >= n] random priorities. The chosen blocks are the highest-priority key
    blocks outside the window (|n - m| <= 1) and the global blocks (0 and n - 1); when fewer than r
    are eligible, the surplus picks are window or global blocks, which the kernel drops as duplicates.
    """
    if r == 0:
        return jnp.zeros((priority.shape[0], n, 0), jnp.int32)
    p = priority[:, :n, :n]
    q_block, k_block = jnp.arange(n)[:, None], jnp.arange(n)[None, :]
    eligible = (jnp.abs(q_block - k_block) > 1) & (k_block != 0) & (k_block != n - 1)
    p = jnp.where(eligible[None], p, -1)
    return jax.lax.top_k(p, min(r, n))[1].astype(jnp.int32)


def _middle_slots(n: int, rand: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Key block indices int32[H, n - 2, 5 + r] of the middle query blocks and their validity.

    Slots: window (m - 1, m, m + 1), global (0, n - 1), random. A slot is invalid if out of range or
    a repeat of an earlier slot, so each key is counted once.
    """
    h = rand.shape[0]
    middle = jnp.arange(1, n - 1)[:, None]
    fixed = jnp.concatenate([middle + jnp.arange(-1, 2)[None, :],
                             jnp.broadcast_to(jnp.array([0, n - 1]), (n - 2, 2))], axis=1)
    idx = jnp.concatenate([jnp.broadcast_to(fixed[None], (h, *fixed.shape)), rand[:, 1:n - 1]],
                          axis=-1)
    s = idx.shape[-1]
    earlier = jnp.tril(jnp.ones((s, s), dtype=bool), k=-1)  # [slot, earlier slot]
    repeat = jnp.any((idx[..., :, None] == idx[..., None, :]) & earlier[None, None], axis=-1)
    valid = (idx >= 0) & (idx < n) & ~repeat
    return jnp.clip(idx, 0, n - 1), valid


def bigbird_kernel(q: jax.Array, k: jax.Array, v: jax.Array, mask: jax.Array | None = None, *,
                   block_size: int = 64, random_blocks: jax.Array, dropout_rate: float = 0.0,
                   dropout_rng: jax.Array | None = None) -> jax.Array:
    """BigBird (ITC) block-sparse attention.

    q, k, v: float[B, L, H, Dh]; mask: bool[B, L] over keys (True = real); random_blocks:
    int[H, N, r] random key blocks per head and query block (N = ceil(L / block_size)); entries
    that repeat a window/global block or fall outside [0, N) are ignored.
    Returns float[B, L, H, Dh] in q's dtype.
    """
    batch, length, heads = q.shape[:3]
    n = num_blocks(length, block_size)
    if random_blocks.shape[:2] != (heads, n):
        raise ValueError(f"random_blocks must be [heads={heads}, blocks={n}, r], "
                         f"got {random_blocks.shape}")
    if mask is None:
        mask = jnp.ones(q.shape[:2], dtype=bool)
    qb, kb, vb = (to_blocks(a, block_size) for a in (q, k, v))
    mb = to_blocks(mask, block_size)
    flat = n * block_size
    k_all, v_all = kb.reshape(batch, flat, *k.shape[2:]), vb.reshape(batch, flat, *v.shape[2:])
    every_key = mb.reshape(batch, flat)[:, None, None, None, :]
    rng_rows, rng_mid = split_rng(dropout_rng, 2)
    if n <= 2:  # every block is global
        out = attend(qb, [KeyGroup(k_all, v_all, every_key, "shared")], dropout_rate=dropout_rate,
                     dropout_rng=rng_rows)
        return from_blocks(out, length)
    rows = attend(qb[:, jnp.array([0, n - 1])], [KeyGroup(k_all, v_all, every_key, "shared")],
                  dropout_rate=dropout_rate, dropout_rng=rng_rows)  # [B, 2, b, H, Dh]
    idx, valid = _middle_slots(n, random_blocks.astype(jnp.int32))  # [H, M, S]
    head = jnp.arange(heads)[:, None, None]

    def gather(xb):  # [B, N, b, H, Dh] -> [B, M, S b, H, Dh], each head its own blocks
        g = jnp.moveaxis(xb, 3, 1)[:, head, idx]  # [B, H, M, S, b, Dh]
        g = g.transpose(0, 2, 3, 4, 1, 5)
        return g.reshape(batch, n - 2, -1, heads, xb.shape[-1])

    key_ok = mb[:, idx] & valid[None, :, :, :, None]  # [B, H, M, S, b]
    allowed = key_ok.reshape(batch, heads, n - 2, 1, -1)
    mid = attend(qb[:, 1:n - 1], [KeyGroup(gather(kb), gather(vb), allowed, "block")],
                 dropout_rate=dropout_rate, dropout_rng=rng_mid)
    out = jnp.concatenate([rows[:, :1], mid, rows[:, 1:]], axis=1)
    return from_blocks(out, length)


@register("bigbird")
class BigBirdAttention(nnx.Module):
    """Multi-head BigBird attention: window, global first/last blocks and fixed random blocks."""

    paper = "Zaheer et al., NeurIPS 2020"
    complexity = "O(L b (5 + r) d)"
    subquadratic = True
    contract_options: ClassVar[dict[str, int]] = {"block_size": 8}

    def __init__(self, dim: int, num_heads: int, *, qkv_dim: int | None = None,
                 max_len: int | None = None, dropout: float = 0.0, rngs: nnx.Rngs,
                 block_size: int = 64, num_random_blocks: int = 3):
        if max_len is None:
            raise ValueError("bigbird needs max_len: its random blocks are drawn once, in "
                             "__init__, for ceil(max_len / block_size) blocks")
        if block_size < 1:
            raise ValueError(f"block_size must be >= 1, got {block_size}")
        if num_random_blocks < 0:
            raise ValueError(f"num_random_blocks must be >= 0, got {num_random_blocks}")
        self.proj = HeadProjections(dim, num_heads, qkv_dim, rngs=rngs)
        self.max_len = max_len
        self.block_size = block_size
        self.num_random_blocks = num_random_blocks
        n = num_blocks(max_len, block_size)
        noise = jax.random.uniform(rngs.random_blocks(), (num_heads, n, n))
        # a random permutation per row: distinct integer priorities survive any float recasting
        self.random_priority = RandomBlockPriority(jnp.argsort(noise, axis=-1).astype(jnp.int32))
        self.dropout = dropout
        self.rngs = rngs

    def random_blocks(self, length: int) -> jax.Array:
        """int32[H, N, r]: this layer's random key blocks for a sequence of ``length``."""
        if length > self.max_len:
            raise ValueError(f"sequence length {length} exceeds max_len={self.max_len} that "
                             "bigbird's random blocks were drawn for")
        n = num_blocks(length, self.block_size)
        return select_random_blocks(self.random_priority[...], n, self.num_random_blocks)

    def __call__(self, x: jax.Array, mask: jax.Array | None = None, *,
                 deterministic: bool = True) -> jax.Array:
        q, k, v = self.proj.qkv(x)
        rng = None if deterministic or self.dropout == 0.0 else self.rngs.dropout()
        o = bigbird_kernel(q, k, v, key_mask(mask, x), block_size=self.block_size,
                           random_blocks=self.random_blocks(x.shape[1]),
                           dropout_rate=self.dropout, dropout_rng=rng)
        return self.proj.merge(o)
