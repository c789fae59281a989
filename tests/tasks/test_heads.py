"""The heads of tasks/_heads.py: LRA's (the default), the state-space codes' decoders ("linear") and
one hidden layer ("mlp"), on one pooled vector and on a two-tower pair."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from lra.tasks._heads import ClassifierHead, DualHead

B, F, H, C = 3, 6, 10, 4


def dense(layer, x):
    return x @ layer.kernel[...] + layer.bias[...][None]


def pooled(seed):
    return jax.random.normal(jax.random.key(seed), (B, F))


def test_linear_head_is_one_dense_layer():
    head = ClassifierHead(F, H, C, rngs=nnx.Rngs(0), form="linear")
    assert head.hidden is None and head.logits.in_features == F
    u = pooled(0)
    np.testing.assert_allclose(np.asarray(head(u)), np.asarray(dense(head.logits, u)), rtol=1e-6)


@pytest.mark.parametrize(("form", "width"), [("linear", F), ("mlp", H)])
def test_one_hidden_layer_over_the_pair_features(form, width):
    """S4's and S5's retrieval decoders: Dense(d) -> GELU -> Dense over [u, v, u*v, u-v] ("linear");
    Mega's classifier: one hidden layer of mlp_dim ("mlp")."""
    head = DualHead(F, H, C, rngs=nnx.Rngs(0), form=form, activation="gelu")
    assert head.hidden2 is None and head.hidden1.out_features == width
    u, v = pooled(1), pooled(2)
    features = jnp.concatenate([u, v, u * v, u - v], axis=-1)
    want = dense(head.logits, jax.nn.gelu(dense(head.hidden1, features)))
    np.testing.assert_allclose(np.asarray(head(u, v)), np.asarray(want), rtol=1e-5, atol=1e-6)


def test_lra_heads_are_the_default():
    head = DualHead(F, H, C, rngs=nnx.Rngs(0))
    assert (head.hidden1.out_features, head.hidden2.out_features) == (H, H // 2)
    u, v = pooled(3), pooled(4)
    features = jnp.concatenate([u, v, u * v, u - v], axis=-1)
    hidden = jax.nn.relu(dense(head.hidden2, jax.nn.relu(dense(head.hidden1, features))))
    np.testing.assert_allclose(np.asarray(head(u, v)), np.asarray(dense(head.logits, hidden)),
                               rtol=1e-5, atol=1e-6)
    one = ClassifierHead(F, H, C, rngs=nnx.Rngs(0))
    assert one.hidden.out_features == H and one.activation is jax.nn.relu


def test_bad_head_options_are_clear_errors():
    with pytest.raises(ValueError, match="head form must be one of lra, linear, mlp, got 'deep'"):
        ClassifierHead(F, H, C, rngs=nnx.Rngs(0), form="deep")
    with pytest.raises(ValueError, match="head activation must be one of relu, gelu, got 'tanh'"):
        DualHead(F, H, C, rngs=nnx.Rngs(0), activation="tanh")
