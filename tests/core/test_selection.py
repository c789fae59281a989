"""``lra.sweep --grid``: axes multiply the cells, keep them apart, and the choice is made on
validation only (lra/selection.py)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from helpers import cli_env

from lra import selection, sweep


def record(lr: float, seed: int, val: float, test: float, protocol: str = "lra") -> dict:
    return {"task": "listops", "attention": "softmax", "preset": "small", "seed": seed,
            "config": {"task": "listops", "attention": "softmax", "preset": "small", "seed": seed,
                       "protocol": protocol, "train": {"lr": lr}, "model": {}, "data": {},
                       "attn": {}},
            "metrics": {"best_val_accuracy": val, "test_accuracy_at_last": test,
                        "test_accuracy_at_best_val": test}}


def test_the_choice_is_made_on_validation_even_where_test_disagrees():
    records = [record(1e-3, 0, 0.40, 0.20), record(1e-3, 1, 0.42, 0.22),  # best on validation
               record(3e-3, 0, 0.30, 0.60), record(3e-3, 1, 0.31, 0.61)]  # best on test
    (s,) = selection.select(records, ["train.lr"])
    assert s.chosen.values == (("train.lr", 1e-3),)
    assert s.test == [0.20, 0.22]  # the chosen values' test accuracy, not the best test accuracy
    text = selection.render([s])
    assert "chosen train.lr=0.001: test 21.00 ± 1.41 (2)" in text
    assert "train.lr=0.003: val 30.50" in text


def test_a_tie_on_validation_goes_to_the_first_grid_point_whatever_the_file_order():
    records = [record(3e-3, 0, 0.5, 0.9), record(1e-3, 0, 0.5, 0.1)]
    for order in (records, records[::-1]):
        (s,) = selection.select(order, ["train.lr"])
        assert s.chosen.values == (("train.lr", 1e-3),)


def test_modern_reports_the_best_validation_step_headline():
    rec = record(1e-3, 0, 0.4, 0.3, protocol="modern")
    rec["metrics"]["test_accuracy_at_last"] = 0.99
    (s,) = selection.select([rec], ["train.lr"])
    assert s.test == [0.3]


@pytest.mark.parametrize("flags, message", [
    (["train.lr"], "expected KEY=V1,V2"),
    (["train.lr="], "expected KEY=V1,V2"),
    (["seed=0,1"], "use --seeds"),
    (["train.lr=1,2", "train.lr=3"], "given twice"),
    (["train.lr=1,1"], "listed twice"),
])
def test_bad_grid_flags_are_one_line(flags, message):
    with pytest.raises(sweep.SweepError, match=message):
        sweep.parse_grid(flags)
    with pytest.raises(sweep.SweepError, match="also given to --set"):
        sweep.parse_grid(["train.lr=1,2"], ["train.lr=3"])


def test_axes_multiply_the_cells_and_keep_them_apart(tmp_path, capsys):
    argv = ["--task", "listops", "--attn", "softmax", "--seeds", "0,1", "--preset", "tiny",
            "--grid", "train.lr=0.001,0.003", "--grid", "train.warmup_steps=2,5",
            "--results-dir", str(tmp_path / "res"), "--workdirs", str(tmp_path / "wd")]
    assert sweep.main([*argv, "--list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 8  # 2 x 2 grid points x 2 seeds
    workdirs = {line.split("--workdir ")[1].split()[0] for line in lines}
    assert len(workdirs) == 8 and all("__train.lr=" in w for w in workdirs)
    assert sum("--set train.lr=0.003 --set train.warmup_steps=5" in line for line in lines) == 2
    assert sweep.main([*argv, "--shard", "0/3", "--list"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 3
    assert sweep.main([*argv, "--dry-run"]) == 0
    assert "[train.lr=0.003, train.warmup_steps=5] seed 1" in capsys.readouterr().out
    assert sweep.main(["--task", "listops", "--attn", "softmax", "--grid", "train.lr=x,y",
                       "--list"]) == 2  # a value the config refuses: one line at once
    assert "train.lr" in capsys.readouterr().err


@pytest.mark.slow
def test_a_tiny_grid_runs_and_selects_on_validation(tmp_path):
    cmd = [sys.executable, "-m", "lra.sweep", "--task", "listops", "--attn", "softmax",
           "--seeds", "0", "--preset", "tiny", "--grid", "train.lr=0.0005,0.05",
           "--set", "data.train_size=64", "--set", "data.val_size=16", "--set", "data.test_size=16",
           "--set", "train.num_steps=4", "--set", "train.eval_every=2", "--no-leaderboard",
           "--data-dir", str(tmp_path / "data"), "--workdirs", str(tmp_path / "wd"),
           "--results-dir", str(tmp_path / "res")]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=900, env=cli_env())
    assert out.returncode == 0, out.stderr[-3000:]
    assert "Selection on validation" in out.stderr
    records = [json.loads(p.read_text()) for p in (tmp_path / "res" / "runs").glob("*.json")]
    assert sorted(r["config"]["train"]["lr"] for r in records) == [0.0005, 0.05]
    best = max(records, key=lambda r: (r["metrics"]["best_val_accuracy"], -r["config"]["train"]["lr"]))
    chosen = f"chosen train.lr={best['config']['train']['lr']}"
    again = subprocess.run([*cmd, "--select"], capture_output=True, text=True, timeout=600,
                           env=cli_env())
    assert again.returncode == 0 and chosen in again.stdout, again.stdout + again.stderr
