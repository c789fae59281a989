"""Luna: Ma et al., "Luna: Linear Unified Nested Attention", NeurIPS 2021 (arXiv 2106.01540).

Two nested softmax attentions through a learned packed sequence P in R^{l x D}. Per head, with
projections (tie_kv = True, the official default: one "context" projection serves as key and
value)::

    pack:    P' = softmax(P W_pq (X W_c)^T / sqrt(d) + B) (X W_c)      [l, d] per head,
             B_j = -1e30 where x_j is padding
    unpack:  Y  = softmax(X W_q (P' W_c')^T / sqrt(d)) (P' W_c')       [L, d] per head

P' is the concatenation of the pack heads ([l, qkv_dim], no output projection, as the official
code), and W_c' mixes all of its heads before the unpack splits them again. The output projection
W_o maps Y's heads back to D. With ``tie_kv=False`` keys and values get separate projections
(W_pk, W_pv for the pack; W_k, W_v for the unpack). Both softmaxes run in float32
(``softmax_kernel``); attention dropout acts on both weight matrices, as in the official code.

Cost: O(L l d) time and memory per head. No causal mode (causal packing is not in the released
code).

Padding: pads are masked out of the pack softmax, so P' (and with it every output) is independent
of pad contents; the unpack attends only to the l packed rows, none of which is padding. A padded
input gives the same real outputs as the unpadded input.

Departures from the paper and the official code, and why:

* The paper carries P' to the next layer as its P (after a residual and LayerNorm), so only the
  first layer owns a learned P. The layer contract here returns only [B, L, D], so each layer owns
  its learned P (initialised N(0, D^-1/2) as the official ``projected_embeddings``) and the packed
  context is not passed on.
* The official encoder's ``dynamic_projection`` uses only the first min(l, longest real length in
  the batch) rows of P, which makes outputs depend on the other sequences in the batch and the
  shapes data-dependent; here all l rows are always used.
* The pack uses the same number of heads as the unpack (the official code allows a separate
  ``num_pheads``; its LRA scripts set 8).
* Projections are bias-free Xavier-uniform like every family here (the official code uses biases,
  gain 1/sqrt(2), or N(0, 0.02) with ``--apply-bert-init``).

Options: ``packed_len`` (l = 16; the paper's LRA runs use 16, 128 and 256), ``tie_kv`` (True).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

import jax
import jax.numpy as jnp
from flax import nnx
from lra.attention import register
from lra.attention._projections import Dense, head_dim, key_mask
from lra.attention._softmax import softmax_kernel


def luna_kernel(q: jax.Array, k: jax.Array, v: jax.Array, p_q: jax.Array,
                packed_kv: Callable[[jax.Array], tuple[jax.Array, jax.Array]],
                mask: jax.Array | None = None, *, dropout_rate: float = 0.0,
                dropout_rngs: tuple[jax.Array | None, jax.Array | None] = (None, None)
                ) -> jax.Array:
    """Pack then unpack.

    q, k, v: float[B, L, H, d] (queries of X for the unpack; keys and values of X for the pack);
    p_q: float[B, l, H, d] (queries of P); ``packed_kv``: a function float[B, l, H, d] -> (keys,
    values) float[B, l, H, d] of the packed sequence P' (the learned projection between the two
    attentions); mask: bool[B, L] over X (True = real). Returns float[B, L, H, d] in q's dtype.
    """
    packed = softmax_kernel(p_q, k, v, mask, dropout_rate=dropout_rate,
                            dropout_rng=dropout_rngs[0])
    pk, pv = packed_kv(packed)
    return softmax_kernel(q, pk, pv, None, dropout_rate=dropout_rate, dropout_rng=dropout_rngs[1])


@register("luna")
class LunaAttention(nnx.Module):
    """Multi-head Luna attention (pack X into l learned slots, unpack back to L)."""

    display_name = "Luna"
    kind = "2020 attention"
    paper = "Ma et al., NeurIPS 2021"
    complexity = "O(L l d)"
    subquadratic = True
    recurrent_state = "packed_len * qkv_dim"
    """No causal form: the packed context P' (l x qkv_dim) that every query's unpack reads."""
    peer_options: ClassVar[dict] = {}
    parameter_note = "learns a packed sequence [l, D] and the projections of a second (pack) attention"

    def __init__(self, dim: int, num_heads: int, *, qkv_dim: int | None = None,
                 dropout: float = 0.0, rngs: nnx.Rngs, packed_len: int = 16, tie_kv: bool = True):
        qkv_dim = qkv_dim or dim
        self.num_heads = num_heads
        self.head_dim = head_dim(qkv_dim, num_heads)
        self.packed = nnx.Param(
            dim ** -0.5 * jax.random.normal(rngs.params(), (packed_len, dim), jnp.float32))
        self.tie_kv = tie_kv
        self.pack_query = Dense(dim, qkv_dim, rngs=rngs)
        self.query = Dense(dim, qkv_dim, rngs=rngs)
        if tie_kv:
            self.pack_context = Dense(dim, qkv_dim, rngs=rngs)
            self.context = Dense(qkv_dim, qkv_dim, rngs=rngs)
        else:
            self.pack_key = Dense(dim, qkv_dim, rngs=rngs)
            self.pack_value = Dense(dim, qkv_dim, rngs=rngs)
            self.key = Dense(qkv_dim, qkv_dim, rngs=rngs)
            self.value = Dense(qkv_dim, qkv_dim, rngs=rngs)
        self.out = Dense(qkv_dim, dim, rngs=rngs)
        self.dropout = dropout
        self.rngs = rngs

    def _heads(self, y: jax.Array) -> jax.Array:
        return y.reshape(*y.shape[:-1], self.num_heads, self.head_dim)

    def _packed_kv(self, packed: jax.Array) -> tuple[jax.Array, jax.Array]:
        flat = packed.reshape(*packed.shape[:-2], -1)  # P': the pack heads side by side
        if self.tie_kv:
            c = self._heads(self.context(flat))
            return c, c
        return self._heads(self.key(flat)), self._heads(self.value(flat))

    def __call__(self, x: jax.Array, mask: jax.Array | None = None, *,
                 deterministic: bool = True) -> jax.Array:
        packed = self.packed[...].astype(x.dtype)
        p = jnp.broadcast_to(packed, (x.shape[0], *packed.shape))
        p_q = self._heads(self.pack_query(p))
        if self.tie_kv:
            k = v = self._heads(self.pack_context(x))
        else:
            k, v = self._heads(self.pack_key(x)), self._heads(self.pack_value(x))
        rngs = (None, None)
        if not deterministic and self.dropout > 0.0:
            rngs = (self.rngs.dropout(), self.rngs.dropout())
        o = luna_kernel(self._heads(self.query(x)), k, v, p_q, self._packed_kv,
                        key_mask(mask, x), dropout_rate=self.dropout, dropout_rngs=rngs)
        return self.out(o.reshape(*o.shape[:-2], -1))
