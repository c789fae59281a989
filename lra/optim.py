"""The optimizer and the learning-rate schedules of the LRA configs.

LRA used Adam(b1=0.9, b2=0.98, eps=1e-9) with decoupled weight decay on every parameter
(optax.adamw), and one of two schedules (t counts optimizer steps from 1):

* ``rsqrt``:  lr(t) = base * min(1, t / warmup) / sqrt(max(t, warmup))
* ``cosine``: lr(t) = base * min(1, t / warmup) * max(0, (1 + cos(pi * frac(p))) / 2),
  p = max(0, (t - warmup) / num_steps)  (LRA's cycle length is the number of training steps)
* ``constant``: lr(t) = base * min(1, t / warmup)
"""

from __future__ import annotations

import jax.numpy as jnp
import optax

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


def optimizer(train: TrainConfig) -> optax.GradientTransformation:
    adamw = optax.adamw(learning_rate(train), b1=train.b1, b2=train.b2, eps=train.eps,
                        weight_decay=train.weight_decay)
    if train.grad_clip > 0:
        return optax.chain(optax.clip_by_global_norm(train.grad_clip), adamw)
    return adamw
