"""Kernel sums of linear attention, shared by linear, cosformer and performer.

Heads first throughout ([B, H, L, ...]): every sum over length is a batched matmul with the batch
dimensions leading. ``linear_sums`` is the non-causal form (two matmuls); ``causal_linear_sums`` the
causal one, a chunked scan that never forms a per-position state, by ``lax.scan`` ("xla") or, on GPU,
a Pallas forward kernel (attention/_causal_scan_pallas.py) whose backward pass is the scan's VJP.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from lra.attention import _platform
from lra.attention._causal_scan_pallas import pallas_causal_sums


def heads_first(*arrays: jax.Array) -> tuple[jax.Array, ...]:
    """[B, L, H, ...] -> [B, H, L, ...]: one swap per input, so that every sum over length below is
    a batched matmul with the batch dimensions leading (no transposes inside the hot loop)."""
    return tuple(a.swapaxes(1, 2) for a in arrays)


def linear_sums(phi_q: jax.Array, phi_k: jax.Array, v: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Non-causal kernel sums, heads first.

    phi_q: float32[B, H, Lq, F]; phi_k: float32[B, H, Lk, F]; v: float32[B, H, Lk, d]. Returns
    num float32[B, H, Lq, d] = phi_q (phi_k^T v) and den float32[B, H, Lq] = phi_q (sum_j phi_k_j).
    """
    kv = jnp.matmul(phi_k.swapaxes(-1, -2), v)               # [B, H, F, d]
    num = jnp.matmul(phi_q, kv)
    den = jnp.matmul(phi_q, phi_k.sum(2)[..., None])[..., 0]  # [B, H, Lq]
    return num, den


SCAN_IMPLS = ("auto", "xla", "pallas")


def select_scan_impl(impl: str, platform: str) -> str:
    """"xla" or "pallas": ``auto`` takes the Pallas kernel on GPU only (on CPU it would run in
    Pallas's interpret mode, which is for tests, not speed)."""
    if impl not in SCAN_IMPLS:
        raise ValueError(f"causal scan impl must be one of {', '.join(SCAN_IMPLS)}, got {impl!r}")
    if impl == "auto":
        return "pallas" if platform == "gpu" else "xla"
    return impl


def causal_linear_sums(phi_q: jax.Array, phi_k: jax.Array, v: jax.Array, chunk_size: int,
                       log_scale: jax.Array | None = None, *, impl: str = "auto",
                       platform: str | None = None) -> tuple[jax.Array, jax.Array]:
    """Causal kernel sums by a chunked scan, never forming a per-position [F, d] state.

    Heads first: phi_q, phi_k: float32[B, H, L, F]; v: float32[B, H, L, d]. Returns
    num float32[B, H, L, d] = sum_{j<=i} (phi_q_i . phi_k_j) v_j and
    den float32[B, H, L]    = sum_{j<=i}  phi_q_i . phi_k_j.

    ``log_scale`` float32[B, H, L] (optional, non-decreasing along L) supports stabilised
    exponential features (attention/performer.py): phi_k[j] is taken to be stored divided by
    exp(log_scale[j]), and row i of num and den is returned divided by exp(log_scale[i]), a factor
    common to the whole row that cancels in num / den. Because log_scale never decreases, every
    rescaling factor exp(log_scale[j] - log_scale[i]), j <= i, lies in (0, 1]: nothing overflows,
    and no position's scale depends on later positions.

    ``impl``: "xla" (``lax.scan``), "pallas" (attention/_causal_scan_pallas.py: a fused kernel for the
    forward, this scan's VJP for the backward; interpret mode off GPU) or "auto" (``select_scan_impl``
    on ``platform``, default ``attention._platform.platform()``).
    """
    platform = platform or _platform.platform()
    if select_scan_impl(impl, platform) == "pallas":
        scaled = log_scale is not None
        scales = log_scale if scaled else jnp.zeros(phi_q.shape[:3], jnp.float32)
        return _pallas_sums(chunk_size, scaled, platform != "gpu", phi_q, phi_k, v, scales)
    return _xla_causal_sums(phi_q, phi_k, v, chunk_size, log_scale)


@functools.partial(jax.custom_vjp, nondiff_argnums=(0, 1, 2))
def _pallas_sums(chunk, scaled, interpret, phi_q, phi_k, v, scales):
    return pallas_causal_sums(phi_q, phi_k, v, chunk, scales if scaled else None,
                              interpret=interpret)


