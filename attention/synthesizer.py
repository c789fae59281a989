"""Synthesizer: Tay, Bahri, Metzler, Juan, Zhao, Zheng, "Synthesizer: Rethinking Self-Attention for
Transformer Models", ICML 2021 (arXiv 2005.00743).

Attention weights are synthesised instead of (or besides) computed from query-key dot products. Per
head h, with key mask m (1 = real), for a length L <= ``max_len``::

    dense:              S_h[i, :] = W2_h ReLU(W1 x_i)_h   in R^{max_len}, first L entries used
    random:             S_h = R_h[:L, :L],                R_h in R^{max_len x max_len} learned
    factorized_random:  S_h = (R1_h R2_h^T)[:L, :L],      R1_h, R2_h in R^{max_len x k}
    logits = S_h (+ q_i . k_j / sqrt(d) if ``mix_dot_product``),  -1e30 where m_j = 0 (or j > i
    if causal)
    out = softmax(logits) V

W1 maps the input to ``qkv_dim`` (split over heads, width d each) and W2_h maps d to max_len; all
maps are bias-free like the rest of the projections. Inputs shorter than ``max_len`` use the
top-left block of R (row i, column j always mean positions i and j); longer ones are an error.
The softmax is float32. Cost O(L^2 d) time, O(L^2) memory, plus O(H max_len^2) parameters in
random mode (O(H max_len k) factorised).

Options: ``mode`` ("random", LRA), ``mix_dot_product`` (True: LRA adds the dot-product logits to
the random ones), ``k`` (32, LRA; the rank of the factorised mode). Requires ``max_len``.

Relation to the LRA code (``lra_benchmarks/models/synthesizer``): the Synthesizer LRA ran is
"random + dot product" (mode random, ``ignore_dot_product=False``) with pads masked; the Text config
asks for ``factorized_random`` with k=32 and no dot product, but at the top level of the config,
which the text trainer never forwards to the model. LRA's dense mode reshapes [B, L, H, max_len]
to [B, H, L, max_len] without transposing (mixing heads and positions); here the heads are kept
apart. Initialisation: R, R1, R2 and W2 are Xavier-uniform per head (LRA: Xavier over the
whole [H, ., .] array).
"""

from __future__ import annotations

import math
from typing import ClassVar

import jax
import jax.numpy as jnp
from flax import nnx
from lra.attention import register
from lra.attention._projections import Dense, head_dim, key_mask
from lra.attention._softmax import attend

MODES = ("dense", "random", "factorized_random")
_per_head_xavier = nnx.initializers.xavier_uniform(batch_axis=(0,))


def synthesizer_kernel(q: jax.Array | None, k: jax.Array | None, v: jax.Array,
                       mask: jax.Array | None = None, *, synthetic: jax.Array,
                       causal: bool = False, dropout_rate: float = 0.0,
                       dropout_rng: jax.Array | None = None) -> jax.Array:
    """softmax(synthetic (+ q k^T / sqrt(d))) v, masked.

    q, k: float[B, L, H, d] or both None (no dot-product term); v: float[B, L, H, d];
    synthetic: float[B or 1, H, L, L] logits (query i, key j); mask: bool[B, L] over keys.
    Returns float[B, L, H, d] in v's dtype.
    """
    logits = synthetic.astype(jnp.float32)
    if q is not None:
        scale = 1.0 / math.sqrt(q.shape[-1])
        dots = jnp.einsum("bqhd,bkhd->bhqk", q, k, preferred_element_type=jnp.float32) * scale
        logits = logits + dots
    return attend(logits, v, mask, causal=causal, dropout_rate=dropout_rate, dropout_rng=dropout_rng)


