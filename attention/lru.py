"""LRU: Orvieto et al., "Resurrecting Recurrent Neural Networks for Long Sequences", ICML 2023
(arXiv 2303.06349).

A complex diagonal linear recurrence of N states over the D channels, with an exponential
parameterisation of its eigenvalues and a normalisation of its input::

    lambda  = exp(-exp(nu_log) + i exp(theta_log))          (|lambda| < 1 for any parameters)
    gamma   = exp(gamma_log),  initialised to sqrt(1 - |lambda|^2)
    h_t     = lambda (.) h_{t-1} + gamma (.) (B u_t)
    y_t     = Re(C h_t) + D (.) u_t

computed for all t by ``jax.lax.associative_scan`` (attention/_ssm.py). O(L N d) time and memory.

Ring initialisation: u1, u2 ~ U[0, 1];  |lambda|^2 uniform in [r_min^2, r_max^2], i.e.
nu_log = log(-1/2 log(u1 (r_max^2 - r_min^2) + r_min^2));  theta_log = log(max_phase u2).
B = B_re + i B_im with both parts N(0, 1/(2D)); C likewise N(0, 1/N); D ~ N(0, 1).

Bidirectional (``causal=False``; the paper uses it on PathFinder and Path-X): a second scan run
backwards over the same lambda, gamma, B u, read by its own C, so C = [C_fwd | C_bwd] is [D, 2N].
The minimal-LRU code (NicolasZucchet/minimal-LRU@bbd71b1 lru/model.py) has the forward scan only,
so this direction, and its handling of pads, is this project's.
Both directions include the current token. ``causal=True``: the forward scan with C_fwd only.

Padding: the input is zeroed at pads before B u (attention/_ssm.py: this makes the reverse scan
equal to one started at each example's last real token).

Optimiser group "ssm" (``train.ssm_lr``, no weight decay; attention/_ssm.py): ``nu_log``,
``theta_log``, ``gamma_log``, ``B_re``, ``B_im`` (as the minimal-LRU code).
``num_heads``, ``qkv_dim`` and ``dropout`` are accepted for the shared signature and not used.
Options: ``state_size`` N (64), ``r_min`` (0.0), ``r_max`` (0.99), ``max_phase`` (2 pi).
"""

from __future__ import annotations

import math
from typing import ClassVar

import jax
import jax.numpy as jnp
from flax import nnx
from lra.attention import register
from lra.attention._ssm import diagonal_scan, masked_input, ssm_param


def ring_init(key: jax.Array, state_size: int, r_min: float, r_max: float, max_phase: float):
    """(nu_log, theta_log, gamma_log), each float32[N], for |lambda| in [r_min, r_max]."""
    k1, k2 = jax.random.split(key)
    u1 = jax.random.uniform(k1, (state_size,))
    u2 = jax.random.uniform(k2, (state_size,))
    # Clamp |lambda|^2 inside (0, 1) so that no initial parameter is infinite.
    r2 = jnp.clip(u1 * (r_max**2 - r_min**2) + r_min**2, 1e-12, 1.0 - 1e-7)
    nu_log = jnp.log(-0.5 * jnp.log(r2))
    theta_log = jnp.log(max_phase * jnp.maximum(u2, 1e-12))
    gamma_log = jnp.log(jnp.sqrt(1.0 - r2))
    return nu_log, theta_log, gamma_log


@register("lru")
class LRU(nnx.Module):
    """Linear Recurrent Unit by associative scan, bidirectional unless causal."""

    display_name = "LRU"
    kind = "state space"
    paper = "Orvieto et al., ICML 2023"
    complexity = "O(L N d)"
    subquadratic = True
    recurrent_state = "2 * state_size"
    """N complex states for all D channels together."""
    modern_row = "LRU"
    modern_departure = ("bidirectional on every task (the paper: only Pathfinder and Path-X); base lr "
                        "1e-3 (not tabulated); the encoder adds positions")
    modern_task_departures: ClassVar[dict] = {
        "image": "the row's Image is colour sCIFAR, this suite's is LRA's grey CIFAR-10"}
    attention_dropout = False  # a linear recurrence has no attention weights to drop
    parameter_note = ("one diagonal linear recurrence per layer (nu, theta, gamma, B, C, D) replaces "
                      "the q, k, v and output projections")

    def __init__(self, dim: int, num_heads: int, *, qkv_dim: int | None = None,
                 causal: bool = False, dropout: float = 0.0, rngs: nnx.Rngs,
                 state_size: int = 64, r_min: float = 0.0, r_max: float = 0.99,
                 max_phase: float = 2 * math.pi):
        del num_heads, qkv_dim, dropout
        if state_size < 1:
            raise ValueError(f"lru: state_size must be >= 1, got {state_size}")
        if not 0.0 <= r_min < r_max <= 1.0:
            raise ValueError(f"lru: need 0 <= r_min < r_max <= 1, got r_min={r_min}, r_max={r_max}")
        if max_phase <= 0:
            raise ValueError(f"lru: max_phase must be > 0, got {max_phase}")
        self.dim = dim
        self.causal = causal
        nu_log, theta_log, gamma_log = ring_init(rngs.params(), state_size, r_min, r_max, max_phase)
        self.nu_log = ssm_param(nu_log)
        self.theta_log = ssm_param(theta_log)
        self.gamma_log = ssm_param(gamma_log)
        b_std = 1.0 / math.sqrt(2 * dim)
        self.B_re = ssm_param(jax.random.normal(rngs.params(), (state_size, dim)) * b_std)
        self.B_im = ssm_param(jax.random.normal(rngs.params(), (state_size, dim)) * b_std)
        directions = 1 if causal else 2
        c_std = 1.0 / math.sqrt(state_size)
        self.C_re = nnx.Param(jax.random.normal(rngs.params(), (dim, directions * state_size)) * c_std)
        self.C_im = nnx.Param(jax.random.normal(rngs.params(), (dim, directions * state_size)) * c_std)
        self.D = nnx.Param(jax.random.normal(rngs.params(), (dim,)))

    def eigenvalues(self) -> jax.Array:
        """complex64[N]: lambda = exp(-exp(nu_log) + i exp(theta_log))."""
        return jnp.exp(-jnp.exp(self.nu_log[...]) + 1j * jnp.exp(self.theta_log[...]))

    def input_matrix(self) -> jax.Array:
        """complex64[N, D]: gamma (.) B, the normalised input map."""
        b = self.B_re[...] + 1j * self.B_im[...]
        return jnp.exp(self.gamma_log[...])[:, None] * b

    def __call__(self, x: jax.Array, mask: jax.Array | None = None, *,
                 deterministic: bool = True) -> jax.Array:
        if x.shape[-1] != self.dim:
            raise ValueError(f"lru: input width {x.shape[-1]} != dim={self.dim}")
        u = masked_input(x, mask)
        lam = self.eigenvalues()
        bu = jnp.einsum("blh,nh->bln", u.astype(jnp.complex64), self.input_matrix())
        states = diagonal_scan(lam, bu)
        if not self.causal:
            states = jnp.concatenate([states, diagonal_scan(lam, bu, reverse=True)], axis=-1)
        c = self.C_re[...] + 1j * self.C_im[...]
        y = jnp.einsum("bln,hn->blh", states, c).real
        return (y + self.D[...][None, None, :] * u).astype(x.dtype)
