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
