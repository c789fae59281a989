"""Mega: Ma et al., "Mega: Moving Average Equipped Gated Attention", ICLR 2023 (arXiv 2209.10655).

The mixer of Mega's layer: a multi-dimensional damped EMA feeding single-head gated attention.

1. Damped EMA, per channel d and EMA dimension j = 1..h (``ndim``), in the paper's letters::

       s_t,dj  = alpha_dj beta_dj x_t,d + (1 - alpha_dj delta_dj) s_{t-1},dj
       ema_t,d = sum_j eta_dj s_t,dj / sqrt(h)

   The parameters keep the names of Mega's code, where they are swapped: paper alpha =
   sigmoid(``delta``), paper delta = sigmoid(``alpha``); ``eta`` is the code's ``gamma``.

   unrolled into one kernel per channel, K_d[l] = sum_j eta_dj alpha_dj beta_dj q_dj^l / sqrt(h) with
   q = 1 - alpha delta, applied by FFT convolution of length 2L; mx = silu(K * x + omega (.) x).
   Bidirectional (``causal=False``, as every Mega LRA encoder): a second set of EMA parameters gives
   a second kernel applied to the reversed sequence; both directions include the current token.
2. From mx (D -> D + z + hidden + D): update gate u = sigmoid(.), z and reset gate r = silu(.),
   candidate hx; v = silu(W_v x). q = z gamma_q + beta_q, k = z gamma_k + beta_k (per-dim affine).
3. Single-head attention over v with a learned relative-position bias b[j - i]:

   * ``attn_fn="softmax"``: softmax(q k^T / sqrt(z) + b), padded (and future, if causal) keys masked
     with a finite -1e30 (no NaN for a row with no allowed key).
   * ``attn_fn="laplace"`` (Mega's choice on image tasks): f(q k^T / n + b) with
     f(x) = (1 + erf((x - mu) / (sigma sqrt 2))) / 2, mu = sqrt(1/2), sigma = sqrt(1/(4 pi)), n the
     number of allowed keys of the row (min 1); disallowed keys get weight 0.

4. h = silu(hx + W_h(r (.) (A v))); the mixer returns u (.) h.

Residual: Mega's layer ends with u (.) h + (1 - u) (.) x, a gated residual. Under the attention
contract the encoder's block adds the residual itself (x + mixer(norm(x))), so this mixer returns
the gated update u (.) h and the block's plain residual replaces the (1 - u) (.) x term. The
normalised feed-forward network of Mega's layer is the encoder block's MLP.

Cost. Without chunking (``chunk_size=0``, the default, = Mega as published for ListOps/Text/
Retrieval) the attention is full: O(L^2 z) time and O(L^2) memory; the family is therefore NOT marked
sub-quadratic. ``chunk_size=c`` (Mega-chunk) restricts attention to blocks of c positions (the length
is padded to a multiple of c; pads are masked keys), O(L c z) time and O(L c) memory: linear in L. The
EMA runs over the whole sequence in both cases (O(L log L d)).

Padding: the mixer's input is zeroed at pads (so the EMA's reverse kernel is exact, see
attention/_ssm.py, and v is the same at every pad), and padded keys get no attention weight. Mega's
EMA does the same: ``MultiHeadEMA.forward`` zeroes its input where the padding mask is set
(facebookresearch/mega@aeaa4b4 fairseq/modules/exponential_moving_average.py, lines 179-180).

Linear maps are initialised N(0, 0.02) with zero bias; gamma_q/k ~ N(0, 0.02), beta_q/k = 0; EMA:
delta, alpha raw ~ N(0, 0.2), beta ~ N(0, 0.02) + (1, -1, 1, ...) over j, eta ~ N(0, 1),
omega ~ N(0, 1); relative bias N(0, 0.02) over 2 max_pos - 1 offsets (max_pos = chunk_size when
chunking, else ``max_len``). ``num_heads`` and ``qkv_dim`` are not used (Mega is single-head; its
sizes are ``z_dim`` and ``hidden_dim``). ``dropout`` applies to the attention weights.
Optimiser group "ssm" (``train.ssm_lr``, no weight decay; attention/_ssm.py): the EMA's ``delta``,
``alpha``, ``beta``, ``eta`` (not ``omega``, a residual scale).
Options: ``ndim`` h (16), ``z_dim`` (64), ``hidden_dim`` (0 = 2 dim), ``attn_fn`` ("softmax"),
``chunk_size`` (0 = full attention).
"""

