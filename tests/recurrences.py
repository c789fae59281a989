"""Step-by-step ``lax.scan`` recurrences for the 2023-25 mixers' tests (written independently of
attention/_chunked.py): decayed linear attention, the (gated) delta rule, the stabilised mLSTM cell and
Mamba's selective scan, one position at a time."""

import jax
import jax.numpy as jnp
import numpy as np
from lra.attention._chunked import flip_within_length


def _scan(step, init, arrays):
    xs = tuple(jnp.moveaxis(a, 1, 0) for a in arrays)
    return jnp.moveaxis(jax.lax.scan(step, init, xs)[1], 0, 1)


def decay_recurrence(q, k, v, log_a, log_input=None, **_):
    """S_t = diag(a_t) S_{t-1} + e^{i_t} k_t v_t^T, o_t = S_t^T q_t. q, k [B, L, H, K]; v [B, L, H, V];
    log_a [B, L, H] or [B, L, H, K]; log_input [B, L, H] or None."""
    vector = log_a.ndim == 4

    def step(state, inp):
        q_t, k_t, v_t, la_t, li_t = inp
        a = jnp.exp(la_t)[..., :, None] if vector else jnp.exp(la_t)[..., None, None]
        state = a * state + jnp.exp(li_t)[..., None, None] * k_t[..., :, None] * v_t[..., None, :]
        return state, jnp.einsum("bhk,bhkv->bhv", q_t, state)

    li = jnp.zeros(log_a.shape[:3]) if log_input is None else log_input
    init = jnp.zeros((q.shape[0], q.shape[2], q.shape[3], v.shape[3]))
    return _scan(step, init, (q, k, v, log_a, li))


def delta_recurrence(q, k, v, beta, log_a=None, **_):
    """S_t = a_t (I - beta_t k_t k_t^T) S_{t-1} + beta_t k_t v_t^T, o_t = S_t^T q_t."""
    log_a = jnp.zeros(beta.shape) if log_a is None else log_a

    def step(state, inp):
        q_t, k_t, v_t, b_t, la_t = inp
        ks = jnp.einsum("bhk,bhkv->bhv", k_t, state)
        state = jnp.exp(la_t)[..., None, None] * (
            state - b_t[..., None, None] * k_t[..., :, None] * ks[..., None, :])
        state = state + b_t[..., None, None] * k_t[..., :, None] * v_t[..., None, :]
        return state, jnp.einsum("bhk,bhkv->bhv", q_t, state)

    init = jnp.zeros((q.shape[0], q.shape[2], q.shape[3], v.shape[3]))
    return _scan(step, init, (q, k, v, beta, log_a))


def mlstm_recurrence(q, k, v, log_i, log_f, **_):
    """xLSTM's stabilised mLSTM cell, as the paper writes it (m_0 = 0)::

        m_t = max(log f_t + m_{t-1}, log i_t);  i' = exp(log i_t - m_t);  f' = exp(log f_t + m_{t-1} - m_t)
        C_t = f' C_{t-1} + i' k_t v_t^T;  n_t = f' n_{t-1} + i' k_t
        h_t = C_t^T q_t / (max(|n_t . q_t|, exp(-m_t)) + 1e-6)
    """
    def step(carry, inp):
        c, n, m = carry
        q_t, k_t, v_t, li, lf = inp
        m_new = jnp.maximum(lf + m, li)
        i_s, f_s = jnp.exp(li - m_new), jnp.exp(lf + m - m_new)
        c = f_s[..., None, None] * c + i_s[..., None, None] * k_t[..., :, None] * v_t[..., None, :]
        n = f_s[..., None] * n + i_s[..., None] * k_t
        den = jnp.maximum(jnp.abs(jnp.sum(n * q_t, -1)), jnp.exp(-m_new))[..., None] + 1e-6
        return (c, n, m_new), jnp.einsum("bhk,bhkv->bhv", q_t, c) / den

    b, _, h, kd = q.shape
    init = (jnp.zeros((b, h, kd, v.shape[3])), jnp.zeros((b, h, kd)), jnp.zeros((b, h)))
    return _scan(step, init, (q, k, v, log_i, log_f))


def selective_recurrence(x, delta, a, b, c, **_):
    """Mamba's S6: h_t = exp(delta_t a) h_{t-1} + delta_t b_t x_t, y_t = c_t . h_t (per channel)."""
    def step(h, inp):
        x_t, d_t, b_t, c_t = inp
        h = jnp.exp(d_t[..., None] * a[None]) * h + (d_t * x_t)[..., None] * b_t[:, None, :]
        return h, jnp.einsum("ben,bn->be", h, c_t)

    init = jnp.zeros((x.shape[0], x.shape[2], a.shape[1]))
    return _scan(step, init, (x, delta, b, c))


def bidirectional(fn, arrays, lengths):
    """fn forward plus fn over each example reversed within its length, flipped back."""
    back = fn(*(flip_within_length(a, lengths) for a in arrays))
    return fn(*arrays) + flip_within_length(back, lengths)


def outputs_with(monkeypatch, where, name, replacement, module, x, mask):
    """(module's output, its output with ``where.name`` replaced by ``replacement``), both jitted
    afresh: the family's own features and gates, the recurrence in place of the chunked kernel."""
    run = lambda: np.asarray(jax.jit(lambda x, mask: module(x, mask))(x, mask))  # noqa: E731
    got = run()
    with monkeypatch.context() as patch:
        patch.setattr(where, name, replacement)
        want = run()
    return got, want
