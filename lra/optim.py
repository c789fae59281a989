"""The optimizer and the learning-rate schedules of the LRA configs.

LRA used Adam(b1=0.9, b2=0.98, eps=1e-9) with decoupled weight decay on every parameter
(optax.adamw), and one of two schedules (t counts optimizer steps from 1):

* ``rsqrt``:  lr(t) = base * min(1, t / warmup) / sqrt(max(t, warmup))
* ``cosine``: lr(t) = base * min(1, t / warmup) * max(0, (1 + cos(pi * frac(p))) / 2),
  p = max(0, (t - warmup) / num_steps)  (LRA's cycle length is the number of training steps)
* ``constant``: lr(t) = base * min(1, t / warmup)

Parameter groups (the modern recipes of S4, S5, LRU, Mega): with ``train.ssm_lr`` > 0 the parameters
tagged ``optimizer_group="ssm"`` (the state-space core of s4d, s5, lru and Mega's EMA; see
attention/_ssm.py) get plain Adam at ``ssm_lr`` under the same schedule shape and no weight decay;
every other parameter keeps AdamW at ``lr`` with ``weight_decay``. The split is optax's
``multi_transform`` over labels read from the parameters' metadata, so it follows the parameters
wherever a family puts them. ``ssm_lr`` = 0 (the default) is one AdamW group, as LRA.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import optax
from flax import nnx

from lra.config import TrainConfig


def learning_rate(train: TrainConfig) -> optax.Schedule:
    base, warmup = train.lr, max(train.warmup_steps, 1)

    def schedule(count):
        t = jnp.asarray(count, jnp.float32) + 1.0  # optax counts from 0; LRA's lr(0) would be 0
        lr = base * jnp.minimum(1.0, t / warmup)
        if train.schedule == "rsqrt":
            lr = lr / jnp.sqrt(jnp.maximum(t, warmup))
        elif train.schedule == "cosine":
            progress = jnp.maximum(0.0, (t - warmup) / train.num_steps)
            lr = lr * jnp.maximum(0.0, 0.5 * (1.0 + jnp.cos(jnp.pi * (progress % 1.0))))
        return lr

    return schedule


GROUP_METADATA = "optimizer_group"
SSM = "ssm"
DEFAULT = "default"


def param_groups(params):
    """The label of every parameter: ``"ssm"`` if tagged so (see the module docstring), else
    ``"default"``. ``params`` is an nnx State (or any tree of nnx Variables); returns a tree of
    strings in its shape (a prefix of the parameter tree, as ``optax.multi_transform`` takes)."""

    def label(variable):
        metadata = variable.get_metadata() if isinstance(variable, nnx.Variable) else {}
        return SSM if metadata.get(GROUP_METADATA) == SSM else DEFAULT

    return jax.tree.map(label, params, is_leaf=lambda v: isinstance(v, nnx.Variable))


def optimizer(train: TrainConfig) -> optax.GradientTransformation:
    adamw = optax.adamw(learning_rate(train), b1=train.b1, b2=train.b2, eps=train.eps,
                        weight_decay=train.weight_decay)
    tx = adamw
    if train.ssm_lr < 0:
        raise ValueError(f"train.ssm_lr must be >= 0 (0 = no separate group), got {train.ssm_lr}")
    if train.ssm_lr > 0:
        ssm = optax.adam(learning_rate(dataclasses.replace(train, lr=train.ssm_lr)), b1=train.b1,
                         b2=train.b2, eps=train.eps)
        tx = optax.multi_transform({SSM: ssm, DEFAULT: adamw}, param_groups)
    if train.grad_clip > 0:
        return optax.chain(optax.clip_by_global_norm(train.grad_clip), tx)
    return tx
