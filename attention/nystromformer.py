"""Nystromformer: Xiong et al., "Nystromformer: A Nystrom-Based Algorithm for Approximating
Self-Attention", AAAI 2021 (arXiv 2102.03902).

Per head, with q, k, v in R^{L x d}, key mask m (1 = real) and m_l landmarks q~, k~ in R^{m_l x d}::

    F = softmax(q k~^T / sqrt(d))          [L, m_l]
    A = softmax(q~ k~^T / sqrt(d))         [m_l, m_l]
    G = softmax(q~ k^T / sqrt(d) + B)      [m_l, L],  B_j = -1e30 where m_j = 0
    out = F (A^+ (G v)) + conv(m * v)

computed right to left: O(L m_l d + m_l^3) time and O(L m_l) memory per head.

Landmarks. The real tokens of each sequence (in order, wherever the mask puts them) are split into
m_l contiguous segments; the real token of rank r (0-based, among n real tokens) falls in segment
floor(r m_l / n). Segment sizes are floor(n/m_l) or ceil(n/m_l), so any n is handled without
padding to a multiple of m_l, and when m_l divides n = L this is the paper's reshape-and-mean.
q~, k~ are the segment *means over real tokens only*: pads neither enter nor dilute the landmarks
(the official code multiplies q, k by the mask and then averages over padded segments, so pads
shrink the landmarks towards 0 and the landmarks depend on the padded length). Consequently a
padded input gives the same real outputs as the unpadded input.

If n < m_l, only n segments are non-empty (one real token each). Empty landmarks are excluded
exactly: their columns of F and A are masked out of the softmax and their rows of A replaced by
identity rows, so A is block-diagonal [[A_SS, 0], [0, I]], its pseudo-inverse is
[[A_SS^+, 0], [0, I]] (the iteration below preserves the blocks and leaves the max column sum
unchanged, since a row-stochastic A_SS has max column sum >= 1), and F A^+ G = F_S A_SS^+ G_S: the
Nystromformer with the n non-empty landmarks. (The official code instead requires L divisible by
m_l and, for m_l = L, switches to exact softmax attention.)

Pseudo-inverse: ``pinv_iterations`` (6) steps of the cubically convergent update
Z <- 1/4 Z (13 I - A Z (15 I - A Z (7 I - A Z))) from Z_0 = A^T / (||A||_1 ||A||_inf), i.e.
divided by the max absolute row sum times the max absolute column sum of each head's A (per head,
not the batch-global max of the "original" official init). The residual I - A Z contracts as
E -> 3/4 E^3 + 1/4 E^4, so 6 steps suffice for well-conditioned A; for near-singular A (near-uniform
attention) the small singular values are not inverted and the result is only an approximate
inverse. All three softmaxes, the pseudo-inverse (at HIGHEST matmul precision, so that TPUs and GPUs
do not round it to bf16/tf32) and the products with it are float32; the output returns to the input
dtype.

Skip connection: a depthwise convolution over the sequence on v (``conv_kernel`` taps, one kernel
per head shared by the head's d channels, "same" zero padding, no bias: the official
``Conv2d(h, h, (kernel, 1), groups=h)``). Padded values are zeroed before the convolution, so real
outputs do not depend on pad contents; they do see that a neighbour is a pad (a zero). PyTorch's
default init U(+-1/sqrt(kernel)). Odd kernels are centred; an even kernel reaches one tap further
left than right.

No attention dropout (the official Nystrom attention has none; the encoder's dropout still
applies). No causal mode.

Options: ``num_landmarks`` (64, as the paper's LRA runs), ``conv_kernel`` (35 as the paper's LRA
runs; 0 = no skip convolution), ``pinv_iterations`` (6).
"""

from __future__ import annotations

from typing import ClassVar

import jax
import jax.numpy as jnp
from flax import nnx
from lra.attention import register
from lra.attention._projections import MASKED_LOGIT, HeadProjections, key_mask

_HIGHEST = jax.lax.Precision.HIGHEST


