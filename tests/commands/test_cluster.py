"""`lra.sweep --executor local|debug` (lra/cluster.py): submitit's local executor, offline.

The end-to-end tests share one data directory and one uninterrupted reference grid (module-scoped
fixtures). The pre-time-limit signal is sent by the test to the submitit task, as SLURM's
``--signal=USR2@...`` would, once the run is training: a real time limit on the local executor is
whole seconds after a start-up that varies with the machine's load.
"""

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import cli_env, run_module_in_process, wait_until_training

from lra import cluster, sweep

TINY = ["--preset", "tiny", "--set", "data.train_size=64", "--set", "data.val_size=16",
        "--set", "data.test_size=16", "--set", "train.num_steps=40", "--set", "train.eval_every=20",
        "--set", "train.checkpoint_every=20", "--set", "train.log_every=1"]


def _cmd(root: Path, data: Path, *extra: str, task: str = "listops", seeds: str = "0,1"):
    return [sys.executable, "-m", "lra.sweep", "--task", task, "--attn", "softmax", "--seeds", seeds,
            *TINY, "--data-dir", str(data), "--workdirs", str(root / "wd"),
            "--results-dir", str(root / "res"), "--no-leaderboard", *extra]


def _digests(results: Path) -> dict[int, str]:
    records = [json.loads(p.read_text()) for p in (results / "runs").glob("*.json")]
    return {r["seed"]: r["metrics"]["params_sha256"] for r in records}


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("data")


@pytest.fixture(scope="module")
def reference(tmp_path_factory, data_dir):
    """The grid (seeds 0, 1) through the default subprocess executor: {seed: params_sha256}."""
    root = tmp_path_factory.mktemp("subprocess")
    out = run_module_in_process(_cmd(root, data_dir))  # the sweep here, its cells in processes
    assert out.returncode == 0, out.stderr[-3000:]
    digests = _digests(root / "res")
    assert sorted(digests) == [0, 1]
    return digests


@pytest.mark.slow
def test_local_executor_gives_the_subprocess_executors_results(tmp_path, data_dir, reference):
    out = subprocess.run(_cmd(tmp_path, data_dir, "--executor", "local"), capture_output=True,
                         text=True, timeout=600, env=cli_env())
    assert out.returncode == 0, out.stderr[-3000:]
    assert _digests(tmp_path / "res") == reference
    for seed in (0, 1):
        line = next(ln for ln in out.stderr.splitlines() if f"listops/softmax seed {seed}: " in ln)
        assert ": done (result listops__softmax__tiny__seed" in line, line
        log = tmp_path / "wd" / f"listops-softmax-tiny-seed{seed}" / "sweep.log"
        assert f"; log {log}; job stdout " in line and Path(line.rsplit(" stderr ", 1)[1]).is_file()
    assert "2 done, 0 not done, 0 skipped (2 cells)" in out.stderr
    again = subprocess.run([*_cmd(tmp_path, data_dir, "--executor", "local")], capture_output=True,
                           text=True, timeout=300, env=cli_env())
    assert again.returncode == 0 and again.stderr.count(": skipped (result ") == 2, again.stderr


