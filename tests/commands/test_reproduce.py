"""``python -m lra.reproduce``: every published row names a config that resolves, a row's seeds run
through lra.sweep (a second call skips them) and the table compares printed with measured, counting
the seeds at chance."""

from __future__ import annotations

import json
import signal
import subprocess
import sys

import pytest
from helpers import SMALL_LISTOPS, cli_env, run_module_in_process, wait_until_training

from lra import config as config_lib
from lra import reproduce
from lra.leaderboard import published
from lra.metrics_log import standard_error

FEW_STEPS = [*SMALL_LISTOPS, "--set", "train.num_steps=4", "--set", "train.eval_every=2",
             "--set", "train.checkpoint_every=2"]


def test_every_row_names_a_config_that_resolves():
    assert reproduce.ROWS["lra/softmax/listops"].printed == published.LRA_TABLE1["softmax"][0]
    assert reproduce.ROWS["lra/softmax/pathx"].printed == published.FAIL
    assert reproduce.ROWS["modern/s5/pathfinder"].printed == published.MODERN_PUBLISHED["S5"][0][4]
    assert "lra/cosformer/pathx" not in reproduce.ROWS  # nothing printed
    for row in reproduce.ROWS.values():
        assert row.name == f"{row.protocol}/{row.family}/{row.task}"
        config_lib.load(row.task, row.family, preset=row.preset, protocol=row.protocol,
                        overrides=list(row.overrides))
    assert "colour sCIFAR" in reproduce.ROWS["modern/lru/image"].departs


# The S4D paper prints one row per initialisation; a run is scored against the one it trains.
S4D_ROWS = {"inv": "S4D-Inv", "lin": "S4D-Lin", "legs": "S4D-LegS"}


@pytest.mark.parametrize("task", published.TASKS)
def test_modern_s4d_rows_are_the_printed_row_of_the_initialisation_trained(task):
    row = reproduce.ROWS[f"modern/s4d/{task}"]
    init = config_lib.load(task, "s4d", preset=row.preset, protocol="modern").attn["init"]
    label = S4D_ROWS[init]
    assert row.source.startswith(f"{label}: ")
    assert row.printed == published.MODERN_PUBLISHED[label][0][published.TASKS.index(task)]
    assert "LegS" not in row.departs
    # the S4D-Inv row as printed (S4D paper): 60.18 / 87.34 / 91.09 / 87.83 / 93.78 / 92.80
    assert published.MODERN_PUBLISHED["S4D-Inv"][0] == (60.18, 87.34, 91.09, 87.83, 93.78, 92.80)


@pytest.mark.slow
def test_list_and_unknown_row():
    listed = run_module_in_process([sys.executable, "-m", "lra.reproduce", "--list"])
    assert listed.returncode == 0, listed.stderr
    out = listed.stdout.splitlines()
    assert len(out) == len(reproduce.ROWS)
    assert any(line.startswith("modern/s5/pathfinder ") and "--protocol modern" in line
               for line in out)
    bad = run_module_in_process([sys.executable, "-m", "lra.reproduce", "lra/sofmax/listop"])
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1
    assert "close matches: lra/softmax/listops" in bad.stderr


@pytest.mark.parametrize("acc,n,expected", [(0.1, 32, True), (0.1 + 0.05, 32, True),
                                            (0.1 + 0.06, 32, False), (0.5, 2000, True)])
def test_at_chance_is_one_standard_error(acc, n, expected):
    classes = 2 if acc == 0.5 else 10
    assert reproduce.at_chance(acc, classes, n) is expected
    assert standard_error(0.1, 32) == pytest.approx(0.053, abs=1e-3)


