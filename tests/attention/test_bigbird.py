"""BigBird attention against an independent dense reference (explicit L x L masks)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from helpers import assert_module_matches_dense, length_mask
from lra.attention.bigbird import bigbird_kernel, select_random_blocks
from lra.attention.softmax import softmax_kernel
from reference import dense_reference

from lra import attention

B, H, DH = 2, 3, 4
# jitted: one compilation per configuration is much cheaper than eager op-by-op dispatch
kernel = jax.jit(bigbird_kernel, static_argnames=("block_size",))


def qkv_and_mask(length, seed=0):
    rng = np.random.default_rng(seed)
    q, k, v = (rng.normal(size=(B, length, H, DH)).astype(np.float32) for _ in range(3))
    mask = np.ones((B, length), bool)
    mask[1, 2 * length // 3:] = False
    mask[0, [p for p in (3, 17) if p < length]] = False
    return q, k, v, mask


def bigbird_pattern(length, block, rand):
    """bool[H, L, L] from the paper's definition: window, global first/last block, random blocks."""
    n = -(-length // block)
    a, b = np.arange(n)[:, None], np.arange(n)[None, :]
    blocks = (np.abs(a - b) <= 1) | (a == 0) | (a == n - 1) | (b == 0) | (b == n - 1)
    blocks = np.repeat(blocks[None], rand.shape[0], axis=0)
    for h, row, m in np.ndindex(*rand.shape):
        blocks[h, row, rand[h, row, m]] = True
    pos = np.arange(length) // block
    return blocks[:, pos][:, :, pos]


def compare(out, ref, allowed):
    rows = allowed.any(-1).transpose(0, 2, 1)  # [B, L, H]
    np.testing.assert_allclose(out[rows], ref[rows], atol=2e-5, rtol=1e-4)
    assert np.isfinite(out).all()


def priorities(n, seed):
    rng = np.random.default_rng(seed)
    return jnp.asarray(np.stack([[rng.permutation(n) for _ in range(n)] for _ in range(H)]),
                       jnp.int32)


@pytest.mark.parametrize("length,block,r", [(128, 8, 3), (125, 8, 2), (96, 16, 1), (64, 8, 0),
                                            (40, 8, 3), (24, 8, 3), (13, 8, 3), (5, 8, 3)])
def test_kernel_matches_dense_pattern(length, block, r):
    q, k, v, mask = qkv_and_mask(length)
    n = -(-length // block)
    # arbitrary picks, repeats and window/global blocks included: the kernel must count each key
    # once (the module's own picks come from select_random_blocks, tested below)
    rand = np.random.default_rng(length).integers(0, n, size=(H, n, r))
    allowed = bigbird_pattern(length, block, rand)[None] & mask[:, None, None, :]
    out = kernel(*(jnp.asarray(a) for a in (q, k, v, mask)), block_size=block,
                         random_blocks=jnp.asarray(rand))
    compare(np.asarray(out), dense_reference(q, k, v, allowed), allowed)


def test_random_blocks_are_eligible_distinct_and_matter():
    n, r = 16, 3
    rand = np.asarray(select_random_blocks(priorities(n, 0), n, r))
    assert rand.shape == (H, n, r)
    for h, row in np.ndindex(H, n):
        if row in (0, n - 1):
            continue  # global rows see everything; their random picks are irrelevant
        picks = set(rand[h, row].tolist())
        assert len(picks) == r
        assert not picks & {row - 1, row, row + 1, 0, n - 1}
    assert len({tuple(rand[h].ravel()) for h in range(H)}) == H  # heads differ
    # a shorter sequence uses the restriction of the same draw; where fewer than r blocks are
    # eligible it takes all of them (the surplus picks are window/global blocks, dropped later)
    small = np.asarray(select_random_blocks(priorities(n, 0), 7, r))
    for h, row in np.ndindex(H, 7):
        if 0 < row < 6:
            eligible = set(range(7)) - {row - 1, row, row + 1, 0, 6}
            assert len(set(small[h, row].tolist()) & eligible) == min(r, len(eligible))
    # and the random blocks matter: other random blocks give another output
    length, block = 128, 8
    q, k, v, mask = qkv_and_mask(length)
    args = [jnp.asarray(a) for a in (q, k, v, mask)]
    out = kernel(*args, block_size=block, random_blocks=jnp.asarray(rand))
    other = select_random_blocks(priorities(n, 1), n, r)
    out2 = kernel(*args, block_size=block, random_blocks=other)
    assert np.abs(np.asarray(out - out2))[mask].max() > 1e-3


def test_few_blocks_cover_everything():
    # with at most 5 blocks (and r >= 1) every key block is visible: plain softmax attention
    for length in (5, 24, 40):
        q, k, v, mask = (jnp.asarray(a) for a in qkv_and_mask(length))
        rand = select_random_blocks(priorities(8, 0), -(-length // 8), 3)
        out = kernel(q, k, v, mask, block_size=8, random_blocks=rand)
        ref = jax.jit(softmax_kernel)(q, k, v, mask)
        np.testing.assert_allclose(np.asarray(out), np.asarray(ref), atol=2e-5, rtol=1e-4)


def test_module_random_blocks_fixed_per_layer_and_not_trainable():
    def make(seed, max_len=128):
        return attention.build("bigbird", dim=16, num_heads=H, qkv_dim=H * DH, max_len=max_len,
                               rngs=nnx.Rngs(seed), block_size=8)

    module = make(0)
    np.testing.assert_array_equal(module.random_blocks(128), module.random_blocks(128))
    assert np.any(np.asarray(make(1).random_blocks(128)) != np.asarray(module.random_blocks(128)))
    assert "random_priority" in nnx.state(module)  # saved with the model...
    assert "random_priority" not in nnx.state(module, nnx.Param)  # ...but never trained


def test_module_matches_dense_reference():
    dim, length, block = 16, 100, 8
    module = attention.build("bigbird", dim=dim, num_heads=H, qkv_dim=H * DH, max_len=128,
                             rngs=nnx.Rngs(0), block_size=block, num_random_blocks=2)
    x = jax.random.normal(jax.random.key(1), (B, length, dim))
    rand = np.asarray(module.random_blocks(length))
    assert_module_matches_dense(module, x, length_mask([length, 70], length),
                                bigbird_pattern(length, block, rand))


def test_needs_max_len_and_respects_it():
    with pytest.raises(ValueError, match="max_len"):
        attention.build("bigbird", dim=16, num_heads=2, rngs=nnx.Rngs(0))
    module = attention.build("bigbird", dim=16, num_heads=2, max_len=32, rngs=nnx.Rngs(0),
                             block_size=8)
    with pytest.raises(ValueError, match="exceeds max_len"):
        module(jnp.zeros((1, 40, 16)))
    with pytest.raises(ValueError, match="causal"):
        attention.build("bigbird", dim=16, num_heads=2, max_len=32, causal=True,
                        rngs=nnx.Rngs(0))