from __future__ import annotations

import math
from typing import ClassVar

import jax
import jax.numpy as jnp
from flax import nnx
from lra.attention import register
from lra.attention._projections import MASKED_LOGIT, dropout_probs
from lra.attention._ssm import bidirectional_fft_conv, masked_input, ssm_param

ATTN_FNS = ("softmax", "laplace")
_LAPLACE_MU = math.sqrt(0.5)
_LAPLACE_SIGMA = math.sqrt(1.0 / (4 * math.pi))


def laplace(x: jax.Array) -> jax.Array:
    """Mega's laplace attention function: the normal CDF with mean sqrt(1/2), std sqrt(1/(4 pi))."""
    return 0.5 * (1.0 + jax.scipy.special.erf((x - _LAPLACE_MU) / (_LAPLACE_SIGMA * math.sqrt(2.0))))


def ema_kernel(delta: jax.Array, alpha: jax.Array, beta: jax.Array, eta: jax.Array,
               length: int) -> jax.Array:
    """Damped-EMA kernels. delta, alpha, beta, eta: float32[C, h] (delta, alpha before the sigmoid).

    Returns float32[C, length]: K[c, l] = sum_j eta alpha beta q^l / sqrt(h), q = 1 - alpha delta.
    """
    a, d = jax.nn.sigmoid(delta), jax.nn.sigmoid(alpha)
    q = 1.0 - a * d
    powers = jnp.exp(jnp.log(q)[..., None] * jnp.arange(length, dtype=jnp.float32)[None, None, :])
    scale = 1.0 / math.sqrt(delta.shape[-1])
    return jnp.einsum("cj,cjl->cl", eta * a * beta * scale, powers)


class DampedEMA(nnx.Module):
    """Multi-dimensional damped EMA of float[B, L, D]; bidirectional unless causal."""

    def __init__(self, dim: int, ndim: int, *, causal: bool, rngs: nnx.Rngs):
        channels = dim if causal else 2 * dim  # forward kernels, then reverse ones
        self.dim = dim
        self.causal = causal
        self.delta = ssm_param(jax.random.normal(rngs.params(), (channels, ndim)) * 0.2)
        self.alpha = ssm_param(jax.random.normal(rngs.params(), (channels, ndim)) * 0.2)
        signs = jnp.where(jnp.arange(ndim) % 2 == 0, 1.0, -1.0)[None, :]
        self.beta = ssm_param(jax.random.normal(rngs.params(), (channels, ndim)) * 0.02 + signs)
        self.eta = ssm_param(jax.random.normal(rngs.params(), (channels, ndim)))
        self.omega = nnx.Param(jax.random.normal(rngs.params(), (dim,)))

    def kernels(self, length: int) -> jax.Array:
        """float32[K, D, length], K = 1 (causal) or 2 (forward, reverse)."""
        k = ema_kernel(self.delta[...], self.alpha[...], self.beta[...], self.eta[...], length)
        return k.reshape(-1, self.dim, length)

    def linear(self, u: jax.Array) -> jax.Array:
        """The EMA proper, K * u (both directions): u float32[B, L, D] zero at pads -> float32[B, L, D]."""
        k = self.kernels(u.shape[1])
        return bidirectional_fft_conv(u, k[0], None if self.causal else k[1])

    def __call__(self, u: jax.Array) -> jax.Array:
        return jax.nn.silu(self.linear(u) + self.omega[...][None, None, :] * u)


