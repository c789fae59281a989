"""Optimiser groups and schedules (lra/optim.py): state-space parameters get train.ssm_lr and no weight
decay; each modern recipe trains each parameter, and ends its schedule, as its source does."""

import dataclasses
import math
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from lra import attention, sharding, tasks
from lra import config as config_lib
from lra.config import TrainConfig
from lra.data_pipeline import TrainBatches
from lra.encoder import build_model
from lra.optim import learning_rate, optimizer, param_groups
from lra.train import create_train_state

SSM_NAMES = {
    "s4d": {"log_A_real", "A_imag", "log_dt"},
    "s5": {"Lambda_re", "Lambda_im", "B", "log_step"},
    "lru": {"nu_log", "theta_log", "gamma_log", "B_re", "B_im"},
    "mega": {"delta", "alpha", "beta", "eta"},
}


def labelled(module):
    params = nnx.state(module, nnx.Param)
    labels = param_groups(params)
    return {"/".join(map(str, path)): label for path, label in nnx.to_flat_state(labels)}


@pytest.mark.parametrize("name", sorted(SSM_NAMES))
def test_the_state_space_core_of_each_family_is_tagged(name):
    module = attention.build(name, dim=8, num_heads=1, max_len=16, rngs=nnx.Rngs(0))
    labels = labelled(module)
    ssm = {path.split("/")[-1] for path, label in labels.items() if label == "ssm"}
    assert ssm == SSM_NAMES[name]
    assert "default" in labels.values()  # C, D, projections stay in the default group


def test_attention_families_have_no_ssm_parameters():
    module = attention.build("softmax", dim=8, num_heads=2, rngs=nnx.Rngs(0))
    assert set(labelled(module).values()) == {"default"}


def _one_update(train, grad_value):
    module = attention.build("s5", dim=4, num_heads=1, state_size=4, blocks=1, rngs=nnx.Rngs(0))
    params = nnx.state(module, nnx.Param)
    tx = optimizer(train)
    grads = jax.tree.map(lambda p: jnp.full_like(p, grad_value), params)
    updates, _ = tx.update(grads, tx.init(params), params)
    return {"/".join(map(str, k)): np.asarray(v) for k, v in nnx.to_flat_state(updates)}, \
        {"/".join(map(str, k)): np.asarray(v) for k, v in nnx.to_flat_state(params)}


@pytest.mark.slow
def test_ssm_group_has_its_own_lr_and_no_weight_decay():
    train = TrainConfig(lr=1e-2, ssm_lr=1e-4, weight_decay=0.5, schedule="constant", warmup_steps=1)
    updates, params = _one_update(train, 0.0)
    # zero gradient: only weight decay moves a parameter, and it must not touch the ssm group
    assert np.all(updates["Lambda_re"] == 0) and np.all(updates["log_step"] == 0)
    np.testing.assert_allclose(updates["D"], -1e-2 * 0.5 * params["D"], rtol=1e-5)
    updates, _ = _one_update(train, 1.0)  # Adam's first step is lr * sign(g)
    np.testing.assert_allclose(updates["Lambda_im"], -1e-4, rtol=1e-4)
    np.testing.assert_allclose(updates["B"], -1e-4, rtol=1e-4)
    # ssm_lr = 0: one AdamW group, as LRA (the state-space parameters decay like the rest)
    single, params = _one_update(TrainConfig(lr=1e-2, weight_decay=0.5, schedule="constant",
                                             warmup_steps=1), 0.0)
    np.testing.assert_allclose(single["Lambda_re"], -1e-2 * 0.5 * params["Lambda_re"], rtol=1e-5)


def test_negative_ssm_lr_is_a_clear_error():
    with pytest.raises(ValueError, match=r"train\.ssm_lr must be >= 0"):
        optimizer(TrainConfig(ssm_lr=-1.0))


@pytest.mark.slow
def test_the_trainer_step_applies_the_groups(tmp_path):
    cfg = config_lib.load("listops", "s5", preset="tiny", overrides={
        "data.train_size": 32, "data.val_size": 8, "data.test_size": 8, "train.ssm_lr": 1e-5,
        "train.lr": 1e-2, "train.schedule": "constant", "train.warmup_steps": 1})
    task = tasks.build("listops", tmp_path, **cfg.data)
    task.prepare()
    _, state, rest, _, step = create_train_state(cfg, task, sharding.make_mesh(), init="eager")
    params = state["params"]
    batch = TrainBatches(task.source("train"), cfg.train.batch_size, seed=0)[0]
    new, _ = step(jax.tree.map(jnp.copy, state), rest, batch, jax.random.key(0))
    labels = dict(nnx.to_flat_state(param_groups(params)))
    moved = {k: float(jnp.abs(a - b).max()) for (k, a), (_, b) in
             zip(nnx.to_flat_state(params), nnx.to_flat_state(new["params"]), strict=True)}
    ssm = [v for k, v in moved.items() if labels[k] == "ssm"]
    default = [v for k, v in moved.items() if labels[k] == "default"]
    assert ssm and max(ssm) <= 1.1e-5 and max(default) > 5e-3


