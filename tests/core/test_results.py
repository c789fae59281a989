"""Result files (lra/results.py): the data provenance and the git sessions a record names, the keys
that differ from the preset, file names that never collide, the user's own folder by default and
the user's umask.
"""

from __future__ import annotations

import json
import os
import shutil
import stat

import pytest
from helpers import (
    REPO,
    assert_one_line_error,
    copy_resumable,
    full_disk,
    module_compile_cache,
    run_in_process,
    tiny_run_args,
)

from lra import config as config_lib
from lra import reproduce, results, sweep
from lra import run as run_cli


@pytest.fixture(scope="module", autouse=True)
def compile_once(tmp_path_factory):
    yield from module_compile_cache(tmp_path_factory)


def test_result_file_records_data_provenance(finished):
    _, results, err = finished
    record = json.loads(next((results / "runs").iterdir()).read_text())
    data = record["data"]
    assert data["folder"] == "listops/min5_max40_depth3_train128_val32_test32"
    assert data["origin"] == "generated" and data["generator"]["seed"] == 0
    assert data["generator"]["version"] >= 1
    assert data["examples"] == {"train": 128, "val": 32, "test": 32}
    assert data["evaluated"] == {"val": 32, "test_at_best_val": 32, "test_at_last": 32}
    # issue 54: examples per class, for the at-chance mark's majority class
    assert {k: (len(v), sum(v)) for k, v in data["class_counts"].items()} == {
        "train": (10, 128), "val": (10, 32), "test": (10, 32)}
    first = [x for x in err.splitlines() if x.startswith("data: ")]
    assert first and "train 128, val 32, test 32" in first[0] and "seed 0" in first[0]


@pytest.mark.slow
def test_a_run_resumed_under_other_code_says_so_and_records_both(finished, tmp_path, monkeypatch):
    """Fails on fcb2559: the result file named only the last session's commit, as if the whole run
    had trained under it."""
    from lra import results

    before = json.loads((finished[0] / "result.json").read_text())["git"]
    assert "sessions" not in before  # one session: the record is as it always was
    work = copy_resumable(finished, tmp_path / "w")
    resumed_at = max(int(p.name) for p in (work / "checkpoints" / "last").iterdir()
                     if p.name.isdigit())
    other = {"commit": "f" * 40, "dirty": False}
    monkeypatch.setattr(results, "git_commit", lambda: other)
    code, _, err = run_in_process(*tiny_run_args(finished[0].parent / "data", work, tmp_path / "results"))
    assert code == 0, err[-3000:]
    assert f"steps before {resumed_at} ran under commit {before['commit'][:12]}" in err
    assert "this session runs ffffffffffff" in err
    git = json.loads((work / "result.json").read_text())["git"]
    assert git["commit"] == other["commit"] and git["dirty"] == before["dirty"]
    assert git["sessions"] == [
        {"from_step": 0, "commit": before["commit"], "dirty": before["dirty"]},
        {"from_step": resumed_at, "commit": other["commit"], "dirty": False}]


def test_config_overrides_name_every_key_that_differs_from_the_preset():
    """Fails on main: lra.results had no config_overrides."""
    plain = config_lib.load("listops", "softmax", preset="tiny", seed=3)
    assert results.config_overrides(plain) == {}
    pairs = ["train.num_steps=2", "train.lr=0.0123", "model.dropout=0.37"]
    changed = config_lib.load("listops", "softmax", preset="tiny", seed=3, overrides=pairs)
    assert results.config_overrides(changed, pairs) == {
        "model.dropout": 0.37, "train.lr": 0.0123, "train.num_steps": 2}
    # a config changed in code, with no --set, is named too; a --set of the preset's own value too
    same = f"train.lr={plain.train.lr}"
    assert results.config_overrides(changed) == results.config_overrides(changed, pairs)
    assert results.config_overrides(plain, [same]) == {"train.lr": plain.train.lr}


def test_result_file_names_never_collide_across_machines(tmp_path):
    record = {"task": "listops", "attention": "softmax", "preset": "small", "seed": 0,
              "device": {"platform": "cpu", "count": 1}, "date": "2026-01-01T00:00:00Z"}
    a = results.write_run(tmp_path / "machine_a", record)  # the same cell, the same second
    b = results.write_run(tmp_path / "machine_b", record)
    assert a.name != b.name and a.name.startswith("listops__softmax__small__seed0__cpu1__20260101T000000")
    c = results.write_run(tmp_path / "machine_a", record)
    assert c != a and json.loads(c.read_text()) == record == json.loads(a.read_text())
    assert sorted(p.name for p in (tmp_path / "machine_a" / "runs").iterdir()) == sorted([a.name, c.name])