def relative_bias(table: jax.Array, length: int) -> jax.Array:
    """float32[length, length] with [i, j] = table[j - i + max_pos - 1]; table: float32[2 max_pos - 1]."""
    max_pos = (table.shape[0] + 1) // 2
    offsets = jnp.arange(length)[None, :] - jnp.arange(length)[:, None]
    return table[offsets + max_pos - 1]


def mega_attention(q: jax.Array, k: jax.Array, v: jax.Array, mask: jax.Array, bias: jax.Array, *,
                   attn_fn: str, causal: bool, chunk_size: int = 0, dropout_rate: float = 0.0,
                   dropout_rng: jax.Array | None = None) -> jax.Array:
    """Single-head attention inside chunks.

    q, k: float32[B, L, z]; v: float32[B, L, E]; mask: bool[B, L] (True = real key); bias: float32[2 m - 1]
    relative-position table, m >= block length. ``chunk_size`` 0: one block of length L. Returns
    float32[B, L, E].
    """
    b, length, _ = q.shape
    c = chunk_size if 0 < chunk_size < length else length
    n = -(-length // c)
    pad = n * c - length

    def blocks(a):
        a = jnp.pad(a, [(0, 0), (0, pad)] + [(0, 0)] * (a.ndim - 2))
        return a.reshape(b, n, c, *a.shape[2:])

    qb, kb, vb, mb = blocks(q), blocks(k), blocks(v), blocks(mask)
    allowed = jnp.broadcast_to(mb[:, :, None, :], (b, n, c, c))
    if causal:
        allowed = allowed & (jnp.arange(c)[None, :] <= jnp.arange(c)[:, None])[None, None]
    scores = jnp.einsum("bnqz,bnkz->bnqk", qb, kb)
    rel = relative_bias(bias, c)[None, None]
    if attn_fn == "softmax":
        logits = scores / math.sqrt(q.shape[-1]) + rel
        probs = jax.nn.softmax(jnp.where(allowed, logits, MASKED_LOGIT), axis=-1)
    elif attn_fn == "laplace":
        count = jnp.maximum(jnp.sum(allowed, axis=-1, keepdims=True), 1).astype(jnp.float32)
        probs = jnp.where(allowed, laplace(scores / count + rel), 0.0)
    else:
        raise ValueError(f"mega: attn_fn must be one of {', '.join(ATTN_FNS)}, got {attn_fn!r}")
    probs = dropout_probs(probs, dropout_rate, dropout_rng)
    out = jnp.einsum("bnqk,bnke->bnqe", probs, vb)
    return out.reshape(b, n * c, -1)[:, :length]


def _linear(d_in: int, d_out: int, rngs: nnx.Rngs) -> nnx.Linear:
    return nnx.Linear(d_in, d_out, kernel_init=nnx.initializers.normal(0.02),
                      bias_init=nnx.initializers.zeros_init(), rngs=rngs)


@register("mega")
class Mega(nnx.Module):
    """Mega's moving-average gated attention (optionally chunked: Mega-chunk)."""

    display_name = "Mega"
    kind = "state space"
    paper = "Ma et al., ICLR 2023"
    complexity = "O(L^2 z); chunk c: O(L c z)"
    subquadratic = False  # the default is full attention; chunk_size > 0 is linear (see docstring)
    recurrent_state = ("ndim * dim"
                       " + (min(L, chunk_size) if chunk_size else L) * (z_dim + (hidden_dim or 2 * dim))")
    """The EMA's ndim states per channel, and the keys (z_dim) and values (hidden_dim) of the current
    chunk (of every position so far with chunk_size = 0)."""
    length_options = ("chunk_size",)
    modern_row = "Mega"
    modern_departure = ("ScaleNorm runs as LayerNorm, the EMA is not truncated; "
                        "the encoder adds positions")
    parameter_note = ("a multi-dimensional damped EMA plus gated single-head attention with its own "
                      "gate and value projections")
    # The shared contract tests (L=64) then run the chunked path, pads inside the last chunk included;
    # tests/attention/test_mega.py covers full attention.
    contract_options: ClassVar[dict[str, int]] = {"chunk_size": 16}

    def __init__(self, dim: int, num_heads: int, *, qkv_dim: int | None = None,
                 causal: bool = False, max_len: int | None = None, dropout: float = 0.0,
                 rngs: nnx.Rngs, ndim: int = 16, z_dim: int = 64, hidden_dim: int = 0,
                 attn_fn: str = "softmax", chunk_size: int = 0):
        del num_heads, qkv_dim
        if attn_fn not in ATTN_FNS:
            raise ValueError(f"mega: attn_fn must be one of {', '.join(ATTN_FNS)}, got {attn_fn!r}")
        if chunk_size < 0:
            raise ValueError(f"mega: chunk_size must be >= 0 (0 = full attention), got {chunk_size}")
        if chunk_size == 0 and not max_len:
            raise ValueError("mega: full attention (chunk_size=0) needs max_len for its relative "
                             "position bias")
        if ndim < 1 or z_dim < 1 or hidden_dim < 0:
            raise ValueError(f"mega: need ndim >= 1, z_dim >= 1, hidden_dim >= 0, got {ndim}, "
                             f"{z_dim}, {hidden_dim}")
        hidden = hidden_dim or 2 * dim
        self.dim, self.z_dim, self.hidden = dim, z_dim, hidden
        self.causal = causal
        self.attn_fn = attn_fn
        self.chunk_size = chunk_size
        self.dropout = dropout
        self.rngs = rngs
        self.max_pos = chunk_size or max_len
        self.ema = DampedEMA(dim, ndim, causal=causal, rngs=rngs)
        self.v_proj = _linear(dim, hidden, rngs)
        self.mx_proj = _linear(dim, 2 * dim + z_dim + hidden, rngs)
        self.h_proj = _linear(hidden, dim, rngs)
        self.qk_gamma = nnx.Param(jax.random.normal(rngs.params(), (2, z_dim)) * 0.02)
        self.qk_beta = nnx.Param(jnp.zeros((2, z_dim)))
        self.rel_pos = nnx.Param(jax.random.normal(rngs.params(), (2 * self.max_pos - 1,)) * 0.02)

    def __call__(self, x: jax.Array, mask: jax.Array | None = None, *,
                 deterministic: bool = True) -> jax.Array:
        if x.shape[-1] != self.dim:
            raise ValueError(f"mega: input width {x.shape[-1]} != dim={self.dim}")
        length = x.shape[1]
        if self.chunk_size == 0 and length > self.max_pos:
            raise ValueError(f"mega: sequence of length {length} exceeds max_len={self.max_pos}")
        xn = masked_input(x, mask)
        mask = jnp.ones(x.shape[:2], bool) if mask is None else mask.astype(bool)
        v = jax.nn.silu(self.v_proj(xn))
        mx = self.ema(xn)
        d, z = self.dim, self.z_dim
        base = self.mx_proj(mx)
        u = jax.nn.sigmoid(base[..., :d])
        zr = jax.nn.silu(base[..., d:d + z + self.hidden])
        hx = base[..., d + z + self.hidden:]
        zq, r = zr[..., :z], zr[..., z:]
        gamma, beta = self.qk_gamma[...], self.qk_beta[...]
        q = zq * gamma[0][None, None] + beta[0][None, None]
        k = zq * gamma[1][None, None] + beta[1][None, None]
        rng = None if deterministic or self.dropout == 0.0 else self.rngs.dropout()
        attn = mega_attention(q, k, v, mask, self.rel_pos[...], attn_fn=self.attn_fn,
                              causal=self.causal, chunk_size=self.chunk_size,
                              dropout_rate=self.dropout, dropout_rng=rng)
        h = jax.nn.silu(hx + self.h_proj(r * attn))
        return (u * h).astype(x.dtype)