def _pallas_sums_fwd(chunk, scaled, interpret, phi_q, phi_k, v, scales):
    return _pallas_sums(chunk, scaled, interpret, phi_q, phi_k, v, scales), (phi_q, phi_k, v, scales)


def _pallas_sums_bwd(chunk, scaled, interpret, residuals, cotangents):
    phi_q, phi_k, v, scales = residuals
    if scaled:
        _, vjp = jax.vjp(lambda *a: _xla_causal_sums(*a[:3], chunk, a[3]), phi_q, phi_k, v, scales)
        return vjp(cotangents)
    _, vjp = jax.vjp(lambda *a: _xla_causal_sums(*a, chunk), phi_q, phi_k, v)
    return (*vjp(cotangents), jnp.zeros_like(scales))


_pallas_sums.defvjp(_pallas_sums_fwd, _pallas_sums_bwd)


def _xla_causal_sums(phi_q, phi_k, v, chunk_size, log_scale=None):
    """``causal_linear_sums`` as a ``lax.scan`` over chunks (shapes as there)."""
    b, h, length, f = phi_q.shape
    d = v.shape[-1]
    chunk = min(chunk_size, length)
    n = -(-length // chunk)
    pad = n * chunk - length

    def split(a, mode="constant"):  # [B, H, L, ...] -> [N, B, H, C, ...]
        a = jnp.pad(a, [(0, 0), (0, 0), (0, pad)] + [(0, 0)] * (a.ndim - 3), mode=mode)
        return jnp.moveaxis(a.reshape(b, h, n, chunk, *a.shape[3:]), 2, 0)

    tri = jnp.tril(jnp.ones((chunk, chunk), dtype=bool))
    scaled = log_scale is not None

    def step(carry, blocks):
        state, z, s_prev = carry  # [B, H, F, d], [B, H, F], [B, H]
        q_c, k_c, v_c, s_c = blocks  # [B, H, C, F] x2, [B, H, C, d], [B, H, C]
        scores = jnp.einsum("bhcf,bhsf->bhcs", q_c, k_c)  # [B, H, C, C]
        past_num = jnp.matmul(q_c, state)
        past_den = jnp.matmul(q_c, z[..., None])[..., 0]
        if scaled:
            # exp(s_j - s_i) for j <= i; the masked exponent keeps j > i from overflowing.
            rel = jnp.where(tri, s_c[:, :, None, :] - s_c[:, :, :, None], -jnp.inf)
            scores = scores * jnp.exp(rel)
            carried = jnp.exp(s_prev[:, :, None] - s_c)  # [B, H, C]
            past_num, past_den = past_num * carried[..., None], past_den * carried
        else:
            scores = jnp.where(tri, scores, 0.0)
        num = jnp.matmul(scores, v_c) + past_num
        den = scores.sum(-1) + past_den
        if scaled:
            s_last = s_c[:, :, -1]
            decay = jnp.exp(s_prev - s_last)  # [B, H]
            k_c = k_c * jnp.exp(s_c - s_last[:, :, None])[..., None]
            state, z = state * decay[..., None, None], z * decay[..., None]
            s_prev = s_last
        state = state + jnp.einsum("bhsf,bhsd->bhfd", k_c, v_c)
        z = z + k_c.sum(2)
        return (state, z, s_prev), (num, den)

    if scaled:
        # Edge padding: a padded tail position gets the last real scale, so no factor exceeds 1.
        scales, s0 = split(log_scale, mode="edge"), log_scale[:, :, 0]
    else:
        scales, s0 = None, jnp.zeros((b, h), jnp.float32)
    init = (jnp.zeros((b, h, f, d), jnp.float32), jnp.zeros((b, h, f), jnp.float32), s0)
    # Checkpointed steps: the backward recomputes each chunk, keeping only the per-chunk states.
    _, (num, den) = jax.lax.scan(jax.checkpoint(step), init, (split(phi_q), split(phi_k), split(v), scales))
    num = jnp.moveaxis(num, 0, 2).reshape(b, h, n * chunk, d)[:, :, :length]
    den = jnp.moveaxis(den, 0, 2).reshape(b, h, n * chunk)[:, :, :length]
    return num, den
