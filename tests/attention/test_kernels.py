"""Kernels against naive references written independently of the implementations."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import length_mask, random_qkv
from lra.attention.cosformer import cosformer_kernel
from lra.attention.softmax import softmax_kernel

B, L, H, DH = 2, 37, 3, 8


def qkv(seed=0, length=L):
    return random_qkv((B, length, H, DH), seed)


def padding_mask(length=L):
    return length_mask([length, length - 11], length)


def naive_softmax(q, k, v, mask, causal):
    out = np.zeros_like(q)
    for b in range(q.shape[0]):
        for h in range(q.shape[2]):
            for i in range(q.shape[1]):
                allowed = [j for j in range(k.shape[1])
                           if (mask is None or mask[b, j]) and (not causal or j <= i)]
                logits = np.array([q[b, i, h] @ k[b, j, h] / math.sqrt(q.shape[-1])
                                   for j in allowed])
                w = np.exp(logits - logits.max())
                w /= w.sum()
                out[b, i, h] = sum(wj * v[b, j, h] for wj, j in zip(w, allowed))
    return out


def naive_cosformer(q, k, v, mask, causal, eps=1e-6):
    relu = lambda a: np.maximum(a, 0)  # noqa: E731
    m = max(q.shape[1], k.shape[1])
    out = np.zeros_like(q)
    for b in range(q.shape[0]):
        for h in range(q.shape[2]):
            for i in range(q.shape[1]):
                num, den = np.zeros(q.shape[-1]), 0.0
                for j in range(k.shape[1]):
                    if (mask is not None and not mask[b, j]) or (causal and j > i):
                        continue
                    s = relu(q[b, i, h]) @ relu(k[b, j, h]) * math.cos(math.pi / 2 * (i - j) / m)
                    num += s * v[b, j, h]
                    den += s
                out[b, i, h] = num / max(den, eps)
    return out


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("masked", [False, True])
def test_softmax_kernel_matches_naive(causal, masked):
    q, k, v = qkv()
    mask = padding_mask() if masked else None
    got = softmax_kernel(q, k, v, None if mask is None else jnp.asarray(mask), causal=causal)
    np.testing.assert_allclose(np.asarray(got), naive_softmax(q, k, v, mask, causal),
                               atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("chunk", [1, 5, 16])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("masked", [False, True])
def test_softmax_query_chunks_match_naive_with_gradients(causal, masked, chunk):
    q, k, v = (jnp.asarray(a) for a in qkv(seed=3))
    mask = padding_mask() if masked else None
    got = softmax_kernel(q, k, v, None if mask is None else jnp.asarray(mask), causal=causal,
                         query_chunk=chunk)  # 5 does not divide L: the last block is padded
    np.testing.assert_allclose(np.asarray(got), naive_softmax(*map(np.asarray, (q, k, v)), mask,
                                                              causal), atol=1e-5, rtol=1e-5)

    def loss(q, k, v, chunk):
        out = softmax_kernel(q, k, v, None if mask is None else jnp.asarray(mask), causal=causal,
                             query_chunk=chunk)
        return jnp.sum(jnp.sin(out))

    want = jax.grad(loss, argnums=(0, 1, 2))(q, k, v, 0)
    grads = jax.jit(jax.grad(loss, argnums=(0, 1, 2)), static_argnums=3)(q, k, v, chunk)
    for g, w in zip(grads, want):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), atol=1e-5, rtol=1e-4)


def test_softmax_all_keys_masked_is_finite():
    q, k, v = qkv()
    mask = np.zeros((B, L), bool)
    out = softmax_kernel(q, k, v, jnp.asarray(mask))
    assert np.isfinite(np.asarray(out)).all()


def test_softmax_bf16_computes_softmax_in_float32():
    q, k, v = (jnp.asarray(a, jnp.bfloat16) for a in qkv())
    out = softmax_kernel(q, k, v)
    assert out.dtype == jnp.bfloat16
    ref = naive_softmax(*(np.asarray(a, np.float32) for a in (q, k, v)), None, False)
    np.testing.assert_allclose(np.asarray(out, np.float32), ref, atol=3e-2)


@pytest.mark.parametrize("chunk", [1, 8, 64])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("masked", [False, True])
def test_cosformer_kernel_matches_quadratic_form(causal, masked, chunk):
    q, k, v = qkv(seed=2)
    mask = padding_mask() if masked else None
    got = cosformer_kernel(q, k, v, None if mask is None else jnp.asarray(mask), causal=causal,
                           chunk_size=chunk)
    np.testing.assert_allclose(np.asarray(got), naive_cosformer(q, k, v, mask, causal),
                               atol=1e-4, rtol=1e-4)


def test_cosformer_reweighting_matters():
    """The cos re-weighting is really applied: plain ReLU linear attention gives other numbers."""
    q, k, v = qkv(seed=3)
    got = np.asarray(cosformer_kernel(q, k, v))
    relu = lambda a: np.maximum(a, 0)  # noqa: E731
    s = np.einsum("bihd,bjhd->bhij", relu(q), relu(k))
    plain = np.einsum("bhij,bjhd->bihd", s, v) / np.maximum(s.sum(-1).transpose(0, 2, 1), 1e-6)[..., None]
    assert np.abs(got - plain).max() > 1e-3


def test_cosformer_dead_query_gives_zero_not_nan():
    q, k, v = qkv(seed=4)
    q = q.copy()
    q[:, 5] = -np.abs(q[:, 5])  # ReLU features all zero
    out = np.asarray(cosformer_kernel(q, k, v))
    assert np.isfinite(out).all()
    np.testing.assert_allclose(out[:, 5], 0.0)


def test_cosformer_causal_memory_is_linear_in_length():
    """No [L, 2d, d] prefix tensor: compiled temp bytes grow ~linearly from L to 4L."""
    def temp_bytes(length):
        shape = jax.ShapeDtypeStruct((1, length, 2, 32), jnp.float32)
        fn = jax.jit(lambda q, k, v: cosformer_kernel(q, k, v, causal=True))
        return fn.lower(shape, shape, shape).compile().memory_analysis().temp_size_in_bytes

    small, big = temp_bytes(1024), temp_bytes(4096)
    # An [L, 2d, d] prefix sum would be 4096*64*32*4 bytes = 32 MiB at 4096.
    assert big < 8 * 2**20, big
    assert big / max(small, 1) < 6, (small, big)


# --- blocked (FlashAttention-style) softmax against the dense path ---------------------------------

def _dense_and_blocked_vjp(q, k, v, mask, causal, block):
    ct = jax.random.normal(jax.random.key(9), q.shape)
    outs = []
    for impl in ("dense", "blocked"):
        f = jax.jit(lambda q, k, v, impl=impl: softmax_kernel(q, k, v, mask, causal=causal,
                                                               impl=impl, block_size=block))
        out, vjp = jax.vjp(f, q, k, v)
        outs.append((out, *vjp(ct)))
    return outs


@pytest.mark.parametrize("block", [1, 8, 16, 64])  # 8 and 16 do not divide L = 37: padded keys
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("masked", [False, True])
def test_blocked_softmax_matches_dense_with_gradients(causal, masked, block):
    q, k, v = (jnp.asarray(a) for a in qkv(seed=4))
    mask = jnp.asarray(padding_mask()) if masked else None
    dense, blocked = _dense_and_blocked_vjp(q, k, v, mask, causal, block)
    for name, want, got in zip(("out", "dq", "dk", "dv"), dense, blocked):
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), atol=2e-6, rtol=1e-5,
                                   err_msg=name)


def test_blocked_softmax_fully_masked_rows_match_dense():
    """Every key masked: finite, the same uniform average and the same gradients as dense."""
    q, k, v = (jnp.asarray(a) for a in qkv(seed=5))
    mask = jnp.asarray(np.stack([np.zeros(L, bool), padding_mask()[1]]))
    dense, blocked = _dense_and_blocked_vjp(q, k, v, mask, False, 8)
    for name, want, got in zip(("out", "dq", "dk", "dv"), dense, blocked):
        assert np.isfinite(np.asarray(got)).all(), name
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), atol=2e-6, rtol=1e-5,
                                   err_msg=name)


@pytest.mark.parametrize("causal", [False, True])
def test_blocked_softmax_dropout_vjp_matches_autodiff(causal):
    """With dropout the custom VJP must agree with autodiff of the same blocked forward pass."""
    from lra.attention import _flash

    q, k, v = (jnp.asarray(a).transpose(0, 2, 1, 3) for a in qkv(seed=6, length=32))
    bias = jnp.where(jnp.asarray(padding_mask(32)), 0.0, _flash.MASKED_LOGIT)
    config = _flash._Config(causal=causal, block=8, has_bias=True, rate=0.3)
    rng = jax.random.key(3)

    def loss(fn, q, k, v):
        return jnp.sum(jnp.sin(fn(q, k, v)))

    custom = lambda q, k, v: _flash._flash(config, q, k, v, bias, rng)  # noqa: E731
    plain = lambda q, k, v: _flash._forward(config, q, k, v, bias, rng)[0]  # noqa: E731
    np.testing.assert_allclose(np.asarray(custom(q, k, v)), np.asarray(plain(q, k, v)), atol=1e-6)
    assert not np.allclose(np.asarray(plain(q, k, v)),
                           np.asarray(_flash._forward(_flash._Config(
                               causal=causal, block=8, has_bias=True, rate=0.0),
                               q, k, v, bias, rng)[0]))  # dropout really drops
    got = jax.grad(lambda *a: loss(custom, *a), argnums=(0, 1, 2))(q, k, v)
    want = jax.grad(lambda *a: loss(plain, *a), argnums=(0, 1, 2))(q, k, v)
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), atol=1e-5, rtol=1e-4)


def test_blocked_softmax_bf16():
    q, k, v = (jnp.asarray(a, jnp.bfloat16) for a in qkv())
    out = softmax_kernel(q, k, v, impl="blocked", block_size=16)
    assert out.dtype == jnp.bfloat16
    ref = naive_softmax(*(np.asarray(a, np.float32) for a in (q, k, v)), None, False)
    np.testing.assert_allclose(np.asarray(out, np.float32), ref, atol=3e-2)


def test_softmax_impl_selection():
    from lra.attention._softmax import BLOCKED_MIN_LENGTH, select_impl

    def pick(platform, dtype=jnp.bfloat16, head_dim=64, length=4096, dropout=False, impl="auto",
             dense_fits=False):
        return select_impl(impl, platform=platform, dtype=dtype, head_dim=head_dim, length=length,
                           dropout=dropout, dense_fits=dense_fits)

    assert pick("gpu") == "cudnn"
    assert pick("gpu", dtype=jnp.float16, length=64) == "cudnn"
    assert pick("gpu", dtype=jnp.float32) == "blocked"
    assert pick("gpu", head_dim=36) == "blocked"
    assert pick("gpu", head_dim=256) == "blocked"
    assert pick("gpu", dropout=True) == "blocked"  # cuDNN has no dropout; the scores do not fit
    assert pick("gpu", dropout=True, dense_fits=True) == "dense"
    assert pick("gpu", dtype=jnp.float32, dense_fits=True) == "dense"
    assert pick("gpu", dense_fits=True) == "cudnn"
    assert pick("cpu", dense_fits=True) == "blocked"  # read on GPU only
    assert pick("cpu") == "blocked"
    assert pick("cpu", length=BLOCKED_MIN_LENGTH - 1) == "dense"
    assert pick("cpu", impl="dense") == "dense"
    with pytest.raises(ValueError, match="impl='cudnn' needs a GPU"):
        pick("cpu", impl="cudnn")
    with pytest.raises(ValueError, match="impl must be one of"):
        pick("cpu", impl="flash")


def test_softmax_kernel_dispatches_by_platform(monkeypatch):
    """The selector's choice is what runs: a fake GPU routes bf16 through the cuDNN call."""
    import lra.attention.softmax as sm

    calls = []
    monkeypatch.setattr(jax.nn, "dot_product_attention",
                        lambda q, k, v, **kw: calls.append(kw) or jnp.zeros_like(q))
    q, k, v = (jnp.asarray(a, jnp.bfloat16) for a in qkv(length=40))
    mask = jnp.asarray(padding_mask(40))
    out = sm.softmax_kernel(q, k, v, mask, platform="gpu")
    assert calls[-1]["implementation"] == "cudnn"
    assert calls[-1]["key_value_seq_lengths"].tolist() == [40, 29]
    assert np.isfinite(np.asarray(out, np.float32)).all()
    holes = mask.at[0, 3].set(False)  # not a prefix: lengths cannot say it, so the rows turn NaN
    assert np.isnan(np.asarray(sm.softmax_kernel(q, k, v, holes, platform="gpu"), np.float32)[0]).all()
    sm.softmax_kernel(q.astype(jnp.float32), k.astype(jnp.float32), v.astype(jnp.float32), mask,
                      platform="gpu")
    assert len(calls) == 2  # float32 went the blocked way


