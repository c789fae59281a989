"""Pathfinder images and copies of them staged the way a cluster stages data to a node (new
mtimes, no ``decoded/`` cache): every command that compares fingerprints takes a copy for the same
data (issue 52, item 4). On main each of these refused the copy or split its runs: the folder's
fingerprint hashed the reader's cache, whose bytes hold the metadata file's mtime."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from helpers import copy_resumable, result_record, run_in_process, tiny_run_args
from lra.tasks import pathfinder

from lra import data_fingerprint, sweep, tasks
from lra import evaluate as evaluate_cli
from lra import run as run_cli
from lra.leaderboard import reader

FOLDER = Path("pathfinder") / "pathfinder32" / "curv_contour_length_14"
# Three steps, one validation and one save, not the tiny preset's six, two and one: at 1,024 tokens
# running the steps is most of these runs' time (the suite's XLA flags make compiles quick and the
# programs slow), and what the tests read is which data each command accepts.
SHORT = ["--set", "train.num_steps=3", "--set", "train.eval_every=3", "--set", "train.checkpoint_every=3"]


def staged(src: Path, dest: Path) -> Path:
    """``src`` copied with new mtimes, without the reader's cache or the digest cache."""
    shutil.copytree(src, dest, copy_function=shutil.copyfile)
    shutil.rmtree(dest / FOLDER / "decoded", ignore_errors=True)
    (dest / data_fingerprint.CACHE_FILE).unlink(missing_ok=True)
    return dest


@pytest.fixture(scope="module")
def images(tmp_path_factory) -> Path:
    """A data directory with the tiny preset's 64 generated images, never read."""
    data = tmp_path_factory.mktemp("copies") / "a"
    pathfinder.generate(data / FOLDER.parent, num_images=64, workers=1, progress=False)
    return data


def tiny_config(seed: int) -> dict:
    args = ["--task", "pathfinder", "--attn", "softmax", "--preset", "tiny", "--seed", str(seed)]
    return run_cli.resolve_config(run_cli.parser().parse_args(args)).to_dict()


def as_training_records(data: Path) -> dict:
    """The fingerprint a run records: ``lra.train`` reads the splits first (writing decoded/)."""
    task = tasks.build("pathfinder", data, num_images=64)
    for split in ("train", "val", "test"):
        task.source(split)
    return json.loads(json.dumps(data_fingerprint.fingerprint(task.provenance(), data)))


def test_the_sweeps_skip_check_and_the_leaderboard_take_copies_for_the_same_data(images, tmp_path,
                                                                                  capsys):
    """A result made on one copy is done for the sweep on a fresh copy (it fingerprints before any
    read: main called it a conflict and would retrain it), and seeds made on two copies form one
    leaderboard row (main: two n=1 rows, one marked [data ...])."""
    results = tmp_path / "results"
    (results / "runs").mkdir(parents=True)
    for seed in (0, 1):
        fp = as_training_records(staged(images, tmp_path / f"node{seed}"))
        (results / "runs" / f"pathfinder-seed{seed}.json").write_text(
            json.dumps(result_record(tiny_config(seed), fingerprint=fp)))
    cells = reader.read(results).cells()
    assert [(key.row, [r["seed"] for r in runs]) for key, runs in cells.items()] == [("softmax", [0, 1])]

    assert sweep.main(["--task", "pathfinder", "--attn", "softmax", "--preset", "tiny", "--seeds", "0,1",
                       "--workdirs", str(tmp_path / "wd"), "--results-dir", str(results),
                       "--data-dir", str(staged(images, tmp_path / "fresh")), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "0 run, 0 resume, 2 skip, 0 conflict" in out, out


@pytest.fixture(scope="module")
def seed0(images, tmp_path_factory):
    """(root, the finished work directory, its results directory): seed 0 of the tiny preset
    trained on a copy of ``images`` in ``root/a`` (which writes ``decoded/`` there)."""
    root = tmp_path_factory.mktemp("trained")
    staged(images, root / "a")
    code, _, err = run_in_process(*tiny_run_args(root / "a", root / "wd0", root / "results", *SHORT,
                                                 task="pathfinder"))
    assert code == 0, err[-3000:]
    assert (root / "a" / FOLDER / "decoded" / "0.npz").is_file()
    return root, root / "wd0", root / "results"


@pytest.mark.slow
def test_evaluate_a_rerun_and_a_resume_take_a_copy_for_the_same_data(seed0, tmp_path, capsys):
    """lra.evaluate and a completed run's re-run fingerprint the data before any read, so the copy
    has no decoded/ then; a preempted run resumes on another node's copy, which its read gives
    a decoded/ of other bytes (main: "other data" for all three)."""
    root, wd0, results = seed0
    assert evaluate_cli.main(["--workdir", str(wd0), "--data-dir", str(staged(root / "a", root / "b")),
                              "--no-progress"]) == 0
    capsys.readouterr()

    code, _, err = run_in_process(*tiny_run_args(staged(root / "a", root / "c"), wd0, results,
                                                 *SHORT, task="pathfinder"))
    assert code == 0 and "holds a completed run" in err, err[-2000:]

    resumable = copy_resumable((wd0,), tmp_path / "wd0-resumed")
    code, _, err = run_in_process(*tiny_run_args(staged(root / "a", tmp_path / "e"), resumable,
                                                 tmp_path / "elsewhere", *SHORT, task="pathfinder"))
    assert code == 0 and "resuming from step 3" in err, err[-2000:]


def test_refingerprint_gives_a_run_recorded_with_the_cache_todays_fingerprint(images, tmp_path, capsys):
    """``python -m lra.data refingerprint``: a run whose fingerprint hashed decoded/ (recorded before
    2026-12-06) joins the runs recorded since on the same images; one on other data is left as is
    and named; --dry-run writes nothing (main: no such command)."""
    from lra import data as data_cli

    data = staged(images, tmp_path / "data")
    now = as_training_records(data)
    task = tasks.build("pathfinder", data, num_images=64)
    old = data_fingerprint.fingerprint(task.provenance(), data).with_derived()
    other = {**now, "sha256": "b" * 64}
    runs = tmp_path / "results" / "runs"
    runs.mkdir(parents=True)
    for seed, fp in ((0, old), (1, now), (2, other)):
        (runs / f"seed{seed}.json").write_text(json.dumps(result_record(tiny_config(seed), fingerprint=fp)))

    def rows():
        return sorted((key.row.split(" [")[0] + (" [data]" if "[data" in key.row else ""),
                       [r["seed"] for r in group]) for key, group in reader.read(runs.parent).cells().items())

    assert rows() != [("softmax", [0, 1]), ("softmax [data]", [2])]
    args = ["refingerprint", "--results-dir", str(runs.parent), "--data-dir", str(data)]
    before = (runs / "seed0.json").read_bytes()
    assert data_cli.main([*args, "--dry-run"]) == 0
    assert "refingerprint: 1 would be updated, 1 already current, 1 left as is" in capsys.readouterr().out
    assert (runs / "seed0.json").read_bytes() == before
    assert data_cli.main(args) == 0
    out, err = capsys.readouterr()
    assert "refingerprint: 1 updated, 1 already current, 1 left as is" in out
    assert err.count("\n") == 1 and "left as is: seed2.json was made on other data" in err
    assert rows() == [("softmax", [0, 1]), ("softmax [data]", [2])]
    assert json.loads((runs / "seed0.json").read_text())["data"]["fingerprint"] == now
