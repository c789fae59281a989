"""The trainer's pieces: schedules, batching, one step, overfitting, gradient accumulation."""


import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from helpers import prepare_tiny_listops_cli, run_module_in_process, tiny_run_cmd

from lra import config as config_lib
from lra import sharding, tasks
from lra.config import TrainConfig
from lra.data_pipeline import TrainBatches, eval_batches
from lra.optim import learning_rate
from lra.train import create_train_state, make_eval_step

TINY_DATA = {"data.train_size": 64, "data.val_size": 16, "data.test_size": 16}


@pytest.fixture(scope="module")
def listops_tiny(tmp_path_factory):
    cfg = config_lib.load("listops", "softmax", preset="tiny", overrides=TINY_DATA)
    task = tasks.build("listops", tmp_path_factory.mktemp("data"), **cfg.data)
    task.prepare()
    return cfg, task


def test_rsqrt_schedule_matches_lra_formula():
    lr = learning_rate(TrainConfig(lr=0.05, schedule="rsqrt", warmup_steps=1000))
    # optax count c is step t = c + 1: base * min(1, t/w) / sqrt(max(t, w))
    np.testing.assert_allclose(float(lr(999)), 0.05 / np.sqrt(1000), rtol=1e-6)  # LRA's 1.58e-3 peak
    np.testing.assert_allclose(float(lr(99)), 0.05 * 0.1 / np.sqrt(1000), rtol=1e-6)
    np.testing.assert_allclose(float(lr(3999)), 0.05 / np.sqrt(4000), rtol=1e-6)


def test_cosine_schedule_warms_up_then_decays_to_zero():
    lr = learning_rate(TrainConfig(lr=1e-3, schedule="cosine", warmup_steps=10, num_steps=110))
    values = np.array([float(lr(c)) for c in range(120)])
    assert values[9] == pytest.approx(1e-3 * np.cos(0.0), rel=1e-6)
    assert np.all(np.diff(values[:10]) > 0) and np.all(np.diff(values[10:118]) <= 1e-12)
    assert values[9 + 55] == pytest.approx(0.5e-3, rel=1e-3)  # half-way through the cycle


def test_train_batches_are_seeded_epoch_permutations():
    src = [{"inputs": np.array([i], np.int32)} for i in range(10)]
    batches = TrainBatches(src, 5, seed=3)
    epoch = np.concatenate([batches[0]["inputs"][:, 0], batches[1]["inputs"][:, 0]])
    assert sorted(epoch.tolist()) == list(range(10))
    again = TrainBatches(src, 5, seed=3)
    assert np.array_equal(again[7]["inputs"], batches[7]["inputs"])
    other = TrainBatches(src, 5, seed=4)
    assert not all(np.array_equal(other[i]["inputs"], batches[i]["inputs"]) for i in range(4))
    # each of two processes reads its half of the same global batch
    halves = [TrainBatches(src, 4, seed=3, process_index=p, process_count=2)[5]["inputs"]
              for p in range(2)]
    assert np.array_equal(np.concatenate(halves), TrainBatches(src, 4, seed=3)[5]["inputs"])


def test_eval_batches_cover_the_split_once_with_weights():
    src = [{"inputs": np.array([i], np.int32)} for i in range(10)]
    batches = list(eval_batches(src, 4))
    assert [b["inputs"].shape for b in batches] == [(4, 1)] * 3
    weights = np.concatenate([b["weights"] for b in batches])
    seen = np.concatenate([b["inputs"][:, 0] for b in batches])[weights > 0]
    assert sorted(seen.tolist()) == list(range(10)) and weights.sum() == 10


def _setup(cfg, task, dropout=0.1, **train):
    d = cfg.to_dict()
    cfg = config_lib.Config.from_dict({
        **d, "train": {**d["train"], **train},
        "model": {**d["model"], "dropout": dropout, "attention_dropout": dropout}})
    setup = create_train_state(cfg, task, sharding.make_mesh(), init="eager")
    return setup.state, setup.rest, setup.train_step