def test_a_users_runs_and_tables_go_to_their_own_folder_by_default(monkeypatch):
    """Fails on a05bdf0: every command defaulted to the project's reference set, results/ (a user's
    quick start replaced a committed run in the reference table)."""
    from lra import evaluate
    from lra.bench import steps

    monkeypatch.delenv("LRA_RESULTS_DIR", raising=False)
    parsers = {"run": run_cli.parser().parse_args(["--task", "listops", "--attn", "softmax"]),
               "sweep": sweep.parser().parse_args(["--task", "listops", "--attn", "softmax"]),
               "reproduce": reproduce.parser().parse_args(["lra/softmax/listops"]),
               "evaluate": evaluate.parser().parse_args(["--workdir", "w"]),
               "bench": steps.parser().parse_args([])}
    for name, args in parsers.items():
        assert str(args.results_dir) == results.USER_RESULTS_DIR, name
    assert results.default_results_dir() != results.Path(results.REFERENCE_RESULTS_DIR)
    monkeypatch.setenv("LRA_RESULTS_DIR", "/somewhere/else")
    assert str(results.default_results_dir()) == "/somewhere/else"
    assert "my-results" in (REPO / ".gitignore").read_text()


def test_result_files_get_the_users_umask_not_0600(tmp_path):
    """Fails on a05bdf0: result files were 0600 (mkstemp's mode) whatever the umask."""
    old = os.umask(0o022)
    try:
        results.write_new(tmp_path / "a.json", {"x": 1})
        os.umask(0o077)
        results.write_new(tmp_path / "b.json", {"x": 1})
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "a.json").stat().st_mode) == 0o644
    assert stat.S_IMODE((tmp_path / "b.json").stat().st_mode) == 0o600
    with pytest.raises(FileExistsError):
        results.write_new(tmp_path / "a.json", {"x": 2})


def test_a_results_dir_on_a_real_full_disk_fails_before_step_1_naming_it(tiny_listops, tmp_path):
    """Issue 41: the start-up probe created an empty file, which takes no block, so a results
    folder on a full disk passed it; the run trained and then failed writing its result, with a
    message naming no path. Fails on a05bdf0 (trained: metrics.jsonl written; "disk full: No
    space left on device" without the folder)."""
    with full_disk(tmp_path / "disk", keep=("results/runs",)) as disk:
        code, _, err = run_in_process(*tiny_run_args(tiny_listops / "data", tmp_path / "w",
                                                     disk / "results"))
    assert code == 1
    assert_one_line_error(err)
    assert "disk full" in err and str(disk / "results" / "runs") in err
    assert not (tmp_path / "w" / "metrics.jsonl").exists()  # nothing trained


def test_a_result_file_on_a_real_full_disk_is_named_and_the_rerun_says_it_writes_it(
        tiny_listops, finished, tmp_path):
    """A completed run whose result file is not in the results folder (killed between its two
    writes, or the disk filled during training, after the probe): writing it on a full disk
    names the file; once there is space, the re-run writes it and says so. Fails on a05bdf0: the
    error named no path, and the re-run printed "existing result (nothing trained or written)"
    while it wrote the file."""
    work = tmp_path / "w"
    shutil.copytree(finished[0], work, ignore=shutil.ignore_patterns("lock"))
    args = tiny_run_args(tiny_listops / "data", work, tmp_path / "disk" / "results")
    with full_disk(tmp_path / "disk", keep=("results/runs",)) as disk:
        code, _, err = run_in_process(*args)
        assert code == 1
        assert_one_line_error(err)
        [line] = [x for x in err.splitlines() if x.startswith("error:")]
        assert line.startswith(f"error: disk full ({disk / 'results' / 'runs'}/"), line
        (disk / "filler").unlink()
        code, out, err = run_in_process(*args)
        assert code == 0, err[-3000:]
        [written] = (disk / "results" / "runs").glob("*.json")
    assert "nothing trained or written" not in out
    assert f"existing run, its result file written now (nothing trained): {written}" in out
