"""MQAR (tasks/mqar.py) against Zoology's ``multiquery_ar`` by its statistics, its two forms, its
options' checks, and the per-position loss the trainer takes over counted positions only."""

import jax.numpy as jnp
import numpy as np
import pytest
from helpers import run_in_process
from lra.tasks.mqar import gap_probabilities, generate, to_bidirectional

from lra import config as config_lib
from lra import data_fingerprint, tasks
from lra.train import _loss

OPTS = {"length": 64, "pairs": 4, "vocab_size": 256, "power_a": 0.01}


@pytest.fixture(scope="module")
def data():
    return generate(2000, seed=5, **OPTS)


def test_keys_are_distinct_and_each_target_is_its_keys_value(data):
    n, context = len(data["inputs"]), 2 * OPTS["pairs"]
    keys, values, inputs = data["keys"], data["values"], data["inputs"]
    half = OPTS["vocab_size"] // 2
    assert all(len(set(row)) == OPTS["pairs"] for row in keys)
    assert keys.min() >= 1 and keys.max() < half and values.min() >= half
    assert values.max() < OPTS["vocab_size"]
    # the context is k1 v1 k2 v2 ...
    assert np.array_equal(inputs[:, 0:context:2], keys)
    assert np.array_equal(inputs[:, 1:context:2], values)
    # exactly one counted position per key, after the context, holding the key; its target is the
    # value the context bound to that key
    assert np.array_equal(data["target_mask"].sum(1), np.full(n, OPTS["pairs"]))
    assert not data["target_mask"][:, :context].any()
    for i in range(0, n, 97):
        bound = dict(zip(inputs[i, 0:context:2], inputs[i, 1:context:2], strict=True))
        for pos in np.flatnonzero(data["target_mask"][i]):
            assert data["targets"][i, pos] == bound[inputs[i, pos]]
            assert (pos - context) % 2 == 0  # a query stands at a slot's first position


def test_query_gaps_follow_the_power_law():
    """One pair per example: the gap g is drawn with p_g proportional to (g + 1)^(a - 1)."""
    one = generate(20_000, length=64, pairs=1, vocab_size=256, power_a=0.01, seed=0)
    space = (64 - 2) // 2
    seen = np.bincount(one["gaps"][:, 0], minlength=space) / 20_000
    expected = gap_probabilities(space, 0.01)
    assert 0.5 * np.abs(seen - expected).sum() < 0.02  # total variation
    assert expected[0] > 0.2 and expected[0] / expected[-1] == pytest.approx(space ** 0.99)
    # a = 1 is uniform
    np.testing.assert_allclose(gap_probabilities(10, 1.0), np.full(10, 0.1))


def test_same_seed_same_data_and_every_split_its_own():
    a = tasks.build("mqar", ".", **OPTS, train_size=32, val_size=32, test_size=32)
    b = tasks.build("mqar", ".", **OPTS, train_size=32, val_size=32, test_size=32)
    assert np.array_equal(a.source("train").inputs, b.source("train").inputs)
    assert not np.array_equal(a.source("train").inputs, a.source("val").inputs)
    c = tasks.build("mqar", ".", **OPTS, seed=1, train_size=32, val_size=32, test_size=32)
    assert not np.array_equal(a.source("train").inputs, c.source("train").inputs)
    ex = a.source("test")[3]
    assert ex["inputs"].dtype == np.int32 and ex["targets"].shape == (64,)
    assert ex["mask"].all() and ex["target_mask"].dtype == bool


def test_the_fingerprint_names_the_generator_and_its_options(tmp_path):
    def fp(**extra):
        task = tasks.build("mqar", tmp_path, **{**OPTS, **extra})
        return data_fingerprint.fingerprint(task.provenance(), tmp_path)

    base = fp()
    assert base["files"] == {} and base["generator"]["pairs"] == 4
    assert fp()["sha256"] == base["sha256"]
    for change in ({"pairs": 8}, {"seed": 1}, {"form": "bidirectional"}, {"power_a": 0.5}):
        assert fp(**change)["sha256"] != base["sha256"], change


def test_bidirectional_form_masks_the_value_after_each_query(data):
    bi = to_bidirectional(data, mask_id=OPTS["vocab_size"])
    rows, cols = np.nonzero(data["target_mask"])
    assert np.all(bi["inputs"][rows, cols + 1] == OPTS["vocab_size"])
    assert np.array_equal(bi["targets"][rows, cols + 1], data["targets"][rows, cols])
    assert np.array_equal(np.argwhere(bi["target_mask"]), np.stack([rows, cols + 1], 1))
    untouched = np.ones_like(data["inputs"], bool)
    untouched[rows, cols + 1] = False
    assert np.array_equal(bi["inputs"][untouched], data["inputs"][untouched])
    task = tasks.build("mqar", ".", **OPTS, form="bidirectional")
    assert task.vocab_size == OPTS["vocab_size"] + 1 and task.num_classes == OPTS["vocab_size"]
    assert not task.causal