@pytest.mark.slow
def test_one_step_updates_every_parameter(listops_tiny):
    cfg, task = listops_tiny
    state, rest, step = _setup(cfg, task, schedule="constant", warmup_steps=1, lr=1e-3)
    batch = TrainBatches(task.source("train"), 16, seed=0)[0]
    new, metrics = step(jax.tree.map(jnp.copy, state), rest, batch, jax.random.key(0))
    assert int(new["step"]) == 1 and np.isfinite(float(metrics["loss"]))
    moved = jax.tree.map(lambda a, b: bool(jnp.any(a != b)), state["params"], new["params"])
    assert all(jax.tree.leaves(moved)), "some parameters did not move"


@pytest.mark.slow
def test_overfits_a_tiny_batch(listops_tiny):
    cfg, task = listops_tiny
    state, rest, step = _setup(cfg, task, dropout=0.0, schedule="constant", warmup_steps=1,
                               lr=3e-3, weight_decay=0.0)
    batch = TrainBatches(task.source("train"), 16, seed=0)[0]
    first = None
    for i in range(150):
        state, metrics = step(state, rest, batch, jax.random.key(i))
        first = first if first is not None else float(metrics["loss"])
    assert float(metrics["accuracy"]) == 1.0 and float(metrics["loss"]) < 0.1 * first


@pytest.mark.slow
def test_gradient_accumulation_equals_the_full_batch(listops_tiny):
    cfg, task = listops_tiny
    batch = TrainBatches(task.source("train"), 16, seed=0)[0]
    outs = []
    for k in (1, 4):
        state, rest, step = _setup(cfg, task, dropout=0.0, grad_accum=k, schedule="constant",
                                   lr=1e-3)
        for i in range(3):
            state, metrics = step(state, rest, batch, jax.random.key(i))
        outs.append((state, metrics))
    (s1, m1), (s4, m4) = outs
    np.testing.assert_allclose(float(m1["loss"]), float(m4["loss"]), rtol=1e-5)
    for a, b in zip(jax.tree.leaves(s1["params"]), jax.tree.leaves(s4["params"])):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), atol=1e-5)


@pytest.mark.slow
def test_remat_gives_the_same_step(listops_tiny):
    cfg, task = listops_tiny
    batch = TrainBatches(task.source("train"), 16, seed=0)[0]
    outs = []
    for remat in (False, True):
        d = cfg.to_dict()
        c = config_lib.Config.from_dict({**d, "model": {**d["model"], "remat": remat}})
        state, rest, step = _setup(c, task, dropout=0.0, schedule="constant", lr=1e-3)
        outs.append(step(state, rest, batch, jax.random.key(0)))
    (s0, m0), (s1, m1) = outs
    np.testing.assert_allclose(float(m0["loss"]), float(m1["loss"]), rtol=1e-6)
    for a, b in zip(jax.tree.leaves(s0["params"]), jax.tree.leaves(s1["params"])):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), atol=1e-6)


@pytest.mark.slow
def test_bfloat16_compute_keeps_float32_parameters(listops_tiny):
    cfg, task = listops_tiny
    d = cfg.to_dict()
    c = config_lib.Config.from_dict({**d, "model": {**d["model"], "dtype": "bfloat16"}})
    state, rest, step = _setup(c, task, dropout=0.0, schedule="constant", lr=1e-3)
    batch = TrainBatches(task.source("train"), 16, seed=0)[0]
    new, metrics = step(state, rest, batch, jax.random.key(0))
    assert np.isfinite(float(metrics["loss"]))
    assert {leaf.dtype for leaf in jax.tree.leaves(new["params"])} == {jnp.dtype("float32")}
    f32_state, _, f32_step = _setup(cfg, task, dropout=0.0, schedule="constant", lr=1e-3)
    _, f32_metrics = f32_step(f32_state, rest, batch, jax.random.key(0))
    assert abs(float(metrics["loss"]) - float(f32_metrics["loss"])) < 0.05


