"""`python -m lra.bench`: its result file, the ratio arithmetic, skipping what would not fit.

One tiny run (two families, lengths 64 and 128, the text task's ``tiny`` preset: a 1-layer d=32
model, 2 timed steps) is shared by the schema tests; it takes a few seconds of compilation per config
on 2 CPU cores.
"""

import argparse
import errno
import json
import math
import os
import statistics
import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import cli_env

from lra import config as config_lib
from lra import leaderboard, tasks
from lra.bench import efficiency, measure
from lra.bench import steps as bench

TINY = ["--preset", "tiny", "--peak-size", "256", "--no-progress"]


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    results_dir = tmp_path_factory.mktemp("results")
    code = bench.main(["--attn", "linear", "--lengths", "64,128", "--batch", "2", "--steps", "2",
                       "--warmup", "1", "--results-dir", str(results_dir), *TINY])
    assert code == 0
    files = list((results_dir / "efficiency").glob("*.json"))
    assert len(files) == 1
    return results_dir, files[0], json.loads(files[0].read_text())


@pytest.mark.slow
def test_result_file_schema(tiny_run):
    _, path, rec = tiny_run
    assert path.name.startswith("text__cpu-x1__b2__float32__")  # task, device, batch, dtype, date
    for key in ("schema", "task", "preset", "config", "model", "batch", "dtype", "lengths", "families",
                "steps", "warmup", "memory_method", "memory_budget", "matmul_peak", "results", "slopes",
                "device", "versions", "git", "date", "xla_flags", "command"):
        assert key in rec, key
    assert rec["schema"] == efficiency.SCHEMA == "lra.bench/1" and rec["task"] == "text"
    assert rec["families"] == ["linear", "softmax"]  # softmax, the baseline, is always measured
    assert rec["model"]["num_layers"] == 1 and rec["model"]["vocab_size"] == 257
    assert rec["device"]["platform"] == "cpu" and rec["device"]["count"] >= 1
    assert "jax" in rec["versions"] and "commit" in rec["git"]
    # conftest.py turns the YNN fusions off in XLA_FLAGS: the bench keeps that, tuning nothing
    assert "--xla_cpu_experimental_ynn_fusion_type=" in rec["xla_flags"]
    assert {json.dumps(r["xla_cpu_fusions"]) for r in rec["results"]} == {
        json.dumps({"choice": "off", "source": "env"})}
    assert rec["matmul_peak"]["flops_per_s"] > 0
    assert [(r["attention"], r["length"]) for r in rec["results"]] == [
        ("linear", 64), ("linear", 128), ("softmax", 64), ("softmax", 128)]
    for r in rec["results"]:
        assert r["status"] == "ok" and r["reason"] is None
        assert len(r["step_time_s"]["samples"]) == 2
        assert math.isfinite(r["final_loss"])


@pytest.mark.slow
def test_speed_memory_and_flops_arithmetic(tiny_run):
    _, _, rec = tiny_run
    by = {(r["attention"], r["length"]): r for r in rec["results"]}
    for (_, length), r in by.items():
        median = statistics.median(r["step_time_s"]["samples"])
        assert r["step_time_s"]["median"] == median
        assert r["steps_per_s"] == pytest.approx(1 / median)
        base = by[("softmax", length)]
        assert r["speed_vs_softmax"] == pytest.approx(r["steps_per_s"] / base["steps_per_s"])
        assert r["memory_vs_softmax"] == pytest.approx(r["memory"]["bytes"] / base["memory"]["bytes"])
        c = r["compiled_memory"]
        assert r["memory"]["bytes"] == c["argument"] + c["output"] - c["alias"] + c["temp"] == c["total"]
        assert c["alias"] > 0  # the state is donated, as in the trainer
        assert "rss_growth" in r["memory"]
        f = r["flops"]
        assert f["per_step"] == max(f["xla"], f["matmul"]) > 0
        assert r["achieved_flops_per_s"] == pytest.approx(f["per_step"] / median)
        assert r["fraction_of_peak"] == pytest.approx(
            r["achieved_flops_per_s"] / rec["matmul_peak"]["flops_per_s"])
    assert by[("softmax", 64)]["speed_vs_softmax"] == 1.0
    # softmax's attention is quadratic: its temporaries grow faster than linear attention's
    soft = by[("softmax", 128)]["compiled_memory"]["temp"] / by[("softmax", 64)]["compiled_memory"]["temp"]
    lin = by[("linear", 128)]["compiled_memory"]["temp"] / by[("linear", 64)]["compiled_memory"]["temp"]
    assert soft > lin
    for name, s in rec["slopes"].items():
        rows = [by[(name, n)] for n in (64, 128)]
        expect = math.log(rows[1]["step_time_s"]["median"] / rows[0]["step_time_s"]["median"]) / math.log(2)
        assert s["time"] == pytest.approx(expect)
        assert s["lengths"] == [64, 128]


