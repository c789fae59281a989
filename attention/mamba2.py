"""Mamba-2: Dao and Gu, "Transformers are SSMs: Generalized Models and Efficient Algorithms Through
Structured State Space Duality", ICML 2024 (arXiv 2405.21060); block as state-spaces/mamba@e9594ce
mamba_ssm/modules/mamba2.py.

SSD: the state space of Mamba with A a scalar per head (H heads of P = E / H channels, N states,
B and C shared by all heads, one group)::

    z, x, B, C, dt = split(in_proj(u))                        in_proj: D -> 2E + 2N + H, no bias
    x, B, C = SiLU(conv1d([x, B, C]))                         depthwise, causal, width 4, bias
    Delta  = softplus(dt + dt_bias)                           [B, L, H]
    h_t    = exp(-Delta_t exp(A_log)) h_{t-1} + B_t (Delta_t x_t)^T     per head, h in R^{N x P}
    y_t    = h_t^T C_t + D x_t
    out    = out_proj(RMSNorm(y (.) SiLU(z)))                 gated RMSNorm over E

i.e. decayed linear attention with q = C, k = B, v = Delta x and a scalar log-decay
-Delta exp(A_log), computed by the chunked kernel (attention/_chunked.py; chunk 64).

Initialisation (mamba2.py): A = exp(A_log) ~ U[1, 16]; dt_bias = softplus^-1(dt), dt log-uniform in
[dt_min, dt_max] floored at 1e-4 (as Mamba); D = 1 per head; norm scale 1. A_log, dt_bias and D are in
the optimiser group "ssm" (no weight decay, as mamba2.py's ``_no_weight_decay``, lines 130, 136, 140).

Bidirectional (``causal=False``): summed directions with shared parameters (HGRN's scheme on LRA;
attention/_mixers.py), the conv, SSD and D skip run on [x, B, C, dt] and on their reversal within each
example's true length; not Hydra's quasiseparable form (separate B, C, dt per direction and a
diagonal term). ``causal=True``: the forward direction only.

Padding: [x, B, C] zeroed at pads before and after the conv; Delta = 0 at pads, so v = Delta x = 0
(nothing is written) and the decay exp(0) = 1.

Heads: ``num_heads`` of the shared signature (P = E / H; mamba2.py fixes the head width instead,
``headdim=64``, line 45). ``qkv_dim`` and ``dropout`` are accepted and not used. Options:
``state_size`` N (64; mamba2.py's default ``d_state`` is 128, line 41), ``expand`` (2), ``conv_size``
(4), ``dt_min`` (1e-3), ``dt_max`` (0.1),
``chunk_size`` (64).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx
from lra.attention import register
from lra.attention._chunked import chunked_decay_attention
from lra.attention._mixers import ShortConv, both_directions, dt_bias_init, real_mask, zero_pads
from lra.attention._projections import Dense
from lra.attention._ssm import ssm_param


@register("mamba2")
class Mamba2(nnx.Module):
    """The Mamba-2 block: SSD (scalar decay per head) by the chunked kernel."""

    display_name = "Mamba-2"
    kind = "2023-25 mixer"
    paper = "Dao and Gu, ICML 2024"
    complexity = "O(L C (N + P) E / P)"
    subquadratic = True
    recurrent_state = "expand * dim * state_size + (conv_size - 1) * (expand * dim + 2 * state_size)"
    """Per head N x P (N E in all) and the convolution's last conv_size - 1 inputs of x, B and C."""
    length_options = ("chunk_size",)
    attention_dropout = False  # no attention weights to drop
    parameter_note = ("the Mamba-2 block's expanded inner width (E = 2 D: in_proj D x (2E + 2N + H), "
                      "out_proj E x D) is about 1.5x softmax attention's projections, as in the paper")

    def __init__(self, dim: int, num_heads: int, *, qkv_dim: int | None = None,
                 causal: bool = False, dropout: float = 0.0, rngs: nnx.Rngs,
                 state_size: int = 64, expand: int = 2, conv_size: int = 4, dt_min: float = 1e-3,
                 dt_max: float = 0.1, chunk_size: int = 64):
        del qkv_dim, dropout
        width = expand * dim
        if width % num_heads:
            raise ValueError(f"mamba2: expand * dim = {width} is not divisible by num_heads={num_heads}")
        self.dim, self.width, self.heads, self.state_size = dim, width, num_heads, state_size
        self.causal, self.chunk_size = causal, chunk_size
        self.in_proj = Dense(dim, 2 * width + 2 * state_size + num_heads, rngs=rngs)
        self.conv = ShortConv(width + 2 * state_size, conv_size, rngs=rngs)
        self.A_log = ssm_param(jnp.log(jax.random.uniform(rngs.params(), (num_heads,), jnp.float32,
                                                          1.0, 16.0)))
        self.dt_bias = ssm_param(dt_bias_init(rngs.params(), (num_heads,), dt_min, dt_max))
        self.D = ssm_param(jnp.ones((num_heads,), jnp.float32))
        self.norm_scale = nnx.Param(jnp.ones((width,), jnp.float32))
        self.out_proj = Dense(width, dim, rngs=rngs)

    def _direction(self, xbc: jax.Array, dt: jax.Array, mask: jax.Array) -> jax.Array:
        xbc = jax.nn.silu(self.conv(xbc, mask))
        e, n, h = self.width, self.state_size, self.heads
        batch, length = xbc.shape[:2]
        xh = xbc[..., :e].reshape(batch, length, h, e // h)
        b = jnp.broadcast_to(xbc[:, :, None, e:e + n], (batch, length, h, n))
        c = jnp.broadcast_to(xbc[:, :, None, e + n:], (batch, length, h, n))
        delta = zero_pads(jax.nn.softplus(dt + self.dt_bias[...][None, None, :]), mask)
        log_a = -delta * jnp.exp(self.A_log[...])[None, None, :]
        y = chunked_decay_attention(c, b, xh * delta[..., None], log_a, chunk_size=self.chunk_size)
        return y + self.D[...][None, None, :, None] * xh

    def __call__(self, x: jax.Array, mask: jax.Array | None = None, *,
                 deterministic: bool = True) -> jax.Array:
        if x.shape[-1] != self.dim:
            raise ValueError(f"mamba2: input width {x.shape[-1]} != dim={self.dim}")
        mask = real_mask(mask, x)
        proj = self.in_proj(x).astype(jnp.float32)
        e, n = self.width, self.state_size
        z, xbc, dt = proj[..., :e], proj[..., e:2 * e + 2 * n], proj[..., 2 * e + 2 * n:]
        y = both_directions(self._direction, (xbc, dt), mask, self.causal)
        y = y.reshape(*y.shape[:2], e) * jax.nn.silu(z)
        y = y * jax.lax.rsqrt(jnp.mean(y * y, axis=-1, keepdims=True) + 1e-5)
        return self.out_proj((y * self.norm_scale[...][None, None, :]).astype(x.dtype))