def _batchnorm_setup(cfg, task, **train):
    """A BatchNorm model's train state as the trainer keeps it: params, batch_stats, opt_state."""
    d = cfg.to_dict()
    cfg = config_lib.Config.from_dict({
        **d, "train": {**d["train"], "schedule": "constant", "lr": 1e-3, **train},
        "model": {**d["model"], "norm": "batch", "dropout": 0.0, "attention_dropout": 0.0}})
    setup = create_train_state(cfg, task, sharding.make_mesh(), init="eager")
    return setup.graphdef, setup.state, setup.rest, setup.train_step


@pytest.mark.parametrize("grad_accum", [1, 4])
@pytest.mark.slow
def test_train_step_returns_the_updated_batch_statistics(listops_tiny, grad_accum):
    cfg, task = listops_tiny
    graphdef, state, rest, step = _batchnorm_setup(cfg, task, grad_accum=grad_accum)
    init_stats = jax.tree.map(jnp.copy, state["batch_stats"])
    assert len(jax.tree.leaves(init_stats)) == 2 * (2 * cfg.model.num_layers + 1)  # mean, var
    batch = TrainBatches(task.source("train"), 16, seed=0)[0]
    new, _ = step(state, rest, batch, jax.random.key(0))
    changed = jax.tree.map(lambda a, b: bool(jnp.any(a != b)), init_stats, new["batch_stats"])
    assert all(jax.tree.leaves(changed)), "some running statistics were not updated"
    # evaluation runs on the statistics it is given: the trained ones differ from the initial ones
    eval_step = jax.jit(make_eval_step(graphdef))
    eval_batch = next(iter(eval_batches(task.source("val"), 16)))
    trained = eval_step(new["params"], new["batch_stats"], rest, eval_batch)
    initial = eval_step(new["params"], init_stats, rest, eval_batch)
    assert float(trained["loss"]) != float(initial["loss"])


@pytest.mark.slow
def test_micro_batches_update_the_statistics_in_order(listops_tiny):
    """grad_accum=K: K running-average updates, one per micro-batch (momentum applied K times)."""
    cfg, task = listops_tiny
    batch = TrainBatches(task.source("train"), 16, seed=0)[0]
    _, s4, rest, step4 = _batchnorm_setup(cfg, task, grad_accum=4, lr=0.0)
    _, s1, _, step1 = _batchnorm_setup(cfg, task, grad_accum=1, lr=0.0)
    new4, _ = step4(s4, rest, batch, jax.random.key(0))
    for i in range(4):  # lr 0: parameters stay put, so four quarter-batch steps are the same
        quarter = jax.tree.map(lambda a, i=i: a[4 * i: 4 * (i + 1)], batch)
        s1, _ = step1(s1, rest, quarter, jax.random.fold_in(jax.random.key(0), i))
    for a, b in zip(jax.tree.leaves(new4["batch_stats"]), jax.tree.leaves(s1["batch_stats"])):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-6)


def test_batch_statistics_left_in_rest_are_refused(listops_tiny):
    cfg, task = listops_tiny
    _, state, rest, step = _batchnorm_setup(cfg, task)
    stats = state.pop("batch_stats")
    batch = TrainBatches(task.source("train"), 16, seed=0)[0]
    with pytest.raises(ValueError, match="BatchNorm statistics"):
        step(state, nnx.merge_state(rest, stats), batch, jax.random.key(0))


# ----------------------------------------------------------------------------------------------
# The command end to end: a NaN stops the run at its step.


@pytest.fixture(scope="module")
def tmp(tmp_path_factory):
    return prepare_tiny_listops_cli(tmp_path_factory.mktemp("faults"))


@pytest.mark.slow
def test_nan_stops_with_the_step_and_keeps_the_last_good_checkpoint(tmp):
    cmd = tiny_run_cmd(tmp, "nan", "--set", "train.lr=1e9", "--set", "train.schedule=constant",
                       "--set", "train.warmup_steps=1", "--set", "train.num_steps=200",
                       "--set", "train.checkpoint_every=1", "--set", "train.weight_decay=0")
    out = run_module_in_process(cmd)
    assert out.returncode == 1
    assert "non-finite" in out.stderr and "at step" in out.stderr
    assert "last good checkpoint" in out.stderr or "no checkpoint" in out.stderr
    assert not (tmp / "nan" / "result.json").exists()
