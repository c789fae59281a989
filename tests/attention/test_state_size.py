"""Each family's declared ``recurrent_state`` (lra/state_size.py) against the state its code carries.

* Recurrent families: the module runs causally (traced only, ``jax.eval_shape``) with its core (the
  causal scan, the chunked kernel, the diagonal or selective scan, the SSM or EMA kernel) wrapped by a
  recorder that reads the size of the state that core carries from step to step, plus the last
  ``kernel_size - 1`` inputs every short convolution of the module keeps.
* Cache families (softmax, local, longformer, sparse, synthesizer, Mega's attention): which keys and
  values each query reads, from the gradients of the family's pure kernel run causally over 2L
  positions; after step t a decoder keeps every key (value) at a position <= t that step t or a
  later step reads, and the state is the most it keeps over the first L steps.

Families without a causal form and reformer (whose buckets depend on the data) are checked by hand in
tests/core/test_state_size.py.
"""

from __future__ import annotations

import importlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from lra.attention._mixers import ShortConv
from lra.attention.local import local_kernel
from lra.attention.longformer import longformer_kernel
from lra.attention.mega import mega_attention
from lra.attention.softmax import softmax_kernel
from lra.attention.sparse import sparse_kernel
from lra.attention.synthesizer import synthesizer_kernel

from lra import attention
from lra.state_size import state_numbers

D, H, L = 16, 2, 32  # model width = qkv_dim, heads, the length the state is taken at


def config(options: dict, *, qkv_dim: int = D) -> dict:
    return {"model": {"emb_dim": D, "num_heads": H, "qkv_dim": qkv_dim, "num_layers": 1},
            "attn": options}


# What each core carries per sequence (batch 1), read from its arguments' shapes.

def _linear_sums(phi_q, phi_k, v, chunk_size, log_scale=None, **_):
    """S [H, F, d] and z [H, F]; with ``log_scale`` (Performer's stabiliser) the running max [H]."""
    _, h, _, f = phi_q.shape
    return h * f * v.shape[-1] + h * f + (h if log_scale is not None else 0)


def _decay(q, k, v, log_a, *, log_input=None, **_):
    """S [H, K, V]; with ``log_input`` (mLSTM) the stabiliser m [H] (v then carries the normaliser's
    column of ones, so H K (V + 1) = C + n)."""
    return q.shape[2] * q.shape[3] * v.shape[3] + (q.shape[2] if log_input is not None else 0)


def _delta(q, k, v, *_, **__):
    return q.shape[2] * q.shape[3] * v.shape[3]


def _diagonal(a, bu, **_):
    """x [N], complex: two numbers each."""
    return bu.shape[-1] * (2 if jnp.iscomplexobj(bu) else 1)


def _selective(x, delta, a, b, c, **_):
    return x.shape[-1] * a.shape[-1]  # h [E, N]


def _s4d(a, *_, **__):
    return 2 * a.size  # dA [D, N/2] complex modes: the state of the unrolled recurrence


def _ema(delta, *_, **__):
    return delta.size  # [D, ndim] real EMA states (one direction when causal)


CORES = {
    "linear": [("causal_linear_sums", _linear_sums)],
    "performer": [("causal_linear_sums", _linear_sums)],
    "cosformer": [("causal_linear_sums", _linear_sums)],
    "s4d": [("s4d_kernel", _s4d)],
    "s5": [("diagonal_scan", _diagonal)],
    "lru": [("diagonal_scan", _diagonal)],
    "mamba": [("selective_scan", _selective)],
    "mamba2": [("chunked_decay_attention", _decay)],
    "gla": [("chunked_decay_attention", _decay)],
    "retnet": [("chunked_decay_attention", _decay)],
    "mlstm": [("chunked_decay_attention", _decay)],
    "gated_deltanet": [("chunked_delta_rule", _delta)],
    "mega": [("ema_kernel", _ema)],
}

RECURRENT = [
    ("linear", {}), ("cosformer", {}),
    ("performer", {"nb_features": 8}), ("performer", {"kernel": "relu"}),
    ("s4d", {"state_size": 8}),
    ("s5", {"state_size": 8, "blocks": 2}), ("s5", {"state_size": 8, "blocks": 2, "conj_sym": False}),
    ("lru", {"state_size": 8}),
    ("mamba", {"state_size": 4, "conv_size": 3}), ("mamba2", {"state_size": 4}),
    ("gla", {}), ("gla", {"variant": "hgrn2"}), ("retnet", {}),
    ("gated_deltanet", {}), ("gated_deltanet", {"gate": False, "conv_size": 2}),
    ("mlstm", {}), ("mega", {"chunk_size": 8}), ("mega", {"chunk_size": 0}),
]


def _conv_state(module) -> int:
    """The last kernel_size - 1 inputs of every short convolution in ``module``."""
    return sum((node.kernel_size - 1) * node.weight.shape[1]
               for _, node in nnx.iter_graph(module) if isinstance(node, ShortConv))


