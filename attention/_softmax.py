"""Softmax attention's machinery, shared by the families that attend with a softmax.

``softmax_kernel`` (masked softmax attention of per-head q, k, v, with its implementations and the
rule that picks one: dense, blocked, cuDNN; attention/softmax.py's docstring gives the math, the
implementations and the rule), ``attend`` (the masked float32 softmax of given logits and the
weighted sum of values) and ``attention_bias_mask``. attention/softmax.py registers the family;
linformer and luna call ``softmax_kernel`` on their own keys and values, synthesizer ``attend`` on
its synthetic logits.
"""

from __future__ import annotations

import functools
import sys

import jax
import jax.numpy as jnp
from lra.attention import _platform
from lra.attention._flash import blocked_attention
from lra.attention._projections import MASKED_LOGIT, dropout_probs

IMPLS = ("auto", "dense", "blocked", "cudnn")
BLOCK_SIZE = 128          # keys per block of the blocked path (128-512 measured alike on this CPU)
BLOCKED_MIN_LENGTH = 512  # CPU: from this many keys up the blocked path is the faster one
CUDNN_DTYPES = (jnp.bfloat16, jnp.float16)


# Bytes per score element of dense attention with dropout (``dense_bytes``): what each layer holds
# for the backward pass (its float32 probabilities; GPU form, see the module docstring), and what one
# layer needs on top while its forward or backward pass runs (float32 logits, probabilities, the
# dropout draw's random bits, their gradients, the dropped probabilities in the compute dtype).
HELD_BYTES = 4
TRANSIENT_BYTES = 16
# Of the free memory; the rest for the model, the other activations and XLA's workspace. The
# estimate is from the program's structure (XLA:CPU's buffer sizes, skewed there by its unfused
# random-bit generation, cannot calibrate a GPU's): the first device window's dense and blocked
# timings and peaks at ListOps' paper shape are to set it.
DENSE_MEMORY_FRACTION = 0.8


def dense_bytes(batch: int, heads: int, length: int, *, dtype_bytes: int, layers: int,
                length_k: int | None = None) -> int:
    """Bytes the scores of dense attention take in a training step: ``batch * heads * length *
    length_k`` elements (``length_k`` defaults to ``length``), ``HELD_BYTES`` each for every one of
    ``layers`` layers whose probabilities the backward pass holds at once (all of the encoder's, or
    one under ``model.remat``) and ``TRANSIENT_BYTES + dtype_bytes`` for the layer being computed."""
    elements = batch * heads * length * (length if length_k is None else length_k)
    return elements * (layers * HELD_BYTES + TRANSIENT_BYTES + dtype_bytes)


def dense_fits(batch: int, heads: int, length: int, *, dtype_bytes: int, layers: int,
               memory_free: int | None, length_k: int | None = None) -> bool:
    """Whether dense attention's scores (``dense_bytes``) fit in ``DENSE_MEMORY_FRACTION`` of
    ``memory_free`` bytes; never when the free memory is unknown (``None``).

    A pure function of its arguments, so that the GPU rule can be checked with a device's numbers on
    any host. ``batch`` is the global batch of the traced step: with data parallelism over several
    devices each holds a share of it, so the rule errs towards the blocked path there.
    """
    if memory_free is None:
        return False
    need = dense_bytes(batch, heads, length, dtype_bytes=dtype_bytes, layers=layers,
                       length_k=length_k)
    return need <= DENSE_MEMORY_FRACTION * memory_free


def select_impl(impl: str, *, platform: str, dtype, head_dim: int, length: int,
                dropout: bool, dense_fits: bool = False) -> str:
    """The implementation ``impl`` resolves to ("dense", "blocked" or "cudnn").

    ``platform``: "cpu", "gpu" or "tpu" (attention/_platform.py); a parameter so that the GPU rule
    can be tested on a CPU. ``dropout``: whether attention dropout is active in this call.
    ``dense_fits``: whether the dense scores fit the device's memory (the module-level
    ``dense_fits``); read on GPU only.
    """
    if impl not in IMPLS:
        raise ValueError(f"softmax: impl must be one of {', '.join(IMPLS)}, got {impl!r}")
    cudnn_ok = (platform == "gpu" and jnp.dtype(dtype) in CUDNN_DTYPES and head_dim % 8 == 0
                and head_dim <= 128 and not dropout)
    if impl == "cudnn" and not cudnn_ok:
        raise ValueError(f"softmax: impl='cudnn' needs a GPU, bfloat16/float16, head size a multiple "
                         f"of 8 up to 128 and no attention dropout; got platform={platform}, "
                         f"dtype={jnp.dtype(dtype).name}, head size {head_dim}, dropout={dropout}")
    if impl != "auto":
        return impl
    if platform == "gpu":
        return "cudnn" if cudnn_ok else ("dense" if dense_fits else "blocked")
    return "blocked" if length >= BLOCKED_MIN_LENGTH else "dense"


