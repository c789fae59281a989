"""Classifier heads shared by the tasks: one pooled encoding, or two (two-tower retrieval).

A task's ``head(features_dim, mlp_dim, *, rngs, **options)`` passes ``options`` on unchanged; they
are the model config's head keys (``form`` = ``model.head``, ``activation`` =
``model.head_activation``; lra/config.py), so a new option reaches every head without touching
the tasks. The forms:

* ``"lra"`` (the default): LRA's heads. One tower: Dense(mlp_dim) -> act -> Dense(C); two towers:
  Dense(mlp_dim) -> act -> Dense(mlp_dim / 2) -> act -> Dense(C) over [u, v, u*v, u-v].
* ``"linear"``: the decoders of the state-space codes. One tower: one Dense(C) (S4's pooled
  ``SequenceDecoder``, S5's and minimal-LRU's ``decoder = nn.Dense(d_output)``). Two towers: no
  source decodes a pair linearly; S4's ``RetrievalHead`` (``nli``) and S5's ``RetrievalDecoder``
  both run Dense(features_dim) -> act -> Dense(C) over the four features, and so does this form.
* ``"mlp"``: one hidden layer of mlp_dim for one or two towers, Dense(mlp_dim) -> act -> Dense(C)
  (Mega's classifier: ``classifier_layers`` 1 of ``classifier_out_dim`` = the FFN width).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx

FORMS = ("lra", "linear", "mlp")
ACTIVATIONS = {"relu": jax.nn.relu, "gelu": jax.nn.gelu}


def _check(form: str, activation: str) -> None:
    if form not in FORMS:
        raise ValueError(f"head form must be one of {', '.join(FORMS)}, got {form!r}")
    if activation not in ACTIVATIONS:
        raise ValueError(f"head activation must be one of {', '.join(ACTIVATIONS)}, got {activation!r}")


class ClassifierHead(nnx.Module):
    """One pooled encoding float[B, D] -> float32[B, C]; the form's layers (module docstring).
    Layers: ``hidden`` (absent under "linear") and ``logits``, the names checkpoints hold."""

    def __init__(self, features_dim: int, mlp_dim: int, num_classes: int, *, rngs: nnx.Rngs,
                 form: str = "lra", activation: str = "relu"):
        _check(form, activation)
        self.activation = ACTIVATIONS[activation]
        self.hidden = None if form == "linear" else nnx.Linear(features_dim, mlp_dim, rngs=rngs)
        width = features_dim if self.hidden is None else mlp_dim
        self.logits = nnx.Linear(width, num_classes, rngs=rngs)

    def __call__(self, pooled: jax.Array) -> jax.Array:
        h = pooled if self.hidden is None else self.activation(self.hidden(pooled))
        return self.logits(h).astype(jnp.float32)


class DualHead(nnx.Module):
    """Two-tower head over [u, v, u*v, u-v] (the LRA paper's interaction); u, v: float[B, D] ->
    float32[B, C]; the form's layers (module docstring): ``hidden1``, ``hidden2`` (form "lra"
    only) and ``logits``."""

    def __init__(self, features_dim: int, mlp_dim: int, num_classes: int, *, rngs: nnx.Rngs,
                 form: str = "lra", activation: str = "relu"):
        _check(form, activation)
        self.activation = ACTIVATIONS[activation]
        width = features_dim if form == "linear" else mlp_dim
        self.hidden1 = nnx.Linear(4 * features_dim, width, rngs=rngs)
        self.hidden2 = nnx.Linear(width, width // 2, rngs=rngs) if form == "lra" else None
        self.logits = nnx.Linear(width if self.hidden2 is None else width // 2, num_classes,
                                 rngs=rngs)

    def __call__(self, u: jax.Array, v: jax.Array) -> jax.Array:
        combined = jnp.concatenate([u, v, u * v, u - v], axis=-1)
        h = self.activation(self.hidden1(combined))
        if self.hidden2 is not None:
            h = self.activation(self.hidden2(h))
        return self.logits(h).astype(jnp.float32)
