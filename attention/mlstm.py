"""mLSTM: Beck, Poeppel, Spanring, Auer, Prudnikova, Kopp, Klambauer, Brandstetter and Hochreiter,
"xLSTM: Extended Long Short-Term Memory", NeurIPS 2024 (arXiv 2405.04517), the matrix-memory cell.

Per head (K = V = qkv_dim / H), matrix memory C, normaliser n and stabiliser m::

    C_t = f_t C_{t-1} + i_t k_t v_t^T,     n_t = f_t n_{t-1} + i_t k_t,     k scaled by K^-1/2
    h_t = C_t^T q_t / (max(|n_t . q_t|, exp(-m_t)) + 1e-6)        (C, n, h stabilised by e^{-m_t})
    i_t = exp(x W_i + b_i)  (exponential input gate),   f_t = sigmoid(x W_f + b_f)  or  exp(x W_f + b_f)
    m_t = max(log f_t + m_{t-1}, log i_t)
    q, k = (c W_q, c W_k) with c = SiLU(conv1d(x)) (width 4),   v = x W_v
    out = W_o (GroupNorm_h(h) (.) sigmoid(x W_og))

The output depends on the stabiliser only through the 1e-6: with unstabilised sums N_t, Z_t,
h_t = N_t / (max(|Z_t|, 1) + 1e-6 e^{m_t}), so m, which only keeps exp(i) from overflowing, moves h by
a relative 1e-6 e^{m_t} / max(|Z_t|, 1) at most (the official code has the same +1e-6:
NX-AI/xlstm@032a6fb xlstm/blocks/mlstm/backends.py, ``eps=1e-6``, lines 85 and 143). So two
implementations agree exactly only when they use the same m_t. The chunked kernel's stabilised path
(attention/_chunked.py ``log_input``: per-row and per-chunk-state log-scales; chunk 64) gives each
row the largest of its log-weights, which is the recurrence's m_t started from m = -inf and the
official parallel form's row maximum (``max_log_D``, backends.py line 71); the normaliser is the
kernel applied to v = 1.

Initialisation (the xLSTM cell): gate kernels 0; forget-gate bias linspace(3, 6) over the heads;
input-gate bias N(0, 0.1^2). Gates in float32.

The paper's block adds a pre-up-projection (x2) and a learnable skip around this cell; here the
encoder's block is the block, and the cell runs at qkv_dim.

Departures from the official code (NX-AI/xlstm@032a6fb, xlstm/blocks/mlstm/):

* Gates. Here i and f are computed from x, as the paper's cell equations write them; the official
  cell computes both from cat([q, k, v]) (cell.py: ``igate``, ``fgate`` on 3 x the embedding width,
  lines 30-31; ``if_gate_input = torch.cat([q, k, v], dim=-1)``, line 46).
* Output gate. Here sigmoid(x W_og), the paper's cell equation; the official layer has no sigmoid
  gate and multiplies by SiLU(z) of the up-projection's second half instead (layer.py line 121).
* Projections. Here W_q, W_k, W_v are dense; the official layer's are block-diagonal with blocks of
  4 channels (``LinearHeadwiseExpand``, ``qkv_proj_blocksize=4``; layer.py lines 21 and 52-70).

Bidirectional (``causal=False``): summed directions with shared parameters (attention/_mixers.py), the
conv and the normalised cell run on x and on x reversed within each example's true length (each
direction normalised by its own n). ``causal=True``: the forward direction.

Padding: the conv input and output are zero at pads, so k = 0 there; the input gate's log is a large
finite negative value (-1e4; -inf would make exp(-m) infinite) and log f = 0 (decay 1).

``dropout`` is accepted and not used. Options: ``forget_gate`` ("sigmoid" or "exp"), ``conv_size``
(4), ``chunk_size`` (64).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx
from lra.attention import register
from lra.attention._chunked import chunked_decay_attention
from lra.attention._mixers import HeadNorm, Linear, ShortConv, both_directions, real_mask, zero_pads
from lra.attention._projections import Dense, head_dim

FORGET_GATES = ("sigmoid", "exp")
PAD_LOG_INPUT = -1e4


def mlstm_cell(q, k, v, log_i, log_f, *, chunk_size: int = 64) -> jax.Array:
    """h float32[B, L, H, V] from q, k [B, L, H, K] (k already scaled), v [B, L, H, V] and the gates'
    logs log_i, log_f [B, L, H], by the stabilised chunked kernel."""
    ones = jnp.ones(v.shape[:3] + (1,), jnp.float32)
    out, m = chunked_decay_attention(q, k, jnp.concatenate([v.astype(jnp.float32), ones], -1),
                                     log_f, chunk_size=chunk_size, log_input=log_i)
    num, den = out[..., :-1], out[..., -1:]
    return num / (jnp.maximum(jnp.abs(den), jnp.exp(-m)[..., None]) + 1e-6)


@register("mlstm")
class MLSTM(nnx.Module):
    """xLSTM's matrix memory (exponential input gate, stabiliser, normaliser) by the chunked kernel."""

    display_name = "mLSTM"
    kind = "2023-25 mixer"
    paper = "Beck et al., NeurIPS 2024"
    complexity = "O(L C d + L d^2 / H)"
    subquadratic = True
    recurrent_state = "qkv_dim * qkv_dim // heads + qkv_dim + heads + (conv_size - 1) * dim"
    """Per head C (K x V), n (K) and the stabiliser m, and the convolution's last conv_size - 1 inputs."""
    length_options = ("chunk_size",)
    attention_dropout = False  # the weights are never formed
    parameter_note = ("the output gate W_og adds a fifth qkv_dim x D projection to q, k, v and the "
                      "output (1.25x softmax attention's)")

    def __init__(self, dim: int, num_heads: int, *, qkv_dim: int | None = None,
                 causal: bool = False, dropout: float = 0.0, rngs: nnx.Rngs,
                 forget_gate: str = "sigmoid", conv_size: int = 4, chunk_size: int = 64):
        del dropout
        if forget_gate not in FORGET_GATES:
            raise ValueError(f"mlstm: forget_gate must be one of {', '.join(FORGET_GATES)}, "
                             f"got {forget_gate!r}")
        qkv_dim = qkv_dim or dim
        self.head = head_dim(qkv_dim, num_heads)
        self.dim, self.heads, self.causal, self.chunk_size = dim, num_heads, causal, chunk_size
        self.forget_gate = forget_gate
        self.conv = ShortConv(dim, conv_size, rngs=rngs)
        self.q_proj = Dense(dim, qkv_dim, rngs=rngs)
        self.k_proj = Dense(dim, qkv_dim, rngs=rngs)
        self.v_proj = Dense(dim, qkv_dim, rngs=rngs)
        # One zeros array each: two parameters holding one buffer cannot both be donated to a
        # jitted step ("Attempt to donate the same buffer twice", lra.bench).
        self.i_gate = Linear(dim, num_heads, rngs=rngs, kernel=jnp.zeros((dim, num_heads)),
                             bias=0.1 * jax.random.normal(rngs.params(), (num_heads,)))
        self.f_gate = Linear(dim, num_heads, rngs=rngs, kernel=jnp.zeros((dim, num_heads)),
                             bias=jnp.linspace(3.0, 6.0, num_heads, dtype=jnp.float32))
        self.og_proj = Dense(dim, qkv_dim, rngs=rngs)
        self.norm = HeadNorm(num_heads, self.head, kind="group")
        self.o_proj = Dense(qkv_dim, dim, rngs=rngs)

    def _direction(self, x, mask):
        heads = (*x.shape[:2], self.heads, self.head)
        c = jax.nn.silu(self.conv(x, mask))
        q = self.q_proj(c).reshape(heads)
        k = self.k_proj(c).reshape(heads) * (self.head ** -0.5)
        v = zero_pads(self.v_proj(x.astype(jnp.float32)), mask).reshape(heads)
        log_i = jnp.where(mask[..., None], self.i_gate(x), PAD_LOG_INPUT)
        f = self.f_gate(x)
        log_f = zero_pads(jax.nn.log_sigmoid(f) if self.forget_gate == "sigmoid" else f, mask)
        return mlstm_cell(q, k, v, log_i, log_f, chunk_size=self.chunk_size)

    def __call__(self, x: jax.Array, mask: jax.Array | None = None, *,
                 deterministic: bool = True) -> jax.Array:
        if x.shape[-1] != self.dim:
            raise ValueError(f"mlstm: input width {x.shape[-1]} != dim={self.dim}")
        mask = real_mask(mask, x)
        h = self.norm(both_directions(self._direction, (zero_pads(x, mask),), mask, self.causal))
        h = h.reshape(*h.shape[:2], -1) * jax.nn.sigmoid(self.og_proj(x).astype(jnp.float32))
        return self.o_proj(h.astype(x.dtype))
