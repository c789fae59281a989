"""Chunked decayed linear attention: the kernel of mamba2, gla (and HGRN2), retnet, mlstm, and the
chunked delta rule of gated_deltanet.

The recurrence (per batch element and head; state S in R^{K x V}, zero initially)::

    S_t = diag(a_t) S_{t-1} + k_t v_t^T,        o_t = S_t^T q_t                          (causal)

with a decay a_t in (0, 1] that is a scalar per head (RetNet, Mamba-2/SSD, mLSTM) or a vector over the
K key channels (GLA, HGRN2). Unrolled, o_t = sum_{s <= t} (q_t (.) G_ts) . k_s v_s with
G_ts = prod_{r = s+1..t} a_r (elementwise over K for vector decays).

Chunked form (Mamba-2's SSD, Dao & Gu, ICML 2024, arXiv 2405.21060, section 7; GLA, Yang et al.,
ICML 2024, arXiv 2312.06635, section 4): split L into chunks of C positions (the last one padded with
k = 0, log a = 0 when C does not divide L), and within chunk n let c_t = sum of log a over the chunk
up to and including t::

    intra   o_t  = sum_{s <= t in chunk} (q_t (.) exp(c_t - c_s)) . k_s v_s       masked C x C products
    state   U_n  = sum_{s in chunk} (k_s (.) exp(c_end - c_s)) v_s^T                chunk states
    scan    H_n  = exp(c_end of chunk n-1) (.) H_{n-1} + U_{n-1}                    lax.scan over L/C
    inter   o_t += (q_t (.) exp(c_t))^T H_n

Every exponent above is <= 0, so nothing overflows for any decay. The pairwise exponents
c_t - c_s are built as a segment sum (mask, then cumulative sum: the sum of log a over (s, t]) and set
to -inf above the diagonal BEFORE ``exp``: masking after ``exp`` would multiply overflowed entries by
zero and give NaN gradients (huggingface/transformers#48455). Everything runs in float32 whatever the
input dtype (bfloat16 rounds decays in (0.998, 1) to 1). Vector decays materialise a [C, C, K]
tensor per chunk: use a small C (16) for them, 64 for scalar decays.

``log_input`` (mLSTM, Beck et al., NeurIPS 2024, arXiv 2405.04517): an exponential input gate
exp(i_s) that multiplies k_s. It can be large, so this path carries a max-stabiliser: every row t
and every chunk state keeps its own log-scale m (the chunk states as (S e^-m, m) pairs, rescaled
when combined), and the kernel returns o_t e^{-m_t} together with m_t. A row's m is the maximum of
its log-weights, as in the mLSTM recurrence m_t = max(log f_t + m_{t-1}, i_t).

Bidirectional use (the families): the same causal kernel is run on each example reversed within
its true length (``flip_within_length``) and the result flipped back; families sum both directions.

The delta rule (``chunked_delta_rule``; DeltaNet, Yang et al., NeurIPS 2024, arXiv 2406.06484, and
Gated DeltaNet, Yang, Kautz and Hatamizadeh, ICLR 2025, arXiv 2412.06464)::

    S_t = a_t (I - beta_t k_t k_t^T) S_{t-1} + beta_t k_t v_t^T,    o_t = S_t^T q_t

is chunked through the UT transform: within a chunk with entering state S_0 and g_t = exp(c_t),
S_t = g_t S_0 + sum_{s <= t} (g_t / g_s) k_s u_s^T, where the pseudo-values u solve the unit lower
triangular system (I + A) u = beta (.) v - (beta g (.) k) S_0 with A_ts = beta_t (g_t / g_s) k_t . k_s
for s < t. The C x C system is solved for all chunks at once through T = (I + A)^-1, built row by
row by forward substitution (``unit_lower_inverse``), then u = T (...) as matmuls;
only u = u_0 - W S_0, the outputs and the next state depend on S_0, so the scan over chunks is
three small matmuls per chunk.

Layout: q, k [B, L, H, K], v [B, L, H, V] (the contract's kernel layout), log-decays [B, L, H]
(scalar) or [B, L, H, K] (vector); outputs float32 [B, L, H, V].
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

# A finite "minus infinity" for log-scales (an initial stabiliser, mLSTM's input gate at pads): -inf
# would turn exp(-m) into inf and a difference of two such values into NaN.
NEG = -1e30


def lengths_of(mask: jax.Array | None, batch: int, length: int) -> jax.Array:
    """int32[B] true lengths of right-padded rows (mask bool[B, L], None = all real)."""
    if mask is None:
        return jnp.full((batch,), length, jnp.int32)
    return jnp.sum(mask.astype(jnp.int32), axis=1)


def flip_within_length(x: jax.Array, lengths: jax.Array) -> jax.Array:
    """x[B, L, ...] with each row's first ``lengths[b]`` positions reversed (pads stay in place).

    Position t < n of row b reads t' = n - 1 - t; an involution, so it also flips back.
    """
    length = x.shape[1]
    t = jnp.arange(length)[None, :]
    n = lengths[:, None]
    idx = jnp.where(t < n, n - 1 - t, t)
    idx = idx.reshape(idx.shape + (1,) * (x.ndim - 2))
    return jnp.take_along_axis(x, idx, axis=1)


def _segsum(x: jax.Array, vector: bool) -> jax.Array:
    """Chunk axis at -1 (scalar) or -2 (vector, K last). Returns [..., C(t), C(s), (K)]."""
    if vector:
        size = x.shape[-2]
        rep = jnp.broadcast_to(x[..., :, None, :], x.shape[:-1] + (size, x.shape[-1]))
        strict = jnp.tril(jnp.ones((size, size), bool), -1)[:, :, None]
        incl = jnp.tril(jnp.ones((size, size), bool))[:, :, None]
        axis = -3
    else:
        size = x.shape[-1]
        rep = jnp.broadcast_to(x[..., :, None], x.shape + (size,))
        strict = jnp.tril(jnp.ones((size, size), bool), -1)
        incl = jnp.tril(jnp.ones((size, size), bool))
        axis = -2
    # rep[t, s] = x_t; keep t > s, sum over t up to each row: out[t, s] = sum_{s < r <= t} x_r.
    out = jnp.cumsum(jnp.where(strict, rep, 0.0), axis=axis)
    return jnp.where(incl, out, -jnp.inf)


def _chunk(a: jax.Array, size: int) -> jax.Array:
    """[B, L, H, *rest] -> [B, H, N, C, *rest] with L padded by zeros to N * C."""
    pad = (-a.shape[1]) % size
    if pad:
        a = jnp.pad(a, [(0, 0), (0, pad)] + [(0, 0)] * (a.ndim - 2))
    a = jnp.moveaxis(a, 2, 1)
    return a.reshape(a.shape[:2] + (a.shape[2] // size, size) + a.shape[3:])


def _unchunk(a: jax.Array, length: int) -> jax.Array:
    """[B, H, N, C, V] -> [B, L, H, V]."""
    a = a.reshape(a.shape[:2] + (a.shape[2] * a.shape[3],) + a.shape[4:])[:, :, :length]
    return jnp.moveaxis(a, 1, 2)


def chunked_decay_attention(q: jax.Array, k: jax.Array, v: jax.Array, log_a: jax.Array, *,
                            chunk_size: int = 64, log_input: jax.Array | None = None):
    """Causal decayed linear attention by chunks (module docstring).

    q, k: float[B, L, H, K]; v: float[B, L, H, V]; log_a: float[B, L, H] (scalar decay per head) or
    float[B, L, H, K] (vector decay), each <= 0 for a decay in (0, 1] (positive values are allowed
    with ``log_input``, whose stabiliser covers growth). ``log_input``: float[B, L, H] or None.
    Returns float32[B, L, H, V]; with ``log_input`` the pair (o e^{-m}, m float32[B, L, H]).
    """
    length = q.shape[1]
    vector = log_a.ndim == 4
    if log_input is not None and vector:
        raise ValueError("log_input (the stabilised path) supports scalar decays only")
    f32 = [a.astype(jnp.float32) for a in (q, k, v, log_a)]
    qc, kc, vc, gc = (_chunk(a, chunk_size) for a in f32)     # [B, H, N, C, ...]
    cum = jnp.cumsum(gc, axis=3)                               # [B, H, N, C, (K)]
    total = cum[:, :, :, -1]                                   # [B, H, N, (K)]
    seg = _segsum(gc, vector)                                  # [B, H, N, C, C, (K)]
    if log_input is not None:
        return _stabilised(qc, kc, vc, cum, total, seg, _chunk(log_input.astype(jnp.float32),
                                                               chunk_size), length)
    if vector:
        scores = jnp.einsum("bhntk,bhnsk,bhntsk->bhnts", qc, kc, jnp.exp(seg))
        k_end = kc * jnp.exp(total[:, :, :, None, :] - cum)
        q_in = qc * jnp.exp(cum)
        decay = jnp.exp(total)[..., None]                      # [B, H, N, K, 1]
    else:
        scores = jnp.einsum("bhntk,bhnsk->bhnts", qc, kc) * jnp.exp(seg)
        k_end = kc * jnp.exp(total[:, :, :, None] - cum)[..., None]
        q_in = qc * jnp.exp(cum)[..., None]
        decay = jnp.exp(total)[..., None, None]                # [B, H, N, 1, 1]
    out = jnp.einsum("bhnts,bhnsv->bhntv", scores, vc)
    local = jnp.einsum("bhnsk,bhnsv->bhnkv", k_end, vc)        # [B, H, N, K, V]

    def step(state, inputs):
        loc, dec = inputs
        return dec * state + loc, state                        # emit the state entering the chunk

    init = jnp.zeros(local.shape[:2] + local.shape[3:], jnp.float32)
    _, entering = jax.lax.scan(step, init, (jnp.moveaxis(local, 2, 0), jnp.moveaxis(decay, 2, 0)))
    out = out + jnp.einsum("bhntk,bhnkv->bhntv", q_in, jnp.moveaxis(entering, 0, 2))
    return _unchunk(out, length)


def _stabilised(qc, kc, vc, cum, total, seg, ic, length):
    """The ``log_input`` path: scalar decays with per-row and per-state log-scales."""
    logw = seg + ic[:, :, :, None, :]                          # [B, H, N, C(t), C(s)]
    m_intra = jnp.max(logw, axis=-1)                           # finite: s = t is always present
    lw_end = total[:, :, :, None] - cum + ic                   # [B, H, N, C]
    m_local = jnp.max(lw_end, axis=-1)                         # [B, H, N]
    local = jnp.einsum("bhnsk,bhnsv->bhnkv",
                       kc * jnp.exp(lw_end - m_local[..., None])[..., None], vc)

    def step(carry, inputs):
        state, m = carry
        loc, m_loc, tot = inputs
        m_new = jnp.maximum(tot + m, m_loc)
        state_new = (jnp.exp(tot + m - m_new)[..., None, None] * state
                     + jnp.exp(m_loc - m_new)[..., None, None] * loc)
        return (state_new, m_new), (state, m)

    batch_heads = local.shape[:2]
    init = (jnp.zeros(batch_heads + local.shape[3:], jnp.float32),
            jnp.full(batch_heads, NEG, jnp.float32))
    _, (entering, m_enter) = jax.lax.scan(
        step, init, tuple(jnp.moveaxis(a, 2, 0) for a in (local, m_local, total)))
    entering = jnp.moveaxis(entering, 0, 2)                    # [B, H, N, K, V]
    m_enter = jnp.moveaxis(m_enter, 0, 2)                      # [B, H, N]
    lw_inter = cum + m_enter[..., None]                        # [B, H, N, C]
    m_row = jnp.maximum(m_intra, lw_inter)
    scores = jnp.einsum("bhntk,bhnsk->bhnts", qc, kc) * jnp.exp(logw - m_row[..., None])
    out = jnp.einsum("bhnts,bhnsv->bhntv", scores, vc)
    q_in = qc * jnp.exp(lw_inter - m_row)[..., None]
    out = out + jnp.einsum("bhntk,bhnkv->bhntv", q_in, entering)
    m_out = m_row.reshape(m_row.shape[:2] + (-1,))[:, :, :length]
    return _unchunk(out, length), jnp.moveaxis(m_out, 1, 2)


@jax.custom_vjp
def unit_lower_inverse(a: jax.Array) -> jax.Array:
    """(I + a)^-1 for strictly lower triangular ``a`` float32[..., C, C], by forward substitution.

    Row t of T = (I + a)^-1 is e_t - sum_{s<t} a_ts T_s, so C steps of one row each give T exactly
    as a triangular solve would, from matmuls only. ``lax.linalg.triangular_solve`` is not used: on
    CPU it calls the host LAPACK (OpenBLAS through SciPy), whose thread pool deadlocked the training
    step of gated_deltanet once orbax's checkpoint threads were running (every thread waiting on a
    futex, reproduced with ``python -m lra.run --task listops --attn gated_deltanet --preset tiny``;
    ``OPENBLAS_NUM_THREADS=1`` made it pass). The gradient is the inverse's own,
    dA = -T^T dT T^T on the strict lower triangle, so nothing per row is stored.
    """
    return _unit_lower_inverse(a)


def _unit_lower_inverse(a: jax.Array) -> jax.Array:
    size = a.shape[-1]
    eye = jnp.broadcast_to(jnp.eye(size, dtype=a.dtype), a.shape)

    def row(t, inv):
        new = eye[..., t, :] - jnp.einsum("...s,...sc->...c", a[..., t, :], inv)
        return inv.at[..., t, :].set(new)

    return jax.lax.fori_loop(0, size, row, eye)


def _inverse_fwd(a):
    inv = _unit_lower_inverse(a)
    return inv, inv


def _inverse_bwd(inv, g):
    inv_t = jnp.swapaxes(inv, -1, -2)
    strict = jnp.tril(jnp.ones(inv.shape[-2:], bool), -1)
    return (jnp.where(strict, -(inv_t @ g @ inv_t), 0.0),)


unit_lower_inverse.defvjp(_inverse_fwd, _inverse_bwd)


def chunked_delta_rule(q: jax.Array, k: jax.Array, v: jax.Array, beta: jax.Array,
                       log_a: jax.Array | None = None, *, chunk_size: int = 32) -> jax.Array:
    """Causal (gated) delta rule by chunks with a per-chunk triangular inverse (module docstring).

    q, k: float[B, L, H, K] (k L2-normalised by the caller); v: float[B, L, H, V]; beta: float[B, L, H]
    (0 = no write); log_a: float[B, L, H] <= 0 or None (DeltaNet: a = 1). Returns float32[B, L, H, V].
    """
    length = q.shape[1]
    if log_a is None:
        log_a = jnp.zeros(beta.shape, jnp.float32)
    qc, kc, vc, bc, gc = (_chunk(a.astype(jnp.float32), chunk_size) for a in (q, k, v, beta, log_a))
    size = chunk_size
    cum = jnp.cumsum(gc, axis=3)                               # [B, H, N, C]
    total = cum[:, :, :, -1]
    decay = jnp.exp(_segsum(gc, False))                        # g_t / g_s below the diagonal, 0 above
    strict = jnp.tril(jnp.ones((size, size), bool), -1)
    kk = jnp.einsum("bhntk,bhnsk->bhnts", kc, kc)
    a_mat = jnp.where(strict, bc[..., None] * kk * decay, 0.0)
    rhs = jnp.concatenate([(bc * jnp.exp(cum))[..., None] * kc, bc[..., None] * vc], axis=-1)
    sol = jnp.einsum("bhnts,bhnsd->bhntd", unit_lower_inverse(a_mat), rhs)
    w, u0 = sol[..., :kc.shape[-1]], sol[..., kc.shape[-1]:]   # [B, H, N, C, K], [.., V]
    p_mat = jnp.einsum("bhntk,bhnsk->bhnts", qc, kc) * decay   # inclusive lower triangle
    q_in = qc * jnp.exp(cum)[..., None]
    k_end = kc * jnp.exp(total[..., None] - cum)[..., None]
    dec = jnp.exp(total)[..., None, None]

    def step(state, inputs):
        w_n, u0_n, p_n, q_n, k_n, d_n = inputs
        u = u0_n - jnp.einsum("bhck,bhkv->bhcv", w_n, state)
        o = jnp.einsum("bhck,bhkv->bhcv", q_n, state) + jnp.einsum("bhts,bhsv->bhtv", p_n, u)
        return d_n * state + jnp.einsum("bhck,bhcv->bhkv", k_n, u), o

    init = jnp.zeros(kc.shape[:2] + (kc.shape[-1], vc.shape[-1]), jnp.float32)
    xs = tuple(jnp.moveaxis(a, 2, 0) for a in (w, u0, p_mat, q_in, k_end, dec))
    _, out = jax.lax.scan(step, init, xs)
    return _unchunk(jnp.moveaxis(out, 0, 2), length)
