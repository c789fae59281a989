"""Encoder options of the modern recipes (lra/encoder.py): masked BatchNorm, post-norm, half-GLU,
linear pixel input, and the recipe around the mixer (dropout form, final norm, heads, MLP)."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from lra import attention
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
    from lra import tasks

    assert tasks.family("image").pixel_stats == pytest.approx((122.6 / 255, 61.0 / 255))
    assert tasks.family("pathfinder").pixel_stats == (0.5, 0.5)
    assert tasks.family("pathx").pixel_stats == (0.5, 0.5)
    assert tasks.family("listops").pixel_stats is None


@pytest.mark.parametrize(("override", "message"), [
    ("model.norm=group", r"model\.norm='group': choose from layer, batch"),
    ("model.channel_mixer=swiglu", r"model\.channel_mixer='swiglu': choose from mlp, glu"),
    ("model.input_encoder=onehot", r"model\.input_encoder='onehot': choose from embed, linear"),
    ("model.bn_momentum=1.5", r"model\.bn_momentum=1\.5: expected a number in \[0, 1\)"),
    ("model.dropout_form=spatial", r"model\.dropout_form='spatial': choose from elementwise, tied"),
    ("model.head=deep", r"model\.head='deep': choose from lra, linear, mlp"),
    ("model.mlp_activation=tanh", r"model\.mlp_activation='tanh': choose from gelu, silu"),
])
def test_bad_choices_are_clear_errors(override, message):
    """Allowed values live on ModelConfig's fields (lra.config.option), and validation reads them."""
    from lra import config as config_lib

    with pytest.raises(config_lib.ConfigError, match=message):
        config_lib.load("listops", "softmax", preset="tiny", overrides=[override])


# The recipe around the mixer (issue 51): each modern recipe's model, as the trainer builds it.

def recipe_model(task, family, *, concrete=False):
    """(config, Classifier) of ``family``'s modern recipe on ``task`` at the tiny scale, built by
    lra.encoder.build_model as the trainer does (abstractly unless ``concrete``)."""
    from pathlib import Path

    from lra import config as config_lib
    from lra import tasks
    from lra.encoder import build_model

    cfg = config_lib.load(task, family, preset="tiny", protocol="modern")
    task_obj = tasks.build(task, Path("."), **cfg.data)
    make = lambda: build_model(cfg, task_obj, rngs=nnx.Rngs(params=0, dropout=1, default=2))  # noqa: E731
    return cfg, (make() if concrete else nnx.eval_shape(make))


def kept(drop, shape, seed=0):
    """The mask a dropout module draws on a [B, L, C] input of ones: bool[B, L, C], True = kept."""
    drop.rngs = nnx.Rngs(dropout=seed).dropout
    return np.asarray(drop(jnp.ones(shape), deterministic=False)) != 0


@pytest.mark.parametrize(("task", "family"), [("image", "s5"), ("image", "s4d"), ("image", "lru")])
def test_tied_dropout_drops_whole_channels_for_a_whole_sequence(task, family):
    """S5, S4 and minimal-LRU draw one mask per (example, channel) and use it at every position;
    their input is never dropped. Every dropout of the recipe's blocks, on its model's widths."""
    cfg, model = recipe_model(task, family, concrete=True)
    assert cfg.model.dropout == 0.1
    block, shape = model.encoder.blocks[0], (16, 32, cfg.model.emb_dim)
    for drop in (block.dropout, block.glu.dropout):
        mask = kept(drop, shape)
        assert np.all(mask == mask[:, :1]), "a channel is dropped at some positions only"
        assert 0 < (~mask).sum() < mask.size
        per_example = mask[:, 0]  # [B, C]
        assert len({row.tobytes() for row in per_example}) > 1, "one mask for every example"
        assert not np.array_equal(per_example, kept(drop, shape, seed=1)[:, 0])  # new draw, new mask
    assert np.all(kept(model.encoder.dropout, shape))  # no input dropout


def test_the_lra_protocol_keeps_elementwise_and_input_dropout():
    from pathlib import Path

    from lra import config as config_lib
    from lra import tasks
    from lra.encoder import build_model

    cfg = config_lib.load("listops", "softmax", preset="tiny")
    assert cfg.model.dropout == 0.1 and cfg.model.mlp_init == "lecun"
    model = build_model(cfg, tasks.build("listops", Path("."), **cfg.data),
                        rngs=nnx.Rngs(params=0, dropout=1, default=2))
    shape = (8, 32, cfg.model.emb_dim)
    mask = kept(model.encoder.blocks[0].dropout, shape)
    assert not np.all(mask == mask[:, :1])
    assert not np.all(kept(model.encoder.dropout, shape))  # the embedding is dropped
    assert model.encoder.final_norm is not None
    head = model.head
    assert head.hidden.out_features == cfg.model.mlp_dim and head.activation is jax.nn.relu


