"""The run's metrics: TensorBoard events and metrics.jsonl, cut back on resume, and the at-chance notice.

The notice runs use a two-class task built here (the trainer never tests a task's name): every token
of an example is its input class + 1, so a model learns it in a few steps. Its shuffled twin pairs
the same inputs with labels that say nothing about them; its validation split holds each input with
each label equally often, so any model scores exactly chance there (what a stuck model does).
"""

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from helpers import cli_env, run_module_in_process

from lra import config as config_lib
from lra import tasks, train
from lra.metrics_log import AtChance, MetricsLog, read_jsonl, read_scalars, standard_error

RUN = {"task": "listops", "attention": "softmax", "preset": "tiny", "seed": 0}


def _write_run(workdir: Path, last: int, resume_step: int = 0) -> None:
    log = MetricsLog(workdir, resume_step=resume_step, run=RUN)
    for step in range(resume_step + 1, last + 1):
        log.train(step, {"loss": 1.0 / step, "accuracy": 0.5, "lr": 1e-3, "grad_norm": 1.0},
                  timed_steps=step, train_time_s=0.01 * step)
        if step % 5 == 0:
            log.write(step, "val", {"loss": 2.0 / step, "accuracy": 0.6, "examples": 64})
    log.write(last, "test_at_last", {"accuracy": 0.6, "loss": 1.0, "examples": 64})
    log.close()


def _keys(records):
    return [(r["split"], r["step"]) for r in records]


def test_resume_cuts_both_logs_back_to_the_checkpoint(tmp_path):
    _write_run(tmp_path, 12)  # as if killed after step 12, with the last checkpoint at step 7
    with open(tmp_path / "metrics.jsonl", "a") as f:
        f.write('{"step": 13, "split": "tr')  # a line the kill cut short
    _write_run(tmp_path, 15, resume_step=7)
    records = read_jsonl(tmp_path / "metrics.jsonl")
    keys = _keys(records)
    assert len(keys) == len(set(keys)), "a (split, step) was written twice"
    assert [s for split, s in keys if split == "train"] == list(range(1, 16))
    assert [s for split, s in keys if split == "val"] == [5, 10, 15]
    assert [s for split, s in keys if split == "test_at_last"] == [15]
    assert keys.count(("run", 0)) == 1
    scalars = read_scalars(tmp_path / "tensorboard")
    assert [s for s, _ in scalars["train/loss"]] == list(range(1, 16))
    assert [s for s, _ in scalars["val/accuracy"]] == [5, 10, 15]
    # the first record of each session has no rate (it would time compilation)
    assert [s for s, _ in scalars["train/steps_per_s"]] == [*range(2, 8), *range(9, 16)]
    assert len(list((tmp_path / "tensorboard").iterdir())) == 2  # one event file per session


def test_a_damaged_line_in_the_middle_is_dropped_and_said_not_a_traceback(tmp_path, capsys):
    """Fails on main: the resume raised ValueError (a traceback after compilation)."""
    _write_run(tmp_path, 12)
    path = tmp_path / "metrics.jsonl"
    lines = path.read_text().splitlines(keepends=True)
    lines[4] = '{"step": 4, "spl\x00\x00 damaged\n'
    path.write_text("".join(lines))
    _write_run(tmp_path, 15, resume_step=10)
    err = capsys.readouterr().err
    assert err.count("warning:") == 1 and "1 damaged line(s) dropped (line 5)" in err
    keys = _keys(read_jsonl(path))
    train = [s for split, s in keys if split == "train"]
    assert len(train) == 14 and train == sorted(train) and max(train) == 15  # only the bad one lost