def _task_of(workdir: Path, timeout: float = 120) -> int:
    """The pid of the submitit task whose child lra.run holds ``workdir``'s lock."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        text = (workdir / "lock").read_text().strip() if (workdir / "lock").exists() else ""
        if text:
            stat = Path(f"/proc/{text}/stat").read_text()
            return int(stat.rsplit(")", 1)[1].split()[1])  # the parent's pid
        time.sleep(0.1)
    raise AssertionError(f"{workdir}: no lock holder within {timeout:.0f} s")


@pytest.mark.slow
def test_a_signalled_cell_checkpoints_is_requeued_and_resumes_to_the_same_result(
        tmp_path, data_dir, reference):
    first = subprocess.Popen(_cmd(tmp_path, data_dir, "--executor", "local", seeds="0"),
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=cli_env())
    workdir = tmp_path / "wd" / "listops-softmax-tiny-seed0"
    try:
        wait_until_training(workdir)
        os.kill(_task_of(workdir), signal.SIGUSR2)  # SLURM's pre-time-limit signal, to the task
        _, err = first.communicate(timeout=600)
    finally:
        first.kill()
    assert first.returncode == 0, err[-3000:]
    assert "listops/softmax seed 0: done (result " in err and "requeued 1x" in err, err[-3000:]
    assert _digests(tmp_path / "res") == {0: reference[0]}  # as if never interrupted
    log = (workdir / "sweep.log").read_text()
    assert "SIGTERM: checkpoint saved at step " in log, log[-3000:]
    assert "(requeue 1): " in log and "resum" in log.lower()
    task_log = next((tmp_path / "wd" / "submitit").glob("*/*_0_log.out")).read_text()
    assert "signalled; the run stopped with status" in task_log and "requeued (1 of 3)" in task_log


def _parent(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def _running(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.slow
@pytest.mark.parametrize("signame,status", [("SIGKILL", -9), ("SIGINT", 130)])
def test_a_killed_sweep_takes_its_local_tasks_and_their_runs_with_it(tmp_path, data_dir, signame,
                                                                      status):
    """kill -9 of a sweep with --executor local: the task sees the sweep gone, its lra.run saves a
    checkpoint and stops, and submitit's controller ends. Fails on 7162751: all three ran on as
    orphans (the lra.run's PR_SET_PDEATHSIG is tied to the task, which outlived the sweep with
    its controller, started by submitit to survive the python session). Ctrl-C likewise, after
    one true line: on d6639b7 it said "interrupted (SIGINT) before any cell started; nothing to
    resume" while its cell was training."""
    cmd = [*_cmd(tmp_path, data_dir, "--executor", "local", seeds="0"),
           "--set", "train.num_steps=100000", "--set", "train.checkpoint_every=100000"]
    err_file = tmp_path / "sweep.err"
    with open(err_file, "w") as err:
        sweep_proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err, env=cli_env())
    workdir = tmp_path / "wd" / "listops-softmax-tiny-seed0"
    pids = []
    try:
        wait_until_training(workdir)
        run = int((workdir / "lock").read_text().strip())
        task = _parent(run)
        pids = [run, task, _parent(task)]  # lra.run, the submitit task, its controller
        assert _parent(pids[2]) == sweep_proc.pid
        sweep_proc.send_signal(getattr(signal, signame))
        assert sweep_proc.wait(timeout=30) == status, err_file.read_text()[-3000:]
        deadline = time.time() + 60
        while any(map(_running, pids)) and time.time() < deadline:
            time.sleep(0.2)
        assert not any(map(_running, pids)), [p for p in pids if _running(p)]
    finally:
        sweep_proc.kill()
        for pid in pids:  # whatever outlived the sweep, so that a failure leaves no orphan
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    assert "SIGTERM: checkpoint saved at step " in (workdir / "sweep.log").read_text()
    if signame == "SIGINT":
        err = err_file.read_text()
        assert "Traceback" not in err
        assert err.strip().splitlines()[-1] == (
            "SIGINT: sweep stopped while waiting for its cells; its local tasks see it gone and "
            "stop their runs with a checkpoint; re-run the same command to go on")


@pytest.mark.slow
def test_a_failing_cell_is_reported_with_its_last_error_line_and_the_other_finishes(
        tmp_path, data_dir, reference):
    # Text's IMDB is not prepared in this data directory: lra.run exits 1 with a one-line error.
    out = subprocess.run(_cmd(tmp_path, data_dir, "--executor", "local", task="listops,text",
                              seeds="0"), capture_output=True, text=True, timeout=600, env=cli_env())
    assert out.returncode == 1, out.stderr[-3000:]
    line = next(ln for ln in out.stderr.splitlines() if "] text/softmax seed 0: " in ln)
    assert ": FAILED (exit status 1: error: text: tfds dataset imdb_reviews is not prepared" in line
    assert "text-softmax-tiny-seed0/sweep.log; job stdout " in line, line
    assert "listops/softmax seed 0: done (result " in out.stderr
    assert _digests(tmp_path / "res") == {0: reference[0]}
    assert "1 done, 1 not done, 0 skipped (2 cells)" in out.stderr


def test_without_submitit_the_executor_is_a_one_line_error(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "submitit", None)  # import submitit -> ImportError
    code = sweep.main(["--task", "listops", "--attn", "softmax", *TINY, "--executor", "local",
                       "--workdirs", str(tmp_path / "wd"), "--results-dir", str(tmp_path / "res")])
    assert code == 2
    assert capsys.readouterr().err.strip() == (
        'error: --executor local needs submitit, which is not installed: pip install -e ".[slurm]"')


