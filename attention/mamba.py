"""Mamba: Gu and Dao, "Mamba: Linear-Time Sequence Modeling with Selective State Spaces", arXiv
2312.00752 (2023); block as state-spaces/mamba@e9594ce mamba_ssm/modules/mamba_simple.py.

The block (E = expand * D channels, N states per channel, R = ceil(D / 16))::

    x, z   = split(in_proj(u))                                  in_proj: D -> 2E, no bias
    x      = SiLU(conv1d(x))                                    depthwise, causal, width 4, bias
    dr, B, C = split(x_proj(x))                                 x_proj: E -> R + 2N
    Delta  = softplus(dr W_dt + b_dt)                           [B, L, E], input-dependent step
    h_t    = exp(Delta_t A) (.) h_{t-1} + Delta_t B_t x_t       A = -exp(A_log) [E, N] (S6)
    y_t    = C_t . h_t + D (.) x_t
    out    = out_proj(y (.) SiLU(z))                            out_proj: E -> D, no bias

The selective scan has no matmul form (its state is [E, N] per token); ``selective_scan`` steps
through the positions one at a time (a ``lax.scan`` per chunk of ``chunk_size`` positions, inside a
scan over chunks whose body is checkpointed), so memory stays O(L E + (L / C + C) E N) rather than
O(L E N). On CPU this is the fast form: an associative scan inside each chunk (this file before
issue 26's profile) built [B, C, E, N] tensors at every one of its log2(C) levels and their
transposes in the backward pass, and took 7x the time of the sequential scan for fwd+bwd at
B 32, L 151, E 128, N 16.

Initialisation (mamba_simple.py): A_log = log(1..N) for every channel (S4D-Real); D = 1; W_dt ~
U(+-R^-1/2); b_dt = softplus^-1(dt), dt log-uniform in [dt_min, dt_max] floored at 1e-4, so that
softplus(b_dt) lies in [dt_min, dt_max] (a custom initialiser: a framework that zeroes biases would
destroy this range). A_log, D and b_dt are in the optimiser group "ssm" (no weight decay;
attention/_ssm.py). In mamba_simple.py only A_log and D carry ``_no_weight_decay`` (lines 111 and
115); b_dt is marked ``_no_reinit`` (line 101), and whether it decays is left to the trainer's
parameter grouping (biases usually do not).

Bidirectional (``causal=False``, the default): summed directions with shared parameters (HGRN's
scheme on LRA; attention/_mixers.py): conv, SiLU, the selective scan and the D skip are run on x and
on x reversed within each example's true length; their sum is gated by SiLU(z) and projected. The D
skip is thus counted twice. ``causal=True``: the forward direction only.

Padding: x is zeroed at pads before and after the conv, and Delta = 0 at pads, so exp(Delta A) = 1
and Delta B x = 0 there: nothing enters the state and the reverse scan starts at each example's last
real token.

``num_heads``, ``qkv_dim`` and ``dropout`` are accepted for the shared signature and not used.
Options: ``state_size`` N (16), ``expand`` E / D (2), ``conv_size`` (4), ``dt_rank`` R (0 = ceil(D /
16)), ``dt_min`` (1e-3), ``dt_max`` (0.1), ``chunk_size`` (32).
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
from flax import nnx
from lra.attention import register
from lra.attention._mixers import Linear, ShortConv, both_directions, dt_bias_init, real_mask, zero_pads
from lra.attention._projections import Dense
from lra.attention._ssm import ssm_param


def selective_scan(x: jax.Array, delta: jax.Array, a: jax.Array, b: jax.Array, c: jax.Array, *,
                   chunk_size: int = 32) -> jax.Array:
    """y_t = C_t . h_t with h_t = exp(delta_t a) (.) h_{t-1} + delta_t b_t x_t, h_{-1} = 0 (float32).

    x, delta: float[B, L, E]; a: float[E, N]; b, c: float[B, L, N]. Returns float32[B, L, E].

    One position per step of a ``lax.scan`` (the state h float32[B, E, N] stays in cache and
    exp(delta_t a) is never stored for the whole sequence), inside an outer scan over chunks of
    ``chunk_size`` positions whose body is checkpointed: the backward pass keeps the state entering
    each chunk and recomputes one chunk at a time, so memory is O(L E + (L / C + C) E N) per example.
    The order of the additions is the recurrence's own, so the chunk size does not change the values.
    """
    batch, length, width = x.shape
    pad = (-length) % chunk_size
    arrays = [t.astype(jnp.float32) for t in (x, delta, b, c)]
    if pad:  # delta = 0 in the padded tail: an identity step with no input
        arrays = [jnp.pad(t, [(0, 0), (0, pad), (0, 0)]) for t in arrays]
    # time-major chunks [L / C, C, B, F]: each step reads one position of every example
    chunks = tuple(jnp.moveaxis(t, 1, 0).reshape(-1, chunk_size, batch, t.shape[-1]) for t in arrays)
    a = a.astype(jnp.float32)

    def step(h, inputs):
        x_t, d_t, b_t, c_t = inputs                                 # [B, E], [B, E], [B, N], [B, N]
        h = jnp.exp(d_t[..., None] * a[None]) * h + (d_t * x_t)[..., None] * b_t[:, None, :]
        return h, jnp.sum(h * c_t[:, None, :], axis=-1)

    @jax.checkpoint
    def chunk(h, inputs):
        return jax.lax.scan(step, h, inputs)

    h0 = jnp.zeros((batch, width, a.shape[-1]), jnp.float32)
    _, ys = jax.lax.scan(chunk, h0, chunks)                         # [L / C, C, B, E]
    return jnp.moveaxis(ys.reshape(-1, batch, width), 0, 1)[:, :length]


@register("mamba")
class Mamba(nnx.Module):
    """The Mamba (S6) block: selective state space with input-dependent Delta, B, C."""

    display_name = "Mamba"
    kind = "2023-25 mixer"
    paper = "Gu and Dao, arXiv 2312.00752 (2023)"
    complexity = "O(L E N)"
    subquadratic = True
    recurrent_state = "expand * dim * (state_size + conv_size - 1)"
    """N states per inner channel (E = expand D) and the convolution's last conv_size - 1 inputs."""
    length_options = ("chunk_size",)
    attention_dropout = False  # a recurrence has no attention weights to drop
    parameter_note = ("the Mamba block's expanded inner width (E = 2 D: in_proj D x 2E, out_proj E x D) "
                      "is 1.5x softmax attention's four D x D projections, as in the paper")

    def __init__(self, dim: int, num_heads: int, *, qkv_dim: int | None = None,
                 causal: bool = False, dropout: float = 0.0, rngs: nnx.Rngs,
                 state_size: int = 16, expand: int = 2, conv_size: int = 4, dt_rank: int = 0,
                 dt_min: float = 1e-3, dt_max: float = 0.1, chunk_size: int = 32):
        del num_heads, qkv_dim, dropout
        if state_size < 1 or expand < 1 or conv_size < 1 or chunk_size < 1:
            raise ValueError("mamba: state_size, expand, conv_size and chunk_size must be >= 1")
        width = expand * dim
        rank = dt_rank or math.ceil(dim / 16)
        self.dim, self.width, self.rank, self.state_size = dim, width, rank, state_size
        self.causal, self.chunk_size = causal, chunk_size
        self.in_proj = Dense(dim, 2 * width, rngs=rngs)
        self.conv = ShortConv(width, conv_size, rngs=rngs)
        self.x_proj = Dense(width, rank + 2 * state_size, rngs=rngs)
        bound = rank ** -0.5
        self.dt_proj = Linear(
            rank, width, rngs=rngs,
            kernel=jax.random.uniform(rngs.params(), (rank, width), jnp.float32, -bound, bound),
            bias=dt_bias_init(rngs.params(), (width,), dt_min, dt_max))
        self.dt_proj.bias = ssm_param(self.dt_proj.bias[...])
        self.A_log = ssm_param(jnp.log(jnp.broadcast_to(
            jnp.arange(1, state_size + 1, dtype=jnp.float32)[None, :], (width, state_size))))
        self.D = ssm_param(jnp.ones((width,), jnp.float32))
        self.out_proj = Dense(width, dim, rngs=rngs)

    def _direction(self, xs: jax.Array, mask: jax.Array) -> jax.Array:
        u = jax.nn.silu(self.conv(xs, mask))                        # float32, zero at pads
        dbc = self.x_proj(u)
        n, r = self.state_size, self.rank
        delta = jax.nn.softplus(self.dt_proj(dbc[..., :r]))
        delta = zero_pads(delta, mask)
        a = -jnp.exp(self.A_log[...])
        y = selective_scan(u, delta, a, dbc[..., r:r + n], dbc[..., r + n:], chunk_size=self.chunk_size)
        return y + self.D[...][None, None, :] * u

    def __call__(self, x: jax.Array, mask: jax.Array | None = None, *,
                 deterministic: bool = True) -> jax.Array:
        if x.shape[-1] != self.dim:
            raise ValueError(f"mamba: input width {x.shape[-1]} != dim={self.dim}")
        mask = real_mask(mask, x)
        xz = self.in_proj(x)
        xs, z = xz[..., :self.width], xz[..., self.width:]
        y = both_directions(self._direction, (xs,), mask, self.causal)
        return self.out_proj((y * jax.nn.silu(z.astype(jnp.float32))).astype(x.dtype))
