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

