"""Fault injection: every way issue 11 found to publish a wrong result or crash with a traceback.

Bad values, empty or short splits, re-runs, corrupt and damaged checkpoints, a second run on a
locked work directory, SIGINT, disk full (a write that raises ENOSPC), unwritable or misplaced
paths, incomplete official folders, a killed ListOps generation, fetch-release's checks and the
leaderboard's loading. Runs are in-process where no real process is involved (one shared tiny
ListOps data set and one finished run), real subprocesses for kill, lock and SIGINT.
"""

from __future__ import annotations

import builtins
import contextlib
import errno
import http.server
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import ClassVar

import pytest
from helpers import cli_env, full_disk, wait_until_training

import tasks
from lra import leaderboard, release
from lra import run as run_cli

SIZES = {"train_size": 128, "val_size": 32, "test_size": 32}
DATA = [x for k, v in SIZES.items() for x in ("--set", f"data.{k}={v}")]
# Subprocesses write every compile to the persistent cache (compile_once below sets its folder).
CACHE_EVERY_COMPILE = {"JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0"}
TINY_OPTIONS = {"min_length": 5, "max_length": 40, "max_depth": 3, **SIZES}
# LRA's ListOps data defaults, spelled out as overrides (the issue's $D).
PAPER_DATA = [x for k, v in {"min_length": 500, "max_length": 2000, "max_depth": 10,
                             "max_args": 10, "train_size": 96000, "val_size": 2000,
                             "test_size": 2000}.items() for x in ("--set", f"data.{k}={v}")]


def _args(data: Path, work: Path, results: Path, *extra: str, task: str = "listops") -> list[str]:
    return ["--task", task, "--attn", "softmax", "--preset", "tiny", "--data-dir", str(data),
            "--workdir", str(work), "--results-dir", str(results), "--no-progress",
            *(DATA if task == "listops" else []), *extra]