def test_leaderboard_reads_the_real_file(tiny_run):
    results_dir, _, _ = tiny_run
    assert leaderboard.main(["--results-dir", str(results_dir)]) == 0
    board = (results_dir / "LEADERBOARD.md").read_text()
    assert "| linear | " in board and "steps/s 128" in board
    assert list((results_dir / "figures").glob("efficiency-*-scaling.png"))


def test_the_model_is_the_run_config_of_each_family(tiny_run):
    """The bench times what ``lra.run`` would train: each family's resolved config (the preset, the
    family's deltas from configs/text.py), with the bench's batch and dtype."""
    _, _, rec = tiny_run
    run = config_lib.load("text", "softmax", preset="tiny", overrides={"train.batch_size": 2})
    assert rec["config"] == run.to_dict()
    assert rec["model"] == {**run.to_dict()["model"], "vocab_size": 257, "num_classes": 2}
    performer = bench.run_config("text", "performer", "paper", [], 32, "float32", 0)
    assert performer.attn == {"kernel": "relu"}  # configs/text.py's ATTENTION delta
    assert performer.model.emb_dim == 256 and performer.model.num_layers == 4  # configs/text.py BASE
    for r in rec["results"]:
        assert r["attn_options"] == config_lib.load("text", r["attention"], preset="tiny").attn


@pytest.mark.slow
def test_too_big_or_broken_configs_are_recorded_not_crashes(tmp_path, monkeypatch):
    real = bench.create_train_state

    def broken_linear(config, *args, **kwargs):
        if config.attention == "linear":
            raise RuntimeError("this family is unfinished")
        return real(config, *args, **kwargs)

    monkeypatch.setattr(bench, "create_train_state", broken_linear)
    out = tmp_path / "eff.json"
    code = bench.main(["--attn", "linear", "--lengths", "64", "--batch", "2", "--steps", "1",
                       "--memory-budget-gb", "0.0001", "--out", str(out), *TINY])
    assert code == 0
    rec = json.loads(out.read_text())
    by = {r["attention"]: r for r in rec["results"]}
    assert by["softmax"]["status"] == "skipped" and "would not fit" in by["softmax"]["reason"]
    assert "--memory-budget-gb" in by["softmax"]["reason"]
    assert by["linear"]["status"] == "skipped" and "this family is unfinished" in by["linear"]["reason"]
    assert by["softmax"]["speed_vs_softmax"] is None
    assert bench.main(["--attn", "linear", "--out", str(out)]) == 2  # never overwrites


@pytest.mark.slow
@pytest.mark.parametrize("stage,signame", [("import", "SIGINT"), ("time", "SIGTERM")])
def test_a_stop_signal_is_one_line_exit_75_and_no_bench_file(tmp_path, stage, signame):
    """Fails on 7162751: lra.bench had no stop-signal handling and no hook stages (the run below
    finished and wrote its file, exit 0). A real signal gave: SIGTERM killed it (-15), SIGINT a
    KeyboardInterrupt traceback out of JAX's lowering. "import": while JAX loads; "time": at the
    first timed step, once everything compiled and warmed up."""
    folder = tmp_path / "efficiency"
    out = subprocess.run(
        [sys.executable, "-m", "lra.bench", "--attn", "linear", "--lengths", "64", "--batch", "2",
         "--steps", "2", "--warmup", "0", "--out", str(folder / "b.json"), *TINY],
        capture_output=True, text=True, timeout=300,
        env=cli_env(LRA_TEST_SIGNAL_AT=f"{stage}:{signame}"))
    assert out.returncode == 75, out.stderr[-3000:]
    assert out.stderr.strip().splitlines() == [
        f"{signame}: stopped before the measurement finished; nothing written (a bench file holds "
        f"a whole measurement or nothing); re-run the same command"]
    assert out.stdout == "" and list(folder.iterdir()) == []