@pytest.mark.parametrize("change, message", [
    ({"data.length": 63}, "must be even"),
    ({"data.length": 64, "data.vocab_size": 64}, "must exceed length=64"),
    ({"data.length": 64, "data.vocab_size": 128, "data.pairs": 17}, "does not fit length=64"),
    ({"data.form": "both"}, "choose from causal, bidirectional"),
    ({"data.power_a": 0.0}, "power_a"),
    ({"data.train_size": 0}, "train_size must be >= 1"),
])
def test_zoologys_constraints_are_refused_in_one_line(change, message):
    with pytest.raises(config_lib.ConfigError, match=message) as err:
        config_lib.load("mqar", "softmax", preset="tiny", overrides=change)
    assert "\n" not in str(err.value)


def test_the_causal_form_refuses_a_family_without_a_causal_mode():
    with pytest.raises(config_lib.ConfigError, match=r"'fnet' has no causal mode.*softmax"
                       r".*data.form=bidirectional"):
        config_lib.load("mqar", "fnet", preset="tiny")
    cfg = config_lib.load("mqar", "fnet", preset="tiny", overrides=["data.form=bidirectional"])
    assert cfg.data["form"] == "bidirectional"


def test_a_guess_is_one_value_in_half_the_vocabulary_at_each_query():
    """The trainer's at-chance notice compares with the task's chance: for MQAR a value is one of
    V/2 tokens, counted at each of the ``pairs`` queries, as the recall track's at-chance rule;
    1/V over examples (the LRA tasks' rule, applied to MQAR before) put chance at half of it and
    its standard error on an eighth of the predictions."""
    mqar = tasks.build("mqar", ".", **{**OPTS, "vocab_size": 512, "pairs": 8})
    assert mqar.chance(500) == (2 / 512, 4000)
    listops = tasks.build("listops", ".")
    assert listops.chance(500) == (1 / 10, 500)


def test_the_loss_and_accuracy_count_the_marked_positions_only():
    logits = jnp.asarray(np.random.default_rng(0).normal(size=(2, 6, 5)), jnp.float32)
    targets = jnp.asarray([[1, 2, 3, 4, 0, 1], [0, 0, 2, 2, 4, 4]], jnp.int32)
    counted = jnp.asarray([[1, 0, 0, 1, 0, 0], [0, 0, 1, 0, 0, 1]], bool)
    batch = {"targets": targets, "target_mask": counted}
    loss, accuracy = _loss(lambda b, deterministic: logits, batch)
    logp = np.asarray(jax_log_softmax(logits))
    rows, cols = np.nonzero(np.asarray(counted))
    want = -logp[rows, cols, np.asarray(targets)[rows, cols]].mean()
    assert float(loss) == pytest.approx(want, rel=1e-6)
    hits = np.asarray(logits).argmax(-1)[rows, cols] == np.asarray(targets)[rows, cols]
    assert float(accuracy) == pytest.approx(hits.mean())
    # a target where nothing counts changes nothing
    other = {**batch, "targets": jnp.where(counted, targets, (targets + 1) % 5)}
    assert _loss(lambda b, deterministic: logits, other) == (loss, accuracy)


def jax_log_softmax(x):
    import jax

    return jax.nn.log_softmax(x, axis=-1)


@pytest.mark.slow
def test_a_tiny_run_reports_accuracy_over_the_queries(tmp_path):
    code, out, err = run_in_process("--task", "mqar", "--attn", "softmax", "--preset", "tiny",
                                    "--workdir", str(tmp_path / "w"), "--data-dir",
                                    str(tmp_path / "d"), "--results-dir", str(tmp_path / "r"),
                                    "--no-progress")
    assert code == 0, err[-2000:]
    # the closing line leads with the track's number (best validation step), never "LRA's protocol"
    assert "at the best validation step" in out and "(the mqar track's selection)" in out, out
    assert "LRA's protocol" not in out
    import json

    record = json.loads(next((tmp_path / "r" / "runs").glob("*.json")).read_text())
    assert record["data"]["evaluated"]["test_at_last"] == 64  # examples, not positions
    assert record["config"]["data"]["form"] == "causal"
    assert record["data"]["fingerprint"]["generator"]["form"] == "causal"
    assert 0.0 <= record["metrics"]["test_accuracy_at_last"] <= 1.0


def test_task_all_is_lras_six_and_mqar_runs_by_name():
    from lra import sweep

    assert tasks.in_track("recall") == ["mqar"] and "mqar" not in tasks.in_track()
    assert {c.task for c in sweep.expand("all", "softmax", [0])} == set(tasks.in_track("lra"))
    # LRA's six (a test may register its own task beside them: the add-a-task example's parity)
    assert {"listops", "text", "retrieval", "image", "pathfinder", "pathx"} <= set(tasks.in_track())
    assert {c.task for c in sweep.expand("mqar,listops", "softmax", [0])} == {"mqar", "listops"}