def _run(*args: str) -> tuple[int, str, str]:
    """run_cli.main in this process -> (exit status, stdout, stderr); a traceback fails the test."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = run_cli.main(list(args))
    return code, out.getvalue(), err.getvalue()


def _one_line_error(err: str) -> None:
    lines = [x for x in err.splitlines() if x.startswith("error:")]
    assert len(lines) == 1 and "Traceback" not in err, err[-3000:]


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("fi")
    with contextlib.redirect_stderr(io.StringIO()):
        tasks.build("listops", path / "data", **TINY_OPTIONS).prepare()
    return path


@pytest.fixture(scope="module", autouse=True)
def compile_once(tmp_path_factory):
    """The runs here compile the same few programs: JAX's persistent cache compiles them once
    (in this process and in the subprocesses, through JAX_COMPILATION_CACHE_DIR)."""
    import jax

    cache = str(tmp_path_factory.mktemp("jax-cache"))
    keys = ("jax_compilation_cache_dir", "jax_persistent_cache_min_compile_time_secs",
            "jax_persistent_cache_min_entry_size_bytes")
    before = {k: getattr(jax.config, k) for k in keys}
    for key, value in zip(keys, (cache, 0.0, 0)):
        jax.config.update(key, value)
    session_cache = os.environ.get("JAX_COMPILATION_CACHE_DIR")  # conftest.py's, removed at the end
    os.environ["JAX_COMPILATION_CACHE_DIR"] = cache
    yield
    if session_cache is None:
        os.environ.pop("JAX_COMPILATION_CACHE_DIR")
    else:
        os.environ["JAX_COMPILATION_CACHE_DIR"] = session_cache
    for key, value in before.items():
        jax.config.update(key, value)
    from jax.experimental.compilation_cache import compilation_cache

    compilation_cache.reset_cache()  # the other modules compile as they would alone


@pytest.fixture(scope="module")
def finished(base) -> tuple[Path, Path, str]:
    """One completed tiny run: (its work directory, its results directory, its stderr)."""
    code, _, err = _run(*_args(base / "data", base / "done", base / "results"))
    assert code == 0, err[-3000:]
    return base / "done", base / "results", err


def _copy_resumable(finished, dest: Path) -> Path:
    """A copy of the finished work directory as a run killed after its last save would leave it."""
    shutil.copytree(finished[0], dest)
    (dest / "result.json").unlink()
    (dest / "lock").unlink()
    return dest


# ----------------------------------------------------------------------------------------------
# Bug 8 (and bug 2): every value is checked when the config is resolved, also by --print-config.


@pytest.mark.parametrize("extra", [
    ["--set", "model.num_heads=0"], ["--set", "train.grad_accum=0"],
    ["--set", "train.grad_accum=-1"], ["--set", "model.emb_dim=0"],
    ["--set", "data.max_length=0"], ["--set", "data.train_size=-1"],
    ["--set", "attn.query_chunk=-3"], ["--seed", "-1"], ["--seed", "99999999999999999999"],
    ["--set", "model.num_layers=-1"], ["--set", "model.dropout=2.5"], ["--set", "train.lr=-1"],
    ["--set", "train.b2=1.5"], ["--set", "train.eval_batches=-1"],
])
def test_bad_value_exits_2_naming_key_and_value(extra):
    code, _, err = _run("--task", "listops", "--attn", "softmax", "--preset", "tiny", *extra,
                        "--print-config")
    assert code == 2, err
    _one_line_error(err)
    key = extra[1].split("=")[0] if extra[0] == "--set" else "seed"
    value = extra[1].split("=")[1] if extra[0] == "--set" else extra[1]
    assert value in err and (key in err or key.split(".")[1] in err), err


def test_bad_attention_option_value_exits_2():
    code, _, err = _run("--task", "listops", "--attn", "performer", "--set", "attn.kernel=foo",
                        "--print-config")
    assert code == 2 and "foo" in err and "softmax" in err and "relu" in err
    _one_line_error(err)


# ----------------------------------------------------------------------------------------------
# Bug 1: empty or too-short splits stop the run before step 1 (exit 1, naming the file/folder).


@pytest.mark.parametrize("split", ["train", "val"])
def test_header_only_split_file_is_refused(base, tmp_path, split):
    data = tmp_path / "data"
    shutil.copytree(base / "data", data)
    folder = tasks.build("listops", data, **TINY_OPTIONS).directory
    (folder / f"basic_{split}.tsv").write_text("Source\tTarget\r\n")
    code, _, err = _run(*_args(data, tmp_path / "w", tmp_path / "results"))
    assert code == 1
    _one_line_error(err)
    assert str(folder / f"basic_{split}.tsv") in err and "0 examples" in err
    assert not (tmp_path / "results" / "runs").exists() or not any(
        (tmp_path / "results" / "runs").iterdir())
    assert not (tmp_path / "w" / "checkpoints").exists()


def test_empty_retrieval_eval_file_is_refused(tmp_path):
    folder = tmp_path / "data" / "tsv_data"
    folder.mkdir(parents=True)
    row = b"1\tA\tB\tfirst document\tsecond document\n0\tC\tD\tthird\tfourth\n"
    (folder / "new_aan_pairs.train.tsv").write_bytes(row * 8)
    (folder / "new_aan_pairs.test.tsv").write_bytes(row * 8)
    (folder / "new_aan_pairs.eval.tsv").write_bytes(b"")
    code, _, err = _run(*_args(tmp_path / "data", tmp_path / "w", tmp_path / "results",
                               "--set", "data.train_size=0", "--set", "data.val_size=0",
                               "--set", "data.test_size=0", task="retrieval"))
    assert code == 1, err[-2000:]
    _one_line_error(err)
    assert "new_aan_pairs.eval.tsv" in err and "0 examples" in err


def test_short_official_pathfinder_folder_is_refused(tmp_path):
    from tasks import pathfinder

    root = tmp_path / "data" / "pathfinder32"
    with contextlib.redirect_stderr(io.StringIO()):
        folder = pathfinder.generate(root, resolution=32, difficulty="hard", num_images=5,
                                     workers=1)
    (Path(folder) / "generator.json").unlink()  # now it looks like the archive's folder
    code, _, err = _run(*_args(tmp_path / "data", tmp_path / "w", tmp_path / "results",
                               task="pathfinder"))
    assert code == 1, err[-2000:]
    _one_line_error(err)
    assert str(folder) in err and "asks for" in err


# ----------------------------------------------------------------------------------------------
# Bug 3: one result per (work directory, completed run); provenance in the result file.


@pytest.mark.slow
def test_rerun_reports_the_existing_result_and_writes_nothing(finished, tmp_path):
    work, results, _ = finished
    before = sorted((results / "runs").iterdir())
    code, out, err = _run(*_args(work.parent / "data", work, results))
    assert code == 0 and "existing result" in out and "completed run" in err
    assert sorted((results / "runs").iterdir()) == before and len(before) == 1
    code, _, err = _run(*_args(work.parent / "data", work, results, "--set", "train.lr=0.01"))
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
        code, out, _ = _run(*_args(finished[0].parent / "data", work, tmp_path / "results"))
        assert code == 0 and f"{said}: {lost}" in out
    assert json.loads(lost.read_text())["metrics"] == record["metrics"]
    assert os.listdir(lost.parent) == ["lost.json"]


@pytest.mark.slow
def test_force_trains_again_and_keeps_the_earlier_run(finished, tmp_path):
    work = tmp_path / "forced"
    shutil.copytree(finished[0], work)
    (work / "lock").unlink()
    results = tmp_path / "results"
    code, _, err = _run(*_args(finished[0].parent / "data", work, results, "--force"))
    assert code == 0, err[-2000:]
    assert "resuming" not in err and len(list((results / "runs").iterdir())) == 1
    assert len(list(work.glob("previous-*/result.json"))) == 1


def test_result_file_records_data_provenance(finished):
    _, results, err = finished
    record = json.loads(next((results / "runs").iterdir()).read_text())
    data = record["data"]
    assert data["folder"] == "listops/min5_max40_depth3_train128_val32_test32"
    assert data["origin"] == "generated" and data["generator"]["seed"] == 0
    assert data["generator"]["version"] >= 1
    assert data["examples"] == {"train": 128, "val": 32, "test": 32}
    assert data["evaluated"] == {"val": 32, "test_at_best_val": 32, "test_at_last": 32}
    first = [x for x in err.splitlines() if x.startswith("data: ")]
    assert first and "train 128, val 32, test 32" in first[0] and "seed 0" in first[0]


@pytest.mark.slow
def test_tiny_preset_says_why_it_does_not_read_an_official_listops_folder(base, tmp_path):
    data = tmp_path / "data"
    shutil.copytree(base / "data", data)
    official = data / "listops-1000"
    official.mkdir()
    for path in tasks.build("listops", data, **TINY_OPTIONS).directory.glob("*.tsv"):
        shutil.copy(path, official / path.name)
    notes = tasks.build("listops", data, **TINY_OPTIONS).provenance().notes
    assert len(notes) == 1 and str(official) in notes[0] and "max_length=40" in notes[0]
    code, _, err = _run(*_args(data, tmp_path / "w", tmp_path / "results"))
    assert code == 0 and f"note: {notes[0]}" in err
    record = json.loads((tmp_path / "w" / "result.json").read_text())
    assert record["data"]["origin"] == "generated"


# ----------------------------------------------------------------------------------------------
# Bugs 4 and 6, deleted checkpoints: only a verified checkpoint is resumed.


def _largest_file(folder: Path) -> Path:
    return max((p for p in folder.rglob("*") if p.is_file()), key=lambda p: p.stat().st_size)


@pytest.mark.slow
def test_corrupt_last_checkpoint_falls_back_to_the_newest_verified(finished, tmp_path):
    work = _copy_resumable(finished, tmp_path / "w")
    steps = sorted(int(p.name) for p in (work / "checkpoints" / "last").iterdir())
    assert steps == [10, 20]
    victim = _largest_file(work / "checkpoints" / "last" / "20" / "state")
    data = bytearray(victim.read_bytes())
    data[len(data) // 2] ^= 0xFF
    victim.write_bytes(bytes(data))
    code, _, err = _run(*_args(finished[0].parent / "data", work, tmp_path / "results"))
    assert code == 0, err[-3000:]
    assert "not resuming from" in err and "last/20" in err and "resuming from step 10" in err
    assert (work / "checkpoints" / "rejected" / "last-20").is_dir()  # kept for a look
    a = json.loads((finished[0] / "result.json").read_text())["metrics"]
    b = json.loads((work / "result.json").read_text())["metrics"]
    assert a["params_sha256"] == b["params_sha256"]


@pytest.mark.parametrize("damage", ["truncate metadata", "delete state", "truncate data"])
def test_damaged_checkpoints_refuse_with_one_line(finished, tmp_path, damage):
    work = _copy_resumable(finished, tmp_path / "w")
    for step in (work / "checkpoints" / "last").iterdir():
        if damage == "delete state":
            shutil.rmtree(step / "state")
        elif damage == "truncate metadata":
            meta = next(p for p in step.rglob("*metadata*") if p.is_file())
            meta.write_bytes(meta.read_bytes()[:5])
        else:
            victim = _largest_file(step / "state")
            victim.write_bytes(victim.read_bytes()[:7])
    code, _, err = _run(*_args(finished[0].parent / "data", work, tmp_path / "results"))
    assert code == 1
    _one_line_error(err)
    assert "delete" in err and str(work / "checkpoints") in err


@pytest.mark.slow
def test_deleted_last_checkpoints_are_reported(finished, tmp_path):
    work = _copy_resumable(finished, tmp_path / "w")
    shutil.rmtree(work / "checkpoints" / "last")
    code, _, err = _run(*_args(finished[0].parent / "data", work, tmp_path / "results"))
    assert code == 0, err[-3000:]
    assert "no longer holds the checkpoints" in err and "from step 0" in err


@pytest.mark.slow
def test_a_run_resumed_under_other_code_says_so_and_records_both(finished, tmp_path, monkeypatch):
    """Fails on fcb2559: the result file named only the last session's commit, as if the whole run
    had trained under it."""
    from lra import results

    before = json.loads((finished[0] / "result.json").read_text())["git"]
    assert "sessions" not in before  # one session: the record is as it always was
    work = _copy_resumable(finished, tmp_path / "w")
    resumed_at = max(int(p.name) for p in (work / "checkpoints" / "last").iterdir()
                     if p.name.isdigit())
    other = {"commit": "f" * 40, "dirty": False}
    monkeypatch.setattr(results, "git_commit", lambda: other)
    code, _, err = _run(*_args(finished[0].parent / "data", work, tmp_path / "results"))
    assert code == 0, err[-3000:]
    assert f"steps before {resumed_at} ran under commit {before['commit'][:12]}" in err
    assert "this session runs ffffffffffff" in err
    git = json.loads((work / "result.json").read_text())["git"]
    assert git["commit"] == other["commit"] and git["dirty"] == before["dirty"]
    assert git["sessions"] == [
        {"from_step": 0, "commit": before["commit"], "dirty": before["dirty"]},
        {"from_step": resumed_at, "commit": other["commit"], "dirty": False}]


# ----------------------------------------------------------------------------------------------
# Bug 5 and SIGINT: a locked work directory; Ctrl-C saves like SIGTERM.


@pytest.mark.slow
def test_second_run_is_locked_out_and_sigint_saves_a_checkpoint_and_exits_75(base, tmp_path):
    """Ctrl-C checkpoints and exits 75 like SIGTERM (resumable; issue 25). Fails on main (130)."""
    work = tmp_path / "w"
    cmd = [sys.executable, "-m", "lra.run",
           *_args(base / "data", work, tmp_path / "results", "--set", "train.num_steps=100000",
                  "--set", "train.checkpoint_every=100000", "--set", "train.eval_every=100000",
                  "--set", "train.log_every=1")]
    first = subprocess.Popen(cmd, env=cli_env(**CACHE_EVERY_COMPILE), stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, text=True)
    try:
        wait_until_training(work)
        second = subprocess.run(cmd, env=cli_env(**CACHE_EVERY_COMPILE), capture_output=True, text=True,
                                timeout=60)
        assert second.returncode == 2
        _one_line_error(second.stderr)
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


# ----------------------------------------------------------------------------------------------
# Bug 7 and the paths: disk full, permission denied, a file where a folder should be.


class _FullDisk(io.StringIO):
    def write(self, text):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


class _FullDiskAfter(io.StringIO):
    """A metrics.jsonl append that fails with ENOSPC for records after ``step``."""

    def __init__(self, real, step):
        super().__init__()
        self.real, self.step = real, step

    def write(self, text):
        if json.loads(text).get("step", 0) > self.step:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return self.real.write(text)

    def close(self):
        self.real.close()
        super().close()


@pytest.mark.slow
def test_disk_full_is_one_line_and_keeps_the_checkpoint(base, tmp_path, monkeypatch):
    work = tmp_path / "w"
    real_open = builtins.open

    def open_(file, mode="r", *args, **kwargs):  # the disk fills up after step 10's save
        if Path(str(file)) == work / "metrics.jsonl" and "a" in mode:
            return _FullDiskAfter(real_open(file, mode, *args, **kwargs), step=10)
        return real_open(file, mode, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", open_)
    code, _, err = _run(*_args(base / "data", work, tmp_path / "results",
                               "--set", "train.log_every=5"))
    monkeypatch.undo()
    assert code == 1
    _one_line_error(err)
    assert "disk full" in err and str(work / "checkpoints") in err
    from lra.checkpoint import Checkpoints

    assert Checkpoints(work).newest_verified("last")[0] == 10


@pytest.mark.slow
@pytest.mark.parametrize("saves", ["fast", "slow"])
def test_a_disk_full_before_a_checksum_resumes_from_the_verified_checkpoint_and_says_so(
        base, tmp_path, monkeypatch, saves):
    """The disk fills up once step 10's checkpoint is saved, before its checksum file is written:
    step 10 is on disk but unverified, and the rerun resumes from step 5 (verified). "slow": each
    save still under way when the next one starts (its checksum written only then), which a
    loaded machine gave in about 1 run of 6.

    Fails on 7162751: it said step 10's "save did not complete" (it had: only its checksum was
    missing) and not which checkpoint was used instead; with slow saves, step 15 was saved before
    step 10's checksum failed, which pushed step 5 out (two kept), and the rerun found no
    checkpoint that verifies ("delete checkpoints to start over from step 0")."""
    from lra.checkpoint import Checkpoints

    work = tmp_path / "w"
    sums = work / "checkpoints" / "checksums"
    real, real_save, real_record = Path.write_text, Checkpoints.save, Checkpoints.record_checksums

    def write_text(self, *args, **kwargs):  # a full disk stays full: every checksum from step 10
        if self.parent == sums and int(self.name.split("-")[1].split(".")[0]) >= 10:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(self, *args, **kwargs)

    def save(self, *args, **kwargs):
        self.saving = True
        try:
            real_save(self, *args, **kwargs)
        finally:
            self.saving = False

    def record_checksums(self):  # slow saves: not done at the step boundaries
        if getattr(self, "saving", False):
            real_record(self)

    monkeypatch.setattr(Path, "write_text", write_text)
    if saves == "slow":
        monkeypatch.setattr(Checkpoints, "save", save)
        monkeypatch.setattr(Checkpoints, "record_checksums", record_checksums)
    args = _args(base / "data", work, tmp_path / "results", "--set", "train.checkpoint_every=5")
    code, _, err = _run(*args)
    monkeypatch.undo()
    assert code == 1
    _one_line_error(err)
    assert "disk full" in err and str(work / "checkpoints") in err
    assert sorted(int(p.name) for p in (work / "checkpoints" / "last").iterdir()) == [5, 10]
    assert not (sums / "last-10.sha256").exists()
    code, _, err = _run(*args)
    assert code == 0, err[-3000:]
    [line] = [x for x in err.splitlines() if x.startswith("warning:")]
    assert line == (f"warning: not resuming from {work / 'checkpoints' / 'last' / '10'}: no checksum "
                    f"was recorded for it (its save, or the checksum written after it, did not "
                    f"complete: killed, or the disk was full); moved to "
                    f"{work / 'checkpoints' / 'rejected'} (kept, not used); resuming from the "
                    f"verified checkpoint of step 5 instead")
    assert f"resuming from step 5 in {work} (checkpoint verified)" in err
    assert (work / "checkpoints" / "rejected" / "last-10").is_dir()


def test_a_results_dir_on_a_real_full_disk_fails_before_step_1_naming_it(base, tmp_path):
    """Issue 41: the start-up probe created an empty file, which takes no block, so a results
    folder on a full disk passed it; the run trained and then failed writing its result, with a
    message naming no path. Fails on a05bdf0 (trained: metrics.jsonl written; "disk full: No
    space left on device" without the folder)."""
    with full_disk(tmp_path / "disk", keep=("results/runs",)) as disk:
        code, _, err = _run(*_args(base / "data", tmp_path / "w", disk / "results"))
    assert code == 1
    _one_line_error(err)
    assert "disk full" in err and str(disk / "results" / "runs") in err
    assert not (tmp_path / "w" / "metrics.jsonl").exists()  # nothing trained


def test_a_result_file_on_a_real_full_disk_is_named_and_the_rerun_says_it_writes_it(
        base, finished, tmp_path):
    """A completed run whose result file is not in the results folder (killed between its two
    writes, or the disk filled during training, after the probe): writing it on a full disk
    names the file; once there is space, the re-run writes it and says so. Fails on a05bdf0: the
    error named no path, and the re-run printed "existing result (nothing trained or written)"
    while it wrote the file."""
    work = tmp_path / "w"
    shutil.copytree(finished[0], work, ignore=shutil.ignore_patterns("lock"))
    args = _args(base / "data", work, tmp_path / "disk" / "results")
    with full_disk(tmp_path / "disk", keep=("results/runs",)) as disk:
        code, _, err = _run(*args)
        assert code == 1
        _one_line_error(err)
        [line] = [x for x in err.splitlines() if x.startswith("error:")]
        assert line.startswith(f"error: disk full ({disk / 'results' / 'runs'}/"), line
        (disk / "filler").unlink()
        code, out, err = _run(*args)
        assert code == 0, err[-3000:]
        [written] = (disk / "results" / "runs").glob("*.json")
    assert "nothing trained or written" not in out
    assert f"existing run, its result file written now (nothing trained): {written}" in out


def test_unwritable_results_dir_fails_before_step_1(base, tmp_path, monkeypatch):
    results = tmp_path / "results"
    real_open = os.open

    def os_open(path, *args, **kwargs):
        if str(path).startswith(str(results)):
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(path))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(os, "open", os_open)
    code, _, err = _run(*_args(base / "data", tmp_path / "w", results))
    monkeypatch.undo()
    assert code == 1
    _one_line_error(err)
    assert "permission denied" in err and str(results) in err
    assert not (tmp_path / "w" / "metrics.jsonl").exists()


