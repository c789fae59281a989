"""``python -m lra.evaluate``: a restored checkpoint scores what its training run recorded, bit for
bit on CPU (long-range-arena#60: a reloaded checkpoint that scored like a random model), and every
unusable input is one line and exit 1 (2 for the command line)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import SMALL_LISTOPS, cli_env, full_disk, run_module_in_process, run_ok_in_process

from lra import evaluate as evaluate_cli


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A tiny ListOps run (softmax, 20 steps, validation every 5): (workdir, data dir, results)."""
    root = tmp_path_factory.mktemp("evaluate")
    workdir, data, res = root / "wd", root / "data", root / "results"
    run_ok_in_process([sys.executable, "-m", "lra.run", "--task", "listops", "--attn", "softmax",
                       "--preset", "tiny", *SMALL_LISTOPS, "--set", "train.eval_every=5",
                       "--workdir", str(workdir), "--data-dir", str(data), "--results-dir",
                       str(res), "--no-progress"])
    return workdir, data, res


def _logged(workdir: Path, split: str, step: int) -> dict:
    """The training run's own evaluation record of ``split`` at ``step`` (metrics.jsonl)."""
    records = [json.loads(line) for line in (workdir / "metrics.jsonl").read_text().splitlines()]
    return [r for r in records if r.get("split") == split and r.get("step") == step][-1]


@pytest.mark.slow
def test_restored_checkpoints_score_what_training_recorded(trained):
    workdir, data, res = trained
    run = json.loads((workdir / "result.json").read_text())
    m = run["metrics"]
    last = evaluate_cli.evaluate(workdir, checkpoint="last", data_dir=data, progress=False)
    best = evaluate_cli.evaluate(workdir, checkpoint="best", data_dir=data, progress=False)
    assert last["step"] == m["steps"] and best["step"] == m["best_val_step"]
    assert last["accuracy"] == m["test_accuracy_at_last"]  # exact: same batches, same sums
    assert best["accuracy"] == m["test_accuracy_at_best_val"]
    assert last["loss"] == _logged(workdir, "test_at_last", last["step"])["loss"]
    assert best["loss"] == _logged(workdir, "test_at_best_val", best["step"])["loss"]
    val = evaluate_cli.evaluate(workdir, checkpoint="best", split="val", data_dir=data,
                                progress=False)
    assert val["accuracy"] == m["best_val_accuracy"]  # tiny validates on the whole split
    assert last["examples"] == run["data"]["evaluated"]["test_at_last"] == 32
    assert not list((res / "runs").glob("*__eval-*.json"))  # nothing written unless asked


