"""What lra.run promises about its result record, its data and its signals (issues 23 and 25).

* The record's format version 2: ``format_version``, ``overrides`` and ``data.fingerprint``.
* A resume against other data is refused with one line; ``--force`` starts over.
* A signal at any stage (set-up, compilation, training, evaluation, saving) ends with exit status
  75 and a work directory from which the same command finishes with an uninterrupted run's result.

Each test says whether it fails on main 9185bb1 (before these changes).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import cli_env

import tasks
from lra import run as run_cli

SIZES = {"train_size": 128, "val_size": 32, "test_size": 32}
DATA = [x for k, v in SIZES.items() for x in ("--set", f"data.{k}={v}")]
TINY_OPTIONS = {"min_length": 5, "max_length": 40, "max_depth": 3, **SIZES}
STEPS = ["--set", "train.num_steps=6", "--set", "train.eval_every=3",
         "--set", "train.checkpoint_every=2", "--set", "train.log_every=1"]


def _args(data: Path, work: Path, res: Path, *extra: str) -> list[str]:
    return ["--task", "listops", "--attn", "softmax", "--preset", "tiny", "--data-dir", str(data),
            "--workdir", str(work), "--results-dir", str(res), "--no-progress",
            "--xla-cpu-fusions", "on", *DATA, *STEPS, *extra]


def _run(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = run_cli.main(list(args))
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("contract") / "data"
    with contextlib.redirect_stderr(io.StringIO()):
        tasks.build("listops", path, **TINY_OPTIONS).prepare()
    return path


@pytest.fixture(scope="module")
def reference(data) -> dict:
    """One uninterrupted run (in this process): its result record."""
    work = data.parent / "reference"
    code, _, err = _run(*_args(data, work, data.parent / "results"))
    assert code == 0, err[-3000:]
    return json.loads((work / "result.json").read_text())


@pytest.mark.slow
def test_result_record_has_format_version_overrides_and_fingerprint(reference, data):
    """Fails on main: no format_version, no overrides (lra.run did not pass --set down), no
    data.fingerprint, and result_file was relative to the working directory."""
    assert reference["format_version"] == 2
    assert reference["overrides"] == {"data.test_size": 32, "data.train_size": 128,
                                      "data.val_size": 32, "train.checkpoint_every": 2,
                                      "train.eval_every": 3, "train.log_every": 1,
                                      "train.num_steps": 6}
    fp = reference["data"]["fingerprint"]
    assert set(fp) == {"sha256", "files", "generator"}
    assert fp["generator"] == reference["data"]["generator"] and fp["generator"]["seed"] == 0
    assert sorted(fp["files"]) == sorted(reference["data"]["files"].values())
    for name, entry in fp["files"].items():
        assert entry["bytes"] == (data / name).stat().st_size and len(entry["sha256"]) == 64
    assert Path(reference["result_file"]).is_absolute()
    on_disk = json.loads(Path(reference["result_file"]).read_text())
    assert on_disk["overrides"] == reference["overrides"] and on_disk["format_version"] == 2
    assert (data / ".lra-fingerprints.json").is_file()  # the hash cache


def _reference_on_other_data(reference, data, tmp_path):
    """A copy of the reference run's work directory (completed) and a copy of its data in which one
    training file has other bytes of the same size (same generator and options): (data folder,
    work directory, the changed file's name)."""
    other = tmp_path / "data"
    shutil.copytree(data, other)
    work = tmp_path / "w"
    shutil.copytree(Path(reference["result_file"]).parents[2] / "reference", work)
    (work / "lock").unlink()
    fp = reference["data"]["fingerprint"]
    name = next(n for n in fp["files"] if n.endswith("train.tsv"))
    lines = (other / name).read_bytes().splitlines(keepends=True)
    lines[1], lines[2] = lines[2], lines[1]  # same size, other bytes
    (other / name).write_bytes(b"".join(lines))
    return other, work, name


@pytest.mark.slow
def test_resume_against_other_data_is_refused_in_one_line(reference, data, tmp_path):
    """Fails on main: the resume went on silently on the changed file."""
    other, work, name = _reference_on_other_data(reference, data, tmp_path)
    (work / "result.json").unlink()
    args = _args(other, work, tmp_path / "results")
    code, _, err = _run(*args)
    assert code == 1, err[-3000:]
    errors = [x for x in err.splitlines() if x.startswith("error:")]
    assert len(errors) == 1 and "Traceback" not in err
    assert "other data" in errors[0] and name in errors[0] and "sha256" in errors[0]
    assert "--force" in errors[0]
    code, _, err = _run(*args, "--force")
    assert code == 0, err[-3000:]


@pytest.mark.slow
def test_completed_run_against_other_data_is_refused_in_one_line(reference, data, tmp_path):
    """Fails on 040ea93: re-running a completed work directory reported its existing result
    without comparing the data present now with the data the run was made on."""
    other, work, name = _reference_on_other_data(reference, data, tmp_path)
    args = _args(other, work, tmp_path / "results")
    code, out, err = _run(*args)
    assert code == 1, err[-3000:]
    errors = [x for x in err.splitlines() if x.startswith("error:")]
    assert len(errors) == 1 and "Traceback" not in err and "existing result" not in out
    assert "other data" in errors[0] and name in errors[0] and "sha256" in errors[0]
    assert "--force" in errors[0] and str(work) in errors[0]
    assert not (tmp_path / "results").exists()  # nothing written for the other data
    # the same data as the run's: the existing run is reported, its result file copied into this
    # results folder (and said so: nothing is trained, but a file is written)
    code, out, err = _run(*_args(data, work, tmp_path / "results"))
    assert code == 0 and "existing run, its result file written now (nothing trained)" in out, \
        err[-3000:]


def test_force_moves_every_file_of_the_earlier_run_aside(reference, tmp_path):
    """Fails on main: tensorboard/ and sweep.log stayed behind."""
    work = tmp_path / "w"
    shutil.copytree(Path(reference["result_file"]).parents[2] / "reference", work)
    (work / "lock").unlink()
    (work / "sweep.log").write_text("== an earlier sweep\n")
    assert (work / "tensorboard").is_dir()
    from lra import workdir

    moved = workdir.move_aside(work)
    assert sorted(p.name for p in work.iterdir()) == [moved.name]
    assert {"checkpoints", "result.json", "metrics.jsonl", "tensorboard", "sweep.log"} <= {
        p.name for p in moved.iterdir()}


def test_existing_run_with_another_results_dir_copies_its_result_there(reference, tmp_path):
    """Fails on main: the re-run reported "existing result" and wrote nothing under the new
    --results-dir, so a sweep pointed there counted the cell done with nothing in it."""
    work = Path(reference["result_file"]).parents[2] / "reference"
    fresh = tmp_path / "fresh"
    code, out, _ = _run(*_args(work.parent / "data", work, fresh))
    assert code == 0
    copied = list((fresh / "runs").glob("*.json"))
    assert len(copied) == 1 and copied[0].name == Path(reference["result_file"]).name
    assert f"result: {copied[0]}" in out
    assert json.loads(copied[0].read_text())["metrics"] == reference["metrics"]


@pytest.mark.slow
def test_disk_full_during_a_checkpoint_save_is_one_line(data, tmp_path, monkeypatch):
    """Fails on main: tensorstore's RESOURCE_EXHAUSTED for a full disk was reported as out of
    memory with batch-size advice. ENOSPC is faked in-process: the second save raises what orbax
    raises (a wrapped error whose text names errno 28)."""
    from lra import checkpoint

    real, calls = checkpoint.Checkpoints.save, []

    def save(self, which, step, state, meta):
        calls.append(step)
        if which == "last" and step > 2:
            try:
                raise OSError(28, "No space left on device")
            except OSError as err:
                raise ValueError("RESOURCE_EXHAUSTED: Error writing local file "
                                 f"{self.root}/last/{step}/state: [OS error 28]") from err
        return real(self, which, step, state, meta)

    monkeypatch.setattr(checkpoint.Checkpoints, "save", save)
    work = tmp_path / "w"
    code, _, err = _run(*_args(data, work, tmp_path / "results"))
    monkeypatch.undo()
    assert code == 1, err[-3000:]
    errors = [x for x in err.splitlines() if x.startswith("error:")]
    assert len(errors) == 1 and "out of memory" not in err and "Traceback" not in err
    assert f"disk full while saving checkpoint to {work / 'checkpoints'}" in errors[0]
    assert len(err.strip().splitlines()) <= 3, err  # data, xla:cpu fusions, the error
    assert checkpoint.Checkpoints(work).newest_verified("last")[0] == 2  # the last good one


@pytest.fixture
def small_disk(tmp_path):
    """A 3 MiB tmpfs (root only, where mounting is allowed); skipped elsewhere."""
    if os.geteuid() != 0 or not shutil.which("mount"):
        pytest.skip("a real full disk needs root to mount a small tmpfs")
    where = tmp_path / "disk"
    where.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=3M", "tmpfs", str(where)],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    yield where
    subprocess.run(["umount", "-l", str(where)], capture_output=True)


@pytest.mark.slow
def test_a_real_full_disk_during_a_save_is_a_few_lines(data, small_disk):
    """Fails on 040ea93: orbax's background writers logged each failure through absl with its
    traceback (5 tracebacks, about 350 lines here; over a thousand on a larger model) before
    lra.run's own line, and left writer threads that failed again at interpreter shutdown. The
    disk fills once the first checkpoint (step 2) is verified."""
    import time

    from lra import checkpoint

    work = small_disk / "w"
    args = _args(data, work, small_disk / "results")
    args[args.index("train.num_steps=6")] = "train.num_steps=3000"
    args[args.index("train.eval_every=3")] = "train.eval_every=100000"
    proc = subprocess.Popen([sys.executable, "-m", "lra.run", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=cli_env(1))
    deadline = time.time() + 300
    verified = work / "checkpoints" / "checksums" / "last-2.sha256"
    while not verified.is_file() and time.time() < deadline and proc.poll() is None:
        time.sleep(0.02)
    # unbuffered: a buffered file would flush its last part again at close, on the full disk
    with open(small_disk / "filler", "wb", buffering=0) as f:
        with contextlib.suppress(OSError):
            while True:
                f.write(b"\0" * 65536)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 1, err[-3000:]
    lines = err.strip().splitlines()
    assert "Traceback" not in err and len(lines) <= 3, err[-3000:]
    # the save fails in orbax's background writers or in its synchronous part: either way, one line
    assert lines[-1].startswith("error: disk full") and f"{work / 'checkpoints'}" in lines[-1]
    assert "no space left on device" in lines[-1].lower() and "kept" in lines[-1]
    (small_disk / "filler").unlink()
    assert checkpoint.Checkpoints(work).newest_verified("last")[0] >= 2


def _compiling(stage: str) -> dict[str, str]:
    """A signal "while XLA compiles" needs a real compilation, not the test session's cache hit."""
    return {"JAX_ENABLE_COMPILATION_CACHE": "false"} if stage == "compile" else {}


@pytest.mark.slow
@pytest.mark.parametrize("stage", ["setup", "compile", "train", "eval", "save"])
@pytest.mark.parametrize("signame", ["SIGTERM"])
def test_a_signal_at_any_stage_exits_75_and_the_rerun_finishes_like_an_uninterrupted_run(
        reference, data, tmp_path, stage, signame):
    """Fails on main: exit status 0 (SIGTERM) instead of 75, and a signal during compilation
    raised out of XLA's compilation (a segmentation fault in most tries)."""
    cmd = [sys.executable, "-m", "lra.run", *_args(data, tmp_path / "w", tmp_path / "results")]
    stopped = subprocess.run(cmd, capture_output=True, text=True, timeout=300,
                             env=cli_env(1, LRA_TEST_SIGNAL_AT=f"{stage}:{signame}", **_compiling(stage)))
    assert stopped.returncode == 75, stopped.stderr[-3000:]
    assert "Traceback" not in stopped.stderr and f"{signame}: " in stopped.stderr
    assert not (tmp_path / "w" / "result.json").exists()
    again = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=cli_env(1))
    assert again.returncode == 0, again.stderr[-3000:]
    record = json.loads((tmp_path / "w" / "result.json").read_text())
    assert record["metrics"]["params_sha256"] == reference["metrics"]["params_sha256"]
    assert record["metrics"]["test_accuracy_at_last"] == reference["metrics"]["test_accuracy_at_last"]
    steps = [r["step"] for r in map(json.loads, (tmp_path / "w" / "metrics.jsonl").read_text()
                                    .splitlines()) if r.get("split") == "train"]
    assert steps == list(range(1, 7))  # no step lost or repeated in the log


@pytest.mark.slow
@pytest.mark.parametrize("stage", ["eval", "finish", "result"])
def test_a_signal_after_the_last_step_is_honoured_or_said(reference, data, tmp_path, stage):
    """Issue 41: a signal during the last validation was swallowed: the run finished and exited 0
    with nothing said. Now a signal up to the result's writes stops the run (the last step's
    checkpoint saved, exit 75; the re-run tests it and writes the result as an uninterrupted run
    would), and one during the writes (milliseconds) is said in one line after them (exit 0: the
    run has completed). Validation only at the last step here, so that "eval" is its validation.
    Fails on a05bdf0 for each stage: exit 0 and no line ("finish" and "result" are new stages)."""
    args = _args(data, tmp_path / "w", tmp_path / "results")
    args[args.index("train.eval_every=3")] = "train.eval_every=6"
    cmd = [sys.executable, "-m", "lra.run", *args]
    stopped = subprocess.run(cmd, capture_output=True, text=True, timeout=300,
                             env=cli_env(1, LRA_TEST_SIGNAL_AT=f"{stage}:SIGTERM"))
    lines = stopped.stderr.strip().splitlines()
    assert "Traceback" not in stopped.stderr
    if stage == "result":
        assert stopped.returncode == 0, stopped.stderr[-3000:]
        assert lines[-1] == ("SIGTERM came while the result was being written: the run has "
                             "completed and its result is written; nothing is left to resume")
    else:
        assert stopped.returncode == 75, stopped.stderr[-3000:]
        assert not (tmp_path / "w" / "result.json").exists()
        assert not list((tmp_path / "results").glob("runs/*.json"))
        expected = ("SIGTERM: checkpoint saved at step 6" if stage == "eval" else
                    "SIGTERM: stopped before the result was written; the checkpoint of the last "
                    "step (6) is saved")
        assert lines[-1].startswith(expected), lines[-3:]
        again = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=cli_env(1))
        assert again.returncode == 0, again.stderr[-3000:]
        assert "resuming from step 6" in again.stderr
    record = json.loads((tmp_path / "w" / "result.json").read_text())
    assert record["metrics"]["params_sha256"] == reference["metrics"]["params_sha256"]
    assert record["metrics"]["test_accuracy_at_last"] == reference["metrics"]["test_accuracy_at_last"]
    assert len(list((tmp_path / "results").glob("runs/*.json"))) == 1


