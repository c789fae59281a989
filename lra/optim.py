"""The optimizer and the learning-rate schedules of the LRA configs and of the modern recipes.

LRA used Adam(b1=0.9, b2=0.98, eps=1e-9) with decoupled weight decay on every parameter
(optax.adamw), and one of two schedules. Here t counts optimizer steps from 1, W is
``train.warmup_steps``, T ``train.num_steps``, and every schedule warms up as
``ramp(t) = min(1, t / W) ** train.warmup_power`` (power 1 but for Mega's Path-X):

* ``rsqrt``:  lr(t) = base * ramp(t) / sqrt(max(t, W))
* ``cosine``: lr(t) = base * ramp(t) * max(0, (1 + cos(pi * frac(p))) / 2),
  p = max(0, (t - W) / T)  (LRA's cycle length is the number of training steps, counted from the
  end of the warm-up, so a run ends part-way down the cosine: at 2.4% of the peak for W = T / 10)
* ``constant``: lr(t) = base * ramp(t)

The modern recipes' schedules end where their sources end. After the warm-up (t > W), with
``lr_min`` = ``train.lr_min`` and the horizon H = ``train.schedule_horizon`` x T:

* ``cosine_to_min``: lr(t) = lr_min + (base - lr_min) (1 + cos(pi (t - W) / (H - W))) / 2: a half
  cosine from the peak at the warm-up's end to lr_min at step H (transformers'
  ``get_cosine_schedule_with_warmup``, the S4 repository's ``cosine_warmup``, with a floor). H = T
  ends the run at lr_min; a horizon past the run (S4D's Retrieval: 50,000 scheduled steps, 45,960
  run; HGRN2's harness) ends it part-way down; past H the cosine rises again, as transformers' does.
* ``cosine_s5``: lr(t) = lr_min + (base - lr_min) (1 + cos(pi min(t, T - W) / (T - W))) / 2, the
  cosine of S5's training loop (lindermanlab/S5@3c18fdb s5/train.py lines 167-180,
  s5/train_helpers.py lines 16-21; minimal-LRU's is the same code): it counts t from the start of
  the run over T - W steps, so it drops below the peak at the warm-up's end and reaches lr_min W
  steps before the end, where it stays.
* ``linear_decay``: lr(t) = lr_min + (base - lr_min) max(0, (H - t) / (H - W)) (fairseq's
  ``linear_decay``, Mega's; its ``--warmup-power`` is ``train.warmup_power``).

Every warm-up here starts from 0 (LRU's paper and Mega's scripts start at 1e-7: at most 1e-7 apart).

Parameter groups. Every parameter is in one of three groups:

* ``default``: AdamW at ``lr`` with ``weight_decay``;
* ``ssm`` (with ``train.ssm_lr`` > 0): plain Adam at ``ssm_lr`` under the same schedule shape, no
  weight decay: the parameters tagged ``optimizer_group="ssm"`` (the state-space core of s4d, s5,
  lru and Mega's EMA; see attention/_ssm.py);
* ``no_decay``: plain Adam at ``lr`` (AdamW without weight decay), for two options of the modern
  recipes. ``train.dt_group="no_decay"`` moves the state-space step sizes (tagged ``step_size``
  by ``ssm_param``: s4d's ``log_dt``, s5's ``log_step``) out of the ssm group to here (the S4
  repository's ``lr.dt: null``: log dt at the global lr, weight decay 0). ``train.decay_exclude=
  "bias_norm"`` puts here every bias (a parameter whose name ends in ``bias``) and every parameter
  of a normalisation layer (a module whose class name ends in ``Norm``) inside the encoder's blocks
  and its final norm: the S4 repository's ``optimizer_param_grouping`` (state-spaces/s4@e757cef
  configs/config.yaml lines 42-44, src/utils/optim_groups.py lines 24-38), which it applies to its
  backbone only (train.py line 460: ``self.model``), so the input embedding or pixel projection
  and the decoder keep their weight decay there and here.

The split is optax's ``multi_transform`` over labels read from the parameters' metadata (and, for
``decay_exclude``, from the model's module tree), so it follows the parameters wherever a family
puts them. ``ssm_lr`` = 0 with neither option (the default) is one AdamW group, as LRA.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection

import jax
import jax.numpy as jnp
import optax
from flax import nnx

from lra.config import TrainConfig


def _decay(train: TrainConfig, t):
    """lr(t) of the modern schedules after the warm-up (the module docstring)."""
    base, floor, warmup = train.lr, train.lr_min, train.warmup_steps
    if train.schedule == "cosine_s5":
        horizon = max(train.num_steps - warmup, 1)
        frac = 0.5 * (1.0 + jnp.cos(jnp.pi * jnp.minimum(t, horizon) / horizon))
    else:
        horizon = train.schedule_horizon * train.num_steps
        progress = (t - warmup) / max(horizon - warmup, 1.0)
        if train.schedule == "cosine_to_min":
            frac = 0.5 * (1.0 + jnp.cos(jnp.pi * progress))
        else:  # linear_decay
            frac = jnp.maximum(0.0, 1.0 - progress)
    return floor + (base - floor) * frac


def learning_rate(train: TrainConfig) -> optax.Schedule:
    base, warmup = train.lr, max(train.warmup_steps, 1)

    def schedule(count):
        t = jnp.asarray(count, jnp.float32) + 1.0  # optax counts from 0; LRA's lr(0) would be 0
        ramp = jnp.minimum(1.0, t / warmup)
        if train.warmup_power != 1:
            ramp = ramp ** train.warmup_power
        lr = base * ramp
        if train.schedule == "rsqrt":
            lr = lr / jnp.sqrt(jnp.maximum(t, warmup))
        elif train.schedule == "cosine":
            progress = jnp.maximum(0.0, (t - warmup) / train.num_steps)
            lr = lr * jnp.maximum(0.0, 0.5 * (1.0 + jnp.cos(jnp.pi * (progress % 1.0))))
        elif train.schedule != "constant":
            lr = jnp.where(t <= train.warmup_steps, lr, _decay(train, t))
        return lr

    return schedule


GROUP_METADATA = "optimizer_group"
STEP_SIZE_METADATA = "step_size"
SSM = "ssm"
DEFAULT = "default"
NO_DECAY = "no_decay"


def _plain(path) -> tuple:
    """A jax key path as the tuple of plain keys ``nnx.iter_graph`` gives."""
    return tuple(getattr(k, "key", getattr(k, "idx", getattr(k, "name", k))) for k in path)


def param_groups(params, train: TrainConfig | None = None, *,
                 no_decay: Collection[tuple] = frozenset()):
    """The group of every parameter. ``params`` is an nnx State (or any tree of nnx Variables);
    returns a tree of strings in its shape (a prefix of the parameter tree, as
    ``optax.multi_transform`` takes).

    Without ``train``: the tags alone, ``"ssm"`` if tagged so, else ``"default"``. With ``train``:
    the group that config trains each parameter in (the module docstring); ``no_decay`` holds the
    paths (``decay_excluded``) of the parameters ``train.decay_exclude`` exempts."""

    def label(path, variable):
        metadata = variable.get_metadata() if isinstance(variable, nnx.Variable) else {}
        ssm = metadata.get(GROUP_METADATA) == SSM
        if train is None:
            return SSM if ssm else DEFAULT
        if train.dt_group == NO_DECAY and metadata.get(STEP_SIZE_METADATA):
            return NO_DECAY
        if ssm and train.ssm_lr > 0:
            return SSM
        return NO_DECAY if _plain(path) in no_decay else DEFAULT

    return jax.tree_util.tree_map_with_path(label, params,
                                            is_leaf=lambda v: isinstance(v, nnx.Variable))


def _is_norm(node) -> bool:
    return isinstance(node, nnx.Module) and type(node).__name__.endswith("Norm")


def decay_excluded(model: nnx.Module) -> frozenset[tuple]:
    """The paths (tuples of keys, as ``nnx.iter_graph`` gives them) of the parameters that
    ``train.decay_exclude="bias_norm"`` exempts from weight decay: inside the encoder's blocks and
    its final norm, every parameter named ``...bias`` and every parameter of a normalisation layer
    (the module docstring). ``model`` may be abstract (``nnx.eval_shape``)."""
    from lra.encoder import Block, Encoder  # the encoder imports the config, as this module

    nodes = list(nnx.iter_graph(model))
    roots = [path for path, node in nodes if isinstance(node, Block)]
    roots += [(*path, "final_norm") for path, node in nodes if isinstance(node, Encoder)]
    norms = [path for path, node in nodes if _is_norm(node)]

    def under(path, prefixes):
        return any(path[:len(p)] == p for p in prefixes)

    return frozenset(
        path for path, node in nodes
        if isinstance(node, nnx.Param) and under(path, roots)
        and (str(path[-1]).endswith("bias") or under(path[:-1], norms)))


def _used_groups(train: TrainConfig, model: nnx.Module | None, no_decay) -> set[str]:
    """The groups the optimizer gets a transformation for: ``default``, ``ssm`` with ssm_lr > 0 (as
    before the other groups existed: the optimizer state keeps its shape), ``no_decay`` when a
    parameter lands there (without the model: when ``dt_group`` asks for it)."""
    groups = {DEFAULT} | ({SSM} if train.ssm_lr > 0 else set())
    if model is None:
        return groups | ({NO_DECAY} if train.dt_group == NO_DECAY else set())
    labels = param_groups(nnx.state(model, nnx.Param), train, no_decay=no_decay)
    return groups | ({NO_DECAY} if NO_DECAY in jax.tree.leaves(labels) else set())


def optimizer(train: TrainConfig, model: nnx.Module | None = None) -> optax.GradientTransformation:
    """The optimizer of ``train`` (the module docstring). ``model`` (the trainer passes its
    abstract model) gives the module tree ``train.decay_exclude`` reads; without it the groups
    come from the parameters' tags alone."""
    if train.ssm_lr < 0:
        raise ValueError(f"train.ssm_lr must be >= 0 (0 = no separate group), got {train.ssm_lr}")
    if train.decay_exclude != "none" and model is None:
        raise ValueError(f"train.decay_exclude={train.decay_exclude!r} reads the model's modules: "
                         f"pass the model (lra.optim.optimizer(train, model))")
    no_decay = (decay_excluded(model) if model is not None and train.decay_exclude == "bias_norm"
                else frozenset())
    adam = dict(b1=train.b1, b2=train.b2, eps=train.eps)
    transforms = {
        DEFAULT: lambda: optax.adamw(learning_rate(train), weight_decay=train.weight_decay, **adam),
        SSM: lambda: optax.adam(learning_rate(dataclasses.replace(train, lr=train.ssm_lr)), **adam),
        NO_DECAY: lambda: optax.adam(learning_rate(train), **adam),
    }
    used = _used_groups(train, model, no_decay)
    if used == {DEFAULT}:
        tx = transforms[DEFAULT]()
    else:
        tx = optax.multi_transform({g: transforms[g]() for g in sorted(used)},
                                   lambda params: param_groups(params, train, no_decay=no_decay))
    if train.grad_clip > 0:
        return optax.chain(optax.clip_by_global_norm(train.grad_clip), tx)
    return tx
