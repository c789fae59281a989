"""Gated DeltaNet: Yang, Kautz and Hatamizadeh, "Gated Delta Networks: Improving Mamba2 with Delta
Rule", ICLR 2025 (arXiv 2412.06464); with ``gate=False``, DeltaNet: Yang, Wang, Zhang, Shen and Kim,
"Parallelizing Linear Transformers with the Delta Rule over Sequence Length", NeurIPS 2024 (arXiv
2406.06484). Layer as fla-org/flash-linear-attention@bc3b101 fla/layers/gated_deltanet.py.

Per head, state S in R^{K x V} (an online regression that overwrites the value stored under k_t)::

    S_t = alpha_t (I - beta_t k_t k_t^T) S_{t-1} + beta_t k_t v_t^T,     o_t = S_t^T q_t
    q, k, v = SiLU(conv1d(x W_q)), SiLU(conv1d(x W_k)), SiLU(conv1d(x W_v))     (width 4, each)
    q, k    = L2-normalised per head (eps 1e-6), q scaled by K^-1/2
    beta_t  = sigmoid(x W_beta)                              [H]
    alpha_t = exp(-exp(A_log) softplus(x W_a + dt_bias))     [H]  (Mamba-2's decay; 1 if not gate)
    out     = W_o (RMSNorm_head(o) (.) SiLU(x W_g))

computed chunkwise by the UT transform with a per-chunk triangular solve (attention/_chunked.py
``chunked_delta_rule``; chunk 32, float32).

Initialisation (fla): A = exp(A_log) ~ U(0, 16]; dt_bias = softplus^-1(dt), dt log-uniform in
[1e-3, 0.1] floored at 1e-4 (Mamba's); both in the optimiser group "ssm" (no weight decay).

Bidirectional (``causal=False``): summed directions with shared parameters (attention/_mixers.py):
convs, features, beta, alpha and the delta rule run on x and on x reversed within each example's true
length. ``causal=True``: the forward direction.

Padding: the conv inputs and outputs are zero at pads (so k = 0 there, and the L2 norm's eps keeps
0/0 away), beta = 0 (nothing written, nothing erased) and log alpha = 0 (decay 1).

Heads: ``num_heads``, K = V = qkv_dim / H (fla: head_dim 256, expand_v 2). ``dropout`` is accepted
and not used. Options: ``gate`` (True; False = DeltaNet), ``conv_size`` (4), ``chunk_size`` (32).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx
from lra.attention import register
from lra.attention._chunked import chunked_delta_rule
from lra.attention._mixers import (
    HeadNorm,
    Linear,
    ShortConv,
    both_directions,
    dt_bias_init,
    real_mask,
    zero_pads,
)
from lra.attention._projections import Dense, head_dim
from lra.attention._ssm import ssm_param


def l2_normalise(x: jax.Array, eps: float = 1e-6) -> jax.Array:
    """x / sqrt(|x|^2 + eps) over the last axis (finite at x = 0)."""
    return x * jax.lax.rsqrt(jnp.sum(x * x, axis=-1, keepdims=True) + eps)


@register("gated_deltanet")
class GatedDeltaNet(nnx.Module):
    """The gated delta rule (DeltaNet with ``gate=False``), chunked with a per-chunk solve."""

    display_name = "Gated DeltaNet"
    kind = "2023-25 mixer"
    paper = "Yang et al., ICLR 2025; DeltaNet: Yang et al., NeurIPS 2024"
    complexity = "O(L C d + L d^2 / H)"
    subquadratic = True
    recurrent_state = "qkv_dim * qkv_dim // heads + 3 * (conv_size - 1) * qkv_dim"
    """Per head S (K x V, K = V = qkv_dim / H) and the last conv_size - 1 inputs of the q, k and v
    convolutions."""
    length_options = ("chunk_size",)
    attention_dropout = False  # no attention weights to drop
    parameter_note = ("the output gate W_g adds a fifth qkv_dim x D projection to q, k, v and the "
                      "output (1.25x softmax attention's)")

    def __init__(self, dim: int, num_heads: int, *, qkv_dim: int | None = None,
                 causal: bool = False, dropout: float = 0.0, rngs: nnx.Rngs,
                 gate: bool = True, conv_size: int = 4, chunk_size: int = 32):
        del dropout
        qkv_dim = qkv_dim or dim
        self.head = head_dim(qkv_dim, num_heads)
        self.dim, self.heads, self.causal, self.chunk_size, self.gate = (
            dim, num_heads, causal, chunk_size, gate)
        self.q_proj = Dense(dim, qkv_dim, rngs=rngs)
        self.k_proj = Dense(dim, qkv_dim, rngs=rngs)
        self.v_proj = Dense(dim, qkv_dim, rngs=rngs)
        self.q_conv = ShortConv(qkv_dim, conv_size, rngs=rngs)
        self.k_conv = ShortConv(qkv_dim, conv_size, rngs=rngs)
        self.v_conv = ShortConv(qkv_dim, conv_size, rngs=rngs)
        self.b_proj = Linear(dim, num_heads, rngs=rngs)
        if gate:
            self.a_proj = Linear(dim, num_heads, rngs=rngs)
            a = jax.random.uniform(rngs.params(), (num_heads,), jnp.float32, 0.0, 16.0)
            self.A_log = ssm_param(jnp.log(jnp.maximum(a, 1e-4)))
            self.dt_bias = ssm_param(dt_bias_init(rngs.params(), (num_heads,)))
        self.g_proj = Dense(dim, qkv_dim, rngs=rngs)
        self.norm = HeadNorm(num_heads, self.head, kind="rms")
        self.o_proj = Dense(qkv_dim, dim, rngs=rngs)

    def _direction(self, q, k, v, gates, mask):
        heads = (*q.shape[:2], self.heads, self.head)
        q = l2_normalise(jax.nn.silu(self.q_conv(q, mask)).reshape(heads)) * (self.head ** -0.5)
        k = l2_normalise(jax.nn.silu(self.k_conv(k, mask)).reshape(heads))
        v = jax.nn.silu(self.v_conv(v, mask)).reshape(heads)
        h = self.heads
        beta = zero_pads(jax.nn.sigmoid(gates[..., :h]), mask)
        log_a = None
        if self.gate:
            step = jax.nn.softplus(gates[..., h:] + self.dt_bias[...][None, None, :])
            log_a = zero_pads(-jnp.exp(self.A_log[...])[None, None, :] * step, mask)
        return chunked_delta_rule(q, k, v, beta, log_a, chunk_size=self.chunk_size)

    def __call__(self, x: jax.Array, mask: jax.Array | None = None, *,
                 deterministic: bool = True) -> jax.Array:
        if x.shape[-1] != self.dim:
            raise ValueError(f"gated_deltanet: input width {x.shape[-1]} != dim={self.dim}")
        mask = real_mask(mask, x)
        gates = self.b_proj(x)
        if self.gate:
            gates = jnp.concatenate([gates, self.a_proj(x)], axis=-1)
        arrays = (self.q_proj(x), self.k_proj(x), self.v_proj(x), gates)
        o = self.norm(both_directions(self._direction, arrays, mask, self.causal))
        o = o.reshape(*o.shape[:2], -1) * jax.nn.silu(self.g_proj(x).astype(jnp.float32))
        return self.o_proj(o.astype(x.dtype))
