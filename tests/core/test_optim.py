"""Optimiser groups (lra/optim.py): state-space parameters get train.ssm_lr and no weight decay."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

import attention
import tasks
from lra import config as config_lib
from lra import sharding
from lra.config import TrainConfig
from lra.data_pipeline import TrainBatches
from lra.optim import optimizer, param_groups
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
