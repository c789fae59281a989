"""S4D: Gu et al., "On the Parameterization and Initialization of Diagonal State Space Models",
NeurIPS 2022 (arXiv 2206.11893).

Per channel h (D channels, each its own SSM), N/2 complex modes n (conjugate symmetry: the other
N/2 are the conjugates, so outputs are 2 Re(.)), B folded into C (B = 1, as the paper's minimal S4D)::

    x_t = dA (.) x_{t-1} + dB u_t,      y_t = 2 Re(C . x_t) + D u_t
    ZOH:      dA = exp(dt A),  dB = (exp(dt A) - 1) / A
    bilinear: dA = (1 + dt A/2) / (1 - dt A/2),  dB = dt / (1 - dt A/2)

Unrolled, y = K * u + D u with the kernel computed as a Vandermonde product (no recurrence)::

    K[l] = 2 Re sum_n C_n dB_n dA_n^l = 2 Re sum_n C_n dB_n exp(l log dA_n),   l = 0 .. L-1

and the convolution by FFT of length 2L (linear, not circular). Cost O(L N D + L log L D) time,
O(L N D) memory for the Vandermonde matrix.

Parameters (stored real): ``A = -exp(log_A_real) + i A_imag`` with ``log_A_real = log(1/2)``;
``log_dt`` (one per channel) uniform in [log dt_min, log dt_max]; ``C`` complex normal (variance 1);
``D`` ~ N(0, 1). Initialisations of the imaginary parts, n = 0 .. N/2-1:

* ``init="lin"`` (S4D-Lin): A_imag = pi n
* ``init="inv"`` (S4D-Inv): A_imag = (N / pi) (N / (2n + 1) - 1)

Bidirectional (``causal=False``): a second C (A and dt shared) gives a second kernel applied to the
time-reversed sequence; both directions include the current token (y_t sums s <= t and s >= t).
``causal=True`` keeps the forward kernel only.

This departs from the S4 repository, whose reverse direction leaves the current token out. Its
two-sided kernel is ``F.pad(k0, (0, L)) + F.pad(k1.flip(-1), (L, 0))`` (state-spaces/s4@e757cef
models/s4/s4.py, ``FFTConv.forward``, lines 1717-1718; the same in
src/models/sequence/kernels/fftconv.py, lines 98-99), which gives y_t = sum_{s <= t} k0[t - s] u_s
+ sum_{s > t} k1[s - t - 1] u_s; the comment under it calls the shift a deliberate off-by-one and
leaves the corrected kernel commented out (s4.py lines 1722-1724). Ours is that corrected form. The
two span the same maps (per channel and mode, C_bwd = C_S4 / dA, and D absorbs the extra
current-token weight K_bwd[0]), so they differ in parameterisation, not in what can be learned.
The minimal models/s4/s4d.py has no bidirectional option.

Padding: the input is zeroed at pads before the FFT (attention/_ssm.py explains why this makes the
reverse kernel exact: it then starts, in effect, at each example's last real token). The S4
repository's LRA pipeline does the same (``S4Block.forward`` zeroes the block's input past each
example's length: src/models/sequence/modules/s4block.py, lines 151-161).

Shared A (``n_ssm``, S4's option of that name: "number of independent trainable (A, B) SSMs"):
``n_ssm=None`` (the default) gives every channel its own A; ``n_ssm=S`` (S dividing D) trains S
copies of A and channel h uses copy h mod S (S4's ``repeat(A, 't n -> (v t) n')``), so
``n_ssm=1`` ties A across all channels while dt, C and D stay per channel. S4 ties B with A; here
B is folded into C (per channel), which spans the same kernels. S4's LRA configs set ``n_ssm: 1``
on ListOps, Text, Retrieval and Image (state-spaces/s4@e757cef configs/experiment/lra/
s4-listops.yaml line 23, s4-imdb.yaml 26, s4-aan.yaml 26, s4-cifar.yaml 21) and leave it null on
Pathfinder and Path-X.

Optimiser group "ssm" (``train.ssm_lr``, no weight decay; attention/_ssm.py): ``log_A_real``,
``A_imag``, ``log_dt`` (A and the step, as the S4 repository's kernel lr).
``num_heads``, ``qkv_dim`` and ``dropout`` are accepted for the shared signature and not used.
Options: ``state_size`` N (64), ``init`` ("lin"), ``dt_min`` (1e-3), ``dt_max`` (0.1),
``discretization`` ("zoh"), ``n_ssm`` (None: one A per channel).
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
from flax import nnx
from lra.attention import register
from lra.attention._ssm import bidirectional_fft_conv, masked_input, ssm_param

INITS = ("lin", "inv")
DISCRETIZATIONS = ("zoh", "bilinear")


def s4d_imag_init(init: str, state_size: int) -> jax.Array:
    """float32[N/2]: imaginary parts of A for S4D-Lin or S4D-Inv (N = state_size)."""
    n = jnp.arange(state_size // 2, dtype=jnp.float32)
    if init == "lin":
        return math.pi * n
    if init == "inv":
        return (state_size / math.pi) * (state_size / (2 * n + 1) - 1)
    raise ValueError(f"s4d: init must be one of {', '.join(INITS)}, got {init!r}")


def discretize(a: jax.Array, dt: jax.Array, method: str) -> tuple[jax.Array, jax.Array]:
    """a: complex[..., N]; dt: float[..., 1] -> (dA, dB), complex[..., N] (B = 1)."""
    if method == "zoh":
        da = jnp.exp(dt * a)
        return da, (da - 1.0) / a
    if method == "bilinear":
        inv = 1.0 / (1.0 - dt * a / 2)
        return (1.0 + dt * a / 2) * inv, dt * inv
    raise ValueError(f"discretization must be one of {', '.join(DISCRETIZATIONS)}, got {method!r}")


def s4d_kernel(a: jax.Array, dt: jax.Array, c: jax.Array, length: int,
               discretization: str = "zoh") -> jax.Array:
    """The convolution kernel by a Vandermonde product.

    a: complex64[D, N/2]; dt: float32[D]; c: complex64[K, D, N/2] (K kernels sharing A and dt).
    Returns float32[K, D, length]: K[k, h, l] = 2 Re sum_n c[k, h, n] dB[h, n] dA[h, n]^l.
    """
    da, db = discretize(a, dt[:, None], discretization)
    # dA^l as exp(l log dA): one [D, N/2, L] Vandermonde matrix, no sequential powers. Under ZOH
    # log dA is dt A exactly (no round trip through exp and log).
    log_da = dt[:, None] * a if discretization == "zoh" else jnp.log(da)
    vandermonde = jnp.exp(log_da[..., None] * jnp.arange(length, dtype=jnp.float32)[None, None, :])
    return 2.0 * jnp.einsum("khn,hnl->khl", c * db[None], vandermonde).real


@register("s4d")
class S4D(nnx.Module):
    """Diagonal state-space convolution (S4D), bidirectional unless causal."""

    display_name = "S4D"
    kind = "state space"
    paper = "Gu et al., NeurIPS 2022"
    complexity = "O(L N d + L log L d)"
    subquadratic = True
    recurrent_state = "dim * state_size"
    """N/2 complex modes per channel (their conjugates are implied): D N real numbers."""
    modern_row = "S4D-Inv"  # the printed row of the initialisation the recipe trains (attn.init)
    modern_departure = ("the S4 block's GLU runs as a half-GLU; the encoder adds positions")
    attention_dropout = False  # a convolution with an SSM kernel has no attention weights to drop
    parameter_note = ("a diagonal state space per channel (complex A, B, C, a step size and D) and an "
                      "output mixing layer replace the q, k, v and output projections")

    def __init__(self, dim: int, num_heads: int, *, qkv_dim: int | None = None,
                 causal: bool = False, dropout: float = 0.0, rngs: nnx.Rngs,
                 state_size: int = 64, init: str = "lin", dt_min: float = 1e-3,
                 dt_max: float = 0.1, discretization: str = "zoh", n_ssm: int | None = None):
        del num_heads, qkv_dim, dropout
        if state_size < 2 or state_size % 2:
            raise ValueError(f"s4d: state_size must be an even number >= 2, got {state_size}")
        if not 0 < dt_min <= dt_max:
            raise ValueError(f"s4d: need 0 < dt_min <= dt_max, got {dt_min}, {dt_max}")
        if discretization not in DISCRETIZATIONS:
            raise ValueError(f"s4d: discretization must be one of {', '.join(DISCRETIZATIONS)}, "
                             f"got {discretization!r}")
        if n_ssm is not None and (isinstance(n_ssm, bool) or not isinstance(n_ssm, int)
                                  or n_ssm < 1 or dim % n_ssm):
            raise ValueError(f"s4d: n_ssm must be None or a positive divisor of dim={dim}, "
                             f"got {n_ssm!r}")
        modes = state_size // 2
        copies = dim if n_ssm is None else n_ssm
        self.dim = dim
        self.causal = causal
        self.discretization = discretization
        self.log_A_real = ssm_param(jnp.full((copies, modes), math.log(0.5), jnp.float32))
        self.A_imag = ssm_param(jnp.broadcast_to(s4d_imag_init(init, state_size)[None],
                                                 (copies, modes)))
        self.log_dt = ssm_param(jax.random.uniform(
            rngs.params(), (dim,), jnp.float32, math.log(dt_min), math.log(dt_max)), step_size=True)
        kernels = 1 if causal else 2
        # complex normal with unit variance: real and imaginary parts each N(0, 1/2)
        self.C = nnx.Param(jax.random.normal(rngs.params(), (kernels, dim, modes, 2)) * math.sqrt(0.5))
        self.D = nnx.Param(jax.random.normal(rngs.params(), (dim,)))

    def A(self) -> jax.Array:
        """complex64[D, N/2]: the diagonal state matrix (real part kept negative by exp); with
        ``n_ssm`` copies, channel h reads copy h mod n_ssm."""
        a = -jnp.exp(self.log_A_real[...]) + 1j * self.A_imag[...]
        return jnp.tile(a, (self.dim // a.shape[0], 1))

    def kernels(self, length: int) -> jax.Array:
        """float32[K, D, length] (K = 1 causal, 2 bidirectional: forward, then reverse)."""
        c = self.C[...]
        return s4d_kernel(self.A(), jnp.exp(self.log_dt[...]), c[..., 0] + 1j * c[..., 1], length,
                          self.discretization)

    def __call__(self, x: jax.Array, mask: jax.Array | None = None, *,
                 deterministic: bool = True) -> jax.Array:
        if x.shape[-1] != self.dim:
            raise ValueError(f"s4d: input width {x.shape[-1]} != dim={self.dim}")
        u = masked_input(x, mask)
        k = self.kernels(x.shape[1])
        y = bidirectional_fft_conv(u, k[0], None if self.causal else k[1])
        return (y + self.D[...][None, None, :] * u).astype(x.dtype)
