"""A Pallas kernel for the causal chunked scan of the linear-attention family (GPU).

Same sums as ``attention.linear.causal_linear_sums`` (read its docstring for the maths, including
the ``log_scale`` rescaling of stabilised exponential features), computed by one program per
(batch, head): a loop over chunks of ``chunk`` positions that keeps the running [F, d] state and
[F] normaliser in registers/shared memory instead of writing one state per chunk to HBM::

    s      = tril(q_c k_c^T)                        # [C, C], rescaled by exp(s_j - s_i) if scaled
    num_c  = s v_c + q_c state,   den_c = rowsum s + q_c z
    state += k_c^T v_c,           z    += colsum k_c

Only the forward pass is a kernel: the backward pass (``jax.custom_vjp``) is the VJP of the XLA
scan, which recomputes what it needs. On CPU the kernel runs in Pallas interpret mode (the tests
compare it with the XLA scan there); ``causal_linear_sums`` picks it only on GPU. The backend is
Triton, named by ``compiler_params`` (JAX 0.10 defaults GPU kernels to Mosaic GPU, 0.11 to
Triton); tests/attention/test_causal_scan_pallas.py lowers it for CUDA on a CPU host, which catches what
Triton cannot lower (Triton's own compile step runs only on a GPU).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as pltriton


def _kernel(*refs, chunk: int, n_chunks: int, scaled: bool):
    if scaled:
        q_ref, k_ref, v_ref, s_ref, num_ref, den_ref = refs
    else:
        q_ref, k_ref, v_ref, num_ref, den_ref = refs
    f, d = q_ref.shape[-1], v_ref.shape[-1]
    rows = jax.lax.broadcasted_iota(jnp.int32, (chunk, chunk), 0)
    cols = jax.lax.broadcasted_iota(jnp.int32, (chunk, chunk), 1)
    tri = cols <= rows

    def body(c, carry):
        state, z, s_prev = carry  # [F, d], [1, F], [1, 1]
        span = pl.ds(c * chunk, chunk)
        q = q_ref[0, span, :]
        k = k_ref[0, span, :]
        v = v_ref[0, span, :]
        scores = jnp.dot(q, k.T, preferred_element_type=jnp.float32)
        past_num = jnp.dot(q, state, preferred_element_type=jnp.float32)
        past_den = jnp.sum(q * z, axis=1, keepdims=True)  # [C, 1]
        if scaled:
            s_c = s_ref[0, span, :]  # [C, 1]
            rel = jnp.where(tri, s_c.T - s_c, -jnp.inf)
            scores = scores * jnp.exp(rel)
            carried = jnp.exp(s_prev - s_c)  # [C, 1]
            past_num, past_den = past_num * carried, past_den * carried
        else:
            scores = jnp.where(tri, scores, 0.0)
        num_ref[0, span, :] = jnp.dot(scores, v, preferred_element_type=jnp.float32) + past_num
        den_ref[0, span, :] = jnp.sum(scores, axis=1, keepdims=True) + past_den
        if scaled:
            # [1, 1], read from the ref: Triton lowers no slice of a loaded value
            s_last = s_ref[0, pl.ds(c * chunk + chunk - 1, 1), :]
            decay = jnp.exp(s_prev - s_last)
            k = k * jnp.exp(s_c - s_last)
            state, z, s_prev = state * decay, z * decay, s_last
        state = state + jnp.dot(k.T, v, preferred_element_type=jnp.float32)
        z = z + jnp.sum(k, axis=0, keepdims=True)
        return state, z, s_prev

    s0 = s_ref[0, 0:1, :] if scaled else jnp.zeros((1, 1), jnp.float32)
    init = (jnp.zeros((f, d), jnp.float32), jnp.zeros((1, f), jnp.float32), s0)
    jax.lax.fori_loop(0, n_chunks, body, init)


def pallas_causal_sums(phi_q: jax.Array, phi_k: jax.Array, v: jax.Array, chunk: int,
                       log_scale: jax.Array | None, *, interpret: bool) -> tuple[jax.Array, jax.Array]:
    """The kernel's forward pass: shapes as ``causal_linear_sums`` (heads first), float32."""
    b, h, length, f = phi_q.shape
    d = v.shape[-1]
    chunk = min(chunk, length)
    n = -(-length // chunk)
    pad = n * chunk - length

    def flat(a, mode="constant"):  # [B, H, L, X] -> [B*H, L_padded, X]
        a = jnp.pad(a, ((0, 0), (0, 0), (0, pad), (0, 0)), mode=mode)
        return a.reshape(b * h, n * chunk, a.shape[-1])

    inputs = [flat(phi_q), flat(phi_k), flat(v)]
    if log_scale is not None:
        inputs.append(flat(log_scale[..., None], mode="edge"))
    spec = lambda width: pl.BlockSpec((1, n * chunk, width), lambda i: (i, 0, 0))  # noqa: E731
    num, den = pl.pallas_call(
        functools.partial(_kernel, chunk=chunk, n_chunks=n, scaled=log_scale is not None),
        grid=(b * h,),
        in_specs=[spec(f), spec(f), spec(d)] + ([spec(1)] if log_scale is not None else []),
        out_specs=[spec(d), spec(1)],
        out_shape=[jax.ShapeDtypeStruct((b * h, n * chunk, d), jnp.float32),
                   jax.ShapeDtypeStruct((b * h, n * chunk, 1), jnp.float32)],
        interpret=interpret,
        compiler_params=pltriton.CompilerParams(),
    )(*inputs)
    num = num.reshape(b, h, n * chunk, d)[:, :, :length]
    den = den.reshape(b, h, n * chunk)[:, :, :length]
    return num, den