@register("synthesizer")
class SynthesizerAttention(nnx.Module):
    """Multi-head Synthesizer attention (dense, random or factorised-random synthetic logits)."""

    display_name = "Synthesizer"
    kind = "2020 attention"
    paper = "Tay et al., ICML 2021"
    complexity = "O(L^2 d)"
    subquadratic = False
    recurrent_state = "L * qkv_dim * (2 if mix_dot_product else 1)"
    """The values of every position so far, and their keys with ``mix_dot_product``; the synthetic
    logits are parameters (random modes) or come from the query alone (dense)."""
    peer_options: ClassVar[dict] = {}
    parameter_note = "random mode learns an [H, L, L] logit matrix per layer"

    def __init__(self, dim: int, num_heads: int, *, qkv_dim: int | None = None,
                 causal: bool = False, max_len: int | None = None, dropout: float = 0.0,
                 rngs: nnx.Rngs, mode: str = "random", mix_dot_product: bool = True,
                 k: int = 32):
        if max_len is None:
            raise ValueError("synthesizer attention needs max_len: its synthetic logits are "
                             "max_len x max_len parameters")
        if mode not in MODES:
            raise ValueError(f"synthesizer mode must be one of {MODES}, got {mode!r}")
        qkv_dim = qkv_dim or dim
        self.num_heads = num_heads
        self.head_dim = head_dim(qkv_dim, num_heads)
        self.mode = mode
        self.max_len = max_len
        self.causal = causal
        self.dropout = dropout
        self.rngs = rngs
        self.query = Dense(dim, qkv_dim, rngs=rngs) if mix_dot_product else None
        self.key = Dense(dim, qkv_dim, rngs=rngs) if mix_dot_product else None
        self.value = Dense(dim, qkv_dim, rngs=rngs)
        self.out = Dense(qkv_dim, dim, rngs=rngs)
        h, n = num_heads, max_len
        if mode == "dense":
            self.dense_in = Dense(dim, qkv_dim, rngs=rngs)
            self.dense_out = nnx.Param(_per_head_xavier(rngs.params(), (h, self.head_dim, n)))
        elif mode == "random":
            self.random = nnx.Param(_per_head_xavier(rngs.params(), (h, n, n)))
        else:
            self.random_left = nnx.Param(_per_head_xavier(rngs.params(), (h, n, k)))
            self.random_right = nnx.Param(_per_head_xavier(rngs.params(), (h, n, k)))

    def _heads(self, y: jax.Array) -> jax.Array:
        return y.reshape(*y.shape[:-1], self.num_heads, self.head_dim)

    def synthetic_logits(self, x: jax.Array) -> jax.Array:
        """The synthesised logits float32[B or 1, H, L, L] for x: float[B, L, D]."""
        length = x.shape[1]
        if self.mode == "dense":
            hidden = jax.nn.relu(self._heads(self.dense_in(x)))  # [B, L, H, d]
            w2 = self.dense_out[...][:, :, :length].astype(x.dtype)
            return jnp.einsum("blhd,hdm->bhlm", hidden, w2, preferred_element_type=jnp.float32)
        if self.mode == "random":
            return self.random[...][None, :, :length, :length]
        left = self.random_left[...][:, :length]
        right = self.random_right[...][:, :length]
        return jnp.einsum("hik,hjk->hij", left, right)[None]

    def __call__(self, x: jax.Array, mask: jax.Array | None = None, *,
                 deterministic: bool = True) -> jax.Array:
        if x.shape[1] > self.max_len:
            raise ValueError(f"synthesizer attention built for max_len={self.max_len} got "
                             f"length {x.shape[1]}")
        mask = key_mask(mask, x)
        q = k = None
        if self.query is not None:
            q, k = self._heads(self.query(x)), self._heads(self.key(x))
        v = self._heads(self.value(x))
        rng = None if deterministic or self.dropout == 0.0 else self.rngs.dropout()
        o = synthesizer_kernel(q, k, v, mask, synthetic=self.synthetic_logits(x),
                               causal=self.causal, dropout_rate=self.dropout, dropout_rng=rng)
        return self.out(o.reshape(*o.shape[:-2], -1))