def _damage_one_event(events_dir: Path, where: str) -> int:
    """Flip a byte in the payload (or the length) of a middle train/loss record; its offset."""
    from lra.metrics_log import event_files, event_records

    path = event_files(events_dir)[0]
    offsets, pos = [], 0
    for raw, _ in event_records(path):
        offsets.append(pos)
        pos += len(raw)
    victim = offsets[len(offsets) // 2]
    data = bytearray(path.read_bytes())
    data[victim + (14 if where == "payload" else 2)] ^= 0xFF
    path.write_bytes(bytes(data))
    return victim


@pytest.mark.parametrize("where", ["payload", "length"])
def test_a_damaged_event_record_drops_only_itself_and_says_so(tmp_path, capsys, where):
    """Fails on main: every record after the damaged one was dropped silently on resume."""
    _write_run(tmp_path, 12)
    before = read_scalars(tmp_path / "tensorboard")
    offset = _damage_one_event(tmp_path / "tensorboard", where)
    _write_run(tmp_path, 15, resume_step=12)
    err = capsys.readouterr().err
    assert err.count("warning:") == 1 and "damaged part(s) dropped" in err
    assert f"offset {offset}" in err
    after = read_scalars(tmp_path / "tensorboard")
    total_before = sum(len(v) for v in before.values())
    total_kept = sum(len([s for s, _ in v if s <= 12]) for v in after.values())
    assert total_kept == total_before - 1  # the damaged record only
    assert [s for s, _ in after["train/loss"]][-3:] == [13, 14, 15]


def test_a_run_from_step_0_starts_new_logs(tmp_path):
    _write_run(tmp_path, 6)
    _write_run(tmp_path, 3)  # no checkpoint: starts over in the same work directory
    assert [s for split, s in _keys(read_jsonl(tmp_path / "metrics.jsonl")) if split == "train"] == [1, 2, 3]
    assert [s for s, _ in read_scalars(tmp_path / "tensorboard")["train/loss"]] == [1, 2, 3]


def test_only_an_enabled_log_writes(tmp_path):
    log = MetricsLog(tmp_path, resume_step=0, run=RUN, enabled=False)
    log.write(1, "val", {"accuracy": 0.5, "loss": 1.0})
    log.close()
    assert list(tmp_path.iterdir()) == []


def test_at_chance_counts_evaluations_within_one_standard_error():
    se = standard_error(0.5, 100)
    assert se == pytest.approx(0.05)
    watch = AtChance(0.5, patience=3)
    assert watch.update(1, 0.5 + se, 100) is None  # on the edge counts as at chance
    assert watch.update(2, 0.5 + 1.1 * se, 100) is None  # outside: the count restarts
    assert watch.update(3, 0.46, 100) is None
    assert watch.update(4, 0.5, 100) is None
    notice = watch.update(5, 0.54, 100)
    assert notice and "steps 3-5" in notice and "If a task stays at chance" in notice
    assert watch.update(6, 0.5, 100) is None  # said once
    assert AtChance(0.5, patience=0).update(1, 0.5, 100) is None  # 0 = off


# ----------------------------------------------------------------------------------------------
# Real training runs.

LENGTH = 16


class SignalTask(tasks.Task):
    """Two classes; every token of an example is its input class + 1."""

    name = "signal"
    vocab_size, max_len, num_classes = 3, LENGTH, 2

    def __init__(self, data_dir, *, shuffled: bool):
        super().__init__(data_dir)
        rng = np.random.default_rng(0)
        sizes = {"train": 256, "val": 64, "test": 64}
        self.splits = {}
        for split, n in sizes.items():
            inputs = np.arange(n) % 2
            if not shuffled:
                labels = inputs
            elif split == "train":
                labels = rng.permutation(inputs)
            else:  # each input with each label equally often
                labels = (np.arange(n) // 2) % 2
            self.splits[split] = [
                {"inputs": np.full(LENGTH, x + 1, np.int32), "mask": np.ones(LENGTH, bool),
                 "targets": np.int32(y)} for x, y in zip(inputs, labels)]

    def prepare(self):
        pass

    def source(self, split):
        return self.splits[split]

    def provenance(self):
        return tasks.Provenance(folder="(in memory)", origin="generated", files={},
                                wanted={split: 0 for split in self.splits},
                                generator={"name": "test_metrics_log", "version": 1, "seed": 0})

    def head(self, features_dim, mlp_dim, *, rngs, **options):
        from lra.tasks._heads import ClassifierHead

        return ClassifierHead(features_dim, mlp_dim, self.num_classes, rngs=rngs, **options)


def _signal_run(tmp_path, monkeypatch, capsys, *, shuffled: bool, chance: float | None = None):
    base = config_lib.load("listops", "softmax", preset="tiny").to_dict()
    cfg = config_lib.Config.from_dict({
        **base, "task": "signal", "data": {},
        "train": {**base["train"], "lr": 3e-3, "schedule": "constant", "warmup_steps": 1,
                  "weight_decay": 0.0, "num_steps": 30, "eval_every": 5, "log_every": 5,
                  "checkpoint_every": 30, "chance_patience": 3}})
    task = SignalTask(tmp_path, shuffled=shuffled)
    if chance is not None:  # the task's own guess, not 1/num_classes
        task.chance = lambda examples: (chance, examples)
    monkeypatch.setattr(tasks, "build", lambda name, data_dir, **options: task)
    workdir = tmp_path / "work"
    record = train.train_and_evaluate(cfg, workdir, data_dir=tmp_path, progress=False)
    return workdir, record, capsys.readouterr().err


@pytest.mark.slow
def test_learning_run_writes_events_and_no_notice(tmp_path, monkeypatch, capsys):
    workdir, record, err = _signal_run(tmp_path, monkeypatch, capsys, shuffled=False)
    history = record["eval_history"]
    assert history["step"] == [5, 10, 15, 20, 25, 30]
    assert history["val_accuracy"][-1] == 1.0, history
    assert "stays at chance" not in err, err
    scalars = read_scalars(workdir / "tensorboard")
    assert set(scalars) == {"train/loss", "train/accuracy", "train/lr", "train/grad_norm",
                            "train/steps_per_s", "val/loss", "val/accuracy"}
    for tag in ("train/loss", "train/accuracy", "train/lr", "train/grad_norm", "val/loss",
                "val/accuracy"):
        assert [s for s, _ in scalars[tag]] == [5, 10, 15, 20, 25, 30], tag
    assert [s for s, _ in scalars["train/steps_per_s"]] == [10, 15, 20, 25, 30]
    assert [v for _, v in scalars["val/accuracy"]] == pytest.approx(history["val_accuracy"])
    jsonl = read_jsonl(workdir / "metrics.jsonl")
    assert jsonl[0] == {"step": 0, "split": "run", "task": "signal", "attention": "softmax",
                        "preset": "tiny", "seed": 0}


@pytest.mark.slow
def test_shuffled_labels_run_gets_the_at_chance_notice(tmp_path, monkeypatch, capsys):
    _, record, err = _signal_run(tmp_path, monkeypatch, capsys, shuffled=True)
    assert record["eval_history"]["val_accuracy"][:3] == [0.5, 0.5, 0.5]
    notices = [line for line in err.splitlines() if "stayed within one standard error" in line]
    assert len(notices) == 1, err
    assert "steps 5-15" in notices[0] and 'docs/running.md "If a task stays at chance"' in notices[0]


@pytest.mark.slow
def test_the_notice_compares_with_the_tasks_own_chance(tmp_path, monkeypatch, capsys):
    """The same shuffled run against a task whose guess scores 0.25 (as MQAR's is not
    1/num_classes): 0.5 is far above it, so no notice (the trainer used 1/num_classes before)."""
    _, record, err = _signal_run(tmp_path, monkeypatch, capsys, shuffled=True, chance=0.25)
    assert record["eval_history"]["val_accuracy"][:3] == [0.5, 0.5, 0.5]
    assert "stayed within one standard error" not in err, err


# ----------------------------------------------------------------------------------------------
# kill -9 and resume, real processes.


STEPS = 150  # enough that the kill lands before the end even on a loaded machine


@pytest.mark.slow
def test_killed_and_resumed_run_writes_no_step_twice(tmp_path):
    cmd = [sys.executable, "-m", "lra.run", "--task", "listops", "--attn", "softmax", "--preset",
           "tiny", "--data-dir", str(tmp_path / "data"), "--workdir", str(tmp_path / "work"),
           "--results-dir", str(tmp_path / "results"), "--no-progress",
           "--set", f"train.num_steps={STEPS}", "--set", "train.checkpoint_every=10",
           "--set", "train.eval_every=5", "--set", "train.log_every=1"]
    prepared = run_module_in_process([
        sys.executable, "-m", "lra.data", "prepare", "--task", "listops", "--data-dir",
        str(tmp_path / "data"), "--set", "min_length=5", "--set", "max_length=40", "--set",
        "max_depth=3", "--set", "train_size=256", "--set", "val_size=64", "--set", "test_size=64"])
    assert prepared.returncode == 0, prepared.stderr[-3000:]
    proc = subprocess.Popen(cmd, env=cli_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    ckpts, metrics = tmp_path / "work" / "checkpoints" / "last", tmp_path / "work" / "metrics.jsonl"
    deadline = time.time() + 300
    while time.time() < deadline:  # kill once steps past a checkpoint have been logged
        steps = [int(p.name) for p in ckpts.glob("*") if p.name.isdigit()] if ckpts.exists() else []
        logged = read_jsonl(metrics) if metrics.exists() else []
        if steps and max(steps) >= 20 and max(r["step"] for r in logged) > max(steps) + 2:
            break
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)
    assert proc.returncode == -signal.SIGKILL, "the run finished before it could be killed"
    before = max(r["step"] for r in read_jsonl(metrics))
    resumed = run_module_in_process(cmd)  # the kill needed a process; the resume does not
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "resuming from step" in resumed.stderr

    keys = _keys(read_jsonl(metrics))
    assert before > 20 and len(keys) == len(set(keys)), "metrics.jsonl repeats a (split, step)"
    assert [s for split, s in keys if split == "train"] == list(range(1, STEPS + 1))
    assert [s for split, s in keys if split == "val"] == list(range(5, STEPS + 1, 5))
    scalars = read_scalars(tmp_path / "work" / "tensorboard")
    assert [s for s, _ in scalars["train/loss"]] == list(range(1, STEPS + 1))
    assert [s for s, _ in scalars["val/accuracy"]] == list(range(5, STEPS + 1, 5))
    result = json.loads((tmp_path / "work" / "result.json").read_text())
    assert result["eval_history"]["step"] == list(range(5, STEPS + 1, 5))
