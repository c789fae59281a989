"""Dense references shared by the attention tests (float64 numpy, written independently of attention/)."""

import numpy as np


def dense_reference(q, k, v, allowed):
    """Masked softmax attention in float64.

    q: [B, Lq, H, D], k, v: [B, Lk, H, D]; allowed: bool[B or 1, H or 1, Lq, Lk] (True = may attend).
    """
    q, k, v = (np.asarray(a, np.float64) for a in (q, k, v))
    s = np.einsum("bqhd,bkhd->bhqk", q, k) / np.sqrt(q.shape[-1])
    s = np.where(allowed, s, -1e30)
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    return np.einsum("bhqk,bkhd->bqhd", p, v)


def diagonal_recurrence(a, bu, *, reverse=False, last=None):
    """States of a diagonal linear recurrence, step by step in complex128, zero initial state.

    a: [N]; bu: [L, N] (one sequence). Forward: x_t = a x_{t-1} + bu_t for t = 0 .. L-1. Reverse:
    x_t = a x_{t+1} + bu_t starting at t = last - 1 (default L - 1) down to 0; states at t >= last
    stay zero. ``last`` = an example's length is a reverse that starts at its last real token;
    ``last`` = L with non-zero pads in ``bu`` is the naive reverse over the whole padded sequence.
    """
    a = np.asarray(a, np.complex128)
    bu = np.asarray(bu, np.complex128)
    length = bu.shape[0]
    last = length if last is None else last
    out = np.zeros_like(bu)
    state = np.zeros_like(a)
    steps = range(last - 1, -1, -1) if reverse else range(length)
    for t in steps:
        state = a * state + bu[t]
        out[t] = state
    return out


def diagonal_ssm_output(lam, b_mat, c, d, x, lengths, *, causal, factor=1.0):
    """y = factor Re(C [h_fwd; h_bwd]) + d u per sequence of ``x``, both scans as plain loops (float64).

    lam: [N]; b_mat: [N, D]; c: [D, N] (causal) or [D, 2N]; d: [D]; x: [B, L, D]. h_fwd runs over
    every position; h_bwd (bidirectional only) runs backward from position ``lengths[b] - 1``, so
    ``lengths`` = the real lengths never reads pads and ``lengths`` = L reads them (the naive form).
    """
    out = np.zeros(x.shape)
    for b in range(x.shape[0]):
        u = x[b].astype(np.float64)
        bu = u @ b_mat.T
        states = diagonal_recurrence(lam, bu)
        if not causal:
            states = np.concatenate(
                [states, diagonal_recurrence(lam, bu, reverse=True, last=lengths[b])], axis=-1)
        out[b] = factor * (states @ c.T).real + d * u
    return out