def test_slurm_flags_become_sbatch_parameters(tmp_path, monkeypatch):
    """Only the submission file is built (nothing is submitted): where SLURM is not installed, an
    ``srun`` that does nothing stands on PATH for submitit's check. Without one, the sweep's error
    is one line (on a machine without SLURM this test failed with submitit's RuntimeError)."""
    pytest.importorskip("submitit")
    bare = sweep.parser().parse_args(["--task", "listops", "--attn", "softmax", "--executor", "slurm"])
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    with pytest.raises(ValueError, match="--executor slurm needs SLURM's commands"):
        cluster.make_executor(bare, tmp_path / "submitit" / "%j")
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "srun").write_text("#!/bin/sh\n")
    (tmp_path / "bin" / "srun").chmod(0o755)
    args = sweep.parser().parse_args([
        "--task", "listops", "--attn", "softmax", "--executor", "slurm", "--partition", "gpu",
        "--time", "90", "--gpus-per-task", "1", "--cpus-per-task", "8", "--mem-gb", "32",
        "--array-parallelism", "4", "--signal-delay-s", "180", "--slurm-extra", "account=lra",
        "--slurm-extra", "qos=high", "--max-requeues", "5"])
    ex = cluster.make_executor(args, tmp_path / "submitit" / "%j")
    text = ex._make_submission_file_text("python -m submitit.core._submit X", "uid")
    for expected in ("#SBATCH --partition=gpu", "#SBATCH --time=90", "#SBATCH --gpus-per-task=1",
                     "#SBATCH --cpus-per-task=8", "#SBATCH --mem=32GB", "#SBATCH --signal=USR2@180",
                     "#SBATCH --account=lra", "#SBATCH --qos=high"):
        assert expected in text, text
    assert ex.max_num_timeout == 5
    with pytest.raises(ValueError, match="--slurm-extra: expected KEY=VALUE"):
        cluster._extra(["account"])



# ----------------------------------------------------------------------------------------------
# One multi-GPU host: --executor local --gpus-per-task N (emulated GPUs: a fake nvidia-smi).

FAKE_SMI = """#!/bin/sh
echo "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-0a)"
echo "GPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-1b)"
"""


