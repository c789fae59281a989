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
  [L, d, d] tensor of prefix sums is never formed. The scan is ``causal_linear_sums``
  (attention/_linear_scan.py), shared with performer and cosformer. On GPU its forward pass is a
  Pallas kernel (attention/_causal_scan_pallas.py) that keeps the running state on chip.
* Layout: heads before length ([B, H, L, d], one swap of q, k, v at the start), so every sum over
  length is a batched matmul with leading batch dimensions (``linear_sums``); on a 2-core CPU this
  halved cosFormer's time against einsums over [B, L, H, d].
* No attention-weight dropout: the weights are never materialised (LRA's code also drops none).
* Features, sums and the division run in float32 whatever the input dtype; the output returns to it.

Options: ``eps`` (1e-6), ``chunk_size`` (64, causal only).
"""

from __future__ import annotations

from typing import ClassVar

import jax
import jax.numpy as jnp
from flax import nnx
from lra.attention import register
from lra.attention._linear_scan import causal_linear_sums, heads_first, linear_sums
from lra.attention._projections import HeadProjections, key_mask

EPS = 1e-6


def elu_feature_map(x: jax.Array) -> jax.Array:
    """phi(x) = elu(x) + 1 > 0, elementwise."""
    return jax.nn.elu(x) + 1.0


def linear_kernel(q: jax.Array, k: jax.Array, v: jax.Array, mask: jax.Array | None = None, *,
                  causal: bool = False, eps: float = EPS, chunk_size: int = 64) -> jax.Array:
    """Linear (elu + 1 kernel) attention.

    q: float[B, Lq, H, d]; k, v: float[B, Lk, H, d]; mask: bool[B, Lk] over keys (True = real).
    Returns float[B, Lq, H, d] in q's dtype. Causal mode requires Lq == Lk.
    """
    if causal and q.shape[1] != k.shape[1]:
        raise ValueError(f"causal linear attention needs equal lengths, got {q.shape[1]}, "
                         f"{k.shape[1]}")
    qh, kh, vh = heads_first(q.astype(jnp.float32), k.astype(jnp.float32), v.astype(jnp.float32))
    phi_q, phi_k = elu_feature_map(qh), elu_feature_map(kh)
    if mask is not None:
        keep = mask[:, None, :, None]
        phi_k, vh = jnp.where(keep, phi_k, 0.0), jnp.where(keep, vh, 0.0)
    if causal:
        num, den = causal_linear_sums(phi_q, phi_k, vh, chunk_size)
    else:
        num, den = linear_sums(phi_q, phi_k, vh)
    return (num / (den + eps)[..., None]).swapaxes(1, 2).astype(q.dtype)


@register("linear")
class LinearAttention(nnx.Module):
    """Multi-head linear attention with phi = elu + 1 (linear in length, causal or not)."""

    display_name = "Linear Transformer"
    kind = "2020 attention"
    paper = "Katharopoulos et al., ICML 2020"
    complexity = "O(L d^2)"
    subquadratic = True
    recurrent_state = "heads * head_dim * (head_dim + 1)"
    """Per head S = sum phi(k) v^T (d x d) and z = sum phi(k) (d)."""
    length_options = ("chunk_size",)
    peer_options: ClassVar[dict] = {}
    peer_kernel = "linear(elu+1)"
    lra_departure = "padded keys zeroed (LRA summed the pads into every query)"
    attention_dropout = False  # the attention weights are never materialised (LRA drops none either)
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
