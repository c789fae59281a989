"""The signals that stop a run early and resumably (lra/stop_signals.py), with real processes: SIGTERM
in training saves a checkpoint and exits 75; before the first step it stops at once, saves nothing
and the same command then trains from step 0.
"""

import signal
import subprocess
import sys
import time

import pytest
from helpers import cli_env, prepare_tiny_listops_cli, read_result, run_ok, tiny_run_cmd, wait_until_training


@pytest.fixture(scope="module")
def tmp(tmp_path_factory):
    return prepare_tiny_listops_cli(tmp_path_factory.mktemp("faults"))


@pytest.mark.slow
def test_sigterm_saves_a_checkpoint_and_exits_75(tmp):
    """Exit status 75 (resumable; issue 25). Fails on main, which exited 0 like a finished run."""
    cmd = tiny_run_cmd(tmp, "term", "--set", "train.num_steps=100000", "--set",
                       "train.checkpoint_every=100000", "--set", "train.log_every=1")
    proc = subprocess.Popen(cmd, env=cli_env(1), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True)
    wait_until_training(tmp / "term")
    proc.send_signal(signal.SIGTERM)
    t0 = time.time()
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 75, err[-3000:]
    assert time.time() - t0 < 60
    assert "SIGTERM: checkpoint saved" in err
    steps = [p.name for p in (tmp / "term" / "checkpoints" / "last").iterdir() if p.name.isdigit()]
    assert steps and int(steps[0]) > 0


# lra.run with a SIGTERM sent to itself once the data is loaded, before compilation and step 1.
_TERM_IN_SETUP = """
import os, signal, sys
import lra.train
from lra.run import main
real = lra.train._data
def data_then_term(*args, **kwargs):
    out = real(*args, **kwargs)
    os.kill(os.getpid(), signal.SIGTERM)
    return out
lra.train._data = data_then_term
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.slow
def test_sigterm_before_the_first_step_stops_at_once_and_exits_75(tmp):
    """Before the loop runs (data, compilation, restoring) a SIGTERM ends the run at the next safe
    point and cleanly: exit status 75 (resumable), one line that says nothing was saved, no
    traceback, no checkpoint; the same command then trains from step 0. Fails on main (exit 0)."""
    cmd = tiny_run_cmd(tmp, "term-setup", "--set", "train.num_steps=2")
    out = subprocess.run([sys.executable, "-c", _TERM_IN_SETUP, *cmd[3:]], capture_output=True,
                         text=True, timeout=300, env=cli_env(1))
    assert out.returncode == 75, out.stderr[-3000:]
    assert "SIGTERM: stopped before this session's first step; nothing new to save" in out.stderr
    assert "Traceback" not in out.stderr
    last = tmp / "term-setup" / "checkpoints" / "last"
    assert not last.exists() or not [p for p in last.iterdir() if p.name.isdigit()]
    assert not (tmp / "term-setup" / "result.json").exists()
    again = run_ok(cmd)
    assert "resuming" not in again.stderr
    assert read_result(tmp, "term-setup")["metrics"]["steps"] == 2