@pytest.fixture
def two_gpus(tmp_path, monkeypatch):
    """A machine whose nvidia-smi -L lists two GPUs, with nothing set in the environment."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "nvidia-smi").write_text(FAKE_SMI)
    (bin_dir / "nvidia-smi").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    for key in cluster.DEVICE_ENV:
        monkeypatch.delenv(key, raising=False)
    return bin_dir


def _local(*flags: str):
    return sweep.parser().parse_args(["--task", "listops", "--attn", "softmax", "--executor",
                                      "local", "--time", "5", *flags])


def test_each_local_task_gets_its_own_gpu_and_a_share_of_its_memory(tmp_path, two_gpus):
    """Through submitit's real local executor: four tasks that report their environment, two per
    GPU. Before, every task got CUDA_VISIBLE_DEVICES='' (the CPU)."""
    pytest.importorskip("submitit")
    args = _local("--gpus-per-task", "1", "--tasks-per-gpu", "2")
    slots = cluster.local_slots(args)
    assert [s.devices for s in slots] == [(0,), (1,), (0,), (1,)]
    executor = cluster.make_executor(args, tmp_path / "submitit" / "%j")
    jobs = cluster.submit_on_slots(executor, [cluster.device_environment] * 4, slots, poll_s=0.1)
    seen = [job.result() for job in jobs]
    assert sorted(e["CUDA_VISIBLE_DEVICES"] for e in seen) == ["0", "0", "1", "1"]
    assert {e["XLA_PYTHON_CLIENT_MEM_FRACTION"] for e in seen} == {"0.45"}
    assert "XLA_PYTHON_CLIENT_MEM_FRACTION" not in os.environ  # the sweep's own is untouched
    # One task per GPU: the whole GPU, JAX's own memory settings.
    one = cluster.local_slots(_local("--gpus-per-task", "1", "--gpus", "1"))
    assert one == [cluster.Slot((1,))]
    assert [s.devices for s in cluster.local_slots(_local("--gpus-per-task", "2"))] == [(0, 1)]


class _Job:
    def __init__(self, log):
        self.log, self.finished = log, False

    def done(self):
        return self.finished


class _Executor:
    """Records what runs at once; a job ends when the scheduler next looks at the running ones."""

    def __init__(self):
        self.running, self.most, self.devices = [], 0, []

    def update_parameters(self, gpus_per_node, visible_gpus):
        self.next = tuple(visible_gpus)

    def submit(self, fn):
        for job in self.running:  # the oldest ends while a new one waits
            job.finished = True
        self.running = [j for j in self.running if not j.finished] + [_Job(self.next)]
        self.devices.append((self.next, dict(os.environ).get("XLA_PYTHON_CLIENT_MEM_FRACTION")))
        self.most = max(self.most, len(self.running))
        return self.running[-1]


def test_no_more_tasks_run_than_there_are_slots_and_a_freed_slot_is_reused(monkeypatch):
    monkeypatch.delenv("XLA_PYTHON_CLIENT_MEM_FRACTION", raising=False)
    ex = _Executor()
    slots = [cluster.Slot((0,), (("XLA_PYTHON_CLIENT_MEM_FRACTION", "0.45"),)), cluster.Slot((1,))]
    jobs = cluster.submit_on_slots(ex, [object()] * 5, slots, poll_s=0)
    assert len(jobs) == 5 and ex.most <= 2
    assert [d for d, _ in ex.devices[:2]] == [(0,), (1,)]
    assert all((d, f) in (((0,), "0.45"), ((1,), None)) for d, f in ex.devices)


def test_gpu_flags_give_one_line_errors(tmp_path, two_gpus, monkeypatch, capsys):
    common = ["--task", "listops", "--attn", "softmax", *TINY, "--workdirs", str(tmp_path / "wd"),
              "--results-dir", str(tmp_path / "res"), "--no-leaderboard"]
    assert sweep.main([*common, "--gpus-per-task", "1"]) == 2  # checked before anything is planned
    assert capsys.readouterr().err.strip() == (
        "error: --gpus-per-task goes with --executor local or slurm; --executor subprocess runs "
        "each cell with every device this machine shows it")
    for flags, message in (
            (["--executor", "slurm", "--gpus", "0,1"], "--gpus go with --executor local"),
            (["--executor", "local", "--tasks-per-gpu", "2"], "--tasks-per-gpu shares GPUs"),
            (["--executor", "local", "--gpus-per-task", "3"],
             "--gpus-per-task 3: only 2 GPUs found (nvidia-smi -L)"),
            (["--executor", "local", "--gpus-per-task", "1", "--gpus", "0,x"],
             "--gpus: expected GPU indices like 0,1,2")):
        args = sweep.parser().parse_args(["--task", "listops", "--attn", "softmax", *flags])
        with pytest.raises(ValueError, match=re.escape(message)):
            cluster.local_slots(args)
    monkeypatch.setenv("PATH", "/nonexistent")  # no nvidia-smi: no GPU
    with pytest.raises(ValueError, match=re.escape(
            "--gpus-per-task 1: no GPU found (nvidia-smi is not on PATH); give --gpus 0,1,... "
            "or leave --gpus-per-task out to run on the CPU")):
        cluster.local_slots(_local("--gpus-per-task", "1"))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-0a")
    with pytest.raises(ValueError, match=re.escape(
            "CUDA_VISIBLE_DEVICES (give --gpus 0,1,... instead): expected GPU indices")):
        cluster.local_slots(_local("--gpus-per-task", "1"))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    with pytest.raises(ValueError, match=re.escape(
            "no GPU found (CUDA_VISIBLE_DEVICES='' hides every GPU)")):
        cluster.local_slots(_local("--gpus-per-task", "1"))


def test_the_local_executor_says_once_that_it_runs_on_the_cpu(two_gpus):
    note = cluster.placement_note(_local(), [], 12)
    assert note == ("lra.sweep: --executor local without --gpus-per-task runs every cell on the "
                    "CPU, all 12 at once (submitit hides the GPUs from its tasks: "
                    "CUDA_VISIBLE_DEVICES=''); 2 GPUs found here (nvidia-smi -L): "
                    "--gpus-per-task 1 gives each cell one of them")
    args = _local("--gpus-per-task", "1", "--tasks-per-gpu", "3")
    assert cluster.placement_note(args, cluster.local_slots(args), 12) == (
        "lra.sweep: 12 cells on GPUs 0,1 (nvidia-smi -L): 6 at a time, 1 GPU each, 3 tasks per "
        "GPU with XLA_PYTHON_CLIENT_MEM_FRACTION=0.30")
