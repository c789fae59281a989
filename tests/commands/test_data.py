"""The data command line: ``python -m lra.data generate|prepare``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from lra import data

TINY = ["--min-length", "10", "--max-length", "60"]


def run_module(*args: str, env_extra: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, **(env_extra or {})}
    return subprocess.run([sys.executable, "-m", "lra.data", *args], capture_output=True,
                          text=True, timeout=120, env=env)


def rows(path: Path) -> int:
    return len(path.read_bytes().splitlines()) - 1


def test_generate_listops_writes_the_three_files(tmp_path, capsys):
    out = tmp_path / "gen"
    assert data.main(["generate", "listops", "--out", str(out), "--train", "30", "--val", "5",
                      "--test", "4", "--seed", "3", "--workers", "1", *TINY]) == 0
    assert [rows(out / f"basic_{s}.tsv") for s in ("train", "val", "test")] == [30, 5, 4]
    printed = capsys.readouterr().out.split()
    assert printed == [str(out / f"basic_{s}.tsv") for s in ("train", "val", "test")]


def test_no_fsync_writes_the_same_files_without_flushing_them(tmp_path, monkeypatch):
    synced = []
    real = os.fsync

    def fsync(fd):
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        return real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    common = ["--train", "30", "--val", "5", "--test", "4", "--seed", "3", "--workers", "1", *TINY]
    assert data.main(["generate", "listops", "--out", str(tmp_path / "a"), *common]) == 0
    # the default (users): the three files, and each kept shard, on the disk before the renames
    assert sum(".basic_" in Path(p).name for p in synced) == 3
    assert any(".listops-shards" in p for p in synced)
    synced.clear()
    assert data.main(["generate", "listops", "--out", str(tmp_path / "b"), "--no-fsync",
                      *common]) == 0
    # a throw-away disk (the accelerator window): only the folder's write probe, nothing written
    assert [Path(p).name.startswith(".write-test.") for p in synced] == [True]
    for split in ("train", "val", "test"):
        name = f"basic_{split}.tsv"
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()


def test_prepare_generates_under_the_data_dir(tmp_path, capsys):
    assert data.main(["prepare", "--task", "listops", "--data-dir", str(tmp_path),
                      "--set", "train_size=20", "--set", "val_size=3", "--set", "test_size=3",
                      "--set", "min_length=10", "--set", "max_length=60"]) == 0
    folder = tmp_path / "listops" / "min10_max60_train20_val3_test3"
    assert [rows(folder / f"basic_{s}.tsv") for s in ("train", "val", "test")] == [20, 3, 3]
    assert "ListOps data not found" in capsys.readouterr().err
    # Prepared already: nothing printed, nothing rewritten.
    before = (folder / "basic_train.tsv").stat().st_mtime_ns
    assert data.main(["prepare", "--task", "listops", "--data-dir", str(tmp_path),
                      "--set", "train_size=20", "--set", "val_size=3", "--set", "test_size=3",
                      "--set", "min_length=10", "--set", "max_length=60"]) == 0
    assert capsys.readouterr().err == ""
    assert (folder / "basic_train.tsv").stat().st_mtime_ns == before


def test_default_data_dir(monkeypatch, tmp_path):
    monkeypatch.setenv("LRA_DATA_DIR", str(tmp_path / "d"))
    assert data.default_data_dir() == tmp_path / "d"
    monkeypatch.delenv("LRA_DATA_DIR")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert data.default_data_dir() == tmp_path / ".cache" / "lra"


def test_prepare_uses_lra_data_dir_and_finds_an_official_release(tmp_path):
    official = tmp_path / "lra_release" / "lra_release" / "listops-1000"
    official.mkdir(parents=True)
    for split in ("train", "val", "test"):
        (official / f"basic_{split}.tsv").write_bytes(b"Source\tTarget\r\n( ( ( [MAX 2 ) 9 ) ] )"
                                                      b"\t9\r\n")
    result = run_module("prepare", "--task", "listops", env_extra={"LRA_DATA_DIR": str(tmp_path)})
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    assert not (tmp_path / "listops").exists()


@pytest.mark.parametrize("args, expected", [
    (["prepare", "--task", "listopz"], "unknown task 'listopz'. Did you mean listops?"),
    (["prepare", "--task", "listops", "--set", "max_lenght=3"],
     "unknown task 'listops' data key 'max_lenght'. Did you mean max_length"),
    (["prepare", "--task", "listops", "--set", "seed=x"], "expected an integer, got 'x'"),
    (["prepare", "--task", "listops", "--set", "min_length=3000"], "min_length 3000"),
    (["generate", "listops", "--out", "OUT", "--min-length", "50", "--max-length", "40"],
     "strict"),
    # Only the ten one-digit trees are shorter than 2: a DataError from the generator.
    (["generate", "listops", "--out", "OUT", "--train", "20", "--val", "0", "--test", "0",
      "--min-length", "0", "--max-length", "2"], "only 10 distinct"),
])
def test_errors_print_one_line_and_exit_2(tmp_path, capsys, args, expected):
    args = [str(tmp_path / "out") if a == "OUT" else a for a in args]
    assert data.main([*args, *(["--data-dir", str(tmp_path)] if args[0] == "prepare" else [])]) == 2
    err = capsys.readouterr().err
    # The last line is the message (a progress bar may come before it).
    message = err.rstrip("\n").split("\n")[-1]
    assert message.startswith("error: ") and err.count("error") == 1 and err.endswith("\n")
    assert expected in message and "Traceback" not in err
    assert not (tmp_path / "listops").exists()


def test_errors_from_the_command_line_have_no_traceback(tmp_path):
    result = run_module("prepare", "--task", "nosuch", "--data-dir", str(tmp_path))
    assert result.returncode == 2
    assert result.stderr.startswith("error: unknown task 'nosuch'")
    assert "Traceback" not in result.stderr and result.stderr.count("\n") == 1
    malformed = tmp_path / "bad"
    result = run_module("generate", "listops", "--out", str(malformed), "--train", "-1")
    assert result.returncode == 2 and "Traceback" not in result.stderr


@pytest.mark.slow
@pytest.mark.parametrize("signame", ["SIGTERM", "SIGINT"])
def test_a_signal_while_generating_exits_75_and_leaves_nothing_half_written(tmp_path, signame):
    """Fails on 040ea93: lra.data had no handler; SIGTERM killed it (-15, no line) and SIGINT
    printed KeyboardInterrupt tracebacks (the parent's and its workers')."""
    import signal
    import time

    out = tmp_path / "gen"
    args = [sys.executable, "-m", "lra.data", "generate", "listops", "--out", str(out), "--train",
            "20000", "--val", "10", "--test", "10", "--workers", "2", *TINY]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    seen, deadline = b"", time.time() + 120
    while b"tree/s" not in seen and time.time() < deadline:  # the progress bar: generating
        chunk = os.read(proc.stderr.fileno(), 4096)
        if not chunk:
            break
        seen += chunk
    assert b"tree/s" in seen, seen[-2000:]
    proc.send_signal(getattr(signal, signame))
    rest = proc.communicate(timeout=120)[1]
    err = (seen + rest).decode()
    assert proc.returncode == 75, err[-3000:]
    assert "Traceback" not in err and "KeyboardInterrupt" not in err
    last = err.strip().replace("\r", "\n").splitlines()[-1]  # after the progress bar's last \r
    assert last.startswith(f"{signame}: stopped; the files already complete"), err[-2000:]
    # no split file, no temporary file: only the finished shards, kept for the next run
    assert not out.exists() or [p.name for p in out.iterdir()] == [".listops-shards"]
    again = run_module(*args[3:])
    assert again.returncode == 0, again.stderr[-2000:]
    assert sorted(p.name for p in out.iterdir()) == [f"basic_{s}.tsv" for s in ("test", "train", "val")]


@pytest.mark.parametrize("dataset", ["listops", "pathfinder"])
def test_generating_onto_a_real_full_disk_fails_at_once_naming_the_folder(tmp_path, capsys,
                                                                           dataset):
    """Issue 41: a full disk let the generators start (an empty probe file takes no block) and
    failed at the first write with "No space left on device" and no path. Fails on a05bdf0."""
    from helpers import full_disk

    sizes = (["--train", "30", "--val", "5", "--test", "5", *TINY] if dataset == "listops"
             else ["--num-images", "20"])
    with full_disk(tmp_path / "disk") as disk:
        out = disk / "gen"
        assert data.main(["generate", dataset, "--out", str(out), "--workers", "1",
                          *sizes]) == 1
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and err.startswith("error: "), err
    assert "No space left on device" in err and str(out) in err