@pytest.mark.slow
@pytest.mark.parametrize("signame", ["SIGTERM", "SIGINT"])
def test_a_signal_while_the_modules_load_exits_75_and_the_rerun_finishes(data, tmp_path, signame):
    """Fails on 040ea93: lra.run imported JAX and every family at module level, before main
    installed the handler, so a signal then killed the process (-15 for SIGTERM; SIGINT: a
    KeyboardInterrupt traceback). The hook sends the signal 50 ms after main starts, while the
    families load; on 040ea93 there was no such stage and the run was not stopped at all."""
    cmd = [sys.executable, "-m", "lra.run", *_args(data, tmp_path / "w", tmp_path / "results")]
    stopped = subprocess.run(cmd, capture_output=True, text=True, timeout=300,
                             env=cli_env(1, LRA_TEST_SIGNAL_AT=f"import:{signame}"))
    assert stopped.returncode == 75, stopped.stderr[-3000:]
    lines = stopped.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"{signame}: stopped while starting"), lines
    assert not (tmp_path / "w").exists()  # nothing read, nothing written
    if signame == "SIGINT":
        return  # the same stop as SIGTERM's, which the re-run below follows (a fresh run)
    again = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=cli_env(1))
    assert again.returncode == 0, again.stderr[-3000:]
    assert (tmp_path / "w" / "result.json").is_file()


