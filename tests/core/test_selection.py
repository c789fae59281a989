"""``lra.sweep --grid``: axes multiply the cells, keep them apart, and the choice is made on
validation only (lra/selection.py)."""

from __future__ import annotations

import json
import shlex
import sys

import pytest
from helpers import run_module_in_process, write_grid_result

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


def test_a_grid_with_fixed_overrides_is_chosen_and_kept_apart_from_the_presets(tmp_path):
    """Issue 57: ``lra.sweep --set data.form=bidirectional --grid train.lr=...`` chose among the
    causal and bidirectional runs of MQAR together and kept its choice under the preset grid's
    name, replacing it. The keys where the runs differ from their preset (the reader's ``_diff``),
    outside the grid's, now separate the choices and name their files; a preset grid's file keeps
    its name and bytes (no ``overrides`` key)."""
    def mqar(lr, val, form=None):
        rec = record(lr, 0, val, val)
        rec.update(task="mqar", _diff={"train.lr": lr, **({"data.form": form} if form else {})})
        return rec

    records = [mqar(1e-3, 0.9), mqar(1e-2, 0.5),  # causal: the preset's form
               mqar(1e-3, 0.2, "bidirectional"), mqar(1e-2, 0.7, "bidirectional")]
    causal, bidirectional = selection.select(records, ["train.lr"])
    assert (causal.overrides, causal.chosen.values) == ((), (("train.lr", 1e-3),))
    assert bidirectional.overrides == (("data.form", "bidirectional"),)
    assert bidirectional.chosen.values == (("train.lr", 1e-2),)
    assert "mqar/softmax (small, lra protocol) with data.form=bidirectional: chosen train.lr=0.01" \
        in selection.render([bidirectional])
    paths = selection.write(tmp_path, [causal, bidirectional], ["train.lr"])
    assert [p.name for p in paths] == ["mqar__softmax__small__lra.json",
                                       "mqar__softmax__small__lra__data.form=bidirectional.json"]
    assert "overrides" not in json.loads(paths[0].read_text())
    assert json.loads(paths[1].read_text())["overrides"] == {"data.form": "bidirectional"}


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


TINY = ["--preset", "tiny", "--set", "data.train_size=64", "--set", "data.val_size=16",
        "--set", "data.test_size=16"]
GRID = ["--task", "listops", "--attn", "softmax", "--seeds", "0", *TINY, "--grid", "train.lr=1e-3,3e-3"]
TINY_SIZES = "data.test_size=16,data.train_size=64,data.val_size=16"  # TINY's overrides, as named


def test_a_shard_never_decides_the_grids_choice(tmp_path, capsys):
    """Issue 52 item 1, fails on 69b79f7: each shard of an array chose among its own cells and
    overwrote selections/; the last to finish (lr 3e-3: validation 30, test 60) replaced the right
    choice (lr 1e-3: validation 40). Shard 0/2 holds lr 1e-3, shard 1/2 lr 3e-3. A shard keeps a
    choice only once the whole grid has results (then every shard makes the same one), else names
    the command that chooses; ``--select --shard`` is refused."""
    res = tmp_path / "res"
    flags = [*GRID, "--results-dir", str(res), "--workdirs", str(tmp_path / "wd"),
             "--no-leaderboard"]
    seed0 = ["--task", "listops", "--attn", "softmax", "--seed", "0", *TINY]
    # TINY's data sizes are not the preset's: the selection is kept under their names
    kept = res / "selections" / f"listops__softmax__tiny__lra__{TINY_SIZES}.json"
    # shard 0 finishes first (its cell's result is there: skipped), the other shard's is not done
    write_grid_result(res, "lr1e-3.json", [*seed0, "--set", "train.lr=1e-3"], val=0.40, test=0.20)
    assert sweep.main([*flags, "--shard", "0/2"]) == 0
    err = capsys.readouterr().err
    assert not kept.exists(), "a shard chose over its slice of the grid"
    assert "listops/softmax: not chosen: 1 of 2 cells" in err and "train.lr=3e-3] seed 0 (run" in err
    command = err.split("once every shard finished:\n  ")[1].splitlines()[0]
    assert "--shard" not in command and command.endswith("--select")
    # shard 1 finishes last: the grid is whole, the choice is made over all of it
    write_grid_result(res, "lr3e-3.json", [*seed0, "--set", "train.lr=3e-3"], val=0.30, test=0.60)
    assert sweep.main([*flags, "--shard", "1/2"]) == 0
    assert json.loads(kept.read_text())["chosen"]["values"] == {"train.lr": 0.001}
    assert "chosen train.lr=0.001: test 20.00" in capsys.readouterr().err
    before = kept.read_bytes()
    assert sweep.main([*flags, "--shard", "1/2", "--select"]) == 2
    assert "never a shard of it: drop --shard" in capsys.readouterr().err
    assert kept.read_bytes() == before
    # the command the first shard named chooses the same
    kept.unlink()
    assert sweep.main(shlex.split(command)[3:]) == 0
    assert "chosen train.lr=0.001" in capsys.readouterr().out
    assert json.loads(kept.read_text())["chosen"]["values"] == {"train.lr": 0.001}
    kept.unlink()
    (res / "selections").rmdir()
    (res / "selections").write_text("")  # a choice that cannot be kept: one line, exit 1
    assert sweep.main(shlex.split(command)[3:]) == 1
    assert "error: cannot keep the selection under" in capsys.readouterr().out


@pytest.mark.slow
def test_a_tiny_grid_runs_and_selects_on_validation(tmp_path):
    cmd = [sys.executable, "-m", "lra.sweep", "--task", "listops", "--attn", "softmax",
           "--seeds", "0", "--preset", "tiny", "--grid", "train.lr=0.0005,0.05",
           "--set", "data.train_size=64", "--set", "data.val_size=16", "--set", "data.test_size=16",
           "--set", "train.num_steps=4", "--set", "train.eval_every=2", "--no-leaderboard",
           "--data-dir", str(tmp_path / "data"), "--workdirs", str(tmp_path / "wd"),
           "--results-dir", str(tmp_path / "res")]
    out = run_module_in_process(cmd)  # the sweep here; its cells in their own processes
    assert out.returncode == 0, out.stderr[-3000:]
    assert "Selection on validation" in out.stderr
    records = [json.loads(p.read_text()) for p in (tmp_path / "res" / "runs").glob("*.json")]
    assert sorted(r["config"]["train"]["lr"] for r in records) == [0.0005, 0.05]
    best = max(records, key=lambda r: (r["metrics"]["best_val_accuracy"], -r["config"]["train"]["lr"]))
    chosen = f"chosen train.lr={best['config']['train']['lr']}"
    again = run_module_in_process([*cmd, "--select"])
    assert again.returncode == 0 and chosen in again.stdout, again.stdout + again.stderr