# ---------------------------------------------------------------------------------------------
# Probes of the modern recipes: the optimizer the trainer builds (lra.optim.optimizer over the
# abstract model of the resolved config) gives each parameter the learning rate and weight decay
# its source gives it.


def _effective(task: str, family: str) -> tuple[dict[str, tuple[float, float]], TrainConfig]:
    """{parameter path: (learning rate, weight decay)} of the recipe's optimizer, read from one
    update: with zero gradients AdamW moves a parameter of ones by -lr * wd, with unit gradients
    by -lr * (1 + wd). The schedule is made constant (the groups do not depend on it; the
    schedules are probed below) and clipping off (it would rescale the unit gradients)."""
    cfg = config_lib.load(task, family, preset="tiny", protocol="modern")
    train = dataclasses.replace(cfg.train, schedule="constant", warmup_steps=0, grad_clip=0.0)
    task_obj = tasks.build(task, Path("."), **cfg.data)
    model = nnx.eval_shape(lambda: build_model(cfg, task_obj, rngs=nnx.Rngs(0)))
    tx = optimizer(train, model)
    params = jax.tree.map(lambda p: jnp.ones(p.shape, p.dtype), nnx.state(model, nnx.Param))

    @jax.jit
    def moves(grad_value):
        grads = jax.tree.map(lambda p: jnp.full_like(p, grad_value), params)
        return tx.update(grads, tx.init(params), params)[0]

    zero, unit = (dict(nnx.to_flat_state(moves(g))) for g in (0.0, 1.0))
    out = {}
    for path, u0 in zero.items():
        lr = -float(jnp.mean(unit[path][...] - u0[...]))
        out["/".join(map(str, path))] = (lr, -float(jnp.mean(u0[...])) / lr)
    return out, cfg.train


def _in_backbone_norm_or_bias(path: str) -> bool:
    keys = path.split("/")
    backbone = keys[:2] in (["encoder", "blocks"], ["encoder", "final_norm"])
    return backbone and (keys[-1].endswith("bias") or any("norm" in k for k in keys[:-1]))


def _s4d(path: str, t: TrainConfig, task: str) -> tuple[float, float]:
    """S4@e757cef: A and B at the kernel lr 1e-3 without decay (kernels/ssm.py 524-534); log dt
    likewise, or at the global lr without decay where the task's config sets ``lr.dt: null``
    (s4-listops.yaml 16, s4-imdb.yaml 19, s4-aan.yaml 19); biases and norm parameters of the
    backbone without decay (configs/config.yaml 42-44, src/utils/optim_groups.py 24-38, applied to
    ``self.model`` only: train.py 460); everything else (C, D, the embedding, the decoder) AdamW."""
    name = path.split("/")[-1]
    if name in ("log_A_real", "A_imag"):
        return t.ssm_lr, 0.0
    if name == "log_dt":
        return (t.lr if task in ("listops", "text", "retrieval") else 1e-3), 0.0
    if _in_backbone_norm_or_bias(path):
        return t.lr, 0.0
    return t.lr, t.weight_decay


def _core_only(core: set[str]):
    """S5@3c18fdb (s5/train_helpers.py 146-158: ``map_nested_fn`` labels leaves, so its ``norm``
    entry matches nothing and the norms stay in the regular AdamW group) and minimal-LRU@bbd71b1
    (lru/train_helpers.py 91-104): the core at ssm_lr without decay, every other parameter AdamW."""
    def expected(path: str, t: TrainConfig, task: str) -> tuple[float, float]:
        return (t.ssm_lr, 0.0) if path.split("/")[-1] in core else (t.lr, t.weight_decay)
    return expected


def _one_group(path: str, t: TrainConfig, task: str) -> tuple[float, float]:
    """Mega (fairseq Adam, decoupled decay on every parameter) and HGRN2 (weight decay 0)."""
    return t.lr, t.weight_decay


RECIPE_GROUPS = {
    ("listops", "s4d"): _s4d, ("image", "s4d"): _s4d,
    ("listops", "s5"): _core_only({"Lambda_re", "Lambda_im", "B", "log_step"}),
    ("text", "lru"): _core_only({"nu_log", "theta_log", "gamma_log", "B_re", "B_im"}),
    ("listops", "mega"): _one_group, ("listops", "gla"): _one_group,
}


@pytest.mark.parametrize(("task", "family"), sorted(RECIPE_GROUPS))
def test_each_recipe_trains_each_parameter_as_its_source(task, family):
    got, train = _effective(task, family)
    expected = {path: RECIPE_GROUPS[task, family](path, train, task) for path in got}
    for path, (lr, wd) in expected.items():
        assert got[path] == pytest.approx((lr, wd), rel=1e-4, abs=1e-9), path
    if family == "s4d":  # the probe sees the exclusions at work, both ways
        assert {wd for path, (_, wd) in got.items() if "norm" in path} == {0.0}
        embed = "encoder/pixel_proj/bias" if task == "image" else "encoder/embed/embedding"
        assert got[embed][1] == pytest.approx(train.weight_decay, rel=1e-4)  # S4's encoder: not self.model
        assert got["head/logits/bias"][1] == pytest.approx(train.weight_decay, rel=1e-4)


