"""Encoder options of the modern recipes (lra/encoder.py): masked BatchNorm, post-norm, half-GLU,
linear pixel input."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

import attention
from lra.config import ModelConfig
from lra.encoder import Block, Encoder, MaskedBatchNorm

B, L, D = 3, 10, 4
LENGTHS = np.array([L, 6, 3])


def padded(seed=0, pad_value=None):
    rng = np.random.default_rng(seed)
    mask = np.arange(L)[None, :] < LENGTHS[:, None]
    x = rng.standard_normal((B, L, D)) * 2.0 + 1.0
    pads = 1e3 * rng.standard_normal((B, L, D)) if pad_value is None else pad_value
    return jnp.asarray(np.where(mask[..., None], x, pads), jnp.float32), jnp.asarray(mask)


def test_batch_statistics_come_from_real_tokens_only():
    x, mask = padded()
    bn = MaskedBatchNorm(D, momentum=0.9, rngs=nnx.Rngs(0))
    y = bn(x, mask, deterministic=False)
    real = np.asarray(x)[np.asarray(mask)]  # [n_real, D]
    mean, var = real.mean(0), real.var(0)
    np.testing.assert_allclose(np.asarray(bn.mean[...]), 0.1 * mean, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(bn.var[...]), 0.9 + 0.1 * var, rtol=1e-5)
    np.testing.assert_allclose(np.asarray(y)[np.asarray(mask)], (real - mean) / np.sqrt(var + 1e-5),
                               rtol=1e-4, atol=1e-4)
    # other pad contents: same outputs at real tokens, same running statistics
    x2, _ = padded(pad_value=-7.0)
    bn2 = MaskedBatchNorm(D, momentum=0.9, rngs=nnx.Rngs(0))
    y2 = bn2(x2, mask, deterministic=False)
    np.testing.assert_allclose(np.asarray(y2)[np.asarray(mask)], np.asarray(y)[np.asarray(mask)],
                               rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(np.asarray(bn2.mean[...]), np.asarray(bn.mean[...]), rtol=1e-6)
    # the check can fail: BatchNorm over every position (S5's, flax's) lets the pads in
    flax_bn = nnx.BatchNorm(D, momentum=0.9, epsilon=1e-5, rngs=nnx.Rngs(0))
    flax_bn.train()
    naive = np.asarray(flax_bn(x.reshape(B * L, D)).reshape(B, L, D))
    assert np.abs(naive[np.asarray(mask)] - np.asarray(y)[np.asarray(mask)]).max() > 1e-2


def test_evaluation_uses_the_running_statistics():
    x, mask = padded(1)
    bn = MaskedBatchNorm(D, momentum=0.5, rngs=nnx.Rngs(0))
    for _ in range(3):
        bn(x, mask, deterministic=False)
    mean, var = np.asarray(bn.mean[...]), np.asarray(bn.var[...])
    before = (mean.copy(), var.copy())
    y = bn(x, mask, deterministic=True)
    np.testing.assert_array_equal(np.asarray(bn.mean[...]), before[0])  # eval does not update
    np.testing.assert_allclose(np.asarray(y), (np.asarray(x) - mean) / np.sqrt(var + 1e-5),
                               rtol=1e-5, atol=1e-5)
    assert len(jax.tree.leaves(nnx.state(bn, nnx.BatchStat))) == 2  # model state, not parameters


def make_block(**opts):
    attn = attention.build("s5", dim=D, num_heads=1, state_size=4, blocks=1, rngs=nnx.Rngs(0))
    m = ModelConfig(emb_dim=D, mlp_dim=8, dropout=0.0, **opts)
    return Block(attn, m, rngs=nnx.Rngs(1))


@pytest.mark.slow
def test_post_norm_normalises_after_the_residual():
    x, mask = padded(2, pad_value=0.0)
    block = make_block(prenorm=False)
    y = np.asarray(block(x, mask, deterministic=True))
    np.testing.assert_allclose(y.mean(-1), 0.0, atol=1e-4)  # LayerNorm is the last thing applied
    pre = np.asarray(make_block(prenorm=True)(x, mask, deterministic=True))
    assert np.abs(pre.mean(-1)).max() > 1e-2


def test_glu_block_is_x_plus_half_glu_of_the_mixer():
    x, mask = padded(3, pad_value=0.0)
    block = make_block(channel_mixer="glu")
    assert block.mlp is None and block.norm2 is None
    got = np.asarray(block(x, mask, deterministic=True))
    y = block.attn(block.norm1(x), mask)
    g = jax.nn.gelu(y)
    want = x + g * jax.nn.sigmoid(g @ block.glu.gate.kernel[...] + block.glu.gate.bias[...][None, None])
    np.testing.assert_allclose(got, np.asarray(want), rtol=1e-5, atol=1e-5)


def test_batch_norm_blocks_update_their_statistics_and_ignore_pads():
    x, mask = padded(4)
    block = make_block(norm="batch")
    stats0 = jax.tree.map(np.asarray, nnx.state(block, nnx.BatchStat))
    # The check below holds for every statistic there is: a block without any (a norm that is not
    # BatchNorm) must fail here, not pass with nothing checked. Two norms, a mean and a variance each.
    assert len(jax.tree.leaves(stats0)) == 4, stats0
    y = np.asarray(block(x, mask, deterministic=False))
    stats1 = nnx.state(block, nnx.BatchStat)
    assert all(jax.tree.leaves(jax.tree.map(lambda a, b: bool(np.any(a != np.asarray(b))),
                                            stats0, stats1)))
    block2 = make_block(norm="batch")
    x2, _ = padded(4, pad_value=3.0)
    y2 = np.asarray(block2(x2, mask, deterministic=False))
    np.testing.assert_allclose(y2[np.asarray(mask)], y[np.asarray(mask)], rtol=1e-4, atol=1e-4)


def encoder(pixel_stats=None, pixel_offset=1, **opts):
    m = ModelConfig(**{**dict(emb_dim=D, num_heads=1, num_layers=1, qkv_dim=D, mlp_dim=8,
                              dropout=0.0, attention_dropout=0.0, pooling="mean",
                              positional="sinusoidal"), **opts})
    return Encoder(m, vocab_size=257, max_len=L, attention_name="s5",
                   attn_options={"state_size": 4, "blocks": 1}, pixel_stats=pixel_stats,
                   pixel_offset=pixel_offset, rngs=nnx.Rngs(0))


def test_linear_input_projects_normalised_pixel_values():
    enc = encoder(input_encoder="linear", pixel_stats=(0.5, 0.25), pixel_offset=1)
    tokens = jnp.array([[1, 128, 256]])  # intensities 0, 127, 255
    got = np.asarray(enc.embed_inputs(tokens))
    value = (np.array([0, 127, 255]) / 255.0 - 0.5) / 0.25
    w, b = np.asarray(enc.pixel_proj.kernel[...]), np.asarray(enc.pixel_proj.bias[...])
    np.testing.assert_allclose(got[0], value[:, None] * w + b, rtol=1e-5, atol=1e-6)
    assert enc.embed is None
    with pytest.raises(ValueError, match="needs a pixel task"):
        encoder(input_encoder="linear")


def test_pixel_tasks_state_their_normalisation():
    import tasks

    assert tasks.family("image").pixel_stats == pytest.approx((122.6 / 255, 61.0 / 255))
    assert tasks.family("pathfinder").pixel_stats == (0.5, 0.5)
    assert tasks.family("pathx").pixel_stats == (0.5, 0.5)
    assert tasks.family("listops").pixel_stats is None


@pytest.mark.parametrize(("override", "message"), [
    ("model.norm=group", r"model\.norm='group': choose from layer, batch"),
    ("model.channel_mixer=swiglu", r"model\.channel_mixer='swiglu': choose from mlp, glu"),
    ("model.input_encoder=onehot", r"model\.input_encoder='onehot': choose from embed, linear"),
    ("model.bn_momentum=1.5", r"model\.bn_momentum=1\.5: expected a number in \[0, 1\)"),
])
def test_bad_choices_are_clear_errors(override, message):
    """Allowed values live on ModelConfig's fields (lra.config.option), and validation reads them."""
    from lra import config as config_lib

    with pytest.raises(config_lib.ConfigError, match=message):
        config_lib.load("listops", "softmax", preset="tiny", overrides=[override])