@pytest.mark.slow
def test_write_result_marks_an_evaluation_of_the_run(trained, tmp_path, capsys):
    workdir, data, _ = trained
    run_file = Path(json.loads((workdir / "result.json").read_text())["result_file"]).name
    assert evaluate_cli.main(["--workdir", str(workdir), "--data-dir", str(data), "--no-progress",
                              "--checkpoint", "best", "--write-result",
                              "--results-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "best checkpoint at step" in out and "test accuracy" in out and "on 32 examples" in out
    [path] = (tmp_path / "runs").glob("*.json")
    record = json.loads(path.read_text())
    trained_by = json.loads((workdir / "result.json").read_text())["git"]
    assert record["evaluation_of"] == {"workdir": str(workdir), "checkpoint": "best",
                                       "step": record["evaluation_of"]["step"],
                                       "run_file": run_file,
                                       "trained_under": [{"from_step": 0, **trained_by}]}
    # lra.sweep must not take an evaluation for a finished seed
    from lra.skip_check import finished_configs

    assert finished_configs(tmp_path) == {}


def _fails(argv: list[str], capsys, code: int = 1) -> str:
    assert evaluate_cli.main(argv + ["--no-progress"]) == code
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("error: "), err
    return err


def test_no_checkpoint(tmp_path, capsys):
    assert "no 'last' checkpoint" in _fails(["--workdir", str(tmp_path)], capsys)


def test_damaged_checkpoint_is_refused(trained, tmp_path, capsys):
    workdir, data, _ = trained
    copy = tmp_path / "wd"
    shutil.copytree(workdir, copy, ignore=shutil.ignore_patterns("lock"))
    best = copy / "checkpoints" / "best"
    [step] = [p for p in best.iterdir() if p.name.isdigit()]
    victim = max((p for p in step.rglob("*") if p.is_file()), key=lambda p: p.stat().st_size)
    raw = bytearray(victim.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    victim.write_bytes(bytes(raw))
    err = _fails(["--workdir", str(copy), "--data-dir", str(data), "--checkpoint", "best"], capsys)
    assert "do not match the checksum" in err


def _with_stored_config(workdir: Path, copy: Path, change) -> None:
    """A copy of ``workdir`` whose last checkpoint stores ``change(config)``, checksum re-recorded:
    the files are intact, only the code that reads them differs from the one that wrote them."""
    from lra.checkpoint import folder_digest

    shutil.copytree(workdir, copy, ignore=shutil.ignore_patterns("lock"))
    last = copy / "checkpoints" / "last"
    step = max(int(p.name) for p in last.iterdir() if p.name.isdigit())
    meta_file = last / str(step) / "meta" / "metadata"
    meta = json.loads(meta_file.read_text())
    change(meta["config"])
    meta_file.write_text(json.dumps(meta))
    (copy / "checkpoints" / "checksums" / f"last-{step}.sha256").write_text(
        f"{folder_digest(last / str(step))}  last/{step}\n")


def test_config_of_another_code_version_is_refused(trained, tmp_path, capsys):
    workdir, data, _ = trained
    _with_stored_config(workdir, tmp_path / "a",
                        lambda c: c["model"].update(retired_option=3))  # a key unknown here
    err = _fails(["--workdir", str(tmp_path / "a"), "--data-dir", str(data)], capsys)
    assert "cannot be rebuilt by this version" in err and "retired_option" in err
    # a config that resolves but builds another model than the one saved (e.g. a changed default)
    _with_stored_config(workdir, tmp_path / "b", lambda c: c["model"].update(mlp_dim=48))
    err = _fails(["--workdir", str(tmp_path / "b"), "--data-dir", str(data)], capsys)
    assert "does not fit the model this version of the code builds" in err


def test_bad_command_line(tmp_path):
    out = run_module_in_process([sys.executable, "-m", "lra.evaluate", "--workdir", str(tmp_path),
                                 "--split", "dev"])
    assert out.returncode == 2 and "invalid choice: 'dev'" in out.stderr
    with pytest.raises(evaluate_cli.EvaluateError, match="unknown split"):
        evaluate_cli.evaluate(tmp_path, split="dev")


def test_evaluating_on_other_data_is_refused_unless_allowed(trained, tmp_path, capsys):
    """Fails on main: the checkpoint was evaluated on whatever data was present."""
    workdir, data, _ = trained
    other = tmp_path / "data"
    shutil.copytree(data, other)
    test_file = next(other.rglob("basic_test.tsv"))
    lines = test_file.read_bytes().splitlines(keepends=True)
    lines[1], lines[2] = lines[2], lines[1]
    test_file.write_bytes(b"".join(lines))
    err = _fails(["--workdir", str(workdir), "--data-dir", str(other)], capsys)
    assert "trained on other data" in err and "basic_test.tsv" in err
    assert "--allow-other-data" in err
    assert evaluate_cli.main(["--workdir", str(workdir), "--data-dir", str(other),
                              "--allow-other-data", "--no-progress"]) == 0


def test_a_workdir_that_is_a_file_is_one_line(tmp_path, capsys):
    path = tmp_path / "a-file"
    path.write_text("x")
    assert "is a file" in _fails(["--workdir", str(path)], capsys)


def test_a_workdir_held_by_a_live_run_is_refused_naming_it(trained, tmp_path, capsys):
    """Issue 41: evaluating the work directory of a run still training failed at random (the run
    saves and deletes checkpoints as it goes) with a message that blamed the code version or a
    killed run. Now the lock says so at once. Fails on a05bdf0: a held lock was not looked at
    (here, with no checkpoint rotating, it evaluated and exited 0)."""
    workdir, data, _ = trained
    copy = tmp_path / "wd"
    shutil.copytree(workdir, copy, ignore=shutil.ignore_patterns("lock"))
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from lra import workdir; "
         "h = workdir.lock(sys.argv[1]); print('locked', flush=True); time.sleep(120)", str(copy)],
        stdout=subprocess.PIPE, text=True, env=cli_env())
    try:
        assert holder.stdout.readline().strip() == "locked"
        err = _fails(["--workdir", str(copy), "--data-dir", str(data)], capsys)
    finally:
        holder.kill()
        holder.wait(timeout=30)
    assert f"in use by a training run (pid {holder.pid})" in err and str(copy) in err
    # the run has ended (its lock went with it): the same command evaluates
    assert evaluate_cli.main(["--workdir", str(copy), "--data-dir", str(data),
                              "--no-progress"]) == 0


def test_write_result_on_a_real_full_disk_names_the_folder(trained, tmp_path, capsys):
    """Issue 41: the probe (an empty file) passed on a full disk, and the result write failed
    after the evaluation with "No space left on device" and no path. Fails on a05bdf0."""
    workdir, data, _ = trained
    with full_disk(tmp_path / "disk", keep=("runs",)) as disk:
        err = _fails(["--workdir", str(workdir), "--data-dir", str(data), "--write-result",
                      "--results-dir", str(disk)], capsys)
        assert not [p for p in (disk / "runs").iterdir()]
    assert "No space left on device" in err and str(disk / "runs") in err


def test_a_workdir_path_that_is_not_utf8_is_one_line(trained, tmp_path, capsys):
    """Issue 41: a work directory whose name has a byte that is not UTF-8 ended in a traceback
    from the checkpoint library (tensorstore cannot take the path). Fails on a05bdf0."""
    workdir, data, _ = trained
    copy = Path(os.fsdecode(os.fsencode(tmp_path) + b"/wd-\xff"))
    shutil.copytree(workdir, copy, ignore=shutil.ignore_patterns("lock"))
    err = _fails(["--workdir", str(copy), "--data-dir", str(data)], capsys)
    assert "not UTF-8" in err and "--workdir" in err


@pytest.mark.slow
@pytest.mark.parametrize("stage,signame", [("eval", "SIGTERM"), ("restore", "SIGINT")])
def test_a_signal_exits_75_in_one_line_and_writes_nothing(trained, tmp_path, stage, signame):
    """Fails on 040ea93: lra.evaluate had no handler (an outside SIGTERM killed it, -15; SIGINT
    ended in a KeyboardInterrupt traceback) and no safe points, so these hooks never fired and it
    exited 0."""
    workdir, data, _ = trained
    res = tmp_path / "res"
    cmd = [sys.executable, "-m", "lra.evaluate", "--workdir", str(workdir), "--data-dir",
           str(data), "--write-result", "--results-dir", str(res), "--no-progress"]
    stopped = subprocess.run(cmd, capture_output=True, text=True, timeout=300,
                             env=cli_env(LRA_TEST_SIGNAL_AT=f"{stage}:{signame}"))
    assert stopped.returncode == 75, stopped.stderr[-3000:]
    lines = stopped.stderr.strip().splitlines()
    assert lines == [f"{signame}: stopped before the evaluation finished; nothing was written; "
                     f"re-run the same command"], lines
    assert not list(res.rglob("*.json"))  # (runs/ itself is made by the check it can write)
    again = run_module_in_process(cmd)  # the re-run: no signal, no new interpreter needed
    assert again.returncode == 0 and len(list((res / "runs").iterdir())) == 1, again.stderr[-3000:]