_DECISIONS: dict[tuple, dict] = {}


def decisions() -> list[dict]:
    """Every GPU choice of ``impl="auto"`` this process has traced, once per distinct case, the
    latest traced last: {impl, batch, heads, length_q, length_k, dtype, dropout, layers,
    memory_free, dense_bytes}."""
    return [dict(d) for d in _DECISIONS.values()]


def _record(decision: dict) -> None:
    """Note a GPU choice; print it the first time it is made."""
    key = tuple(decision.values())
    seen = _DECISIONS.pop(key, None) is not None
    _DECISIONS[key] = decision
    if seen:
        return
    d = decision
    free = "unknown" if d["memory_free"] is None else f"{d['memory_free'] / 1e9:.1f} GB"
    print(f"softmax attention on gpu: {d['impl']} (B={d['batch']} H={d['heads']} "
          f"L={d['length_q']}x{d['length_k']} {d['dtype']}, dropout {d['dropout']}, "
          f"{d['layers']} layers held: dense scores {d['dense_bytes'] / 1e9:.1f} GB, {free} free)",
          file=sys.stderr)


def attention_bias_mask(mask: jax.Array | None, length_q: int, length_k: int, *,
                        causal: bool, query_offset: jax.Array | int = 0) -> jax.Array | None:
    """bool[B or 1, 1, Lq, Lk] of allowed (query, key) pairs, or None if all are allowed.

    Query i sits at position ``query_offset + i`` (for a block of queries) in the causal mask."""
    allowed = None
    if mask is not None:
        allowed = mask[:, None, None, :].astype(bool)
    if causal:
        rows = jnp.arange(length_q)[:, None] + query_offset
        tri = (jnp.arange(length_k)[None, :] <= rows)[None, None]
        allowed = tri if allowed is None else allowed & tri
    return allowed


def softmax_kernel(q: jax.Array, k: jax.Array, v: jax.Array, mask: jax.Array | None = None, *,
                   causal: bool = False, dropout_rate: float = 0.0,
                   dropout_rng: jax.Array | None = None, query_chunk: int = 0, impl: str = "auto",
                   block_size: int = BLOCK_SIZE, platform: str | None = None,
                   layers: int = 1) -> jax.Array:
    """Masked softmax attention.

    q: float[B, Lq, H, Dh]; k, v: float[B, Lk, H, Dh]; mask: bool[B, Lk] over keys (True = real).
    Returns float[B, Lq, H, Dh] in q's dtype. ``impl`` and ``query_chunk``: see the module
    docstring; ``platform`` defaults to ``attention._platform.platform()``. ``layers``: how many
    layers' scores the backward pass holds at once (the GPU memory rule, ``dense_fits``).
    """
    if query_chunk < 0:
        raise ValueError(f"softmax: query_chunk must be >= 0 (0 = off), got {query_chunk}")
    if query_chunk > 0:
        impl, block_size = "blocked", query_chunk
    platform = platform or _platform.platform()
    dropout = dropout_rng is not None and dropout_rate > 0.0
    fits = False
    if platform == "gpu" and impl == "auto":
        (b, lq, h, _), lk, free = q.shape, k.shape[1], _platform.memory_free()
        fits = dense_fits(b, h, lq, dtype_bytes=q.dtype.itemsize, layers=layers,
                          memory_free=free, length_k=lk)
    chosen = select_impl(impl, platform=platform, dtype=q.dtype, head_dim=q.shape[-1],
                         length=k.shape[1], dropout=dropout, dense_fits=fits)
    if platform == "gpu" and impl == "auto":
        _record({"impl": chosen, "batch": b, "heads": h, "length_q": lq, "length_k": lk,
                 "dtype": jnp.dtype(q.dtype).name, "dropout": dropout, "layers": layers,
                 "memory_free": free,
                 "dense_bytes": dense_bytes(b, h, lq, dtype_bytes=q.dtype.itemsize, layers=layers,
                                            length_k=lk)})
    if chosen == "blocked":
        return blocked_attention(q, k, v, mask, causal=causal, block=block_size,
                                 dropout_rate=dropout_rate, dropout_rng=dropout_rng)
    if chosen == "cudnn":
        return _cudnn(q, k, v, mask, causal=causal)
    dense = _dense_lean if platform == "gpu" else _dense
    return dense(q, k, v, mask, causal=causal, dropout_rate=dropout_rate, dropout_rng=dropout_rng)


def _cudnn(q, k, v, mask, *, causal):
    """``jax.nn.dot_product_attention`` on cuDNN, the mask as per-example key lengths."""
    if mask is None:
        return jax.nn.dot_product_attention(q, k, v, is_causal=causal, implementation="cudnn")
    lengths = mask.sum(-1, dtype=jnp.int32)
    out = jax.nn.dot_product_attention(q, k, v, key_value_seq_lengths=lengths, is_causal=causal,
                                       implementation="cudnn")
    # Lengths only describe masks whose real keys come first; poison any other mask's rows.
    prefix = jnp.all(mask == (jnp.arange(mask.shape[1])[None, :] < lengths[:, None]), axis=1)
    return jnp.where(prefix[:, None, None, None], out, jnp.nan).astype(q.dtype)