@pytest.mark.slow
@pytest.mark.parametrize("signame", ["SIGINT", "SIGUSR2"])
def test_sigint_and_sigusr2_in_training_exit_75(reference, data, tmp_path, signame):
    """Fails on main: SIGINT exited 130 and SIGUSR2 killed the run."""
    cmd = [sys.executable, "-m", "lra.run", *_args(data, tmp_path / "w", tmp_path / "results")]
    stopped = subprocess.run(cmd, capture_output=True, text=True, timeout=300,
                             env=cli_env(1, LRA_TEST_SIGNAL_AT=f"train:{signame}"))
    assert stopped.returncode == 75, stopped.stderr[-3000:]
    assert f"{signame}: checkpoint saved at step 1" in stopped.stderr


def test_data_prepare_and_reproduce_name_a_path_that_is_a_file(tmp_path, capsys):
    """Fails on main: lra.data prepare generated for minutes and then failed "Not a directory";
    lra.reproduce reported "no result yet" for a --results-dir that is a file."""
    from lra import data as data_cli
    from lra import reproduce

    path = tmp_path / "a-file"
    path.write_text("x")
    assert data_cli.main(["prepare", "--task", "listops", "--data-dir", str(path / "sub")]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--data-dir" in err and "is a file" in err
    assert reproduce.main(["lra/softmax/listops", "--preset", "tiny", "--seeds", "0",
                           "--results-dir", str(path), "--no-run"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--results-dir" in err and "a-file is a file" in err


@pytest.mark.slow
def test_a_rerun_from_another_working_directory_finds_the_same_result(data, tmp_path, monkeypatch):
    """Fails on main: result.json named its result file relative to the first run's working
    directory, so the re-run from elsewhere wrote a second file under a folder never named."""
    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir()
    second.mkdir()
    monkeypatch.chdir(first)
    code, _, err = _run(*_args(data, Path("w"), Path("res")))
    assert code == 0, err[-3000:]
    named = json.loads((first / "w" / "result.json").read_text())["result_file"]
    assert Path(named).is_absolute() and Path(named).is_file()
    monkeypatch.chdir(second)
    code, out, _ = _run(*_args(data, first / "w", first / "res"))
    assert code == 0 and f"result: {named}" in out
    assert not any(second.rglob("*.json")) and len(list((first / "res" / "runs").iterdir())) == 1