@pytest.mark.parametrize("which", ["workdir", "data", "results"])
def test_path_that_is_a_file_is_one_line(base, tmp_path, which):
    paths = {"workdir": tmp_path / "w", "data": base / "data", "results": tmp_path / "results"}
    paths[which] = tmp_path / "a-file"
    paths[which].write_text("x")
    code, _, err = _run(*_args(paths["data"], paths["workdir"], paths["results"]))
    assert code == 1
    _one_line_error(err)
    assert "a-file" in err


def test_a_workdir_path_that_is_not_utf8_is_refused_before_training(base, tmp_path):
    """Issue 41: such a path trained, then failed at the first checkpoint save inside tensorstore
    with a traceback ("Unable to cast Python instance of type <class 'str'>"). Fails on a05bdf0.
    (A data or results folder with such a name works: only the checkpoint library refuses it.)"""
    work = Path(os.fsdecode(os.fsencode(tmp_path) + b"/w-\xff"))
    code, _, err = _run(*_args(base / "data", work, tmp_path / "results"))
    assert code == 1
    _one_line_error(err)
    assert "--workdir" in err and "not UTF-8" in err and "w-\\xff" in err
    assert not work.exists()


def test_data_command_out_that_is_a_file_is_one_line(tmp_path, capsys):
    from lra import data

    path = tmp_path / "a-file"
    path.write_text("x")
    assert data.main(["generate", "listops", "--out", str(path), "--train", "2", "--val", "1",
                      "--test", "1", "--workers", "1", "--min-length", "1",
                      "--max-length", "20"]) == 1
    assert data.main(["fetch-release", "--out", str(path), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.count("error:") == 2 and err.count("a-file") == 2 and "Traceback" not in err


# ----------------------------------------------------------------------------------------------
# Incomplete official folders, and a killed ListOps generation.


def test_incomplete_official_listops_folder_is_reported(tmp_path, monkeypatch):
    from tasks import listops

    monkeypatch.setattr(listops, "generate", lambda *a, **k: pytest.fail("generated instead"))
    official = tmp_path / "listops-1000"
    official.mkdir()
    for split in ("train", "val"):
        (official / f"basic_{split}.tsv").write_text("Source\tTarget\r\n")
    with pytest.raises(tasks.DataError, match=r"basic_test\.tsv") as err:
        tasks.build("listops", tmp_path).prepare()
    assert str(official) in str(err.value)


def test_incomplete_official_pathfinder_folder_is_reported(tmp_path, monkeypatch):
    from tasks import pathfinder

    monkeypatch.setattr(pathfinder, "generate", lambda *a, **k: pytest.fail("generated instead"))
    folder = tmp_path / "pathfinder32" / pathfinder.folder_name("hard")
    (folder / "imgs" / "0").mkdir(parents=True)
    with pytest.raises(tasks.DataError, match="metadata") as err:
        tasks.build("pathfinder", tmp_path, num_images=64).prepare()
    assert str(folder) in str(err.value)


def _children(pid: int) -> list[int]:
    out = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        with contextlib.suppress(OSError):
            out += [int(x) for x in (task / "children").read_text().split()]
    return out


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_killed_listops_generation_leaves_no_workers_and_no_temp_files(tmp_path):
    out = tmp_path / "gen"
    gen = subprocess.Popen([sys.executable, "-m", "lra.data", "generate", "listops", "--out",
                            str(out), "--train", "1000000", "--val", "1", "--test", "1",
                            "--workers", "2"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    workers: list[int] = []
    try:
        deadline = time.time() + 60
        while time.time() < deadline and len(workers) < 2:
            workers = [c for c in _children(gen.pid) if "spawn_main" in
                       Path(f"/proc/{c}/cmdline").read_bytes().decode(errors="replace")]
            time.sleep(0.1)
        assert len(workers) == 2
        gen.send_signal(signal.SIGKILL)
        gen.wait(timeout=10)
        deadline = time.time() + 10
        while time.time() < deadline and any(map(_alive, workers)):
            time.sleep(0.1)
        assert not [w for w in workers if _alive(w)], "orphaned workers"
    finally:
        gen.kill()
        for w in workers:
            with contextlib.suppress(ProcessLookupError):
                os.kill(w, signal.SIGKILL)
    # A full-size temporary file a killed run left behind goes at the next generation.
    from tasks import listops

    out.mkdir(exist_ok=True)
    stale = out / ".basic_train.tsv.2147483646.tmp"  # no such pid
    stale.write_text("x" * 1000)
    listops.generate(out, train=4, val=1, test=1, workers=1, min_length=1, max_length=20,
                     max_depth=3, progress=False)
    assert not list(out.glob("*.tmp"))


# ----------------------------------------------------------------------------------------------
# fetch-release: --sha256 checked first, a full disk is not a lost connection, a stalled server.


class _Server(http.server.BaseHTTPRequestHandler):
    blob = b"x" * (3 << 20)
    stall = False
    gets: ClassVar[list] = []

    def do_HEAD(self):
        self.send_response(200)
        self.send_header("Content-Length", str(len(self.blob)))
        self.end_headers()

    def do_GET(self):
        type(self).gets.append(self.headers.get("Range"))
        self.send_response(200)
        self.send_header("Content-Length", str(len(self.blob)))
        self.end_headers()
        if self.stall:
            time.sleep(1.5)
            return
        self.wfile.write(self.blob)

    def log_message(self, *args):
        pass


@pytest.fixture
def server():
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Server)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    _Server.gets, _Server.stall = [], False
    yield f"http://127.0.0.1:{httpd.server_address[1]}/lra_release.gz"
    httpd.shutdown()


def test_bad_sha256_is_refused_before_downloading(tmp_path, monkeypatch):
    monkeypatch.setattr(release, "download", lambda *a, **k: pytest.fail("downloaded"))
    with pytest.raises(release.ReleaseError, match="64 hexadecimal"):
        release.fetch_release(tmp_path, url="http://127.0.0.1:9/lra_release.gz", sha256="abc")


def test_disk_full_during_fetch_is_not_a_lost_connection(tmp_path, server, monkeypatch):
    class Full(io.BytesIO):
        def write(self, data):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(release, "open", lambda *a, **k: Full(), raising=False)
    with pytest.raises(release.ReleaseError) as err:
        release.download(server, tmp_path / "lra_release.gz", retry_wait=0.01, progress=False)
    assert "No space left" in str(err.value) and "connection lost" not in str(err.value)
    assert len(_Server.gets) == 1  # not retried


def test_stalled_server_is_given_up_on_quickly(tmp_path, server):
    import inspect

    assert inspect.signature(release.download).parameters["timeout"].default == 30  # docs/tasks-and-data.md
    _Server.stall = True
    t0 = time.time()
    with pytest.raises(release.ReleaseError, match="stalled"):
        release.download(server, tmp_path / "lra_release.gz", timeout=0.3, retry_wait=0.2,
                         progress=False)
    assert time.time() - t0 < 1.5 and len(_Server.gets) == release.STALLS


# ----------------------------------------------------------------------------------------------
# Bug 9: the leaderboard skips and lists what it cannot use.


def test_leaderboard_skips_invalid_result_files(finished, tmp_path, capsys):
    results = tmp_path / "results"
    runs = results / "runs"
    shutil.copytree(finished[1] / "runs", runs)
    good = json.loads(next(runs.iterdir()).read_text())
    bad = {
        "no-device": {k: v for k, v in good.items() if k != "device"},
        "string-accuracy": {**good, "metrics": {**good["metrics"], "test_accuracy_at_last": "0.5"}},
        "unknown-task": {**good, "task": "sudoku"},
        "zero-examples": {**good, "data": {**good["data"],
                                           "evaluated": {**good["data"]["evaluated"], "val": 0}}},
    }
    for name, record in bad.items():
        (runs / f"{name}.json").write_text(json.dumps(record))
    (runs / "x.json").write_bytes(b"\x00\xff\xfe binary")
    assert leaderboard.main(["--results-dir", str(results)]) == 0
    err = capsys.readouterr().err
    for name in (*bad, "x"):
        assert f"{name}.json" in err, name
    assert "(1)" in (results / "LEADERBOARD.md").read_text()  # the valid run, counted once
    assert leaderboard.main(["--results-dir", str(results), "--strict"]) == 1


def test_leaderboard_fails_on_a_missing_results_dir(tmp_path, capsys):
    assert leaderboard.main(["--results-dir", str(tmp_path / "nope")]) == 1
    assert not (tmp_path / "nope").exists()