@pytest.mark.parametrize(("task", "family", "final_norm", "head_layers"), [
    ("text", "s5", False, ["logits"]), ("text", "lru", False, ["logits"]),
    ("text", "s4d", True, ["logits"]),  # S4's pre-norm backbone keeps its final norm
    ("retrieval", "s5", False, ["hidden1", "logits"]),
    ("retrieval", "s4d", True, ["hidden1", "logits"]),
    ("text", "mega", False, ["hidden", "logits"]),  # post-norm: no final norm, as in Mega
    ("retrieval", "mega", False, ["hidden1", "logits"]),
    ("text", "mamba", False, ["logits"]),  # no LRA recipe: S5's encoder around another mixer
])
def test_recipes_decode_and_end_as_their_sources(task, family, final_norm, head_layers):
    """S5, S4 and minimal-LRU decode with one Dense (Retrieval: Dense(d) -> GELU -> Dense over the
    pair's features); S5 and minimal-LRU have no final norm; Mega's classifier is one hidden layer
    of the FFN width with GELU."""
    cfg, model = recipe_model(task, family)
    m, head = cfg.model, model.head
    assert (model.encoder.final_norm is not None) == final_norm
    layers = [name for name in ("hidden", "hidden1", "hidden2", "logits")
              if getattr(head, name, None) is not None]
    assert layers == head_layers
    if len(layers) == 2:
        width = m.mlp_dim if family == "mega" else m.emb_dim
        assert getattr(head, layers[0]).out_features == width
        assert head.activation is jax.nn.gelu
    else:
        assert head.logits.in_features == m.emb_dim


def test_mega_ffn_is_silu_and_lru_batch_norm_momentum_is_flax_default():
    cfg, model = recipe_model("text", "mega", concrete=True)
    mlp = model.encoder.blocks[0].mlp
    x = jax.random.normal(jax.random.key(0), (2, 5, cfg.model.emb_dim))
    hidden = jax.nn.silu(x @ mlp.up.kernel[...] + mlp.up.bias[...][None, None])
    want = hidden @ mlp.down.kernel[...] + mlp.down.bias[...][None, None]
    np.testing.assert_allclose(np.asarray(mlp(x, deterministic=True)), np.asarray(want),
                               rtol=1e-5, atol=1e-5)
    _, lru = recipe_model("listops", "lru")
    assert {lru.encoder.blocks[0].norm1.momentum} == {0.99}  # mLRU: flax BatchNorm's default


@pytest.mark.parametrize(("task", "shared"), [("listops", True), ("image", True),
                                              ("pathfinder", False)])
def test_s4d_recipe_shares_a_where_s4_sets_n_ssm(task, shared):
    cfg, model = recipe_model(task, "s4d")
    attn = model.encoder.blocks[0].attn
    copies = 1 if shared else cfg.model.emb_dim
    assert attn.log_A_real.shape == (copies, cfg.attn["state_size"] // 2)
    assert attn.log_dt.shape == (cfg.model.emb_dim,)


def test_lra_mlp_initialisation_is_an_option():
    """LRA's MlpBlock: xavier-uniform kernels, N(0, 1e-6) biases; the default stays lecun-normal
    and zero biases (the committed LRA-protocol runs were trained with it)."""
    from lra.encoder import MLP

    m = ModelConfig(emb_dim=256, mlp_dim=512)
    lra_init = MLP(dataclasses.replace(m, mlp_init="lra"), dtype=jnp.float32, rngs=nnx.Rngs(0))
    default = MLP(m, dtype=jnp.float32, rngs=nnx.Rngs(0))
    bound = np.sqrt(6 / (256 + 512))
    kernel = np.asarray(lra_init.up.kernel[...])
    assert np.abs(kernel).max() <= bound and np.abs(kernel).max() > 0.95 * bound  # uniform
    np.testing.assert_allclose(kernel.std(), bound / np.sqrt(3), rtol=0.02)
    bias = np.asarray(lra_init.down.bias[...])
    assert 0 < bias.std() < 2e-6
    assert not np.any(np.asarray(default.up.bias[...]))
    np.testing.assert_allclose(np.asarray(default.up.kernel[...]).std(), 1 / np.sqrt(256), rtol=0.05)