def test_softmax_dense_fits_rule():
    """The GPU memory rule with devices' numbers: LRA ListOps at the paper shape (batch 32, 8 heads,
    2000 tokens and the CLS token, bfloat16; 4 layers as LRA's config, 6 as a deeper model) is dense
    on an 80 GB H100 and a 141 GB H200, also at the 75% of memory JAX's allocator takes by default;
    Text at 4K (batch 32, 4 heads, 4 layers) on the H200 only; ListOps' model at 4K and ListOps on
    a 16 GB card not at all; unknown memory never."""
    from lra.attention._softmax import DENSE_MEMORY_FRACTION, dense_bytes, dense_fits

    gb = 10**9
    for layers in (4, 6):
        for free in (80 * gb, 141 * gb, int(0.75 * 80 * gb), int(0.75 * 141 * gb)):
            assert dense_fits(32, 8, 2001, dtype_bytes=2, layers=layers, memory_free=free)
        assert not dense_fits(32, 8, 2001, dtype_bytes=2, layers=layers, memory_free=16 * gb)
        assert not dense_fits(32, 8, 2001, dtype_bytes=2, layers=layers, memory_free=None)
    assert dense_fits(32, 4, 4096, dtype_bytes=2, layers=4, memory_free=141 * gb)
    assert not dense_fits(32, 4, 4096, dtype_bytes=2, layers=4, memory_free=80 * gb)
    assert not dense_fits(32, 8, 4096, dtype_bytes=2, layers=4, memory_free=141 * gb)
    need = dense_bytes(32, 8, 2001, dtype_bytes=2, layers=6)
    assert need == 32 * 8 * 2001**2 * (6 * 4 + 16 + 2)  # 4 bytes held per layer, 18 transient
    assert dense_fits(32, 8, 2001, dtype_bytes=2, layers=6,
                      memory_free=math.ceil(need / DENSE_MEMORY_FRACTION))
    assert not dense_fits(32, 8, 2001, dtype_bytes=2, layers=6,
                          memory_free=math.ceil(need / DENSE_MEMORY_FRACTION) - 2)
    assert dense_bytes(2, 3, 10, length_k=4, dtype_bytes=4, layers=1) == 2 * 3 * 10 * 4 * 24


