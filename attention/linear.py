"""Linear Transformer: Katharopoulos, Vyas, Pappas, Fleuret, "Transformers are RNNs: Fast
Autoregressive Transformers with Linear Attention", ICML 2020 (arXiv 2006.16236).

Per head, with the feature map phi(x) = elu(x) + 1 (positive, so every weight is positive)::

    S = sum_j phi(k_j) v_j^T   in R^{d x d},     z = sum_j phi(k_j)   in R^d
    out_i = phi(q_i)^T S / (phi(q_i)^T z + eps)

which is the kernel form out_i = sum_j (phi(q_i) . phi(k_j)) v_j / (sum_j phi(q_i) . phi(k_j) + eps)
computed in O(L d^2) time instead of O(L^2 d).

* ``eps`` (default 1e-6, LRA's value) is added to the denominator, as in LRA's
  ``linear_attention``.
* Padded keys: phi(k_j) and v_j are zeroed before any sum. LRA's code ignores the pad mask; since
  phi > 0 every pad then enters S and z, so its Text/Retrieval numbers mix in the pads. Here they
  cannot (a deliberate departure).
* Causal mode (the paper's autoregressive form, S and z as prefix sums) uses a chunked scan:
  inside a chunk of ``chunk_size`` positions the masked quadratic form, across chunks a running
  [d, d] state. Memory is O(L d + (L / chunk_size) d^2) per head for the backward pass; the
  [L, d, d] tensor of prefix sums is never formed. The scan is ``causal_linear_sums``, shared with
  attention/performer.py.
* No attention-weight dropout: the weights are never materialised (LRA's code also drops none).
* Features, sums and the division run in float32 whatever the input dtype; the output returns to it.

Options: ``eps`` (1e-6), ``chunk_size`` (64, causal only).
"""

from __future__ import annotations

from typing import ClassVar

import jax
import jax.numpy as jnp
from flax import nnx

from attention import register
from attention._projections import HeadProjections, key_mask

EPS = 1e-6


def elu_feature_map(x: jax.Array) -> jax.Array:
    """phi(x) = elu(x) + 1 > 0, elementwise."""
    return jax.nn.elu(x) + 1.0


