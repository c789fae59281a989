"""S5: Smith, Warrington and Linderman, "Simplified State Space Layers for Sequence Modeling",
ICLR 2023 (arXiv 2208.04933).

One multi-input multi-output diagonal SSM over all D channels (P complex states, not one SSM per
channel as in S4D)::

    x_t = Lbar (.) x_{t-1} + Bbar u_t,      y_t = Re(C x_t) + D (.) u_t      (u_t, y_t in R^D)
    ZOH:      Lbar = exp(Lambda Delta),  Bbar = ((Lbar - 1) / Lambda) (.) B
    bilinear: Lbar = (1 + Delta Lambda/2) / (1 - Delta Lambda/2),  Bbar = Delta / (1 - Delta Lambda/2) (.) B

computed for all t at once by ``jax.lax.associative_scan`` with the operator
(a_i, b_i) o (a_j, b_j) = (a_j a_i, a_j b_i + b_j) (attention/_ssm.py). O(L P D) time and memory.

Initialisation (the S5 code's): HiPPO-N, the normal part of HiPPO-LegS of size n = P / J::

    A_nk = -sqrt(2n+1) sqrt(2k+1) (n > k),  -(n+1) (n = k),  0 (n < k);   p_n = sqrt(n + 1/2)
    S = A + p p^T = -1/2 I + (skew-symmetric)

Lambda = -1/2 + i w with (w, V) the eigen-decomposition of the Hermitian -i (S - diag S), i.e. the
eigenvalues of S; the initial Lambda is the same for each of the J blocks, V block-diagonal. B0 is
lecun-normal [P, D], B = V^-1 B0; C0 [D, P] is drawn by ``c_init`` and C = C0 V ("complex_normal":
C drawn directly, no V). D ~ N(0, 1); log Delta ~ U[log dt_min, log dt_max], one per state.

Conjugate symmetry (``conj_sym``, default on): the eigenvalues of a real S come in conjugate pairs,
so only one of each pair is kept (P/2 states) and the output is 2 Re(C x).

Bidirectional (``causal=False``): a second scan run backwards over the same Lbar, Bbar u (Lambda,
B, Delta shared); C = [C1 | C2] reads both states. Both directions include the current token.
``causal=True``: the forward scan with C1 only.

Padding: the input is zeroed at pads before Bbar u (attention/_ssm.py: this makes the reverse scan
equal to one started at each example's last real token). The S5 code does not: its ``apply_ssm``
runs the reverse scan through the pads (lindermanlab/S5@3c18fdb s5/ssm.py, lines 79-82).

Parameters are stored real (``Lambda_re``, ``Lambda_im``, ``log_step``, ``B`` [P', D, 2],
``C`` [D, P' or 2P', 2], ``D``), with the names of the S5 code. Optimiser group "ssm"
(``train.ssm_lr``, no weight decay; attention/_ssm.py): ``Lambda_re``, ``Lambda_im``, ``log_step``,
``B`` (S5's "standard" opt_config; C and D stay in the default group).
``num_heads``, ``qkv_dim`` and ``dropout`` are accepted for the shared signature and not used.
Options: ``state_size`` P (64), ``blocks`` J (4), ``discretization`` ("zoh" or "bilinear"),
``conj_sym`` (True), ``c_init`` ("trunc_standard_normal", "lecun_normal", "complex_normal"),
``dt_min`` (1e-3), ``dt_max`` (0.1), ``clip_eigs`` (False: if True, Re Lambda <= -1e-4 in the
forward pass).
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
from lra.attention import register
from lra.attention._ssm import diagonal_scan, masked_input, ssm_param

DISCRETIZATIONS = ("zoh", "bilinear")
C_INITS = ("trunc_standard_normal", "lecun_normal", "complex_normal")


def hippo_n(n: int) -> np.ndarray:
    """float64[n, n]: S = A + p p^T, the normal part of the HiPPO-LegS matrix A."""
    q = np.sqrt(2 * np.arange(n) + 1.0)
    a = -np.tril(np.outer(q, q), -1) - np.diag(np.arange(n) + 1.0)
    p = np.sqrt(np.arange(n) + 0.5)
    return a + np.outer(p, p)


def hippo_n_eig(n: int) -> tuple[np.ndarray, np.ndarray]:
    """Eigenvalues complex128[n] (imaginary parts ascending) and unitary eigenvectors [n, n] of S.

    S = mean(diag S) I + K with K real skew-symmetric, so -i K is Hermitian: its ``eigh`` gives
    orthonormal eigenvectors and real w, and S's eigenvalues are mean(diag S) + i w.
    """
    s = hippo_n(n)
    diag = np.diag(s)
    w, v = np.linalg.eigh(-1j * (s - np.diag(diag)))
    return diag.mean() + 1j * w, v


def block_diag(blocks: list[np.ndarray]) -> np.ndarray:
    rows = sum(b.shape[0] for b in blocks)
    cols = sum(b.shape[1] for b in blocks)
    out = np.zeros((rows, cols), blocks[0].dtype)
    r = c = 0
    for b in blocks:
        out[r:r + b.shape[0], c:c + b.shape[1]] = b
        r, c = r + b.shape[0], c + b.shape[1]
    return out


def s5_init(state_size: int, blocks: int, conj_sym: bool) -> tuple[np.ndarray, np.ndarray]:
    """Lambda complex128[P'] and V complex128[P, P'] (P' = P/2 with conj_sym, else P)."""
    n = state_size // blocks
    lam, v = hippo_n_eig(n)
    if conj_sym:  # one of each conjugate pair: the negative imaginary parts come first
        lam, v = lam[: n // 2], v[:, : n // 2]
    return np.tile(lam, blocks), block_diag([v] * blocks)


def discretize(lam: jax.Array, b: jax.Array, delta: jax.Array, method: str):
    """lam: complex[P']; b: complex[P', D]; delta: float[P'] -> (Lbar complex[P'], Bbar complex[P', D])."""
    if method == "zoh":
        lbar = jnp.exp(lam * delta)
        return lbar, ((lbar - 1.0) / lam)[:, None] * b
    if method == "bilinear":
        inv = 1.0 / (1.0 - delta * lam / 2)
        return (1.0 + delta * lam / 2) * inv, (inv * delta)[:, None] * b
    raise ValueError(f"discretization must be one of {', '.join(DISCRETIZATIONS)}, got {method!r}")


def _complex(x: jax.Array) -> jax.Array:
    return x[..., 0] + 1j * x[..., 1]


def _stack(z: jax.Array) -> jax.Array:
    """complex[...] -> float32[..., 2] (real, imaginary)."""
    return jnp.stack([z.real, z.imag], axis=-1).astype(jnp.float32)


@register("s5")
class S5(nnx.Module):
    """MIMO diagonal state space (S5) by associative scan, bidirectional unless causal."""

    display_name = "S5"
    kind = "state space"
    paper = "Smith et al., ICLR 2023"
    complexity = "O(L P d)"
    subquadratic = True
    recurrent_state = "state_size if conj_sym else 2 * state_size"
    """P/2 complex states with conjugate symmetry (P without) for all D channels together."""
    modern_row = "S5"
    modern_departure = ("half_glu2 runs as half_glu1; dt_global and S5's opt_config variants not "
                        "modelled; the encoder adds positions")
    attention_dropout = False  # a linear recurrence has no attention weights to drop
    parameter_note = ("one MIMO diagonal state space per layer (Lambda, B, C, step sizes, D) replaces "
                      "the q, k, v and output projections")

    def __init__(self, dim: int, num_heads: int, *, qkv_dim: int | None = None,
                 causal: bool = False, dropout: float = 0.0, rngs: nnx.Rngs,
                 state_size: int = 64, blocks: int = 4, discretization: str = "zoh",
                 conj_sym: bool = True, c_init: str = "trunc_standard_normal",
                 dt_min: float = 1e-3, dt_max: float = 0.1, clip_eigs: bool = False):
        del num_heads, qkv_dim, dropout
        if blocks < 1 or state_size % blocks:
            raise ValueError(f"s5: state_size={state_size} must be a multiple of blocks={blocks}")
        if conj_sym and (state_size // blocks) % 2:
            raise ValueError(f"s5: conj_sym needs an even block size, got state_size/blocks="
                             f"{state_size // blocks}")
        if discretization not in DISCRETIZATIONS:
            raise ValueError(f"s5: discretization must be one of {', '.join(DISCRETIZATIONS)}, "
                             f"got {discretization!r}")
        if c_init not in C_INITS:
            raise ValueError(f"s5: c_init must be one of {', '.join(C_INITS)}, got {c_init!r}")
        if not 0 < dt_min <= dt_max:
            raise ValueError(f"s5: need 0 < dt_min <= dt_max, got {dt_min}, {dt_max}")
        self.dim = dim
        self.causal = causal
        self.conj_sym = conj_sym
        self.discretization = discretization
        self.clip_eigs = clip_eigs
        lam, v = s5_init(state_size, blocks, conj_sym)
        kept = lam.shape[0]
        self.Lambda_re = ssm_param(jnp.asarray(lam.real, jnp.float32))
        self.Lambda_im = ssm_param(jnp.asarray(lam.imag, jnp.float32))
        # Random draws stay jax arrays (the trainer initialises under jit); V is a constant.
        v_c = jnp.asarray(v, jnp.complex64)
        b0 = nnx.initializers.lecun_normal()(rngs.params(), (state_size, dim))
        self.B = ssm_param(_stack(v_c.conj().T @ b0))  # V^-1 = V^H (V unitary)
        directions = 1 if causal else 2
        if c_init == "complex_normal":
            c = jax.random.normal(rngs.params(), (dim, directions * kept, 2)) * math.sqrt(0.5)
            self.C = nnx.Param(c)
        else:
            # lecun_normal: fan_in = P * D (JAX's rule for a [D, P, 2] array); per-row
            # (trunc_standard_normal): the D rows drawn separately, fan_in = P.
            batch_axis = (0,) if c_init == "trunc_standard_normal" else ()
            init = jax.nn.initializers.variance_scaling(1.0, "fan_in", "truncated_normal",
                                                        in_axis=-2, out_axis=-1,
                                                        batch_axis=batch_axis)
            parts = [_complex(init(rngs.params(), (dim, state_size, 2))) @ v_c
                     for _ in range(directions)]
            self.C = nnx.Param(_stack(jnp.concatenate(parts, axis=1)))
        self.D = nnx.Param(jax.random.normal(rngs.params(), (dim,)))
        self.log_step = ssm_param(jax.random.uniform(
            rngs.params(), (kept,), jnp.float32, math.log(dt_min), math.log(dt_max)), step_size=True)

    def discrete(self) -> tuple[jax.Array, jax.Array]:
        """(Lbar complex64[P'], Bbar complex64[P', D]) of the current parameters."""
        lam_re = self.Lambda_re[...]
        if self.clip_eigs:
            lam_re = jnp.minimum(lam_re, -1e-4)
        lam = lam_re + 1j * self.Lambda_im[...]
        return discretize(lam, _complex(self.B[...]), jnp.exp(self.log_step[...]),
                          self.discretization)

    def __call__(self, x: jax.Array, mask: jax.Array | None = None, *,
                 deterministic: bool = True) -> jax.Array:
        if x.shape[-1] != self.dim:
            raise ValueError(f"s5: input width {x.shape[-1]} != dim={self.dim}")
        u = masked_input(x, mask)
        lbar, bbar = self.discrete()
        bu = jnp.einsum("blh,nh->bln", u.astype(jnp.complex64), bbar)
        states = diagonal_scan(lbar, bu)
        if not self.causal:
            states = jnp.concatenate([states, diagonal_scan(lbar, bu, reverse=True)], axis=-1)
        y = jnp.einsum("bln,hn->blh", states, _complex(self.C[...])).real
        if self.conj_sym:
            y = 2.0 * y
        return (y + self.D[...][None, None, :] * u).astype(x.dtype)
