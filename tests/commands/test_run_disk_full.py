"""lra.run on a full disk: a checkpoint save that fails for lack of space is one line naming the
folder, with the last good checkpoint kept (faked in-process, and for real on a small tmpfs as
root)."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import cli_env
from helpers import contract_run_args as _args
from helpers import run_in_process as _run


@pytest.fixture
def data(contract_data) -> Path:
    """The tiny ListOps set of the run contract tests (conftest.py's ``contract_data``)."""
    return contract_data


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