def landmark_weights(mask: jax.Array, num_landmarks: int) -> tuple[jax.Array, jax.Array]:
    """Segment-mean weights over real tokens.

    mask: bool[B, L] (True = real). Returns w float32[B, L, m] with w[b, i, s] = 1/|segment s|
    if real token i is in segment s (else 0), and valid bool[B, m] (segment s is non-empty).
    """
    real = mask.astype(jnp.int32)
    n = real.sum(-1, keepdims=True)  # [B, 1]
    rank = jnp.cumsum(real, axis=-1) - 1
    segment = (rank * num_landmarks) // jnp.maximum(n, 1)  # [B, L], in [0, m) at real tokens
    member = (segment[..., None] == jnp.arange(num_landmarks)[None, None, :]) & mask[..., None]
    count = member.sum(1)  # [B, m]
    w = member.astype(jnp.float32) / jnp.maximum(count, 1)[:, None, :].astype(jnp.float32)
    return w, count > 0


def iterative_pinv(a: jax.Array, iterations: int = 6) -> jax.Array:
    """Moore-Penrose pseudo-inverse of each float[..., m, m] matrix by the Nystromformer iteration.

    Z_0 = A^T / (max_i sum_j |A_ij| * max_j sum_i |A_ij|), then
    Z <- 1/4 Z (13 I - A Z (15 I - A Z (7 I - A Z))). Computed in float32.
    """
    a = a.astype(jnp.float32)
    m = a.shape[-1]
    eye = jnp.broadcast_to(jnp.eye(m, dtype=jnp.float32), a.shape)
    row = jnp.abs(a).sum(-1).max(-1)
    col = jnp.abs(a).sum(-2).max(-1)
    z = jnp.swapaxes(a, -1, -2) / (row * col)[..., None, None]
    mm = lambda x, y: jnp.matmul(x, y, precision=_HIGHEST)  # noqa: E731
    for _ in range(iterations):
        az = mm(a, z)
        z = 0.25 * mm(z, 13 * eye - mm(az, 15 * eye - mm(az, 7 * eye - az)))
    return z


def nystromformer_kernel(q: jax.Array, k: jax.Array, v: jax.Array, mask: jax.Array | None = None,
                         *, num_landmarks: int = 64, pinv_iterations: int = 6) -> jax.Array:
    """Nystrom approximation of softmax attention (without the convolution skip).

    q, k, v: float[B, L, H, d]; mask: bool[B, L] (True = real), which defines the landmarks and
    masks keys. Returns float[B, L, H, d] in q's dtype.
    """
    if mask is None:
        mask = jnp.ones(q.shape[:2], dtype=bool)
    mask = mask.astype(bool)
    scale = 1.0 / jnp.sqrt(jnp.float32(q.shape[-1]))
    qf, kf = q.astype(jnp.float32), k.astype(jnp.float32)
    vf = jnp.where(mask[:, :, None, None], v.astype(jnp.float32), 0.0)
    w, valid = landmark_weights(mask, num_landmarks)
    q_l = jnp.einsum("blm,blhd->bmhd", w, qf)
    k_l = jnp.einsum("blm,blhd->bmhd", w, kf)

    col_ok = valid[:, None, None, :]  # [B, 1, 1, m]
    f = jnp.einsum("blhd,bmhd->bhlm", qf, k_l) * scale
    f = jax.nn.softmax(jnp.where(col_ok, f, MASKED_LOGIT), axis=-1)
    a = jnp.einsum("bmhd,bnhd->bhmn", q_l, k_l) * scale
    a = jax.nn.softmax(jnp.where(col_ok, a, MASKED_LOGIT), axis=-1)
    eye = jnp.broadcast_to(jnp.eye(num_landmarks, dtype=bool), a.shape)
    # Empty landmarks get identity rows: A = blockdiag(A_SS, I) excludes them exactly.
    a = jnp.where(valid[:, None, :, None], a, eye.astype(jnp.float32))
    g = jnp.einsum("bmhd,blhd->bhml", q_l, kf) * scale
    g = jax.nn.softmax(jnp.where(mask[:, None, None, :], g, MASKED_LOGIT), axis=-1)

    gv = jnp.einsum("bhml,blhd->bhmd", g, vf)
    zgv = jnp.matmul(iterative_pinv(a, pinv_iterations), gv, precision=_HIGHEST)
    out = jnp.einsum("bhlm,bhmd->blhd", f, zgv)
    return out.astype(q.dtype)