def causal_linear_sums(phi_q: jax.Array, phi_k: jax.Array, v: jax.Array, chunk_size: int,
                       log_scale: jax.Array | None = None) -> tuple[jax.Array, jax.Array]:
    """Causal kernel sums by a chunked scan, never forming a per-position [F, d] state.

    phi_q, phi_k: float32[B, L, H, F]; v: float32[B, L, H, d]. Returns
    num float32[B, L, H, d] = sum_{j<=i} (phi_q_i . phi_k_j) v_j and
    den float32[B, L, H]    = sum_{j<=i}  phi_q_i . phi_k_j.

    ``log_scale`` float32[B, L, H] (optional, non-decreasing along L) supports stabilised
    exponential features (attention/performer.py): phi_k[j] is taken to be stored divided by
    exp(log_scale[j]), and row i of num and den is returned divided by exp(log_scale[i]), a factor
    common to the whole row that cancels in num / den. Because log_scale never decreases, every
    rescaling factor exp(log_scale[j] - log_scale[i]), j <= i, lies in (0, 1]: nothing overflows,
    and no position's scale depends on later positions.
    """
    b, length, h, f = phi_q.shape
    d = v.shape[-1]
    chunk = min(chunk_size, length)
    n = -(-length // chunk)
    pad = n * chunk - length

    def split(a, mode="constant"):  # [B, L, ...] -> [N, B, C, ...]
        a = jnp.pad(a, [(0, 0), (0, pad)] + [(0, 0)] * (a.ndim - 2), mode=mode)
        return jnp.moveaxis(a.reshape(b, n, chunk, *a.shape[2:]), 1, 0)

    tri = jnp.tril(jnp.ones((chunk, chunk), dtype=bool))
    scaled = log_scale is not None

    def step(carry, blocks):
        state, z, s_prev = carry  # [B, H, F, d], [B, H, F], [B, H]
        q_c, k_c, v_c, s_c = blocks  # [B, C, H, F] x2, [B, C, H, d], [B, C, H]
        scores = jnp.einsum("bchf,bshf->bhcs", q_c, k_c)
        past_num = jnp.einsum("bchf,bhfd->bchd", q_c, state)
        past_den = jnp.einsum("bchf,bhf->bch", q_c, z)
        if scaled:
            s_c = s_c.transpose(0, 2, 1)  # [B, H, C]
            # exp(s_j - s_i) for j <= i; the masked exponent keeps j > i from overflowing.
            rel = jnp.where(tri, s_c[:, :, None, :] - s_c[:, :, :, None], -jnp.inf)
            scores = scores * jnp.exp(rel)
            carried = jnp.exp(s_prev[:, :, None] - s_c).transpose(0, 2, 1)  # [B, C, H]
            past_num, past_den = past_num * carried[..., None], past_den * carried
        else:
            scores = jnp.where(tri, scores, 0.0)
        num = jnp.einsum("bhcs,bshd->bchd", scores, v_c) + past_num
        den = scores.sum(-1).transpose(0, 2, 1) + past_den
        if scaled:
            s_last = s_c[:, :, -1]
            decay = jnp.exp(s_prev - s_last)  # [B, H]
            k_c = k_c * jnp.exp(s_c - s_last[:, :, None]).transpose(0, 2, 1)[..., None]
            state, z = state * decay[..., None, None], z * decay[..., None]
            s_prev = s_last
        state = state + jnp.einsum("bshf,bshd->bhfd", k_c, v_c)
        z = z + k_c.sum(1)
        return (state, z, s_prev), (num, den)

    if scaled:
        # Edge padding: a padded tail position gets the last real scale, so no factor exceeds 1.
        scales, s0 = split(log_scale, mode="edge"), log_scale[:, 0]
    else:
        scales, s0 = None, jnp.zeros((b, h), jnp.float32)
    init = (jnp.zeros((b, h, f, d), jnp.float32), jnp.zeros((b, h, f), jnp.float32), s0)
    _, (num, den) = jax.lax.scan(step, init, (split(phi_q), split(phi_k), split(v), scales))
    num = jnp.moveaxis(num, 0, 1).reshape(b, n * chunk, h, d)[:, :length]
    den = jnp.moveaxis(den, 0, 1).reshape(b, n * chunk, h)[:, :length]
    return num, den


def linear_kernel(q: jax.Array, k: jax.Array, v: jax.Array, mask: jax.Array | None = None, *,
                  causal: bool = False, eps: float = EPS, chunk_size: int = 64) -> jax.Array:
    """Linear (elu + 1 kernel) attention.

    q: float[B, Lq, H, d]; k, v: float[B, Lk, H, d]; mask: bool[B, Lk] over keys (True = real).
    Returns float[B, Lq, H, d] in q's dtype. Causal mode requires Lq == Lk.
    """
    phi_q = elu_feature_map(q.astype(jnp.float32))
    phi_k = elu_feature_map(k.astype(jnp.float32))
    vf = v.astype(jnp.float32)
    if mask is not None:
        keep = mask[:, :, None, None]
        phi_k, vf = jnp.where(keep, phi_k, 0.0), jnp.where(keep, vf, 0.0)
    if causal:
        if q.shape[1] != k.shape[1]:
            raise ValueError(f"causal linear attention needs equal lengths, got {q.shape[1]}, "
                             f"{k.shape[1]}")
        num, den = causal_linear_sums(phi_q, phi_k, vf, chunk_size)
    else:
        kv = jnp.einsum("blhf,blhd->bhfd", phi_k, vf)
        num = jnp.einsum("blhf,bhfd->blhd", phi_q, kv)
        den = jnp.einsum("blhf,bhf->blh", phi_q, phi_k.sum(1))
    return (num / (den + eps)[..., None]).astype(q.dtype)


@register("linear")
class LinearAttention(nnx.Module):
    """Multi-head linear attention with phi = elu + 1 (linear in length, causal or not)."""

    paper = "Katharopoulos et al., ICML 2020"
    complexity = "O(L d^2)"
    subquadratic = True
    # At L=64 the contract's causal tests then cross four chunks, not one.
    contract_options: ClassVar[dict] = {"chunk_size": 16}

    def __init__(self, dim: int, num_heads: int, *, qkv_dim: int | None = None,
                 causal: bool = False, dropout: float = 0.0, rngs: nnx.Rngs,
                 eps: float = EPS, chunk_size: int = 64):
        # No attention-weight dropout: the weights are never materialised (LRA drops none either).
        del dropout
        self.proj = HeadProjections(dim, num_heads, qkv_dim, rngs=rngs)
        self.causal = causal
        self.eps = eps
        self.chunk_size = chunk_size

    def __call__(self, x: jax.Array, mask: jax.Array | None = None, *,
                 deterministic: bool = True) -> jax.Array:
        q, k, v = self.proj.qkv(x)
        o = linear_kernel(q, k, v, key_mask(mask, x), causal=self.causal, eps=self.eps,
                          chunk_size=self.chunk_size)
        return self.proj.merge(o)
