"""The accelerator window's check (lra/bench/device_check.py) end to end at toy sizes on CPU, in the
phase order and with the time boxes of the real one: no typo waits for a GPU."""

import json
import sys
import tarfile
import time

import pytest

from lra.bench import device_check

TINY_BENCH = ["--bench-set", "model.num_layers=1", "--bench-set", "model.emb_dim=32", "--bench-set",
              "model.qkv_dim=32", "--bench-set", "model.mlp_dim=64", "--bench-set", "model.num_heads=2"]
TINY_TRAIN = ["--train-preset", "tiny", "--train-set", "data.train_size=64", "--train-set",
              "data.val_size=16", "--train-set", "data.test_size=16", "--train-set",
              "train.num_steps=2", "--train-set", "train.checkpoint_every=2"]


def _summary(results_dir):
    (path,) = (results_dir / "efficiency").glob("device-check__*.jsonl")
    return json.loads(path.read_text())


@pytest.mark.slow
def test_every_phase_in_order_at_toy_sizes(tmp_path):
    results_dir = tmp_path / "results"
    code = device_check.main(["--results-dir", str(results_dir), "--bundle", str(tmp_path / "w.tgz"),
                              "--lengths", "32", "--bench-attn", "cosformer", "--batch", "2",
                              "--steps", "1", "--warmup", "0", "--train-attn", "softmax",
                              "--eval-every", "1", "--workdir", str(tmp_path / "work"),
                              "--data-dir", str(tmp_path / "data"), "--scan-length", "40",
                              *TINY_BENCH, *TINY_TRAIN])
    log = _summary(results_dir)
    assert code == 0, log
    assert [p["phase"] for p in log["phases"]] == list(device_check.PHASES)
    assert all(p["status"] == "ok" for p in log["phases"]) and log["ok"]
    assert [p["box_s"] for p in log["phases"]] == [device_check.BOXES[p] for p in device_check.PHASES]
    data = json.loads((results_dir / "data__listops.json").read_text())
    assert data["examples"] == {"train": 64, "val": 16, "test": 16}
    # the run file's resolved config shows the validation interval and the dtype the check set
    (run_file,) = (results_dir / "runs").glob("*.json")
    run = json.loads(run_file.read_text())
    assert run["attention"] == "softmax"
    assert run["config"]["train"]["eval_every"] == 1 and run["config"]["model"]["dtype"] == "bfloat16"
    assert log["phases"][1]["eval_every"] == 1 and "LRA: 50" in log["phases"][1]["eval_every_note"]
    (entry,) = log["phases"][1]["runs"]
    assert entry["result_file"] == run_file.name and entry["eval_every"] == 1
    assert entry["test_accuracy_at_last"] == run["metrics"]["test_accuracy_at_last"]
    (eff,) = (results_dir / "efficiency").glob("text__*.json")
    bench = json.loads(eff.read_text())
    assert bench["dtype"] == "bfloat16" and bench["batch"] == 2 and bench["lengths"] == [32]
    assert {r["attention"] for r in bench["results"] if r["status"] == "ok"} == {"softmax",
                                                                               "cosformer"}
    assert bench["config"]["model"]["attention_dropout"] == 0.0  # softmax's cuDNN condition
    kernels = json.loads((results_dir / "kernels__causal_scan.json").read_text())
    assert kernels["ok"] and kernels["length"] == 40 and kernels["interpret"]
    assert "kernels__causal_scan.json" in log["phases"][3]["files"]
    with tarfile.open(tmp_path / "w.tgz") as tar:
        names = tar.getnames()
    assert "results/kernels__causal_scan.json" in names and "results/data__listops.json" in names


@pytest.mark.slow
def test_a_phase_past_its_box_is_cut_and_the_next_still_runs(tmp_path):
    results_dir = tmp_path / "results"
    start = time.perf_counter()
    code = device_check.main(["--results-dir", str(results_dir), "--phases", "listops,kernels",
                              "--box-listops", "3", "--grace", "1", "--train-attn", "softmax,linear",
                              "--workdir", str(tmp_path / "work"), "--data-dir", str(tmp_path / "d"),
                              "--scan-length", "16", *TINY_TRAIN])
    assert code == 1
    listops, kernels = _summary(results_dir)["phases"]
    assert listops["status"] == "cut" and listops["seconds"] < 3 + 2
    softmax, linear = listops["runs"]
    assert softmax["status"] == "cut" and linear["status"] == "not started"
    assert kernels["phase"] == "kernels" and kernels["status"] == "ok"
    assert time.perf_counter() - start < 120


def test_run_boxed_kills_a_child_that_ignores_sigterm(tmp_path):
    stubborn = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(60)"
    out = device_check.run_boxed([sys.executable, "-c", stubborn], 0.5, tmp_path / "log", grace=0.5)
    assert out["cut"] and out["exit_status"] != 0 and out["seconds"] < 0.5 + 1  # within its box
    done = device_check.run_boxed([sys.executable, "-c", "print('hi')"], 30, tmp_path / "log", 1)
    assert done == {**done, "cut": False, "exit_status": 0}
    assert "hi" in (tmp_path / "log").read_text()


def test_unknown_phase_is_a_command_line_error(tmp_path, capsys):
    assert device_check.main(["--results-dir", str(tmp_path), "--phases", "data,nope"]) == 2
    assert "unknown phases ['nope']" in capsys.readouterr().err
