"""The multi-head input and output projections that most families share.

LRA's attention layers use bias-free Xavier-uniform projections to q, k, v of total width
``qkv_dim`` split over ``num_heads``, and an output projection back to ``dim``. Families that need
something else (shared QK for Reformer, no projections for FNet) do it themselves.

Compute happens in the dtype of ``x``: parameters stay float32 and are cast on use, so bfloat16
inputs run in bfloat16 while the optimizer sees float32 weights.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx

_xavier = nnx.initializers.xavier_uniform()

# The logit of a disallowed (query, key) pair before a softmax: finite, so that a query whose keys
# are all masked gets a uniform distribution instead of NaN, and far below any real logit. One value
# for every family, so that their masked softmaxes agree.
MASKED_LOGIT = -1e30


def head_dim(qkv_dim: int, num_heads: int) -> int:
    """Width of one head; fails clearly when ``qkv_dim`` does not split evenly."""
    if qkv_dim % num_heads:
        raise ValueError(f"qkv_dim={qkv_dim} is not divisible by num_heads={num_heads}")
    return qkv_dim // num_heads


class Dense(nnx.Module):
    """A bias-free linear map ``float[..., d_in] -> float[..., d_out]`` computed in the input dtype."""

    def __init__(self, d_in: int, d_out: int, *, rngs: nnx.Rngs):
        self.kernel = nnx.Param(_xavier(rngs.params(), (d_in, d_out), jnp.float32))

    def __call__(self, x: jax.Array) -> jax.Array:
        # One 2-D product over the flattened leading dimensions: with x kept [B, L, d_in] the
        # weight gradient is a dot contracting two dimensions, and XLA:CPU lays it out with the
        # incoming gradient transposed to [d_out, B * L] and fused with the attention core's own
        # layout change, a slow strided copy. Same values bit for bit; measured fwd+bwd of the
        # module (B=4, L=2048, H=8, Dh=64, one process, median of 7): cosformer 423 -> 304 ms,
        # local 353 -> 307, the projections alone 241 -> 211.
        w = self.kernel[...].astype(x.dtype)
        return (x.reshape(-1, x.shape[-1]) @ w).reshape(*x.shape[:-1], w.shape[-1])


class HeadProjections(nnx.Module):
    """q, k, v projections ``[B, L, D] -> [B, L, H, Dh]`` and the output ``[B, L, H, Dh] -> [B, L, D]``."""

    def __init__(self, dim: int, num_heads: int, qkv_dim: int | None, *, rngs: nnx.Rngs,
                 shared_qk: bool = False):
        qkv_dim = qkv_dim or dim
        self.num_heads = num_heads
        self.head_dim = head_dim(qkv_dim, num_heads)
        self.shared_qk = shared_qk
        self.query = Dense(dim, qkv_dim, rngs=rngs)
        self.key = None if shared_qk else Dense(dim, qkv_dim, rngs=rngs)
        self.value = Dense(dim, qkv_dim, rngs=rngs)
        self.out = Dense(qkv_dim, dim, rngs=rngs)

    def _heads(self, y: jax.Array) -> jax.Array:
        return y.reshape(*y.shape[:-1], self.num_heads, self.head_dim)

    def qkv(self, x: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
        """x: float[B, L, D] -> q, k, v: float[B, L, H, Dh] (k is q when ``shared_qk``)."""
        q = self._heads(self.query(x))
        k = q if self.key is None else self._heads(self.key(x))
        return q, k, self._heads(self.value(x))

    def merge(self, o: jax.Array) -> jax.Array:
        """o: float[B, L, H, Dh] -> float[B, L, D]."""
        return self.out(o.reshape(*o.shape[:-2], -1))


def key_mask(mask: jax.Array | None, x: jax.Array) -> jax.Array:
    """The contract's ``mask`` (bool[B, L] or None) as a concrete bool[B, L]."""
    if mask is None:
        return jnp.ones(x.shape[:2], dtype=bool)
    if mask.shape != x.shape[:2]:
        raise ValueError(f"mask shape {mask.shape} does not match x's [batch, length] {x.shape[:2]}")
    return mask.astype(bool)


def dropout_probs(probs: jax.Array, rate: float, rng: jax.Array | None) -> jax.Array:
    """Inverted dropout on attention weights; identity when ``rng`` is None or ``rate`` is 0."""
    if rng is None or rate == 0.0:
        return probs
    keep = jax.random.bernoulli(rng, 1.0 - rate, probs.shape)
    return jnp.where(keep, probs / (1.0 - rate), 0).astype(probs.dtype)
