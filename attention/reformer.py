"""Reformer LSH attention: Kitaev, Kaiser, Levskaya, "Reformer: The Efficient Transformer",
ICLR 2020 (arXiv 2001.04451).

Per head, queries and keys are shared (one projection ``qk``), keys are unit-length
``k_j = qk_j / ||qk_j||``, and each hash round ``r`` draws a fixed random rotation
``R_r in R^{d x n_buckets/2}``::

    h_r(x) = argmax([x R_r ; -x R_r])                       (angular LSH, n_buckets buckets)
    s_r    = stable argsort of h_r over positions            (sort by (bucket, position))
    chunk the sorted sequence into chunks of ``chunk_size``; a query attends to the keys of its own
    chunk and of the previous chunk (the first chunk: its own only):
    o_i^r  = sum_j softmax_j(q_i . k_j) v_j,   lse_i^r = logsumexp_j(q_i . k_j)   over those keys
    out_i  = sum_r exp(lse_i^r - logsumexp_r lse_i^r) o_i^r  (rounds combined by their normalisers)

The unit-length keys take the place of the 1/sqrt(d) scale (as in the HuggingFace port of trax).
A query never attends to itself unless nothing else is allowed: its own logit is set to -1e5
(HuggingFace's value), far below any real logit but above the -1e30 of masked keys, so it wins only when it
is the only choice (with shared QK, q_i . k_i would otherwise dominate).

* Padding: padded positions get their own bucket ``n_buckets``, so the stable sort puts them after
  every real token and they never displace a real token from its chunk; they are also masked as
  keys. The sequence is padded internally to a multiple of ``chunk_size`` the same way. Real
  outputs therefore depend neither on pad contents nor on how many pads there are.
* Causal mode: a query i attends to keys j <= i *of its own bucket* whose sorted index is at most
  ``chunk_size`` before its own (always inside its chunk or the previous one). The paper's causal
  variant (chunk window with j > i masked) is not causal in the strict sense: which past keys share
  a chunk with query i depends on how many *future* tokens hash into lower buckets. Restricting to
  same-bucket predecessors makes the attended set a function of tokens <= i only.
* The rotations are drawn once per layer at initialisation (a non-trainable ``HashRotations``
  variable, one per head and round), so evaluation is deterministic; trax and the HuggingFace
  port draw new ones at every forward pass unless given a fixed seed.
* Duplicate (query, key) pairs across rounds are not down-weighted (the paper's optional
  correction); as in trax and LRA they simply count once per round.
* Logits, softmax and the round combination are float32; cost O(n_hashes L (log L + chunk) d)
  time, O(n_hashes L chunk) memory per head.

Options: ``n_hashes`` (1, LRA), ``n_buckets`` (10, LRA; must be even), ``chunk_size`` (64, the
HuggingFace default; LRA's effective chunks were ~L/10, 100-400 tokens, see below).

Departures from the LRA code (``lra_benchmarks/models/reformer``), which (i) splits the sequence
into n_hashes * n_buckets chunks, i.e. chunks of ~L/10 tokens, after padding L up to the next
multiple of 10 ("chunk_len" 10; a full extra 10 when L already is one), so its cost is quadratic;
(ii) multiplies the logits by sqrt(d) instead of normalising keys; (iii) masks neither self nor
pads (pads enter the buckets and the softmax); (iv) uses one rotation seed, PRNGKey(0), for every
layer and head; (v) has no output projection and no attention dropout; (vi) reshapes the heads'
outputs ``[B, H, L, d]`` straight to ``[B, L, H d]`` without moving the head axis
(``reformer_attention.py`` line 337), so its output row t holds positions 2t and 2t + 1 of one
head (at 2 heads; in general H consecutive positions of one head) rather than position t of every
head; (vii) lets its first chunk look back to the last chunk (``look_one_back`` wraps around, line
31); (viii) overwrites ``qkv_features`` with the input width (the model's ``qkv_dim`` is unused).
Here: a fixed chunk size (so memory is linear), the paper's normalised keys, self and pad masks,
per-layer random rotations, heads kept apart (position t of every head in row t), no wrap-around
from the first chunk to the last, the configured ``qkv_dim``, the shared output projection and
attention-weight dropout.
"""

from __future__ import annotations

from typing import ClassVar

import jax
import jax.numpy as jnp
from flax import nnx
from lra.attention import register
from lra.attention._projections import MASKED_LOGIT, HeadProjections, dropout_probs, key_mask

SELF_LOGIT = -1e5  # below any real logit, above masked ones: self wins only when alone