def depthwise_conv(v: jax.Array, kernel: jax.Array) -> jax.Array:
    """Per-head convolution along length: v float[B, L, H, d], kernel float[H, K] -> like v.

    Cross-correlation (as PyTorch's Conv2d) with "same" zero padding, out[l] = sum_t k[t]
    v[l + t - K // 2]; each head's kernel is applied to each of its d channels. Computed as a
    product of real FFTs of length >= L + K - 1 (no wrap-around), in float32, so the cost is
    O(L log L) per channel whatever K. Fwd+bwd at B=4 H=8 d=64 K=33 on the 2-core CPU: 0.37x the
    time of the K shifted multiply-adds this replaced at L=1024 and 0.49x at 4096 (which were
    themselves 2.2x faster than XLA:CPU's grouped convolution, whose backward is slow). Agrees with
    the direct sum to float32 rounding (tests/attention/test_nystromformer.py).
    """
    length, taps = v.shape[1], kernel.shape[-1]
    n_fft = 1 << (length + taps - 2).bit_length()  # a power of two >= L + K - 1
    x = jnp.moveaxis(v.astype(jnp.float32), 1, -1)  # [B, H, d, L]: the FFT runs on the last axis
    spectrum = jnp.fft.rfft(x, n=n_fft, axis=-1)
    # Correlation = convolution with the reversed kernel, read from offset K - 1 - K // 2.
    taps_spectrum = jnp.fft.rfft(kernel[:, ::-1].astype(jnp.float32), n=n_fft, axis=-1)  # [H, F]
    full = jnp.fft.irfft(spectrum * taps_spectrum[None, :, None, :], n=n_fft, axis=-1)
    start = taps - 1 - taps // 2
    return jnp.moveaxis(full[..., start:start + length], -1, 1).astype(v.dtype)


@register("nystromformer")
class NystromformerAttention(nnx.Module):
    """Multi-head Nystromformer attention with the depthwise convolution skip on v."""

    display_name = "Nyströmformer"
    kind = "2020 attention"
    paper = "Xiong et al., AAAI 2021"
    complexity = "O(L m d + m^3)"
    subquadratic = True
    recurrent_state = "qkv_dim * (2 * num_landmarks + conv_kernel)"
    """No causal form: the landmark keys and the landmarks' values A^+ G v every query reads, and the
    conv_kernel values of its skip convolution."""
    peer_options: ClassVar[dict] = {"num_landmarks": 256, "conv_kernel": 33}
    peer_mechanism = "nystrom"
    attention_dropout = False  # the official Nystrom attention has none
    # At L=64 the default 64 landmarks would be one token each: 8 landmarks (segments of 8 tokens,
    # 5 or 6 for the contract's sequence with 41 real tokens) exercise the landmark averaging.
    contract_options: ClassVar[dict] = {"num_landmarks": 8}

    @staticmethod
    def peer_matmuls(B: int, H: int, L: int, D: int) -> list[tuple[str, int, tuple]]:
        """256 landmarks; 6 pseudo-inverse iterations of 4 products (lra/bench/peers.py
        ``family_matmuls``)."""
        BH, m = B * H, 256
        return [("q k~", 1, (BH, L, D, m)), ("q~ k", 1, (BH, m, D, L)), ("(q~ k) v", 1, (BH, m, L, D)),
                ("pinv", 24, (BH, m, m, m)), ("out", 2, (BH, L, m, m))]

    def __init__(self, dim: int, num_heads: int, *, qkv_dim: int | None = None,
                 dropout: float = 0.0, rngs: nnx.Rngs, num_landmarks: int = 64,
                 conv_kernel: int = 35, pinv_iterations: int = 6):
        # No attention dropout: the official Nystrom attention has none.
        del dropout
        if num_landmarks < 1:
            raise ValueError(f"num_landmarks must be >= 1, got {num_landmarks}")
        self.proj = HeadProjections(dim, num_heads, qkv_dim, rngs=rngs)
        self.num_landmarks = num_landmarks
        self.pinv_iterations = pinv_iterations
        bound = 1.0 / max(conv_kernel, 1) ** 0.5
        self.conv = nnx.Param(jax.random.uniform(
            rngs.params(), (num_heads, conv_kernel), jnp.float32, -bound, bound)
        ) if conv_kernel else None

    def __call__(self, x: jax.Array, mask: jax.Array | None = None, *,
                 deterministic: bool = True) -> jax.Array:
        q, k, v = self.proj.qkv(x)
        mask = key_mask(mask, x)
        o = nystromformer_kernel(q, k, v, mask, num_landmarks=self.num_landmarks,
                                 pinv_iterations=self.pinv_iterations)
        if self.conv is not None:
            o = o + depthwise_conv(jnp.where(mask[:, :, None, None], v, jnp.zeros((), v.dtype)),
                                   self.conv[...])
        return self.proj.merge(o)