@pytest.mark.slow
def test_reproduce_runs_the_seeds_and_prints_the_table(tmp_path, capsys):
    argv = ["lra/softmax/listops", "--preset", "tiny", "--seeds", "0,1",
            "--results-dir", str(tmp_path / "results"), "--workdirs", str(tmp_path / "wd"),
            "--data-dir", str(tmp_path / "data"), *FEW_STEPS]
    assert reproduce.main(argv) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    runs = sorted((tmp_path / "results" / "runs").glob("*.json"))
    assert len(runs) == 2
    records = [json.loads(p.read_text()) for p in runs]
    accs = [r["metrics"]["test_accuracy_at_last"] for r in records]
    # at chance: within one standard error of 1/classes, or no better than the test split's
    # majority class (the file records its class counts: issue 54)
    k = sum(abs(a - 0.1) <= standard_error(0.1, 32)
            or a <= max(r["data"]["class_counts"]["test"]) / 32 + 1e-9
            for a, r in zip(accs, records, strict=True))
    mean = 100 * sum(accs) / 2
    [row] = [ln for ln in lines if ln.startswith("| 36.37 |")]
    assert f"| {mean:.2f} ± " in row and f"(2) | {mean - 36.37:+.2f} | {k}/2 |" in row
    assert any(ln.startswith("not like for like: preset tiny") for ln in lines)
    assert any(ln.startswith("not the row's recipe: --set data.train_size=128") for ln in lines)
    assert any(ln.startswith("this suite's config departs from the row's: the ListOps vocabulary")
               for ln in lines)
    # resumable: a second call finds both seeds finished and trains nothing
    assert reproduce.main(argv) == 0
    assert capsys.readouterr().out == out
    assert sorted((tmp_path / "results" / "runs").glob("*.json")) == runs


@pytest.mark.slow
@pytest.mark.parametrize("signame", ["SIGTERM", "SIGINT"])
def test_a_signal_while_the_modules_load_is_one_line_and_exit_75(tmp_path, signame):
    """Fails on 7162751: lra.reproduce had no handler and no hook stage (this --no-run printed its
    table and exited 1). A real signal while lra.leaderboard and matplotlib loaded at module level:
    SIGTERM killed it (-15), SIGINT gave a KeyboardInterrupt traceback."""
    out = subprocess.run([sys.executable, "-m", "lra.reproduce", "lra/softmax/listops", "--no-run",
                          "--results-dir", str(tmp_path / "results")], capture_output=True,
                         text=True, timeout=120, env=cli_env(LRA_TEST_SIGNAL_AT=f"import:{signame}"))
    assert out.returncode == 75, out.stderr[-3000:]
    assert out.stderr.strip().splitlines() == [
        f"{signame}: stopped; no seed was running, the seeds' checkpoints and results are kept; "
        f"re-run the same command"]
    assert out.stdout == ""


@pytest.mark.slow
def test_sigterm_while_a_seed_trains_checkpoints_it_and_exits_75_without_a_table(tmp_path):
    """Fails on 7162751: the sweep stopped (75) but lra.reproduce printed a table of no result
    ("1 of 1 seeds have no result yet") and exited 1, as for a failed seed."""
    work = tmp_path / "wd"
    cmd = [sys.executable, "-m", "lra.reproduce", "lra/softmax/listops", "--preset", "tiny",
           "--seeds", "0", "--results-dir", str(tmp_path / "results"), "--workdirs", str(work),
           "--data-dir", str(tmp_path / "data"), *SMALL_LISTOPS, "--set", "train.num_steps=100000",
           "--set", "train.log_every=1"]
    first = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env=cli_env())
    try:
        wait_until_training(work / "listops-softmax-tiny-seed0")
        first.send_signal(signal.SIGTERM)
        out, err = first.communicate(timeout=300)
    finally:
        first.kill()
    assert first.returncode == 75, err[-3000:]
    assert out == "" and "Traceback" not in err
    assert err.strip().splitlines()[-1] == (
        "SIGTERM: sweep stopped with 1 cells unfinished; re-run the same command to continue")
    log = (work / "listops-softmax-tiny-seed0" / "sweep.log").read_text()
    assert "SIGTERM: checkpoint saved at step " in log


def test_shard_and_overrides_are_passed_to_the_sweep(tmp_path, monkeypatch, capsys):
    from lra import sweep

    seen = []
    monkeypatch.setattr(sweep, "main", lambda argv: seen.append(argv) or 0)
    code = reproduce.main(["modern/s5/listops", "--preset", "tiny", "--seeds", "0-3", "--shard",
                           "1/2", "--set", "train.num_steps=3", "--results-dir", str(tmp_path)])
    assert code == 0  # the other shard's seeds are not this one's to report missing
    [argv] = seen
    assert argv[argv.index("--shard") + 1] == "1/2"
    assert argv[argv.index("--protocol") + 1] == "modern" and "--set=train.num_steps=3" in argv
    assert "4 of 4 seeds have no result yet" in capsys.readouterr().out
