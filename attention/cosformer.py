"""cosFormer: Qin et al., "cosFormer: Rethinking Softmax in Attention", ICLR 2022 (arXiv 2202.08791).

Per head, with q' = ReLU(q), k' = ReLU(k) and 1-indexed positions i, j::

    s_ij  = q'_i . k'_j * cos(pi/2 * (i - j) / M)
    out_i = sum_j s_ij v_j / max(sum_j s_ij, eps)

Ptolemy's identity cos(a - b) = sin a sin b + cos a cos b with theta_i = pi * i / (2M) turns the
re-weighting into features phi(x_i) = [x'_i sin theta_i ; x'_i cos theta_i] in R^{2d}, so the sums
over j factor through a [2d, d] matrix: cost O(L d^2) instead of O(L^2 d).

* ``M`` is the padded key length (max of query and key lengths), as in the official implementation,
  so |i - j| < M keeps every weight non-negative. It depends only on the array shape, never on the
  pad contents, so padding cannot leak through it.
* Padded keys (and their values) are zeroed before any sum.
* ``eps`` (default 1e-6, the official PyTorch value; OpenNLPLab's LRA port used 1e-4) clamps the
  denominator from below: a query whose ReLU features are all zero (a "dead" query) outputs 0 rather
  than NaN.
* Causal mode uses the chunked scan of attention/linear.py (``causal_linear_sums``): inside a chunk
  of ``chunk_size`` positions the quadratic masked form, across chunks a running [2d, d] state.
  Memory is O(L d + d^2) per head; the [L, 2d, d] prefix sum of the official code is never formed.
* Feature sums are accumulated in float32 whatever the input dtype.
* Layout: heads before length, the sin and cos features in one [B, H, L, 2d] array, sums as batched
  matmuls (attention/linear.py's ``linear_sums``): about 2x faster than einsums over [B, L, H, d]
  on a 2-core CPU.

Options: ``eps`` (1e-6), ``chunk_size`` (64, causal only).
"""

from __future__ import annotations

import math
from typing import ClassVar

import jax
import jax.numpy as jnp
from flax import nnx
from lra.attention import register
from lra.attention._linear_scan import causal_linear_sums, heads_first, linear_sums
from lra.attention._projections import HeadProjections, key_mask

EPS = 1e-6


def _cos_sin_features(x: jax.Array, big_m: int) -> jax.Array:
    """x: float32[B, H, L, d] (non-negative) -> float32[B, H, L, 2d] with 1-indexed positions:
    the sin and cos halves side by side, so one matmul covers both terms of Ptolemy's identity."""
    pos = jnp.arange(1, x.shape[2] + 1, dtype=jnp.float32)
    theta = (math.pi / 2) * pos / big_m
    sin, cos = jnp.sin(theta)[None, None, :, None], jnp.cos(theta)[None, None, :, None]
    return jnp.concatenate([x * sin, x * cos], axis=-1)


def cosformer_kernel(q: jax.Array, k: jax.Array, v: jax.Array, mask: jax.Array | None = None, *,
                     causal: bool = False, eps: float = EPS, chunk_size: int = 64) -> jax.Array:
    """cosFormer attention in linear time.

    q: float[B, Lq, H, d]; k, v: float[B, Lk, H, d]; mask: bool[B, Lk] over keys (True = real).
    Returns float[B, Lq, H, d] in q's dtype. Causal mode requires Lq == Lk.
    """
    if causal and q.shape[1] != k.shape[1]:
        raise ValueError(f"causal cosformer needs equal lengths, got {q.shape[1]}, {k.shape[1]}")
    big_m = max(q.shape[1], k.shape[1])
    qh, kh, vh = heads_first(q.astype(jnp.float32), k.astype(jnp.float32), v.astype(jnp.float32))
    qf, kf = jax.nn.relu(qh), jax.nn.relu(kh)
    if mask is not None:
        keep = mask[:, None, :, None]
        kf, vh = jnp.where(keep, kf, 0.0), jnp.where(keep, vh, 0.0)
    phi_q = _cos_sin_features(qf, big_m)
    phi_k = _cos_sin_features(kf, big_m)
    if causal:
        num, den = causal_linear_sums(phi_q, phi_k, vh, chunk_size)
    else:
        num, den = linear_sums(phi_q, phi_k, vh)
    return (num / jnp.maximum(den, eps)[..., None]).swapaxes(1, 2).astype(q.dtype)


@register("cosformer")
class CosFormerAttention(nnx.Module):
    """Multi-head cosFormer attention (linear in length, causal or not)."""

    display_name = "cosFormer"
    kind = "2020 attention"
    paper = "Qin et al., ICLR 2022"
    complexity = "O(L d^2)"
    subquadratic = True
    recurrent_state = "heads * 2 * head_dim * (head_dim + 1)"
    """Per head the sin and cos halves of S (2d x d) and z (2d); the position is a counter."""
    length_options = ("chunk_size",)
    peer_options: ClassVar[dict] = {}
    peer_kernel = "cosformer"
    lra_departure = "not in LRA: the cosFormer paper's model at the Transformer's size of each task"
    attention_dropout = False  # the attention weights are never materialised (as in the paper)

    @staticmethod
    def peer_matmuls(B: int, H: int, L: int, D: int) -> list[tuple[str, int, tuple]]:
        """ReLU features with their sin and cos halves side by side, 2D wide (lra/bench/peers.py
        ``family_matmuls``)."""
        return [("phi_k^T v", 1, (B * H, 2 * D, L, D)), ("phi_q kv", 1, (B * H, L, 2 * D, D))]

    def __init__(self, dim: int, num_heads: int, *, qkv_dim: int | None = None,
                 causal: bool = False, dropout: float = 0.0, rngs: nnx.Rngs,
                 eps: float = EPS, chunk_size: int = 64):
        # No attention-weight dropout: the weights are never materialised (as in the paper).
        del dropout
        self.proj = HeadProjections(dim, num_heads, qkv_dim, rngs=rngs)
        self.causal = causal
        self.eps = eps
        self.chunk_size = chunk_size

    def __call__(self, x: jax.Array, mask: jax.Array | None = None, *,
                 deterministic: bool = True) -> jax.Array:
        q, k, v = self.proj.qkv(x)
        o = cosformer_kernel(q, k, v, key_mask(mask, x), causal=self.causal, eps=self.eps,
                             chunk_size=self.chunk_size)
        return self.proj.merge(o)