@pytest.mark.parametrize("causal", [False, True])
def test_softmax_gpu_dense_path_matches_dense_with_dropout(causal):
    """With the rules planning for a GPU whose memory holds the scores, ``impl="auto"`` with
    attention dropout takes the dense path (recorded in ``decisions()``), whose backward pass keeps
    only the probabilities: values and gradients as the dense reference's with the same key (to
    float rounding); with too little memory, the blocked loop."""
    from lra.attention import _platform
    from lra.attention import _softmax as sm

    q, k, v = (jnp.asarray(a) for a in qkv(seed=7))
    mask = jnp.asarray(padding_mask())
    key = jax.random.key(11)
    ct = jax.random.normal(jax.random.key(12), q.shape)

    def run(impl):
        f = lambda q, k, v: softmax_kernel(q, k, v, mask, causal=causal, dropout_rate=0.3,  # noqa: E731
                                           dropout_rng=key, impl=impl)
        out, vjp = jax.vjp(f, q, k, v)
        return out, *vjp(ct)

    with _platform.target("cpu"):  # the plain dense form, on any host
        want = run("dense")
    with _platform.target("gpu", memory_free=10**9):
        got = run("auto")
    assert sm.decisions()[-1] | {"memory_free": 0} == {
        "impl": "dense", "batch": B, "heads": H, "length_q": L, "length_k": L, "dtype": "float32",
        "dropout": True, "layers": 1, "memory_free": 0,
        "dense_bytes": sm.dense_bytes(B, H, L, dtype_bytes=4, layers=1)}
    for name, w, g in zip(("out", "dq", "dk", "dv"), want, got):  # same dropout mask: equal to rounding
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), atol=1e-6, rtol=1e-5, err_msg=name)
    # what the backward pass keeps of the scores (the VJP's residuals): the float32 probabilities
    def kept(impl):
        _, vjp = jax.vjp(lambda q, k, v: softmax_kernel(q, k, v, mask, causal=causal, impl=impl,
                                                        dropout_rate=0.3, dropout_rng=key), q, k, v)
        return [r.dtype for r in jax.tree.leaves(vjp) if getattr(r, "shape", ()) == (B, H, L, L)]

    with _platform.target("gpu", memory_free=10**9):
        assert kept("auto") == [jnp.float32]
    with _platform.target("cpu"):
        assert len(kept("dense")) > 1  # the plain form keeps logits, probabilities, mask ...
    with _platform.target("gpu", memory_free=100):
        run("auto")
    assert sm.decisions()[-1]["impl"] == "blocked"