def test_unknown_family_and_bad_lengths_are_errors(capsys):
    assert bench.main(["--attn", "nosuch", "--lengths", "64", "--no-progress"]) == 2
    assert "unknown attention 'nosuch'" in capsys.readouterr().err
    assert bench.main(["--lengths", "0"]) == 2
    assert bench.main(["--set", "layers=2"]) == 2
    assert "unknown config key 'layers'" in capsys.readouterr().err
    assert bench.main(["--set", "model.num_layers=0"]) == 2
    assert "model.num_layers=0: expected an integer >= 1" in capsys.readouterr().err


def test_the_batch_has_every_input_of_the_task():
    task = tasks.build("retrieval", Path("."))  # two towers: inputs/mask and inputs2/mask2
    b = bench.make_batch(task, 3, 16)
    assert set(b) == {"inputs", "mask", "inputs2", "mask2", "targets"}
    for ids, mask in ((b["inputs"], b["mask"]), (b["inputs2"], b["mask2"])):
        assert ids.shape == mask.shape == (3, 16) and ids.dtype == np.int32
        assert mask[0].sum() == 12 and mask.sum(1).min() >= 8  # true lengths in [L/2, L]
        assert (ids[~mask] == task.pad_id).all() and (ids[mask] != task.pad_id).all()
    assert b["targets"].shape == (3,) and b["targets"].max() < task.num_classes


def _fake_case(name, length, argument, transient):
    case = bench.Case(name, length)
    case.compiled_memory = {"argument": argument, "output": transient, "alias": 0, "temp": 0,
                            "total": argument + transient}
    return case


def test_plan_fit_counts_every_resident_state_and_the_largest_transient():
    cases = [_fake_case("a", 1, 10, 50), _fake_case("b", 1, 10, 30), _fake_case("c", 1, 100, 10),
             _fake_case("d", 1, 10, 500)]
    bench.plan_fit(cases, budget=200, source="test")
    status = {c.attention: c.status for c in cases}
    # b (40), a (60) and c (110) fit together: 120 resident + 50 transient = 170 <= 200
    assert status == {"a": "pending", "b": "pending", "c": "pending", "d": "skipped"}
    assert "would not fit: needs" in cases[3].reason


def test_matmul_flops_multiplies_scans_where_xla_counts_the_body_once():
    def f(x, w):
        return jax.lax.scan(lambda x, _: (x @ w, None), x, None, length=10)[0]

    x = jnp.ones((64, 64))
    jaxpr = jax.make_jaxpr(f)(x, x)
    flops, loops = measure.matmul_flops(jaxpr.jaxpr)
    assert flops == 10 * 2 * 64**3 and loops
    xla = jax.jit(f).lower(x, x).compile().cost_analysis()["flops"]
    assert xla < flops  # why the bench counts the jaxpr too


@pytest.mark.slow
def test_isolated_measurement_runs_in_a_fresh_process():
    args = argparse.Namespace(task="text", preset="tiny", overrides=[], batch=2, dtype="float32",
                              seed=0, budget_bytes=None)
    out = bench._run_isolated(bench.Case("softmax", 64), args)
    assert out["status"] == "ok", out
    assert out["memory"]["rss_growth"] >= 0 and out["compiled_memory"]["total"] > 0


def test_the_bench_file_never_overwrites(tmp_path):
    first = bench.write_unique(tmp_path / "x.json", {"n": 1})
    second = bench.write_unique(tmp_path / "x.json", {"n": 2})
    assert first.name == "x.json" and second.name == "x_1.json"
    assert [json.loads(p.read_text())["n"] for p in (first, second)] == [1, 2]


def test_a_full_disk_leaves_no_bench_file(tmp_path, monkeypatch, capsys):
    """Fails on 7162751: the bench created its file empty (to claim the name), then wrote into it
    on the side and renamed: a full disk left the empty file (which the leaderboard then reports
    as invalid), and the message ended "(None)"."""
    from lra import atomic

    def no_space(*args, **kwargs):  # the disk fills while the file's bytes go to the disk
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    def measured(args, stops):  # after the start-up probe of the folder: the disk fills up
        monkeypatch.setattr(atomic.os, "fsync", no_space)
        return {"schema": efficiency.SCHEMA}

    monkeypatch.setattr(bench, "run", measured)
    folder = tmp_path / "efficiency"
    code = bench.main(["--attn", "linear", "--lengths", "64", "--out", str(folder / "b.json"),
                       *TINY])
    err = capsys.readouterr().err
    assert code == 1 and err == (f"error: cannot write the bench file {folder / 'b.json'}: No space "
                                 f"left on device; nothing written\n")
    assert list(folder.iterdir()) == []