def _dense(q, k, v, mask, *, causal, dropout_rate, dropout_rng, query_offset=0):
    scale = 1.0 / jnp.sqrt(jnp.float32(q.shape[-1]))
    logits = jnp.einsum("bqhd,bkhd->bhqk", q, k, preferred_element_type=jnp.float32) * scale
    return attend(logits, v, mask, causal=causal, dropout_rate=dropout_rate, dropout_rng=dropout_rng,
                  query_offset=query_offset)


def _dense_lean(q, k, v, mask, *, causal, dropout_rate, dropout_rng):
    """``_dense`` whose backward pass keeps only the float32 probabilities (the GPU form, module
    docstring): the dropout mask is drawn again from the same key, and the logits' gradient needs
    only q, k and the mask. Same values as ``_dense``; gradients equal up to float rounding."""
    if dropout_rng is None or dropout_rate == 0.0:
        dropout_rate, dropout_rng = 0.0, jax.random.key(0)  # a key the backward pass never draws
    return _lean(causal, float(dropout_rate), q, k, v, mask, dropout_rng)


def _masked_logits(q, k, mask, causal):
    """float32[B, H, Lq, Lk]: scaled q k^T with disallowed pairs at ``MASKED_LOGIT``."""
    scale = 1.0 / jnp.sqrt(jnp.float32(q.shape[-1]))
    logits = jnp.einsum("bqhd,bkhd->bhqk", q, k, preferred_element_type=jnp.float32) * scale
    allowed = attention_bias_mask(mask, q.shape[1], k.shape[1], causal=causal)
    return logits if allowed is None else jnp.where(allowed, logits, MASKED_LOGIT)


def _dropped_sum(probs, v, rate, rng):
    """Dropout on ``probs`` float32[B, H, Lq, Lk], then the weighted sum of v float[B, Lk, H, Dh]."""
    return jnp.einsum("bhqk,bkhd->bqhd", dropout_probs(probs, rate, rng).astype(v.dtype), v)


@functools.partial(jax.custom_vjp, nondiff_argnums=(0, 1))
def _lean(causal, rate, q, k, v, mask, rng):
    probs = jax.nn.softmax(_masked_logits(q, k, mask, causal), axis=-1)
    return _dropped_sum(probs, v, rate, rng)


def _lean_fwd(causal, rate, q, k, v, mask, rng):
    probs = jax.nn.softmax(_masked_logits(q, k, mask, causal), axis=-1)
    return _dropped_sum(probs, v, rate, rng), (q, k, v, mask, rng, probs)


def _lean_bwd(causal, rate, residuals, ct):
    # The barrier ties what the backward pass draws again to the incoming gradient: without it XLA
    # merges the second draw with the forward pass's (common subexpressions) and keeps the mask.
    residuals, ct = jax.lax.optimization_barrier((residuals, ct))
    q, k, v, mask, rng, probs = residuals
    _, tail = jax.vjp(lambda p, v: _dropped_sum(p, v, rate, rng), probs, v)
    d_probs, dv = tail(ct)
    d_logits = probs * (d_probs - jnp.sum(d_probs * probs, axis=-1, keepdims=True))  # softmax's VJP
    _, head = jax.vjp(lambda q, k: _masked_logits(q, k, mask, causal), q, k)
    dq, dk = head(d_logits)
    return dq, dk, dv, None, None


_lean.defvjp(_lean_fwd, _lean_bwd)


def attend(logits: jax.Array, v: jax.Array, mask: jax.Array | None = None, *, causal: bool = False,
           dropout_rate: float = 0.0, dropout_rng: jax.Array | None = None,
           query_offset: jax.Array | int = 0) -> jax.Array:
    """Masked float32 softmax over keys of ``logits`` float[B or 1, H, Lq, Lk], then the weighted sum.

    v: float[B, Lk, H, Dh]; mask: bool[B, Lk] over keys. ``query_offset``: the position of the first
    query (for the causal mask of a block of queries). Returns float[B, Lq, H, Dh] in v's dtype.
    """
    allowed = attention_bias_mask(mask, logits.shape[-2], logits.shape[-1], causal=causal,
                                  query_offset=query_offset)
    logits = logits.astype(jnp.float32)
    if allowed is not None:
        logits = jnp.where(allowed, logits, MASKED_LOGIT)
    probs = jax.nn.softmax(logits, axis=-1)
    probs = dropout_probs(probs, dropout_rate, dropout_rng)
    return jnp.einsum("bhqk,bkhd->bqhd", probs.astype(v.dtype), v)
