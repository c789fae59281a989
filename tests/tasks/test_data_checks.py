"""What a task checks of its data before step 1 (issue 11's fault injection): empty or short splits
stop a run with one line naming the file or folder, an official folder that is incomplete or does
not match the config is reported, and a killed ListOps generation leaves no workers and no
temporary files. Runs are in-process on conftest.py's tiny ListOps set.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import (
    TINY_LISTOPS_OPTIONS,
    assert_one_line_error,
    module_compile_cache,
    run_in_process,
    tiny_run_args,
)

from lra import tasks


@pytest.fixture(scope="module", autouse=True)
def compile_once(tmp_path_factory):
    yield from module_compile_cache(tmp_path_factory)


@pytest.mark.parametrize("split", ["train", "val"])
def test_header_only_split_file_is_refused(tiny_listops, tmp_path, split):
    data = tmp_path / "data"
    shutil.copytree(tiny_listops / "data", data)
    folder = tasks.build("listops", data, **TINY_LISTOPS_OPTIONS).directory
    (folder / f"basic_{split}.tsv").write_text("Source\tTarget\r\n")
    code, _, err = run_in_process(*tiny_run_args(data, tmp_path / "w", tmp_path / "results"))
    assert code == 1
    assert_one_line_error(err)
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
    code, _, err = run_in_process(*tiny_run_args(tmp_path / "data", tmp_path / "w", tmp_path / "results",
                                                 "--set", "data.train_size=0", "--set", "data.val_size=0",
                                                 "--set", "data.test_size=0", task="retrieval"))
    assert code == 1, err[-2000:]
    assert_one_line_error(err)
    assert "new_aan_pairs.eval.tsv" in err and "0 examples" in err


def test_short_official_pathfinder_folder_is_refused(tmp_path):
    from lra.tasks import pathfinder

    root = tmp_path / "data" / "pathfinder32"
    with contextlib.redirect_stderr(io.StringIO()):
        folder = pathfinder.generate(root, resolution=32, difficulty="hard", num_images=5,
                                     workers=1)
    (Path(folder) / "generator.json").unlink()  # now it looks like the archive's folder
    code, _, err = run_in_process(*tiny_run_args(tmp_path / "data", tmp_path / "w", tmp_path / "results",
                                                 task="pathfinder"))
    assert code == 1, err[-2000:]
    assert_one_line_error(err)
    assert str(folder) in err and "asks for" in err


@pytest.mark.slow
def test_tiny_preset_says_why_it_does_not_read_an_official_listops_folder(tiny_listops, tmp_path):
    data = tmp_path / "data"
    shutil.copytree(tiny_listops / "data", data)
    official = data / "listops-1000"
    official.mkdir()
    for path in tasks.build("listops", data, **TINY_LISTOPS_OPTIONS).directory.glob("*.tsv"):
        shutil.copy(path, official / path.name)
    notes = tasks.build("listops", data, **TINY_LISTOPS_OPTIONS).provenance().notes
    assert len(notes) == 1 and str(official) in notes[0] and "max_length=40" in notes[0]
    code, _, err = run_in_process(*tiny_run_args(data, tmp_path / "w", tmp_path / "results"))
    assert code == 0 and f"note: {notes[0]}" in err
    record = json.loads((tmp_path / "w" / "result.json").read_text())
    assert record["data"]["origin"] == "generated"


def test_incomplete_official_listops_folder_is_reported(tmp_path, monkeypatch):
    from lra.tasks import listops

    monkeypatch.setattr(listops, "generate", lambda *a, **k: pytest.fail("generated instead"))
    official = tmp_path / "listops-1000"
    official.mkdir()
    for split in ("train", "val"):
        (official / f"basic_{split}.tsv").write_text("Source\tTarget\r\n")
    with pytest.raises(tasks.DataError, match=r"basic_test\.tsv") as err:
        tasks.build("listops", tmp_path).prepare()
    assert str(official) in str(err.value)


def test_incomplete_official_pathfinder_folder_is_reported(tmp_path, monkeypatch):
    from lra.tasks import pathfinder

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
    from lra.tasks import listops

    out.mkdir(exist_ok=True)
    stale = out / ".basic_train.tsv.2147483646.tmp"  # no such pid
    stale.write_text("x" * 1000)
    listops.generate(out, train=4, val=1, test=1, workers=1, min_length=1, max_length=20,
                     max_depth=3, progress=False)
    assert not list(out.glob("*.tmp"))
