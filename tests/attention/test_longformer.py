"""Longformer attention against an independent dense reference (explicit L x L masks)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from lra.attention.longformer import longformer_kernel, window_reach
from reference import dense_reference

from lra import attention

B, H, DH = 2, 2, 4
# jitted: one compilation per configuration is much cheaper than eager op-by-op dispatch
kernel = jax.jit(longformer_kernel, static_argnames=("causal", "window", "global_tokens"))


def arrays(length, n=3, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.normal(size=(B, length, H, DH)).astype(np.float32) for _ in range(n)]


def padding_mask(length):
    mask = np.ones((B, length), bool)
    mask[1, 2 * length // 3:] = False
    mask[0, [0, 9]] = False  # the first global token of sequence 0 is padding
    return mask


def band(length, window, causal):
    """LRA's sliding window (sum of eye(L, k) as in its code), or a one-sided window if causal."""
    right = window // 2
    left = window - right  # counts the query itself, as in LRA
    if causal:
        lower = sum(np.eye(length, k=-t) for t in range(window))
        return lower.astype(bool)
    mask = sum(np.eye(length, k=-t) for t in range(left))
    mask = mask + sum(np.eye(length, k=t) for t in range(1, right + 1))
    return mask.astype(bool)


def reference(q, k, v, mask, window, causal, global_tokens, global_qkv=None):
    length = q.shape[1]
    a, b = np.arange(length)[:, None], np.arange(length)[None, :]
    tri = b <= a if causal else np.ones((length, length), bool)
    allowed = (band(length, window, causal) | (b < global_tokens)) & tri
    allowed = allowed[None, None] & mask[:, None, None, :]
    out = dense_reference(q, k, v, allowed)
    if global_tokens:
        qg, kg, vg = global_qkv if global_qkv is not None else (q, k, v)
        rows = dense_reference(qg, kg, vg, tri[None, None] & mask[:, None, None, :])
        out[:, :global_tokens] = rows[:, :global_tokens]
    return out, allowed


def compare(out, ref, allowed):
    rows = allowed.any(-1).any(1)
    np.testing.assert_allclose(out[rows], ref[rows], atol=2e-5, rtol=1e-4)
    assert np.isfinite(out).all()


@pytest.mark.parametrize("global_tokens", [0, 2])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("window", [1, 8, 15, 200])
def test_kernel_matches_dense_band(window, causal, global_tokens):
    length = 61
    q, k, v, qg, kg, vg = arrays(length, 6)
    mask = padding_mask(length)
    gqkv = (qg, kg, vg) if global_tokens else None
    ref, allowed = reference(q, k, v, mask, window, causal, global_tokens, gqkv)
    out = kernel(*(jnp.asarray(a) for a in (q, k, v, mask)), causal=causal,
                            window=window, global_tokens=global_tokens,
                            global_qkv=None if gqkv is None else tuple(map(jnp.asarray, gqkv)))
    compare(np.asarray(out), ref, allowed)


def test_lra_window_convention_and_wrong_band_differs():
    assert window_reach(512, causal=False) == (255, 256)
    assert window_reach(511, causal=False) == (255, 255)
    assert window_reach(512, causal=True) == (511, 0)
    length, window = 64, 16
    q, k, v = arrays(length)
    mask = padding_mask(length)
    out = np.asarray(kernel(*(jnp.asarray(a) for a in (q, k, v, mask)),
                                       window=window))
    wrong, _ = reference(q, k, v, mask, window + 2, False, 0)  # one more key on each side
    assert np.abs(out - wrong)[mask].max() > 1e-3


def test_global_token_sees_everything_and_is_seen():
    length, window = 64, 8
    q, k, v = arrays(length)
    mask = np.ones((B, length), bool)
    run = lambda v, g: np.asarray(kernel(  # noqa: E731
        *(jnp.asarray(a) for a in (q, k, v, mask)), window=window, global_tokens=g))
    v_far = v.copy()
    v_far[:, 50] += 5.0  # far from position 0 and from position 30
    base, far = run(v, 1), run(v_far, 1)
    assert np.abs(far[:, 0] - base[:, 0]).max() > 1e-3  # the global row sees position 50
    np.testing.assert_allclose(far[:, 30], base[:, 30], atol=1e-6)  # position 30 does not
    v_cls = v.copy()
    v_cls[:, 0] += 5.0
    assert np.abs(run(v_cls, 1)[:, 30] - base[:, 30]).max() > 1e-3  # everyone sees the global one
    np.testing.assert_allclose(run(v_cls, 0)[:, 30], run(v, 0)[:, 30], atol=1e-6)


def test_module_uses_global_projections_for_global_rows():
    dim, length = 16, 40
    module = attention.build("longformer", dim=dim, num_heads=H, qkv_dim=H * DH,
                             rngs=nnx.Rngs(0), window=9, global_tokens=1)
    x = jax.random.normal(jax.random.key(1), (B, length, dim))
    mask = np.arange(length)[None, :] < np.array([length, 27])[:, None]
    heads = lambda y: y.reshape(B, length, H, DH)  # noqa: E731
    q, k, v, *gqkv = nnx.jit(lambda m, x: (*m.proj.qkv(x), heads(m.global_query(x)),
                                           heads(m.global_key(x)), heads(m.global_value(x))))(
        module, x)
    ref, _ = reference(q, k, v, mask, 9, False, 1, gqkv)
    ref = nnx.jit(lambda m, o: m.proj.merge(o))(module, jnp.asarray(ref, jnp.float32))
    out = nnx.jit(lambda m, x, mask: m(x, mask))(module, x, jnp.asarray(mask))
    np.testing.assert_allclose(np.asarray(out)[mask], np.asarray(ref)[mask], atol=2e-5,
                               rtol=1e-4)
    plain = attention.build("longformer", dim=dim, num_heads=H, rngs=nnx.Rngs(0))
    assert not hasattr(plain, "global_query")  # no unused parameters without global tokens


@pytest.mark.parametrize("bad", [{"window": 0}, {"global_tokens": -1}])
def test_bad_options(bad):
    with pytest.raises(ValueError):
        attention.build("longformer", dim=16, num_heads=2, rngs=nnx.Rngs(0), **bad)
