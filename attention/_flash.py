"""Blocked online-softmax attention (the FlashAttention algorithm, Dao et al. 2022) in plain JAX.

The keys are cut into blocks of ``block`` positions. The forward pass visits them in turn and keeps,
per query row i, a running max m_i, a running sum l_i and an unnormalised output acc_i::

    s      = q k_j^T / sqrt(d) + bias_j             # [L, block] scores of key block j only
    m'     = max(m, rowmax s)
    p      = exp(s - m')
    l      = l exp(m - m') + rowsum p
    acc    = acc exp(m - m') + p v_j
    out    = acc / l,    lse = m + log l            # after the last block

The backward pass (a ``jax.custom_vjp``) keeps only q, k, v, out, m and log l (O(L d) per head)
and recomputes each block's probabilities p = exp(s - m - log l) from them, with D_i = rowsum(dO_i * out_i)::

    dv_j = p^T dO,   dp = dO v_j^T,   ds = p (dp - D),   dq += ds k_j / sqrt(d),   dk_j = ds^T q / sqrt(d)

so neither pass holds more than one [L, block] score block per head: memory O(L block + L d) instead
of the dense path's O(L^2). Queries are not blocked on top: with every query in each step the
matmuls stay large (XLA:CPU's batched dots lose much of their speed on small blocks), and the
[L, block] block is already O(L) for a fixed block.

Masks follow attention/_softmax.py exactly: a masked (query, key) pair gets the finite logit -1e30,
so a row whose every key is masked averages all values (uniform weights, finite) like the dense
path; its masked logits get no gradient (ds is zeroed there). Key positions added to round the
length up to a whole number of blocks get -2e30, below any masked logit, so exp() sends them to 0
even in a fully masked row and they never count.

Dropout (rate r) drops entries of p after normalisation, as the dense path does, with a keep mask
drawn per key block from ``fold_in(rng, j)`` and drawn again in the backward pass: the sums l use
undropped p; acc and dv use p * keep / (1 - r); dp is multiplied by keep / (1 - r) before ds.
Logits, exp and sums are float32 whatever the input dtype; the matmuls against v return to v's
dtype only at the end.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from lra.attention._projections import MASKED_LOGIT

PAD_LOGIT = -2e30     # key positions that pad the length to whole blocks


def blocked_attention(q: jax.Array, k: jax.Array, v: jax.Array, mask: jax.Array | None, *,
                      causal: bool, block: int, dropout_rate: float = 0.0,
                      dropout_rng: jax.Array | None = None) -> jax.Array:
    """Softmax attention over key blocks of ``block`` positions.

    q: float[B, Lq, H, d]; k, v: float[B, Lk, H, d]; mask: bool[B, Lk] over keys or None.
    Returns float[B, Lq, H, d] in q's dtype. Causal requires Lq == Lk (query i sees keys j <= i).
    """
    if block < 1:
        raise ValueError(f"softmax: block must be >= 1, got {block}")
    b, lq, _, d = q.shape
    lk = k.shape[1]
    if causal and lq != lk:
        raise ValueError(f"causal softmax needs equal lengths, got {lq}, {lk}")
    block = min(block, lk)
    n = -(-lk // block)
    pad = n * block - lk
    # Key bias [B, Lk_padded]: 0 for an allowed key, -1e30 masked, -2e30 for the rounding pad.
    bias = jnp.zeros((b, lk), jnp.float32) if mask is None else \
        jnp.where(mask, 0.0, MASKED_LOGIT).astype(jnp.float32)
    has_bias = mask is not None or pad > 0
    bias = jnp.pad(bias, ((0, 0), (0, pad)), constant_values=PAD_LOGIT)
    dropout = dropout_rng is not None and dropout_rate > 0.0
    if not dropout:
        dropout_rng = jax.random.key(0)  # unused; keeps one traced signature
    config = _Config(causal=causal, block=block, has_bias=has_bias,
                     rate=float(dropout_rate) if dropout else 0.0)
    scale = 1.0 / jnp.sqrt(jnp.float32(d)).astype(q.dtype)
    # [B, H, L, d] once, so that every product below is a plain batched matmul.
    qh = (q * scale).transpose(0, 2, 1, 3)
    kh = jnp.pad(k, ((0, 0), (0, pad), (0, 0), (0, 0))).transpose(0, 2, 1, 3)
    vh = jnp.pad(v, ((0, 0), (0, pad), (0, 0), (0, 0))).transpose(0, 2, 1, 3)
    out = _flash(config, qh, kh, vh, bias, dropout_rng)
    return out.transpose(0, 2, 1, 3).astype(q.dtype)


class _Config:
    """Static settings of one call (hashable, so that ``custom_vjp`` can take it as nondiff)."""

    def __init__(self, *, causal: bool, block: int, has_bias: bool, rate: float):
        self.causal, self.block, self.has_bias, self.rate = causal, block, has_bias, rate
        self._key = (causal, block, has_bias, rate)

    def __hash__(self):
        return hash(self._key)

    def __eq__(self, other):
        return isinstance(other, _Config) and self._key == other._key


def _key_blocks(a: jax.Array, block: int) -> jax.Array:
    """[B, H, Lk, ...] -> [N, B, H, block, ...] (the scan axis first)."""
    b, h, lk = a.shape[:3]
    return jnp.moveaxis(a.reshape(b, h, lk // block, block, *a.shape[3:]), 2, 0)


def _block_logits(config: _Config, q, k_j, bias_j, j):
    """float32[B, H, Lq, block] scores of key block j, masks applied; and the allowed-pair mask."""
    s = jnp.matmul(q, k_j.swapaxes(-1, -2), preferred_element_type=jnp.float32)
    allowed = None
    if config.has_bias:
        s = s + bias_j[:, None, None, :]
        allowed = (bias_j == 0.0)[:, None, None, :]
    if config.causal:
        rows = jnp.arange(q.shape[2])[:, None]
        cols = jnp.arange(config.block)[None, :] + j * config.block
        tri = (cols <= rows)[None, None]
        s = jnp.where(tri, s, jnp.minimum(s, MASKED_LOGIT))
        allowed = tri if allowed is None else allowed & tri
    return s, allowed


def _keep(config: _Config, rng, j, shape):
    """float32 inverted-dropout multipliers (keep / (1 - rate)) of key block j."""
    keep = jax.random.bernoulli(jax.random.fold_in(rng, j), 1.0 - config.rate, shape)
    return keep.astype(jnp.float32) / (1.0 - config.rate)


def _forward(config: _Config, q, k, v, bias, rng):
    b, h, lq, d = q.shape
    blocks = (_key_blocks(k, config.block), _key_blocks(v, config.block),
              jnp.moveaxis(bias.reshape(b, -1, config.block), 1, 0),
              jnp.arange(k.shape[2] // config.block))

    def step(carry, xs):
        m, l, acc = carry
        k_j, v_j, bias_j, j = xs
        s, _ = _block_logits(config, q, k_j, bias_j, j)
        m_new = jnp.maximum(m, s.max(-1))
        p = jnp.exp(s - m_new[..., None])
        alpha = jnp.exp(m - m_new)
        l = l * alpha + p.sum(-1)
        if config.rate:
            p = p * _keep(config, rng, j, p.shape)
        acc = acc * alpha[..., None] + jnp.matmul(p.astype(v_j.dtype), v_j,
                                                  preferred_element_type=jnp.float32)
        return (m_new, l, acc), None

    init = (jnp.full((b, h, lq), 3 * PAD_LOGIT, jnp.float32), jnp.zeros((b, h, lq), jnp.float32),
            jnp.zeros((b, h, lq, d), jnp.float32))
    (m, l, acc), _ = jax.lax.scan(step, init, blocks)
    out = (acc / l[..., None]).astype(v.dtype)
    # m and log l kept apart: in a fully masked row m = -1e30 would swallow log l in float32.
    return out, (m, jnp.log(l))


@functools.partial(jax.custom_vjp, nondiff_argnums=(0,))
def _flash(config, q, k, v, bias, rng):
    return _forward(config, q, k, v, bias, rng)[0]


def _flash_fwd(config, q, k, v, bias, rng):
    out, stats = _forward(config, q, k, v, bias, rng)
    return out, (q, k, v, bias, rng, out, stats)


def _flash_bwd(config, residuals, d_out):
    q, k, v, bias, rng, out, (m, log_l) = residuals
    b, h, lq, d = q.shape
    d_row = jnp.sum(d_out.astype(jnp.float32) * out.astype(jnp.float32), axis=-1)  # D_i
    blocks = (_key_blocks(k, config.block), _key_blocks(v, config.block),
              jnp.moveaxis(bias.reshape(b, -1, config.block), 1, 0),
              jnp.arange(k.shape[2] // config.block))

    def step(dq, xs):
        k_j, v_j, bias_j, j = xs
        s, allowed = _block_logits(config, q, k_j, bias_j, j)
        p = jnp.exp((s - m[..., None]) - log_l[..., None])
        dp = jnp.matmul(d_out, v_j.swapaxes(-1, -2), preferred_element_type=jnp.float32)
        if config.rate:
            keep = _keep(config, rng, j, p.shape)
            p_used, dp = p * keep, dp * keep
        else:
            p_used = p
        dv_j = jnp.matmul(p_used.astype(d_out.dtype).swapaxes(-1, -2), d_out,
                          preferred_element_type=jnp.float32)
        ds = p * (dp - d_row[..., None])
        if allowed is not None:
            ds = jnp.where(allowed, ds, 0.0)
        ds = ds.astype(q.dtype)
        dq = dq + jnp.matmul(ds, k_j, preferred_element_type=jnp.float32)
        dk_j = jnp.matmul(ds.swapaxes(-1, -2), q, preferred_element_type=jnp.float32)
        return dq, (dk_j, dv_j)

    dq, (dk, dv) = jax.lax.scan(step, jnp.zeros((b, h, lq, d), jnp.float32), blocks)
    unblock = lambda a: jnp.moveaxis(a, 0, 2).reshape(b, h, -1, d)  # noqa: E731
    # q entered pre-scaled, so dq here is d/d(q scale): the caller's chain rule applies the scale.
    return (dq.astype(q.dtype), unblock(dk).astype(k.dtype), unblock(dv).astype(v.dtype),
            jnp.zeros_like(bias), None)


_flash.defvjp(_flash_fwd, _flash_bwd)
