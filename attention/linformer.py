"""Linformer: Wang et al., "Linformer: Self-Attention with Linear Complexity", 2020
(arXiv 2006.04768).

Per head, with q, k, v in R^{L x d} and learned length projections E, F in R^{k x n}
(n = ``max_len``, the first L columns used for an input of length L)::

    K_bar = E[:, :L] (m * k)        V_bar = F[:, :L] (m * v)        (m = key mask, 1 = real)
    out   = softmax(q K_bar^T / sqrt(d)) V_bar

The k projected "keys" are mixtures of real positions only, so the softmax runs over k columns
instead of L: O(L k d) time and O(L k) memory per head. There is no causal mode: every projected
key mixes the whole sequence.

* Padded keys and values are zeroed *before* the projection, so values at real positions do not
  depend on pad contents. An input of length L padded to L' > L gives the same real outputs as the
  unpadded input (the extra columns of E multiply zeros). The original LRA code did not mask here.
* E, F are shared by all heads of a layer (as in LRA and the paper's "headwise sharing"); each layer
  owns its own. Xavier-uniform initialisation, as LRA (``kernel_init=xavier_uniform``).
* ``max_len`` fixes n and is required; an input longer than ``max_len`` is an error (the projection
  has no columns for it). The encoder must count any CLS token in ``max_len``.
* The projection sums over up to ``max_len`` positions, so it accumulates in float32 and returns to
  the input dtype; the softmax is float32 (``softmax_kernel``). Attention dropout acts on the
  [L, k] weights, as in LRA.

Options:
* ``k`` (16): projected length. LRA used 16 on every task (the Text config's
  ``low_rank_features=32`` sits outside ``config.model`` and never reached the model); the paper
  used 256, later re-runs 256 (Nystromformer) and 128 (Skyformer).
* ``share_kv`` (True): one projection E = F per layer, as LRA ("key-value sharing" in the paper);
  False gives separate E and F.
"""

from __future__ import annotations

from typing import ClassVar

import jax
import jax.numpy as jnp
from flax import nnx
from lra.attention import register
from lra.attention._projections import HeadProjections, key_mask
from lra.attention._softmax import softmax_kernel

_xavier = nnx.initializers.xavier_uniform()


def project_length(e: jax.Array, x: jax.Array, mask: jax.Array | None = None) -> jax.Array:
    """Mix positions: e float[k, n >= L], x float[B, L, H, d] -> float[B, k, H, d] in x's dtype.

    Positions where ``mask`` (bool[B, L]) is False are zeroed first.
    """
    length = x.shape[1]
    if length > e.shape[1]:
        raise ValueError(f"linformer: input length {length} exceeds max_len={e.shape[1]}")
    if mask is not None:
        x = jnp.where(mask[:, :, None, None], x, jnp.zeros((), x.dtype))
    y = jnp.einsum("kl,blhd->bkhd", e[:, :length].astype(x.dtype), x,
                   preferred_element_type=jnp.float32)
    return y.astype(x.dtype)


def linformer_kernel(q: jax.Array, k: jax.Array, v: jax.Array, e: jax.Array,
                     f: jax.Array | None = None, mask: jax.Array | None = None, *,
                     dropout_rate: float = 0.0, dropout_rng: jax.Array | None = None) -> jax.Array:
    """Linformer attention.

    q, k, v: float[B, L, H, d]; e, f: float[k, n] with n >= L (``f=None`` means f = e, shared);
    mask: bool[B, L] over keys (True = real). Returns float[B, L, H, d] in q's dtype.
    """
    k_bar = project_length(e, k, mask)
    v_bar = project_length(e if f is None else f, v, mask)
    # Every projected key is a mixture of real positions, so none of the k columns is masked.
    return softmax_kernel(q, k_bar, v_bar, None, dropout_rate=dropout_rate,
                          dropout_rng=dropout_rng)


@register("linformer")
class LinformerAttention(nnx.Module):
    """Multi-head Linformer attention (low-rank projection of keys and values along length)."""

    display_name = "Linformer"
    kind = "2020 attention"
    paper = "Wang et al., arXiv 2006.04768 (2020)"
    complexity = "O(L k d)"
    subquadratic = True
    recurrent_state = "2 * k * qkv_dim"
    """No causal form: the k projected keys and values every query reads."""
    peer_options: ClassVar[dict] = {"k": 256}
    lra_departure = "padded positions masked before the length projection"
    parameter_note = "learns a [k, L] length projection per layer"

    @staticmethod
    def peer_matmuls(B: int, H: int, L: int, D: int) -> list[tuple[str, int, tuple]]:
        """k = 256, E and F shared over heads (lra/bench/peers.py ``family_matmuls``)."""
        return [("E K, F V", 2, (B, 256, L, H * D)), ("logits", 1, (B * H, L, D, 256)),
                ("values", 1, (B * H, L, 256, D))]

    def __init__(self, dim: int, num_heads: int, *, qkv_dim: int | None = None,
                 max_len: int | None = None, dropout: float = 0.0, rngs: nnx.Rngs,
                 k: int = 16, share_kv: bool = True):
        if max_len is None:
            raise ValueError("linformer needs a fixed max_len: its projections E, F have one "
                             "column per position")
        self.proj = HeadProjections(dim, num_heads, qkv_dim, rngs=rngs)
        self.e = nnx.Param(_xavier(rngs.params(), (k, max_len), jnp.float32))
        self.f = None if share_kv else nnx.Param(_xavier(rngs.params(), (k, max_len), jnp.float32))
        self.max_len = max_len
        self.dropout = dropout
        self.rngs = rngs

    def __call__(self, x: jax.Array, mask: jax.Array | None = None, *,
                 deterministic: bool = True) -> jax.Array:
        if x.shape[1] > self.max_len:
            raise ValueError(f"linformer: input length {x.shape[1]} exceeds max_len={self.max_len}")
        q, k, v = self.proj.qkv(x)
        rng = None if deterministic or self.dropout == 0.0 else self.rngs.dropout()
        o = linformer_kernel(q, k, v, self.e[...], None if self.f is None else self.f[...],
                             key_mask(mask, x), dropout_rate=self.dropout, dropout_rng=rng)
        return self.proj.merge(o)