def carried(name: str, options: dict, monkeypatch) -> tuple[int, list]:
    """(numbers the causal module's cores and convolutions carry per sequence, the arguments each
    recorded core was called with)."""
    where = importlib.import_module(attention.family(name).__module__)
    sizes, calls = [], []
    for fn_name, size_of in CORES[name]:
        real = getattr(where, fn_name)

        def recorder(*args, _real=real, _size_of=size_of, **kwargs):
            sizes.append(_size_of(*args, **kwargs))
            return _real(*args, **kwargs)

        monkeypatch.setattr(where, fn_name, recorder)
    if name == "mega":
        real_attention = where.mega_attention

        def record_attention(*args, **kwargs):
            calls.append(kwargs)
            return real_attention(*args, **kwargs)

        monkeypatch.setattr(where, "mega_attention", record_attention)
    module = attention.build(name, dim=D, num_heads=H, qkv_dim=D, causal=True, max_len=L,
                             rngs=nnx.Rngs(0), **options)
    jax.eval_shape(lambda x: module(x), jnp.zeros((1, L, D)))
    assert sizes, f"{name}: no recorded core ran"
    return sum(sizes) + _conv_state(module), calls


def kept(attend, length: int, *, keys: bool = True) -> tuple[int, int]:
    """(keys, values) a causal decoder of ``attend(q, k, v) -> out`` (all [1, n, 1, 2]) holds at
    most over its first ``length`` steps: after step t, every position <= t whose key (value) step t
    or a later one reads. Run over 2 * length positions so that the later steps of the first
    ``length`` exist. Which positions a query reads is the same for every head and channel, so one
    head of two channels shows it; the jacobian is jitted (eagerly each operation compiles alone)."""
    n = 2 * length
    q, k, v = jax.random.normal(jax.random.key(0), (3, 1, n, 1, 2))
    counts = []
    for wrt in (1, 2) if keys else (2,):
        def read(a, wrt=wrt):
            return attend(*[a if i == wrt else x for i, x in enumerate((q, k, v))]).sum(axis=(0, 2, 3))

        jac = jax.jit(jax.jacrev(read))((q, k, v)[wrt])                 # [query i, 1, key j, 1, 2]
        reads = np.asarray(jnp.abs(jac).sum(axis=(1, 3, 4)) > 0)       # [query i, key j]
        assert not np.triu(reads, 1).any(), "the kernel is not causal"
        later = np.flip(np.logical_or.accumulate(np.flip(reads, 0), 0), 0)  # [t, j]: some i >= t reads j
        counts.append(max(int(later[t, :t + 1].sum()) for t in range(length)))
    return (counts[0], counts[1]) if keys else (0, counts[0])


@pytest.mark.parametrize("name, options", RECURRENT,
                         ids=[f"{n}-{'-'.join(f'{k}={v}' for k, v in o.items())}" for n, o in RECURRENT])
def test_the_formula_is_the_state_the_recurrence_carries(name, options, monkeypatch):
    numbers, calls = carried(name, options, monkeypatch)
    if name == "mega":  # its attention's cache, from the dependencies of the recorded call
        (kw,) = calls
        z, e = 64, 2 * D  # z_dim and hidden_dim at their defaults
        n = 2 * L
        bias = jax.random.normal(jax.random.key(1), (2 * max(kw["chunk_size"], n) - 1,))

        def attend(q, k, v):  # q, k [B, n, z], v [B, n, E] of two channels each
            out = mega_attention(q[:, :, 0], k[:, :, 0], v[:, :, 0], jnp.ones((1, n), bool), bias,
                                 attn_fn=kw["attn_fn"], causal=True, chunk_size=kw["chunk_size"])
            return out[:, :, None, :]

        keys, values = kept(attend, L)
        numbers += keys * z + values * e
    assert numbers == state_numbers(name, config(options), L), (name, options)


def _softmax(o):
    return lambda q, k, v: softmax_kernel(q, k, v, causal=True, impl="dense")


def _local(o):
    return lambda q, k, v: local_kernel(q, k, v, causal=True, **o)


def _longformer(o):
    return lambda q, k, v: longformer_kernel(q, k, v, causal=True, **o)


def _sparse(o):
    return lambda q, k, v: sparse_kernel(q, k, v, causal=True, **o)


def _synthesizer(o):
    synthetic = jax.random.normal(jax.random.key(2), (1, 1, 2 * L, 2 * L))
    if o.get("mix_dot_product", True):
        return lambda q, k, v: synthesizer_kernel(q, k, v, synthetic=synthetic, causal=True)
    return lambda q, k, v: synthesizer_kernel(None, None, v, synthetic=synthetic, causal=True)


CACHES = [
    ("softmax", {}, _softmax),
    ("local", {"block_size": 8}, _local), ("local", {"block_size": 8, "global_tokens": 1}, _local),
    ("longformer", {"window": 6}, _longformer),
    ("longformer", {"window": 6, "global_tokens": 2}, _longformer),
    ("sparse", {"block_size": 8, "num_summary": 2}, _sparse),
    ("sparse", {"block_size": 8, "num_summary": 2, "global_tokens": 0, "pattern": "strided"}, _sparse),
    ("synthesizer", {}, _synthesizer), ("synthesizer", {"mix_dot_product": False}, _synthesizer),
]


@pytest.mark.parametrize("name, options, attend", CACHES,
                         ids=[f"{n}-{'-'.join(f'{k}={v}' for k, v in o.items())}" for n, o, _ in CACHES])
def test_the_formula_is_the_cache_a_decoder_keeps(name, options, attend):
    keys, values = kept(attend(options), L, keys=options.get("mix_dot_product", True))
    assert D * (keys + values) == state_numbers(name, config(options), L), (name, keys, values)


def test_sparse_fixed_with_global_tokens_is_exact_where_the_blocks_fill_the_length():
    options = {"block_size": 8, "num_summary": 2, "global_tokens": 1}
    keys, values = kept(_sparse(options), L + 1)  # L + 1 - 1 global: four whole blocks
    assert D * (keys + values) == state_numbers("sparse", config(options), L + 1)
