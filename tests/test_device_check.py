"""The first-GPU check (lra/bench/device_check.py) end to end at toy sizes on CPU: no typo waits for a GPU."""

import json

from lra.bench import device_check

TINY_BENCH = ["--bench-set", "model.num_layers=1", "--bench-set", "model.emb_dim=32", "--bench-set",
              "model.qkv_dim=32", "--bench-set", "model.mlp_dim=64", "--bench-set", "model.num_heads=2"]
TINY_TRAIN = ["--train-preset", "tiny", "--train-set", "data.train_size=64", "--train-set",
              "data.val_size=16", "--train-set", "data.test_size=16", "--train-set",
              "train.eval_every=2", "--train-set", "train.checkpoint_every=2"]


def test_device_check_runs_every_phase_at_toy_sizes(tmp_path):
    results_dir = tmp_path / "results"
    # Two families (the default is all; softmax is always added): compile time, not coverage.
    code = device_check.main(["--results-dir", str(results_dir), "--lengths", "32",
                       "--attn", "cosformer,local",
                       "--batch", "2", "--steps", "1", "--warmup", "0", "--dtype", "bfloat16",
                       "--train-steps", "2", "--workdir", str(tmp_path / "work"),
                       "--data-dir", str(tmp_path / "data"), "--scan-length", "40",
                       *TINY_BENCH, *TINY_TRAIN])
    assert code == 0
    (eff,) = (results_dir / "efficiency").glob("*.json")
    record = json.loads(eff.read_text())
    assert record["dtype"] == "bfloat16" and record["batch"] == 2
    measured = {r["attention"] for r in record["results"] if r["status"] == "ok"}
    assert measured == {"softmax", "cosformer", "local"}
    runs = sorted(json.loads(p.read_text())["attention"] for p in (results_dir / "runs").glob("*.json"))
    assert runs == ["cosformer", "softmax"]
    (summary,) = (results_dir / "efficiency").glob("device-check__*.jsonl")
    log = json.loads(summary.read_text())
    assert log["ok"] and [p["exit_status"] for p in log["phases"]] == [0, 0, 0, 0]
    assert log["phases"][3]["phase"] == "pallas causal scan L=40"
    assert "train.num_steps=2" in log["phases"][1]["phase"]


def test_device_check_reports_a_failing_phase(tmp_path):
    code = device_check.main(["--results-dir", str(tmp_path), "--skip-bench",
                       "--train-steps", "1", "--train-set", "no.such_key=1", "--scan-length", "16",
                       "--workdir", str(tmp_path / "work")])
    assert code == 1
    (summary,) = (tmp_path / "efficiency").glob("device-check__*.jsonl")
    assert not json.loads(summary.read_text())["ok"]
