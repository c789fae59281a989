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
a non-trainable ``RandomBlockPriority`` variable (not checkpointed: rebuilt from the run's seed
whenever the model is built, so every process gets the same pattern); a call with N blocks takes,
for each query block, the r eligible key blocks of highest priority among the first N. At
``max_len`` that is exactly a uniform draw; shorter sequences use the restriction of the same draw.
When fewer than r blocks are eligible (few blocks) the pattern already covers everything and the
surplus picks are dropped; any length works, down to a single block.

Computed block-wise and heads first (attention/_blocks.py), never with an ``L x L`` mask: the
N - 2 middle query blocks each gather 3 + 2 + r key blocks (duplicates masked, e.g. block 1's left
neighbour is the global block 0): the window by shifted slices, the global blocks by broadcasting,
the random blocks by a one-hot product (so that no backward pass scatters); the 2 global query
blocks attend densely to all L keys. Cost O(L b (5 + r) d + 2 b L d); memory
O(L b (5 + r)). A length that is not a multiple of b is padded internally; the pads are masked
keys, and the last (global) block is the block holding position L - 1. Logits and softmax in float32.
Encoder only: there is no causal mode (as in LRA, which fell back to dense attention when causal).

Options: ``block_size`` b (64), ``num_random_blocks`` r (3): LRA's values. Needs ``max_len``.

Departures from the LRA code (lra_benchmarks/models/bigbird):

* LRA's encoder passes ``connectivity_seed=`` the layer index (``bigbird/bigbird.py`` line 207),
  and its attention seeds numpy with it (``bigbird_attention.py`` line 366; the fallback
  ``hash(module path) % 2**32``, lines 626-628, runs only when no seed is given): its random blocks
  were fixed per layer, the same in every process and for every run seed. Ours are drawn from the
  run's seed: fixed per layer within a run, different from one seed to the next.
* LRA drew random blocks only among the blocks of the first 1024 positions
  (``last_idx=min(seq_length, 1024)``); we draw from all eligible blocks.
* LRA needed N >= 5 + r blocks (counting the block it appends) and always appended a whole pad
  block (``block_size - L % block_size`` positions, so b of them when L is a multiple of b). Its
  mask for the appended positions is -1e9, which the cast of the mask to a float input mask keeps
  nonzero, i.e. "real": every query attends to that block of zero keys and values (logit 0), as
  LRA's local attention does (attention/local.py), which shifts an output by about 8e-2 relative.
  We pad only up to the next multiple, mask the pads, and handle any number of blocks.
* LRA's block-sparse path applied no attention dropout; we apply the configured ``dropout`` to the
  attention weights like every other family here.
