"""A run's work directory (lra/workdir.py): one result per (work directory, completed run), the
re-run that reports it and writes nothing, ``--force``, and the lock that keeps a second run out
and dies with its process (issue 11's fault injection, bugs 3 and 5).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys

import pytest
from helpers import (
    CACHE_EVERY_COMPILE,
    assert_one_line_error,
    cli_env,
    module_compile_cache,
    run_in_process,
    tiny_run_args,
    wait_until_training,
)

from lra import workdir


@pytest.fixture(scope="module", autouse=True)
def compile_once(tmp_path_factory):
    yield from module_compile_cache(tmp_path_factory)


@pytest.mark.slow
def test_rerun_reports_the_existing_result_and_writes_nothing(finished, tmp_path):
    work, results, _ = finished
    before = sorted((results / "runs").iterdir())
    code, out, err = run_in_process(*tiny_run_args(work.parent / "data", work, results))
    assert code == 0 and "existing result" in out and "completed run" in err
    assert sorted((results / "runs").iterdir()) == before and len(before) == 1
    code, _, err = run_in_process(*tiny_run_args(work.parent / "data", work, results,
                                                 "--set", "train.lr=0.01"))
    assert code == 2 and "train.lr" in err  # another config is not "the same run, done"
    assert sorted((results / "runs").iterdir()) == before


@pytest.mark.slow
def test_result_file_lost_between_the_two_writes_is_written_once(finished, tmp_path):
    work = tmp_path / "w"
    shutil.copytree(finished[0], work)
    record = json.loads((work / "result.json").read_text())
    lost = tmp_path / "results" / "runs" / "lost.json"
    lost.parent.mkdir(parents=True)  # named in result.json, then the process was killed
    record["result_file"] = str(lost)
    (work / "result.json").write_text(json.dumps(record))
    # the first re-run writes the file and says so (issue 41: it said "nothing trained or
    # written"), the second finds it
    for said in ("existing run, its result file written now (nothing trained)",
                 "existing result (nothing trained or written)"):
        code, out, _ = run_in_process(*tiny_run_args(finished[0].parent / "data", work, tmp_path / "results"))
        assert code == 0 and f"{said}: {lost}" in out
    assert json.loads(lost.read_text())["metrics"] == record["metrics"]
    assert os.listdir(lost.parent) == ["lost.json"]


@pytest.mark.slow
def test_force_trains_again_and_keeps_the_earlier_run(finished, tmp_path):
    work = tmp_path / "forced"
    shutil.copytree(finished[0], work)
    (work / "lock").unlink()
    results = tmp_path / "results"
    code, _, err = run_in_process(*tiny_run_args(finished[0].parent / "data", work, results, "--force"))
    assert code == 0, err[-2000:]
    assert "resuming" not in err and len(list((results / "runs").iterdir())) == 1
    assert len(list(work.glob("previous-*/result.json"))) == 1


@pytest.mark.slow
def test_second_run_is_locked_out_and_sigint_saves_a_checkpoint_and_exits_75(tiny_listops, tmp_path):
    """Ctrl-C checkpoints and exits 75 like SIGTERM (resumable; issue 25). Fails on main (130)."""
    work = tmp_path / "w"
    cmd = [sys.executable, "-m", "lra.run",
           *tiny_run_args(tiny_listops / "data", work, tmp_path / "results",
                          "--set", "train.num_steps=100000", "--set", "train.checkpoint_every=100000",
                          "--set", "train.eval_every=100000", "--set", "train.log_every=1")]
    first = subprocess.Popen(cmd, env=cli_env(**CACHE_EVERY_COMPILE), stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, text=True)
    try:
        wait_until_training(work)
        second = subprocess.run(cmd, env=cli_env(**CACHE_EVERY_COMPILE), capture_output=True, text=True,
                                timeout=60)
        assert second.returncode == 2
        assert_one_line_error(second.stderr)
        assert f"pid {first.pid}" in second.stderr
        first.send_signal(signal.SIGINT)
        _, err = first.communicate(timeout=60)
    finally:
        first.kill()
    assert first.returncode == 75, err[-3000:]
    assert "SIGINT: checkpoint saved" in err and "Traceback" not in err
    assert [p for p in (work / "checkpoints" / "last").iterdir() if int(p.name) > 0]


def test_the_lock_dies_with_a_killed_process(tmp_path):
    from lra import workdir

    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from lra import workdir; "
         "h = workdir.lock(sys.argv[1]); print('locked', flush=True); time.sleep(60)",
         str(tmp_path)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(workdir.WorkdirLockedError, match=f"pid {holder.pid}"):
            workdir.lock(tmp_path)
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=10)
        workdir.lock(tmp_path).close()  # free again, without anyone cleaning up
    finally:
        holder.kill()


def test_a_result_json_that_is_not_an_object_is_one_line(tmp_path):
    """Fails on a05bdf0: AttributeError ('list' object has no attribute 'get') from lra.run."""
    (tmp_path / workdir.RESULT_FILE).write_text("[1, 2]")
    with pytest.raises(OSError, match=r"result\.json: expected a JSON object, got list"):
        workdir.finished(tmp_path)


def test_a_workdir_path_that_is_not_utf8_is_refused_before_training(tiny_listops, tmp_path):
    """Issue 41: such a path trained, then failed at the first checkpoint save inside tensorstore
    with a traceback ("Unable to cast Python instance of type <class 'str'>"). Fails on a05bdf0.
    (A data or results folder with such a name works: only the checkpoint library refuses it.)"""
    from pathlib import Path

    work = Path(os.fsdecode(os.fsencode(tmp_path) + b"/w-\xff"))
    code, _, err = run_in_process(*tiny_run_args(tiny_listops / "data", work, tmp_path / "results"))
    assert code == 1
    assert_one_line_error(err)
    assert "--workdir" in err and "not UTF-8" in err and "w-\\xff" in err
    assert not work.exists()
