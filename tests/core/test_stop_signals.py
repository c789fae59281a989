"""The signals that stop a run early and resumably (lra/stop_signals.py), with real processes: SIGTERM
in training saves a checkpoint and exits 75; before the first step it stops at once, saves nothing
and the same command then trains from step 0.
"""

import os
import signal
import subprocess
import sys
import time

import pytest
from helpers import (
    cli_env,
    prepare_tiny_listops_cli,
    read_result,
    run_module_in_process,
    tiny_run_cmd,
    wait_until_training,
)


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
    again = run_module_in_process(cmd)  # the re-run: no signal, no new interpreter needed
    assert again.returncode == 0, again.stderr[-3000:]
    assert "resuming" not in again.stderr
    assert read_result(tmp, "term-setup")["metrics"]["steps"] == 2


# Sizes for a generation of a few seconds on two cores, long enough to be stopped mid-way: ListOps
# makes 8200 trees in 33 shards of 256; Pathfinder 200 images in two batches of 100. The archive's
# batches hold 1000 images: _BATCHES_OF_100 makes the generator's batch (what it keeps) and its unit
# of work smaller in the run's own process, so the test generates a tenth of the images it needed
# with batches of 1000, and batch 1 cannot be finished before the stop sent after batch 0 lands
# (at most 40 of its 100 images are in flight then: 4 units of 5 images a worker, two workers).
_GENERATION = {
    "listops": {"train_size": 8000, "val_size": 100, "test_size": 100, "min_length": 100,
                "max_length": 400, "max_depth": 6},
    "pathfinder": {"num_images": 200},
}
_BATCHES_OF_100 = """
import sys
import lra.tasks._pathfinder_gen as gen
gen.BATCH_SIZE = 100  # more than the images in flight (4 units of _CHUNK images a worker)
gen._CHUNK[32] = 5
from lra.run import main
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.slow
@pytest.mark.parametrize("task", ["listops", "pathfinder"])
def test_sigterm_while_lra_run_generates_data_stops_it_and_the_rerun_goes_on(tmp_path, task):
    """Issue 41: a stop signal while lra.run generated its data went unanswered until the whole
    set was made (a minute and more; a cluster's grace period then ends in SIGKILL). Now the
    generation stops at once (exit 75, one line), its finished shards (ListOps: shards of 256
    trees; Pathfinder: batches of images) are kept, the re-run goes on from them without
    making them again, and the data is the data of an uninterrupted generation (same
    fingerprint). Fails on a05bdf0: the set was complete when the run exited."""
    from lra import data_fingerprint, tasks

    options = _GENERATION[task]
    data = tmp_path / "data"
    start = ["-m", "lra.run"] if task == "listops" else ["-c", _BATCHES_OF_100]
    cmd = [sys.executable, *start, "--task", task, "--attn", "softmax", "--preset",
           "tiny", "--data-dir", str(data), "--workdir", str(tmp_path / "w"), "--results-dir",
           str(tmp_path / "results"), "--no-progress", "--set", "train.num_steps=2",
           "--set", "train.eval_every=2",
           *[x for k, v in options.items() for x in ("--set", f"data.{k}={v}")]]
    finished = ".listops-shards/0.tsv.gz" if task == "listops" else "metadata/0.npy"
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            env=cli_env(1))
    try:
        deadline = time.time() + 300
        while not list(data.rglob(finished)) and proc.poll() is None and time.time() < deadline:
            time.sleep(0.02)
        [first] = data.rglob(finished)  # the first shard is finished: generation is under way
        before = first.stat()
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == 75, err[-3000:]
    assert "Traceback" not in err
    assert err.strip().splitlines()[-1] == (
        "SIGTERM: stopped while preparing the data (the parts already complete are kept); nothing "
        "new to save; re-run the same command to go on")
    if task == "listops":  # stopped mid-way: no split file, shards kept
        assert not list(data.rglob("basic_*.tsv"))
        kept = len(list(data.rglob(".listops-shards/*.tsv.gz")))
        assert 1 <= kept < 8200 / 256
    else:
        assert not list(data.rglob("metadata/1.npy"))
    assert not (tmp_path / "w" / "checkpoints").exists()

    # The re-run, in this process where it can be (Pathfinder's needs the script's smaller batches)
    again = (run_module_in_process(cmd) if task == "listops" else
             subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=cli_env(1)))
    assert again.returncode == 0, again.stderr[-3000:]
    if task == "listops":
        assert f"ListOps: going on from the {kept} finished shards" in again.stderr
        assert not list(data.rglob(".listops-shards"))  # gone once the files are written
    else:
        assert "generating 100 of 200 images" in again.stderr and "(it has 100)" in again.stderr
        after = first.stat()  # not made again
        assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)

    if task == "pathfinder":
        # A set completed from kept batches is the uninterrupted set: each image is a pure
        # function of (seed, index) (tests/tasks/test_pathfinder.py, test_render_is_a_pure_function_
        # of_seed_and_index and test_an_interrupted_or_smaller_set_is_completed); generating a
        # reference here again would double the test's time.
        return
    reference = tmp_path / "reference"
    fingerprints = []
    for where in (data, reference):
        built = tasks.build(task, where, **options)
        built.prepare()  # generates the reference, uninterrupted; finds the resumed data made
        fingerprints.append(data_fingerprint.fingerprint(built.provenance(), where)["sha256"])
    assert fingerprints[0] == fingerprints[1]


def _lose_a_sigterm_in_a_weakref_callback(monkeypatch) -> list:
    """Send SIGTERM from inside a weakref callback, where Python drops what the handler raises
    ("Exception ignored in ..."), as when the signal lands in the import system's module-lock
    cleanup. Returns what was dropped."""
    import weakref

    dropped = []
    monkeypatch.setattr(sys, "unraisablehook", dropped.append)

    class Thing:
        pass

    def callback(_):
        os.kill(os.getpid(), signal.SIGTERM)
        for _ in range(1000):  # the handler runs at the next bytecode boundary: in here
            pass

    thing = Thing()
    ref = weakref.ref(thing, callback)  # noqa: F841 (kept alive so that its callback runs)
    del thing
    return dropped


def test_a_stop_whose_raise_python_dropped_still_stops_the_loops(monkeypatch):
    """Fails on 3edad69: a SIGINT that landed in the import system's weakref callback while
    ListOps was generated was dropped, and ``lra.data generate`` made all 20,020 trees and exited 0
    (a CI run of that commit). ``ordered_map`` now looks at the flag between items."""
    from lra.tasks._files import ordered_map

    from lra import stop_signals

    with stop_signals.raising() as stops:
        dropped = _lose_a_sigterm_in_a_weakref_callback(monkeypatch)
        assert [type(d.exc_value) for d in dropped] == [stop_signals.Stopped]  # it was lost
        assert stops.requested == "SIGTERM"
        done = []
        with pytest.raises(stop_signals.Stopped, match="SIGTERM"):
            for value in ordered_map(abs, [(-1,), (-2,)], workers=1, window=1):
                done.append(value)
        assert done == []
    assert stop_signals._CURRENT.requested is None  # cleared on the way out


def test_poll_is_silent_outside_raising():
    """Under ``handling`` (the trainer making data) the flag is the caller's to look at: the
    generation finishes and the trainer stops at its next safe point."""
    from lra.tasks._files import ordered_map

    from lra import stop_signals

    with stop_signals.handling() as stops:
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.01)
        assert stops.requested == "SIGTERM"
        stop_signals.poll()
        assert list(ordered_map(abs, [(-1,), (-2,)], workers=1, window=1)) == [1, 2]
