"""Every family under a per-position task (tasks/mqar.py, the task contract's ``per_position``):
the causal form leaks nothing from later tokens, and padding never reaches a real position's
prediction, with the whole model (short convolution, the family, the per-position head) jitted."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from helpers import FAMILIES

from lra import attention, tasks
from lra import config as config_lib
from lra.encoder import build_model

LENGTH, PAIRS, VOCAB = 64, 4, 128


def _model(name: str, form: str):
    opts = getattr(attention.family(name), "contract_options", {})
    overrides = {"data.length": LENGTH, "data.pairs": PAIRS, "data.vocab_size": VOCAB,
                 "data.form": form, "model.emb_dim": 16, "model.qkv_dim": 16,
                 **{f"attn.{k}": v for k, v in opts.items()}}
    cfg = config_lib.load("mqar", name, preset="tiny", overrides=overrides)
    task = tasks.build("mqar", ".", **cfg.data)
    return build_model(cfg, task, rngs=nnx.Rngs(0)), task


@functools.partial(nnx.jit)
def _logits(model, inputs, mask):
    return model({"inputs": inputs, "mask": mask}, deterministic=True)


def _tokens(seed: int, vocab: int) -> jax.Array:
    return jax.random.randint(jax.random.key(seed), (2, LENGTH), 0, vocab, jnp.int32)


def _form(name: str) -> str:
    return "causal" if attention.has_causal_mode(name) else "bidirectional"


@pytest.mark.parametrize("name", FAMILIES)
def test_causal_form_leaks_nothing_from_later_tokens(name):
    if not attention.has_causal_mode(name):
        pytest.skip(f"{name} has no causal mode: it runs MQAR's bidirectional form")
    model, task = _model(name, "causal")
    assert task.causal
    tokens, mask = _tokens(1, VOCAB), jnp.ones((2, LENGTH), bool)
    t = 40  # every token after t changes
    later = tokens.at[:, t + 1:].set(_tokens(2, VOCAB)[:, t + 1:])
    y, y2 = _logits(model, tokens, mask), _logits(model, later, mask)
    assert y.shape == (2, LENGTH, VOCAB)
    np.testing.assert_allclose(np.asarray(y[:, : t + 1]), np.asarray(y2[:, : t + 1]), atol=1e-4)
    assert np.abs(np.asarray(y[:, t + 1:] - y2[:, t + 1:])).max() > 1e-4


@pytest.mark.parametrize("name", FAMILIES)
def test_padding_never_reaches_a_real_prediction(name):
    model, task = _model(name, _form(name))
    tokens = _tokens(1, task.vocab_size)
    mask = jnp.arange(LENGTH)[None, :] < jnp.array([[LENGTH], [LENGTH - 23]])
    other = jnp.where(mask, tokens, _tokens(3, task.vocab_size))
    y, y2 = _logits(model, tokens, mask), _logits(model, other, mask)
    real = np.asarray(mask)
    np.testing.assert_allclose(np.asarray(y)[real], np.asarray(y2)[real], atol=1e-4)
    assert np.isfinite(np.asarray(y)[real]).all()


def test_bidirectional_form_sees_later_tokens():
    """The bidirectional form is not causal: a later token changes an earlier prediction (the
    check above would catch a causal model built where the task is not causal)."""
    model, task = _model("softmax", "bidirectional")
    assert not task.causal
    tokens, mask = _tokens(1, task.vocab_size), jnp.ones((2, LENGTH), bool)
    later = tokens.at[:, -1].set((tokens[:, -1] + 1) % task.vocab_size)
    y, y2 = _logits(model, tokens, mask), _logits(model, later, mask)
    assert np.abs(np.asarray(y[:, 0] - y2[:, 0])).max() > 1e-6
