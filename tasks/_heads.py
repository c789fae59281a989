"""Classifier heads shared by the tasks: one pooled encoding, two (two-tower retrieval), or every
position (per-position targets)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx


class ClassifierHead(nnx.Module):
    """LRA's head: Dense(mlp_dim) -> ReLU -> Dense(num_classes). float[B, D] -> float32[B, C]."""

    def __init__(self, features_dim: int, mlp_dim: int, num_classes: int, *, rngs: nnx.Rngs):
        self.hidden = nnx.Linear(features_dim, mlp_dim, rngs=rngs)
        self.logits = nnx.Linear(mlp_dim, num_classes, rngs=rngs)

    def __call__(self, pooled: jax.Array) -> jax.Array:
        return self.logits(jax.nn.relu(self.hidden(pooled))).astype(jnp.float32)


class DualHead(nnx.Module):
    """Two-tower head of the LRA paper: MLP([u, v, u*v, u-v]) with two hidden layers.

    u, v: float[B, D] -> float32[B, C]. Dense(mlp) -> ReLU -> Dense(mlp/2) -> ReLU -> Dense(C).
    """

    def __init__(self, features_dim: int, mlp_dim: int, num_classes: int, *, rngs: nnx.Rngs):
        self.hidden1 = nnx.Linear(4 * features_dim, mlp_dim, rngs=rngs)
        self.hidden2 = nnx.Linear(mlp_dim, mlp_dim // 2, rngs=rngs)
        self.logits = nnx.Linear(mlp_dim // 2, num_classes, rngs=rngs)

    def __call__(self, u: jax.Array, v: jax.Array) -> jax.Array:
        combined = jnp.concatenate([u, v, u * v, u - v], axis=-1)
        h = jax.nn.relu(self.hidden2(jax.nn.relu(self.hidden1(combined))))
        return self.logits(h).astype(jnp.float32)


class PositionHead(nnx.Module):
    """A per-position classifier (tasks with ``per_position``, e.g. MQAR's language-model head):
    one Dense(num_classes) on every position. float[B, L, D] -> float32[B, L, C]."""

    def __init__(self, features_dim: int, num_classes: int, *, rngs: nnx.Rngs):
        self.logits = nnx.Linear(features_dim, num_classes, rngs=rngs)

    def __call__(self, encoded: jax.Array) -> jax.Array:
        flat = encoded.reshape(-1, encoded.shape[-1])
        return self.logits(flat).reshape(*encoded.shape[:-1], -1).astype(jnp.float32)
