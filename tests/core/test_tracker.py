"""``lra.run --wandb PROJECT``: the TensorBoard scalars, the test accuracies and the config reach
Weights & Biases (offline mode, no network), a resumed run keeps its wandb run, and a missing
package is one line (lra/tracker.py)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from helpers import SMALL_LISTOPS, cli_env

from lra import run as run_cli
from lra import sweep, tracker
from lra.leaderboard import load


def test_without_wandb_the_flag_is_one_clear_error(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "wandb", None)  # import wandb -> ImportError
    with pytest.raises(tracker.TrackerError, match="pip install wandb"):
        tracker.Wandb("p", tmp_path, name="n", config={})


def _offline_cmd(root, work, results, *extra: str) -> list[str]:
    return [sys.executable, "-m", "lra.run", "--task", "listops", "--attn", "softmax",
            "--preset", "tiny", "--data-dir", str(root / "data"), "--workdir", str(work),
            "--results-dir", str(results), "--no-progress", "--wandb", "lra-tests",
            "--wandb-entity", "a-lab", "--wandb-group", "sweep-7", "--wandb-tags", "lra,ci",
            *SMALL_LISTOPS, "--set", "train.num_steps=4", "--set", "train.eval_every=2",
            "--set", "train.log_every=1", *extra]


def _offline_env(root) -> dict[str, str]:
    return cli_env(WANDB_MODE="offline", WANDB_SILENT="true", WANDB_DIR=str(root))


@pytest.fixture(scope="module")
def offline_run(tmp_path_factory):
    """One ``lra.run --wandb`` in its own process with wandb itself, offline: (root, workdir); the
    two tests below read it (the second re-runs a copy with --force)."""
    pytest.importorskip("wandb")
    root = tmp_path_factory.mktemp("wandb")
    work = root / "work"
    out = subprocess.run(_offline_cmd(root, work, root / "res"), capture_output=True, text=True, timeout=600,
                         env=_offline_env(root), cwd=root)
    assert out.returncode == 0, out.stderr[-3000:]
    return root, work


@pytest.mark.slow
def test_offline_run_logs_the_scalars_the_summary_and_the_config(offline_run):
    root, work = offline_run
    run_id = (work / tracker.ID_FILE).read_text().strip()
    (log,) = (work / "wandb").glob(f"offline-run-*-{run_id}/run-{run_id}.wandb")
    data = log.read_bytes()  # protobuf records: the keys are stored as plain strings
    for key in (b"train/loss", b"train/lr", b"train/grad_norm", b"val/accuracy", b"val/loss",
                b"test_at_last/accuracy", b"test_at_best_val/accuracy", b"num_layers",
                b"sweep-7", b"a-lab", b"ci"):
        assert key in data, key
    # the result file leads back to the wandb run (fails on a05bdf0: no tracker field)
    (result,) = (root / "res" / "runs").glob("*.json")
    assert json.loads(result.read_text())["tracker"] == {
        "name": "wandb", "run_id": run_id, "project": "lra-tests", "entity": "a-lab",
        "group": "sweep-7", "tags": ["lra", "ci"]}
    load.check_run(json.loads(result.read_text()))


def test_a_resumed_run_keeps_its_wandb_id(tmp_path, monkeypatch):
    seen = []

    class FakeWandb:  # wandb's own init is tested above; here only the id it is given
        @staticmethod
        def init(**kwargs):
            seen.append(kwargs["id"])
            return object()

    monkeypatch.setitem(sys.modules, "wandb", FakeWandb)
    tracker.Wandb("p", tmp_path, name="n", config={})
    tracker.Wandb("p", tmp_path, name="n", config={})
    assert len(seen) == 2 and seen[0] == seen[1] and (tmp_path / tracker.ID_FILE).exists()


def test_entity_group_and_tags_reach_wandb_init_and_the_record(tmp_path, monkeypatch):
    seen = []

    class FakeWandb:  # the offline test above runs the real wandb; here only what init is given
        @staticmethod
        def init(**kwargs):
            seen.append(kwargs)
            return object()

    monkeypatch.setitem(sys.modules, "wandb", FakeWandb)
    options = tracker.WandbOptions("p", entity="lab", group="g", tags=("a", "b"))
    run = tracker.Wandb(options, tmp_path, name="n", config={})
    assert {k: seen[0][k] for k in ("project", "entity", "group", "tags")} == {
        "project": "p", "entity": "lab", "group": "g", "tags": ["a", "b"]}
    assert run.record() == {"name": "wandb", "run_id": run.run_id, "project": "p",
                            "entity": "lab", "group": "g", "tags": ["a", "b"]}


def test_tags_are_split_and_wandb_companions_need_wandb(capsys):
    assert tracker.parse_tags(" a, b,,c ") == ("a", "b", "c")
    with pytest.raises(ValueError, match="longer than 64"):
        tracker.parse_tags("x" * 65)
    code = run_cli.main(["--task", "listops", "--attn", "softmax", "--wandb-group", "g",
                         "--print-config"])
    assert code == 2
    assert "--wandb-group without --wandb PROJECT" in capsys.readouterr().err


def test_the_sweep_passes_the_wandb_flags_to_every_run(tmp_path, capsys):
    args = ["--task", "listops", "--attn", "softmax", "--preset", "tiny", "--seeds", "0,1",
            "--workdirs", str(tmp_path / "wd"), "--results-dir", str(tmp_path / "res"),
            "--wandb", "proj", "--wandb-entity", "lab", "--wandb-group", "g1",
            "--wandb-tags", "a,b", "--list"]
    assert sweep.main(args) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2
    for line in lines:
        parsed = run_cli.parser().parse_args(line.split()[3:])
        assert (parsed.wandb, parsed.wandb_entity, parsed.wandb_group, parsed.wandb_tags) == \
            ("proj", "lab", "g1", "a,b")
    assert sweep.main(args[:-9] + ["--wandb-tags", "a", "--list"]) == 2
    assert "--wandb-tags without --wandb PROJECT" in capsys.readouterr().err


def test_force_moves_the_wandb_run_aside_so_the_rerun_is_a_new_wandb_run(tmp_path, monkeypatch):
    """Issue 41: --force (lra.workdir.move_aside) left ``wandb_id`` and ``wandb/`` in place, so the
    forced re-run continued the old wandb run (which drops every step it had logged). Fails on
    a05bdf0: the second id equals the first and nothing of wandb's is moved."""
    from lra import workdir

    seen = []

    class FakeWandb:
        @staticmethod
        def init(**kwargs):
            seen.append(kwargs["id"])
            return object()

    monkeypatch.setitem(sys.modules, "wandb", FakeWandb)
    tracker.Wandb("p", tmp_path, name="n", config={})
    (tmp_path / "wandb" / f"offline-run-x-{seen[0]}").mkdir(parents=True)
    (tmp_path / workdir.RESULT_FILE).write_text('{"status": "completed"}')
    (tmp_path / f".{workdir.RESULT_FILE}.abc.tmp").write_text("{")  # a killed write's temporary
    moved = workdir.move_aside(tmp_path)
    assert (moved / tracker.ID_FILE).read_text().strip() == seen[0]
    assert (moved / "wandb" / f"offline-run-x-{seen[0]}").is_dir()
    assert sorted(p.name for p in tmp_path.iterdir()) == [moved.name]
    tracker.Wandb("p", tmp_path, name="n", config={})
    assert len(seen) == 2 and seen[1] != seen[0]


@pytest.mark.slow
def test_a_forced_rerun_logs_to_a_new_wandb_run(offline_run, tmp_path):
    """The same through ``lra.run --force`` with wandb itself (offline), on a copy of the run above.
    Fails on a05bdf0: one run id for both runs and one ``wandb/`` folder holding both."""
    import shutil

    root, finished = offline_run
    work = tmp_path / "work"
    shutil.copytree(finished, work)
    first_id = (work / tracker.ID_FILE).read_text().strip()
    again = subprocess.run(_offline_cmd(root, work, tmp_path / "res", "--force"),
                           capture_output=True, text=True, timeout=600, env=_offline_env(tmp_path))
    assert again.returncode == 0, again.stderr[-3000:]
    second_id = (work / tracker.ID_FILE).read_text().strip()
    assert second_id != first_id
    (previous,) = work.glob("previous-*")
    assert (previous / tracker.ID_FILE).read_text().strip() == first_id
    assert list((previous / "wandb").glob(f"offline-run-*-{first_id}"))
    assert [p.name for p in (work / "wandb").glob("offline-run-*")] == [
        p.name for p in (work / "wandb").glob(f"offline-run-*-{second_id}")]