class HashRotations(nnx.Variable):
    """Fixed random LSH rotations (not trained)."""


def lsh_buckets(qk: jax.Array, rotations: jax.Array, mask: jax.Array) -> jax.Array:
    """Bucket ids int32[B, H, R, L] in [0, n_buckets]; padded positions get bucket n_buckets.

    qk: float[B, L, H, d]; rotations: float32[H, d, R, n_buckets/2]; mask: bool[B, L].
    """
    rotated = jnp.einsum("blhd,hdrk->bhrlk", qk.astype(jnp.float32), rotations)
    buckets = jnp.argmax(jnp.concatenate([rotated, -rotated], axis=-1), axis=-1)
    n_buckets = 2 * rotations.shape[-1]
    return jnp.where(mask[:, None, None, :], buckets, n_buckets).astype(jnp.int32)


def reformer_kernel(qk: jax.Array, v: jax.Array, rotations: jax.Array,
                    mask: jax.Array | None = None, *, causal: bool = False, chunk_size: int = 64,
                    dropout_rate: float = 0.0, dropout_rng: jax.Array | None = None) -> jax.Array:
    """Shared-QK LSH attention.

    qk: float[B, L, H, d] (queries, and keys before normalisation); v: float[B, L, H, d];
    rotations: float32[H, d, n_hashes, n_buckets/2]; mask: bool[B, L] over positions (True = real).
    Returns float[B, L, H, d] in v's dtype.
    """
    b, length, h, d = qk.shape
    n_hashes = rotations.shape[2]
    c = chunk_size
    n_chunks = -(-length // c)
    padded = n_chunks * c
    mask = jnp.ones((b, length), bool) if mask is None else mask.astype(bool)
    pad = padded - length
    qk = jnp.pad(qk, [(0, 0), (0, pad), (0, 0), (0, 0)])
    v = jnp.pad(v, [(0, 0), (0, pad), (0, 0), (0, 0)])
    mask = jnp.pad(mask, [(0, 0), (0, pad)])

    buckets = lsh_buckets(qk, rotations, mask)  # [B, H, R, Lp]
    order = jnp.argsort(buckets, axis=-1, stable=True)  # sorted index -> position

    def gather(x):  # [B, Lp, H, F] -> sorted [B, H, R, Lp, F]
        x = jnp.moveaxis(x, 1, 2)[:, :, None]
        return jnp.take_along_axis(x, order[..., None], axis=3)

    qk32 = qk.astype(jnp.float32)
    keys = qk32 * jax.lax.rsqrt(jnp.maximum(jnp.sum(qk32 * qk32, -1, keepdims=True), 1e-12))
    s_q, s_k, s_v = gather(qk32), gather(keys), gather(v)
    s_real = jnp.take_along_axis(jnp.broadcast_to(mask[:, None, None, :], order.shape), order, -1)
    s_bucket = jnp.take_along_axis(buckets, order, axis=-1)
    s_index = jnp.broadcast_to(jnp.arange(padded), order.shape)

    def chunks(x):  # [B, H, R, Lp, ...] -> [B, H, R, N, C, ...]
        return x.reshape(*x.shape[:3], n_chunks, c, *x.shape[4:])

    def with_previous(x):  # own chunk, then the previous chunk (zeros before the first)
        prev = jnp.pad(x, [(0, 0)] * 3 + [(1, 0)] + [(0, 0)] * (x.ndim - 4))[:, :, :, :-1]
        return jnp.concatenate([x, prev], axis=4)

    q_c = chunks(s_q)
    k_c, v_c = with_previous(chunks(s_k)), with_previous(chunks(s_v))
    real_k = with_previous(chunks(s_real))  # the padded "previous" of chunk 0 is False
    pos_q, pos_k = chunks(order), with_previous(chunks(order))
    idx_q, idx_k = chunks(s_index), with_previous(chunks(s_index))

    logits = jnp.einsum("bhrnqd,bhrnkd->bhrnqk", q_c, k_c)
    allowed = real_k[..., None, :]
    if causal:
        bucket_q, bucket_k = chunks(s_bucket), with_previous(chunks(s_bucket))
        back = idx_q[..., :, None] - idx_k[..., None, :]
        allowed = (allowed & (bucket_q[..., :, None] == bucket_k[..., None, :])
                   & (back >= 0) & (back <= c))
    is_self = pos_q[..., :, None] == pos_k[..., None, :]
    logits = jnp.where(is_self, SELF_LOGIT, logits)
    logits = jnp.where(allowed, logits, MASKED_LOGIT)

    lse = jax.nn.logsumexp(logits, axis=-1)  # [B, H, R, N, C]
    probs = jnp.exp(logits - lse[..., None])
    probs = dropout_probs(probs, dropout_rate, dropout_rng)
    o = jnp.einsum("bhrnqk,bhrnkd->bhrnqd", probs, v_c.astype(jnp.float32))

    # Back to position order: sorted index of each position is the inverse permutation.
    undo = jnp.argsort(order, axis=-1)
    o = jnp.take_along_axis(o.reshape(b, h, n_hashes, padded, d), undo[..., None], axis=3)
    lse = jnp.take_along_axis(lse.reshape(b, h, n_hashes, padded), undo, axis=-1)
    weights = jax.nn.softmax(lse, axis=2)  # over hash rounds
    out = jnp.einsum("bhrl,bhrld->blhd", weights, o)
    return out[:, :length].astype(v.dtype)


@register("reformer")
class ReformerAttention(nnx.Module):
    """Multi-head LSH attention with shared QK (Reformer)."""

    display_name = "Reformer"
    kind = "2020 attention"
    paper = "Kitaev et al., ICLR 2020"
    complexity = "O(n_hashes L (log L + chunk) d)"
    subquadratic = True
    recurrent_state = "2 * qkv_dim * min(L, n_hashes * n_buckets * chunk_size)"
    """Per hash round the last ``chunk_size`` shared keys and values of each bucket (all a causal
    query reads), at most every position so far."""
    length_options = ("chunk_size",)
    peer_options: ClassVar[dict] = {"n_hashes": 8, "chunk_size": 64}
    peer_mechanism = "reformer-lsh"
    lra_departure = "chunks of 64 in sorted order, normalised keys, pads masked (LRA: ~L/10 chunks)"
    parameter_note = "queries and keys share one projection"
    # At the contract tests' L=64: 8 chunks and 4 buckets, LRA's single hash round. Hashing is
    # discontinuous: ~0.1% of buckets flip between float32 and bfloat16 inputs and a flip changes
    # that token's output by O(1); ``discrete_routing`` makes the contract's bf16 check require
    # agreement at 95% of positions (multi-round paths are tested in tests/attention/test_reformer.py).
    contract_options: ClassVar[dict[str, int]] = {"chunk_size": 8, "n_buckets": 4, "n_hashes": 1}
    discrete_routing = True  # LSH buckets can flip under bf16 rounding (see the contract tests)

    @staticmethod
    def peer_matmuls(B: int, H: int, L: int, D: int) -> list[tuple[str, int, tuple]]:
        """8 hashes, chunks of 64 against their own and the previous chunk (lra/bench/peers.py
        ``family_matmuls``)."""
        c = 8 * L // 64
        return [("chunk logits", 1, (B * H * c, 64, D, 128)), ("chunk values", 1, (B * H * c, 64, 128, D))]

    def __init__(self, dim: int, num_heads: int, *, qkv_dim: int | None = None,
                 causal: bool = False, dropout: float = 0.0, rngs: nnx.Rngs,
                 n_hashes: int = 1, n_buckets: int = 10, chunk_size: int = 64):
        if n_buckets < 2 or n_buckets % 2:
            raise ValueError(f"reformer n_buckets must be even and >= 2, got {n_buckets}")
        if n_hashes < 1 or chunk_size < 1:
            raise ValueError(f"reformer needs n_hashes >= 1 and chunk_size >= 1, "
                             f"got {n_hashes}, {chunk_size}")
        self.proj = HeadProjections(dim, num_heads, qkv_dim, rngs=rngs, shared_qk=True)
        shape = (num_heads, self.proj.head_dim, n_hashes, n_buckets // 2)
        self.rotations = HashRotations(jax.random.normal(rngs.params(), shape, jnp.float32))
        self.causal = causal
        self.chunk_size = chunk_size
        self.dropout = dropout
        self.rngs = rngs

    def __call__(self, x: jax.Array, mask: jax.Array | None = None, *,
                 deterministic: bool = True) -> jax.Array:
        qk, _, v = self.proj.qkv(x)
        rng = None if deterministic or self.dropout == 0.0 else self.rngs.dropout()
        o = reformer_kernel(qk, v, self.rotations[...], key_mask(mask, x), causal=self.causal,
                            chunk_size=self.chunk_size, dropout_rate=self.dropout,
                            dropout_rng=rng)
        return self.proj.merge(o)

