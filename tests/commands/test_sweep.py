"""`python -m lra.sweep`: grid, shards, skip/resume decisions, and tiny sweeps end to end."""

import json
import os
import random
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import result_record, run_module_in_process, wait_until_training

from lra import attention, cluster, leaderboard, skip_check, subprocess_executor, sweep
from lra import config as config_lib
from lra import run as run_cli
from lra.data import default_data_dir

TINY = ["--preset", "tiny", "--set", "data.train_size=64", "--set", "data.val_size=16",
        "--set", "data.test_size=16", "--set", "train.num_steps=6", "--set", "train.eval_every=3",
        "--set", "train.checkpoint_every=3"]


# ----------------------------------------------------------------------------------------------
# The grid and its shards.


def test_grid_expansion():
    cells = sweep.expand("pathfinder,listops", "softmax,linear,softmax", sweep.parse_seeds("2,0-1"))
    assert len(cells) == 2 * 2 * 3
    assert cells[0] == sweep.Cell("listops", "linear", (), 0) and cells == sorted(cells)
    assert {(c.task, c.attention, c.seed) for c in cells} == {
        (t, a, s) for t in ("listops", "pathfinder") for a in ("linear", "softmax") for s in (0, 1, 2)}
    every = sweep.expand("listops", "all", [0])
    assert [c.attention for c in every] == attention.available() and len(every) >= 15


@pytest.mark.parametrize("bad, message", [
    (("listops", "softmx", "0"), "unknown attn 'softmx'; choose from: all, bigbird"),
    (("listop", "softmax", "0"), "unknown task 'listop'"),
    (("listops", "softmax", "0,x"), "--seeds: expected integers"),
    (("listops", "", "0"), "--attn is empty"),
])
def test_grid_errors_are_one_line(bad, message):
    with pytest.raises(sweep.SweepError, match=message.replace("(", r"\(")):
        sweep.expand(bad[0], bad[1], sweep.parse_seeds(bad[2]))


@pytest.mark.parametrize("count", [1, 2, 3, 5, 7, 40])
def test_shards_partition_the_grid_whatever_its_order(count):
    grid = sweep.expand("listops,pathfinder,text", "softmax,linear,local,performer", [0, 1, 2])
    shards = [sweep.shard(grid, i, count) for i in range(count)]
    assert sorted(c for s in shards for c in s) == sorted(grid)  # the union is the grid ...
    assert sum(len(s) for s in shards) == len(grid)  # ... with no cell twice
    assert max(map(len, shards)) - min(map(len, shards)) <= 1  # balanced
    shuffled = random.Random(count).sample(grid, len(grid))
    assert [sweep.shard(shuffled, i, count) for i in range(count)] == shards
    reordered = sweep.expand("text,pathfinder,listops", "performer,local,linear,softmax", [2, 1, 0])
    assert [sweep.shard(reordered, i, count) for i in range(count)] == shards


@pytest.mark.parametrize("text", ["3/3", "-1/2", "1", "a/b", "0/0"])
def test_bad_shard_is_an_error(text):
    with pytest.raises(sweep.SweepError, match="I/N with 0 <= I < N"):
        sweep.parse_shard(text)