def test_decay_exclude_needs_the_model():
    with pytest.raises(ValueError, match=r"train\.decay_exclude='bias_norm' reads the model"):
        optimizer(TrainConfig(decay_exclude="bias_norm"))


# The schedule's end, from each source's own numbers (not from configs/): transformers'
# get_cosine_schedule_with_warmup at the run's last step k = steps - 1, horizon H:
def _hf_cosine(k: int, warmup: int, horizon: int) -> float:
    if k < warmup:
        return k / warmup
    return max(0.0, 0.5 * (1.0 + math.cos(math.pi * (k - warmup) / (horizon - warmup))))


# (run steps, warm-up, scheduler horizon) where the horizon is not the run's end.
# HGRN2@b154c39 run_lra.py: warm-up (lines 89-96), horizon (98-105), epochs (125-132) x the
# train examples // global batch (8-15); S4@e757cef s4-aan.yaml 36-40: max_epochs 20 x 2298.
HORIZONS = {
    ("listops", "gla"): (50 * (96_000 // 128), 5_000, 50_000),
    ("text", "gla"): (40 * (25_000 // 64), 10_000, 50_000),
    ("retrieval", "gla"): (20 * (147_086 // 128), 312, 50_000),
    ("image", "gla"): (75 * (45_000 // 64), 30_000, 50_000),
    ("pathfinder", "gla"): (100 * (160_000 // 128), 50_000, 500_000),
    ("pathx", "gla"): (200 * (160_000 // 256), 150_000, 500_000),
    ("retrieval", "s4d"): (20 * 2298, 5_000, 50_000),
}
# The rate at a run's last step, as a fraction of the peak: S5's cosine and S4's reach 0 (S5
# run_train.py lr_min 0; cosine_warmup), LRU's 1e-7 (P-LRU App. D: base lr 1e-3), Mega's linear
# decay 0 (README.lra.md: --end-learning-rate 0.0 at --total-num-update = --max-update).
LAST = {"s5": 0.0, "s4d": 0.0, "lru": 1e-7 / 1e-3, "mega": 0.0}


@pytest.mark.parametrize("family", ["s5", "s4d", "lru", "mega", "gla"])
@pytest.mark.parametrize("task", ["listops", "text", "retrieval", "image", "pathfinder", "pathx"])
def test_each_recipe_schedule_ends_where_its_source_ends(task, family):
    t = config_lib.load(task, family, protocol="modern").train
    rate = learning_rate(t)

    def frac(step):  # the rate of the t-th update (count t - 1) over the peak
        return float(rate(step - 1)) / t.lr

    if (task, family) in HORIZONS:
        steps, warmup, horizon = HORIZONS[task, family]
        assert (t.num_steps, t.warmup_steps) == (steps, warmup)
        end = _hf_cosine(steps - 1, warmup, horizon)
    else:
        end = LAST[family]
    assert frac(t.num_steps) == pytest.approx(end, abs=2e-4)
    if 0 < t.warmup_steps <= t.num_steps:
        assert frac(t.warmup_steps) == pytest.approx(1.0, rel=1e-6)


def test_mega_path_x_warms_up_quadratically():
    t = config_lib.load("pathx", "mega", protocol="modern").train
    rate = learning_rate(t)
    # fairseq linear_decay with --warmup-power 2: lr = peak * (t / W) ** 2 during the warm-up
    assert float(rate(t.warmup_steps // 2 - 1)) == pytest.approx(t.lr / 4, rel=1e-5)
    assert float(rate(t.warmup_steps - 1)) == pytest.approx(t.lr, rel=1e-6)


def test_s5_cosine_counts_from_the_start_and_stays_at_lr_min():
    # S5@3c18fdb s5/train.py 167-180: after the warm-up, cosine_annealing(step, lr, T - W) of the
    # step counted from the run's start, clamped at T - W (s5/train_helpers.py 16-21)
    t = TrainConfig(lr=1.0, schedule="cosine_s5", warmup_steps=10, num_steps=110)
    rate = learning_rate(t)
    values = np.array([float(rate(c)) for c in range(110)])
    assert values[9] == pytest.approx(1.0)  # the warm-up's last step
    assert values[10] == pytest.approx(0.5 * (1 + math.cos(math.pi * 11 / 100)), rel=1e-6)
    assert np.all(values[99:] == pytest.approx(0.0, abs=1e-7))  # from step T - W on


def test_lra_cosine_keeps_its_cycle():
    # LRA's cosine (the LRA protocol's Image, Pathfinder, Path-X) is unchanged: a run ends part-way
    t = TrainConfig(lr=1.0, schedule="cosine", warmup_steps=100, num_steps=1000)
    assert float(learning_rate(t)(999)) == pytest.approx(0.5 * (1 + math.cos(math.pi * 0.9)))
