"""lra.run against other data than its run was made on (issues 23 and 25): a resume, or a re-run of a
completed work directory, is refused with one line naming the changed file; ``--force`` starts over.
Each test says whether it fails on main 9185bb1 (before these changes)."""

from __future__ import annotations

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