def test_list_prints_one_lra_run_command_per_cell(capsys, tmp_path):
    args = ["--task", "listops", "--attn", "softmax,linear", "--seeds", "0,1", *TINY,
            "--workdirs", str(tmp_path / "wd"), "--results-dir", str(tmp_path / "res")]
    assert sweep.main([*args, "--list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 4
    parsed = [run_cli.parser().parse_args(shlex.split(line)[3:]) for line in lines]
    assert all(line.startswith("python -m lra.run ") for line in lines)
    assert [(a.attn, a.seed) for a in parsed] == [("linear", 0), ("linear", 1), ("softmax", 0),
                                                  ("softmax", 1)]
    assert parsed[2].workdir == tmp_path / "wd" / "listops-softmax-tiny-seed0"  # lra.run's naming
    assert parsed[0].overrides == TINY[3::2] and parsed[0].preset == "tiny"
    assert sweep.main([*args, "--list", "--shard", "1/2"]) == 0
    assert capsys.readouterr().out.splitlines() == lines[1::2]


def test_a_bad_override_stops_before_anything_runs(capsys, tmp_path):
    code = sweep.main(["--task", "listops", "--attn", "softmax", "--preset", "tiny",
                       "--set", "attn.eps=1e-3", "--results-dir", str(tmp_path), "--dry-run"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1
    assert "error: listops/softmax seed 0: unknown attn key 'eps'" in err


# ----------------------------------------------------------------------------------------------
# Skip, resume, conflict and run, from fixture result files and work directories.


def _config(attn, seed, extra=()):
    args = run_cli.parser().parse_args(["--task", "listops", "--attn", attn, "--seed", str(seed),
                                        *TINY, *extra])
    return run_cli.resolve_config(args).to_dict()


def _checkpoint(workdir: Path, step: int, config: dict) -> None:
    """The files of an orbax 'last' checkpoint that lra.checkpoint.peek_last reads."""
    meta = workdir / "checkpoints" / "last" / str(step) / "meta"
    meta.mkdir(parents=True)
    (meta / "metadata").write_text(json.dumps({"config": config, "history": {}}))


def test_decisions_from_result_files_and_work_directories(tmp_path, capsys):
    res, wd = tmp_path / "res", tmp_path / "wd"
    (res / "runs").mkdir(parents=True)
    # linear seed 0: finished (a result file of the same resolved config, under any name)
    done = _config("linear", 0)
    fingerprint = skip_check.data_now(config_lib.Config.from_dict(done), default_data_dir())
    (res / "runs" / "anything.json").write_text(json.dumps(result_record(done, fingerprint=fingerprint)))
    # linear seed 1: a file named like it holds another config (another lr): not finished
    other = _config("linear", 1, ["--set", "train.lr=0.01"])
    (res / "runs" / "listops__linear__tiny__seed1__cpu1__20260101T000000.json").write_text(
        json.dumps(result_record(other)))
    # softmax seed 0: a checkpoint at step 3 of the same config, and an unfinished orbax save
    _checkpoint(wd / "listops-softmax-tiny-seed0", 3, _config("softmax", 0))
    (wd / "listops-softmax-tiny-seed0" / "checkpoints" / "last" / "6.orbax-checkpoint-tmp-1").mkdir()
    # softmax seed 1: a checkpoint of another config in its work directory
    _checkpoint(wd / "listops-softmax-tiny-seed1", 3, _config("softmax", 1, ["--set", "train.lr=0.01"]))

    args = ["--task", "listops", "--attn", "softmax,linear", "--seeds", "0,1", *TINY,
            "--workdirs", str(wd), "--results-dir", str(res)]
    grid = sweep.expand("listops", "softmax,linear", [0, 1])
    plans = {(p.cell.attention, p.cell.seed): p for p in sweep.plan(grid, sweep.parser().parse_args(args))}
    assert (plans[("linear", 0)].action, plans[("linear", 0)].detail) == ("skip", "result anything.json")
    assert plans[("linear", 1)].action == "run"
    assert (plans[("softmax", 0)].action, plans[("softmax", 0)].detail) == ("resume", "from step 3 of 6")
    assert plans[("softmax", 1)].action == "conflict" and "(train.lr)" in plans[("softmax", 1)].detail

    assert sweep.main([*args, "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "skip     listops/linear seed 0: result anything.json" in out
    assert f"run      listops/linear seed 1 in {wd / 'listops-linear-tiny-seed1'}" in out
    assert "1 run, 1 resume, 1 skip, 1 conflict (4 cells)" in out


def test_an_unreadable_result_file_is_skipped_with_the_leaderboards_line(tmp_path, capsys):
    """A file the leaderboard skips is no finished cell, and the sweep says so in the leaderboard's
    own line (before: exit 2 and a message of its own, for the same file)."""
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "broken.json").write_text("{")
    code = sweep.main(["--task", "listops", "--attn", "softmax", "--preset", "tiny",
                       "--results-dir", str(tmp_path), "--workdirs", str(tmp_path / "wd"),
                       "--dry-run"])
    captured = capsys.readouterr()
    assert code == 0 and "1 run, 0 resume, 0 skip, 0 conflict (1 cells)" in captured.out
    [line] = [ln for ln in captured.err.splitlines() if "broken.json" in ln]
    skipped: list[str] = []
    leaderboard.build(tmp_path, skipped)
    assert line == f"warning: skipped {skipped[0]}"


def test_last_error_line_and_bar():
    log = "loading\nerror: the data is wrong\nmore\n"
    assert cluster.last_error_line(log) == "error: the data is wrong"
    assert cluster.last_error_line("Traceback ...\n  File x\nRuntimeError: boom\n") == "RuntimeError: boom"
    jax_note = "-----\nFor simplicity, JAX has removed its internal frames. Set JAX_TRACEBACK_FILTERING=off."
    assert cluster.last_error_line(f"  File x\njax.errors.JaxRuntimeError: oom\n{jax_note}\n") == (
        "jax.errors.JaxRuntimeError: oom")
    tally = subprocess_executor.Tally(total=10, skipped=2, done=3, failed=1, run_seconds=400.0)
    assert tally.bar(width=10) == "[######----] 6/10 | done 3 | failed 1 | skipped 2 | ETA 0:06:40"
    assert subprocess_executor.Tally(total=3, skipped=1).bar(width=3).endswith("skipped 1 | ETA ?")


# ----------------------------------------------------------------------------------------------
# End to end: real lra.run processes (tiny ListOps; each process costs a few seconds of start-up).


def _sweep_cmd(tmp_path, attns, seeds, *extra):
    return [sys.executable, "-m", "lra.sweep", "--task", "listops", "--attn", attns, "--seeds", seeds,
            *TINY, "--data-dir", str(tmp_path / "data"), "--workdirs", str(tmp_path / "wd"),
            "--results-dir", str(tmp_path / "res"), *extra]


def _wait_for_cells_to_die(workdirs: Path, timeout: float = 60) -> None:
    """Until no work directory below ``workdirs`` is locked by a live run."""
    from lra import workdir

    deadline = time.monotonic() + timeout
    for wd in workdirs.iterdir():
        while True:
            try:
                workdir.lock(wd).close()
                break
            except workdir.WorkdirLockedError:
                assert time.monotonic() < deadline, f"the cell in {wd} outlived its sweep"
                time.sleep(0.2)


@pytest.mark.slow
def test_a_killed_sweep_takes_its_cell_with_it(tmp_path):
    """kill -9 of the sweep: the kernel sends its cell SIGTERM (PR_SET_PDEATHSIG), which
    checkpoints and stops. Fails on main: the cell ran on as an orphan."""
    cmd = _sweep_cmd(tmp_path, "softmax", "0", "--set", "train.num_steps=100000", "--set",
                     "train.log_every=1", "--no-leaderboard")
    first = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    cell = tmp_path / "wd" / "listops-softmax-tiny-seed0"
    try:
        wait_until_training(cell)
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=30)
        _wait_for_cells_to_die(tmp_path / "wd")
    finally:
        first.kill()
    assert "SIGTERM: checkpoint saved at step " in (cell / "sweep.log").read_text()


@pytest.mark.slow
def test_ctrl_c_on_a_sweep_checkpoints_the_cell_and_exits_130(tmp_path):
    """Fails on main: SIGINT reached the sweep as a KeyboardInterrupt (a traceback)."""
    cmd = _sweep_cmd(tmp_path, "softmax", "0", "--set", "train.num_steps=100000", "--set",
                     "train.log_every=1", "--no-leaderboard")
    first = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        wait_until_training(tmp_path / "wd" / "listops-softmax-tiny-seed0")
        first.send_signal(signal.SIGINT)
        _, err = first.communicate(timeout=120)
    finally:
        first.kill()
    assert first.returncode == 130, err[-3000:]
    assert "Traceback" not in err and "SIGINT: sweep stopped with 1 cells unfinished" in err


@pytest.mark.slow
@pytest.mark.parametrize("stage", ["import", "plan"])
@pytest.mark.parametrize("signame,status", [("SIGTERM", 75), ("SIGINT", 130)])
def test_a_signal_while_the_sweep_starts_is_one_line(tmp_path, stage, signame, status):
    """Fails on 7162751: lra.sweep imported JAX (through lra.checkpoint) at module level and the
    families in its parser, with no handler, and had no "import" stage for the hook (the dry run
    exited 0). A real signal 0.3-1.5 s after start: SIGTERM killed it (-15); SIGINT gave a
    KeyboardInterrupt traceback (-2), or was swallowed in JAX's gc callback and the sweep went on.
    While it planned the cells (stage "plan"), after d6639b7 took its handler off once the modules
    had loaded: SIGTERM killed it (-15), SIGINT printed a line and exited 130."""
    cmd = [*_sweep_cmd(tmp_path, "softmax", "0"), "--dry-run"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=120,
                         env={**os.environ, "LRA_TEST_SIGNAL_AT": f"{stage}:{signame}"})
    assert out.returncode == status, out.stderr[-3000:]
    assert out.stderr.strip().splitlines() == [
        f"{signame}: sweep stopped while starting, before any cell started; re-run the same command"]
    assert out.stdout == "" and not (tmp_path / "wd").exists()


def test_a_large_grid_needs_a_flag(tmp_path, capsys):
    """Fails on main: --seeds 0-100000 planned for half an hour."""
    t0 = time.monotonic()
    code = sweep.main(["--task", "listops", "--attn", "softmax", "--seeds", "0-100000",
                       "--results-dir", str(tmp_path), "--workdirs", str(tmp_path), "--dry-run"])
    assert code == 2 and time.monotonic() - t0 < 5
    assert "--allow-large-grid" in capsys.readouterr().err


@pytest.mark.parametrize("flag", ["--workdirs", "--results-dir"])
def test_a_sweep_path_that_is_a_file_is_one_line(tmp_path, capsys, flag):
    """Fails on main: a traceback (NotADirectoryError) for --workdirs, for --results-dir too."""
    path = tmp_path / "a-file"
    path.write_text("x")
    args = {"--workdirs": str(tmp_path / "wd"), "--results-dir": str(tmp_path / "res"), flag: str(path)}
    code = sweep.main(["--task", "listops", "--attn", "softmax", *TINY,
                       *(x for kv in args.items() for x in kv), "--dry-run"])
    err = capsys.readouterr().err
    assert code == 1 and err.count("\n") == 1 and "a-file" in err and "is a file" in err


def test_a_result_of_other_data_is_not_done(tmp_path, capsys):
    """Fails on main: the skip check compared configs only."""
    res, wd, data = tmp_path / "res", tmp_path / "wd", tmp_path / "data"
    (res / "runs").mkdir(parents=True)
    args = ["--task", "listops", "--attn", "softmax", "--seeds", "0", *TINY,
            "--workdirs", str(wd), "--results-dir", str(res), "--data-dir", str(data)]
    config = run_cli.resolve_config(run_cli.parser().parse_args(
        ["--task", "listops", "--attn", "softmax", "--seed", "0", *TINY]))
    fingerprint = skip_check.data_now(config, data)
    other = {**fingerprint, "generator": {**fingerprint["generator"], "version": -1}}
    other["sha256"] = "0" * 64
    (res / "runs" / "old.json").write_text(json.dumps(
        result_record(config.to_dict(), fingerprint=other)))
    (p,) = sweep.plan(sweep.expand("listops", "softmax", [0]), sweep.parser().parse_args(args))
    assert p.action == "conflict" and "old.json was made on other data (generator: " in p.detail
    (res / "runs" / "old.json").write_text(json.dumps(
        result_record(config.to_dict(), fingerprint=fingerprint)))
    (p,) = sweep.plan(sweep.expand("listops", "softmax", [0]), sweep.parser().parse_args(args))
    assert p.action == "skip"


@pytest.mark.slow
def test_tiny_sweep_killed_then_rerun_finishes_only_what_is_missing(tmp_path):
    cmd = _sweep_cmd(tmp_path, "softmax,linear", "0,1")
    runs = tmp_path / "res" / "runs"
    first = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                             start_new_session=True)
    deadline = time.monotonic() + 300
    while not (runs.is_dir() and any(runs.glob("*.json"))) and first.poll() is None:
        assert time.monotonic() < deadline, "no result file after 300 s"
        time.sleep(0.2)
    os.killpg(first.pid, signal.SIGKILL)  # the sweep (the cell runs in its own session)
    first.wait()
    _wait_for_cells_to_die(tmp_path / "wd")
    finished_before = {p.name for p in runs.glob("*.json")}
    assert 1 <= len(finished_before) < 4

    second = run_module_in_process(cmd)  # the re-run: this process, its cells in theirs
    assert second.returncode == 0, second.stderr[-3000:]
    assert second.stderr.count(": skipped (result ") == len(finished_before)
    assert second.stderr.count(": done in ") == 4 - len(finished_before)
    records = [json.loads(p.read_text()) for p in runs.glob("*.json")]
    assert sorted((r["attention"], r["seed"]) for r in records) == [
        ("linear", 0), ("linear", 1), ("softmax", 0), ("softmax", 1)]  # each cell once
    assert finished_before <= {p.name for p in runs.glob("*.json")}
    k = len(finished_before)
    assert f"4/4 | done {4 - k} | failed 0 | skipped {k} | ETA 0:00:00" in second.stderr

    board = (tmp_path / "res" / "LEADERBOARD.md").read_text()  # rebuilt at the end
    for attn in ("linear", "softmax"):
        # TINY's --set data sizes make these runs their own labelled rows (not the preset's cell)
        row = next(line for line in board.splitlines() if line.startswith(f"| {attn} [data."))
        cell = row.split(" | ")[1]
        assert re.search(r"\(2\)( \d/2 at chance)?$", cell.rstrip("* ≈†")) and " ± " in cell, row

    again = run_module_in_process([*cmd, "--dry-run"])
    assert again.returncode == 0 and "0 run, 0 resume, 4 skip, 0 conflict (4 cells)" in again.stdout


@pytest.mark.slow
def test_sigterm_passes_to_the_cell_which_checkpoints_the_sweep_exits_75_and_the_rerun_resumes(
        tmp_path):
    """Fails on main: the sweep exited 0 (and read the cell's stop from a log line)."""
    cmd = _sweep_cmd(tmp_path, "softmax", "0", "--set", "train.num_steps=100000", "--set",
                     "train.log_every=1", "--no-leaderboard")
    first = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        wait_until_training(tmp_path / "wd" / "listops-softmax-tiny-seed0")
        first.send_signal(signal.SIGTERM)
        _, err = first.communicate(timeout=120)
    finally:
        first.kill()
    assert first.returncode == 75, err[-3000:]
    assert "[1/1] listops/softmax seed 0: stopped by SIGTERM after " in err, err[-3000:]
    assert "(checkpointed, exit status 75)" in err
    assert "SIGTERM: sweep stopped with 1 cells unfinished" in err
    log = (tmp_path / "wd" / "listops-softmax-tiny-seed0" / "sweep.log").read_text()
    assert "SIGTERM: checkpoint saved at step " in log
    again = run_module_in_process([*cmd, "--dry-run"])
    assert again.returncode == 0 and "0 run, 1 resume, 0 skip" in again.stdout, again.stdout

BROKEN_FAMILY = '''
from flax import nnx


class Broken(nnx.Module):
    """An attention family whose build raises (tests/commands/test_sweep.py)."""

    paper = "none"
    complexity = "-"

    def __init__(self, dim, num_heads, *, qkv_dim=None, max_len=None, dropout=0.0, rngs):
        raise RuntimeError("broken on purpose")
'''


@pytest.mark.slow
def test_a_failing_cell_is_recorded_and_the_sweep_goes_on(tmp_path):
    # An out-of-tree family, registered through the lra.attention entry-point group.
    site = tmp_path / "site"
    (site / "broken_family-0.1.dist-info").mkdir(parents=True)
    (site / "broken_family.py").write_text(BROKEN_FAMILY)
    (site / "broken_family-0.1.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: broken-family\nVersion: 0.1\n")
    (site / "broken_family-0.1.dist-info" / "entry_points.txt").write_text(
        "[lra.attention]\nbroken = broken_family:Broken\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])}

    listed = subprocess.run(_sweep_cmd(tmp_path, "all", "0", "--list"), capture_output=True,
                            text=True, timeout=120, env=env)
    assert listed.returncode == 0, listed.stderr
    assert "--attn broken " in listed.stdout  # --attn all includes entry-point families
    assert len(listed.stdout.splitlines()) == len(attention.available()) + 1

    # One family of the grid cannot be built: its cells fail, the others run.
    out = subprocess.run(_sweep_cmd(tmp_path, "broken,softmax", "0", "--no-leaderboard"),
                         capture_output=True, text=True, timeout=600, env=env)
    assert out.returncode == 1, out.stderr[-3000:]
    assert "1 of 2 cells failed:" in out.stderr
    assert ("  listops/broken seed 0: attention family 'broken' cannot be built: "
            "RuntimeError: broken on purpose" in out.stderr)
    assert "listops/softmax seed 0: done in" in out.stderr  # the next cell ran after the failure
    assert "| done 1 | failed 1 | skipped 0 |" in out.stderr
    # A grid none of whose cells can be built stops before anything runs.
    out = subprocess.run(_sweep_cmd(tmp_path, "broken", "0,1", "--no-leaderboard"),
                         capture_output=True, text=True, timeout=600, env=env)
    assert out.returncode == 2 and "cannot be built" in out.stderr and "(and 1 more cells)" in out.stderr
    assert not (tmp_path / "res" / "LEADERBOARD.md").exists()