"""

from __future__ import annotations

from typing import ClassVar

import jax
import jax.numpy as jnp
from flax import nnx
from lra.attention import register
from lra.attention._blocks import (
    attend_heads,
    from_head_blocks,
    neighbours,
    num_blocks,
    split_rng,
    to_blocks,
    to_head_blocks,
)
from lra.attention._projections import HeadProjections, key_mask


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


def _random_selection(n: int, rand: jax.Array, dtype) -> tuple[jax.Array, jax.Array, jax.Array]:
    """The middle query blocks' random key blocks: picks, validity and one-hot selection.

    rand: int[H, n, r]. A pick is invalid when it is outside [0, n), a window or global block (top_k
    returns those only when fewer than r blocks are eligible) or a repeat of an earlier pick of the
    same query block: an invalid pick selects nothing, so no key is counted twice. Returns the picks
    clipped to [0, n) int32[H, n - 2, r], their validity bool[H, n - 2, r] and the selection
    float[H, n - 2, r, n].
    """
    picks = rand[:, 1:n - 1].astype(jnp.int32)  # [H, n - 2, r]
    in_range = (picks >= 0) & (picks < n)
    picks = jnp.clip(picks, 0, n - 1)
    middle = jnp.arange(1, n - 1)[None, :, None]
    eligible = (jnp.abs(middle - picks) > 1) & (picks != 0) & (picks != n - 1)
    r = picks.shape[-1]
    earlier = jnp.tril(jnp.ones((r, r), dtype=bool), k=-1)  # [slot, earlier slot]
    repeat = jnp.any((picks[..., :, None] == picks[..., None, :]) & earlier[None, None], axis=-1)
    valid = in_range & eligible & ~repeat
    return picks, valid, jax.nn.one_hot(picks, n, dtype=dtype) * valid[..., None].astype(dtype)


def bigbird_kernel(q: jax.Array, k: jax.Array, v: jax.Array, mask: jax.Array | None = None, *,
                   block_size: int = 64, random_blocks: jax.Array, dropout_rate: float = 0.0,
                   dropout_rng: jax.Array | None = None) -> jax.Array:
    """BigBird (ITC) block-sparse attention.

    q, k, v: float[B, L, H, Dh]; mask: bool[B, L] over keys (True = real); random_blocks:
    int[H, N, r] random key blocks per head and query block (N = ceil(L / block_size)); entries
    that repeat a window/global block or an earlier entry, or fall outside [0, N), are ignored.
    Returns float[B, L, H, Dh] in q's dtype.
    """
    batch, length, heads, dh = q.shape
    b = block_size
    n = num_blocks(length, b)
    if random_blocks.shape[:2] != (heads, n):
        raise ValueError(f"random_blocks must be [heads={heads}, blocks={n}, r], "
                         f"got {random_blocks.shape}")
    if mask is None:
        mask = jnp.ones(q.shape[:2], dtype=bool)
    qb, kb, vb = (to_head_blocks(a, b) for a in (q, k, v))  # [B, H, N, b, Dh]
    mb = to_blocks(mask, b)  # [B, N, b]
    every_key = mb.reshape(batch, 1, 1, 1, n * b)
    rng_rows, rng_mid = split_rng(dropout_rng, 2)

    def dense_rows(qr):  # query blocks [B, H, G, b, Dh] against every key, as one block
        k_all, v_all = (x.reshape(batch, heads, 1, n * b, dh) for x in (kb, vb))
        o = attend_heads(qr.reshape(batch, heads, 1, -1, dh), k_all, v_all, every_key,
                         dropout_rate=dropout_rate, dropout_rng=rng_rows)
        return o.reshape(qr.shape)

    if n <= 2:  # every block is global
        return from_head_blocks(dense_rows(qb), length).astype(q.dtype)
    m = n - 2
    ends = jnp.array([0, n - 1])  # the two global blocks
    rows = dense_rows(qb[:, :, ends])  # [B, H, 2, b, Dh]
    picks, rand_valid, select = _random_selection(n, random_blocks, kb.dtype)
    r = select.shape[2]

    def keys_of_middle_blocks(xb):  # [B, H, N, b, Dh] -> [B, H, n - 2, (5 + r) b, Dh]
        window = neighbours(xb, (-1, 0, 1), axis=2)[:, :, 1:n - 1]
        ends_ = jnp.broadcast_to(xb[:, :, ends].reshape(batch, heads, 1, 2 * b, dh),
                                 (batch, heads, m, 2 * b, dh))
        # the random blocks through a one-hot product: its gradient is a matmul, not a scatter-add
        rand = jnp.einsum("hmrn,bhnqd->bhmrqd", select, xb).reshape(batch, heads, m, r * b, dh)
        return jnp.concatenate([window, ends_, rand], axis=3)

    middle = jnp.arange(1, n - 1)
    window_ok = neighbours(mb, (-1, 0, 1))[:, None, 1:n - 1]  # [B, 1, n - 2, 3 b]
    # blocks 0 and n - 1 are already in the window of query blocks 1 and n - 2
    repeat = jnp.repeat(jnp.stack([middle == 1, middle == n - 2], axis=1), b, axis=1)  # [n-2, 2b]
    ends_ok = mb[:, ends].reshape(batch, 1, 1, 2 * b) & ~repeat[None, None]
    rand_ok = mb[:, picks] & rand_valid[None, :, :, :, None]  # [B, H, n-2, r, b]
    allowed = jnp.concatenate([jnp.broadcast_to(window_ok, (batch, heads, m, 3 * b)),
                               jnp.broadcast_to(ends_ok, (batch, heads, m, 2 * b)),
                               rand_ok.reshape(batch, heads, m, r * b)], axis=-1)
    mid = attend_heads(qb[:, :, 1:n - 1], keys_of_middle_blocks(kb), keys_of_middle_blocks(vb),
                       allowed[:, :, :, None, :], dropout_rate=dropout_rate, dropout_rng=rng_mid)
    out = jnp.concatenate([rows[:, :, :1], mid, rows[:, :, 1:]], axis=2)
    return from_head_blocks(out, length).astype(q.dtype)


@register("bigbird")
class BigBirdAttention(nnx.Module):
    """Multi-head BigBird attention: window, global first/last blocks and fixed random blocks."""

    display_name = "BigBird"
    kind = "2020 attention"
    paper = "Zaheer et al., NeurIPS 2020"
    complexity = "O(L b (5 + r) d)"
    subquadratic = True
    recurrent_state = "2 * qkv_dim * min(L, (5 + num_random_blocks) * block_size)"
    """No causal form: the keys and values a middle query reads (3 window, 2 global and r random
    blocks; the global blocks' queries read all L), as Zoology counts BigBird."""
    length_options = ("block_size",)
    peer_options: ClassVar[dict] = {"block_size": 64, "num_random_blocks": 3}
    lra_departure = "random blocks drawn once; Image runs 4 heads (LRA's num_head typo)"
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
