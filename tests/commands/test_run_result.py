"""lra.run's result record and its work directory: the record's format version 2 (``format_version``,
``overrides``, ``data.fingerprint``, an absolute ``result_file``), a re-run that finds its result
from another working directory or copies it to another ``--results-dir``, and ``--force`` moving the
earlier run aside (issues 23 and 25). Each test says whether it fails on main 9185bb1 (before these
changes)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from helpers import contract_run_args as _args
from helpers import run_in_process as _run


@pytest.fixture
def data(contract_data) -> Path:
    """The tiny ListOps set of the run contract tests (conftest.py's ``contract_data``)."""
    return contract_data


@pytest.fixture
def reference(contract_reference) -> dict:
    """One uninterrupted run's result record (conftest.py's ``contract_reference``)."""
    return contract_reference


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
