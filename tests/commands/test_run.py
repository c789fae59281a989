"""`python -m lra.run` end to end and its error paths; the leaderboard built from its result file."""

import json
import subprocess
import sys

import pytest
from helpers import SMALL_LISTOPS, run_module_in_process

from lra import leaderboard
from lra import run as run_cli


def test_unknown_task_exits_2_with_choices(capsys):
    with pytest.raises(SystemExit) as exc:
        run_cli.main(["--task", "listopz", "--attn", "softmax"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "listopz" in err and "listops" in err


def test_unknown_attention_exits_2_with_choices(capsys):
    with pytest.raises(SystemExit) as exc:
        run_cli.main(["--task", "listops", "--attn", "cosformr"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "cosformer" in err and "softmax" in err


def test_help_lists_tasks_attentions_presets(capsys):
    with pytest.raises(SystemExit):
        run_cli.main(["--help"])
    out = capsys.readouterr().out
    assert "listops" in out and "cosformer" in out and "softmax" in out and "tiny" in out


@pytest.mark.parametrize("override, message", [
    ("train.lr_rate=1", "Did you mean lr"),
    ("model.num_layer=2", "Did you mean num_layers"),
    ("attn.epss=1e-3", "Did you mean eps"),
    ("data.max_lenght=10", "Did you mean max_length"),
    ("train.num_steps=abc", "expected an integer"),
    ("nonsense", "key=value"),
])
def test_bad_override_exits_2_with_hint(capsys, override, message):
    code = run_cli.main(["--task", "listops", "--attn", "cosformer", "--set", override,
                         "--print-config"])
    assert code == 2
    assert message in capsys.readouterr().err


def test_override_reaches_the_resolved_config(capsys):
    code = run_cli.main(["--task", "listops", "--attn", "cosformer", "--preset", "small",
                         "--set", "train.lr=0.001", "--set", "attn.eps=1e-4", "--print-config"])
    assert code == 0
    cfg = json.loads(capsys.readouterr().out)
    assert cfg["train"]["lr"] == 0.001 and cfg["attn"]["eps"] == 1e-4
    assert cfg["preset"] == "small" and cfg["model"]["num_layers"] == 2


@pytest.mark.slow
def test_tiny_run_writes_result_and_leaderboard_row_then_resumes(tmp_path):
    cmd = [sys.executable, "-m", "lra.run", "--task", "listops", "--attn", "cosformer",
           "--preset", "tiny", "--data-dir", str(tmp_path / "data"), "--workdir",
           str(tmp_path / "work"), "--results-dir", str(tmp_path / "results"), "--no-progress",
           *SMALL_LISTOPS]
    first = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert first.returncode == 0, first.stderr[-3000:]
    assert "generating" in first.stderr  # missing data is generated, and the user is told
    files = list((tmp_path / "results" / "runs").glob("*.json"))
    assert len(files) == 1
    record = json.loads(files[0].read_text())
    for key in ("task", "attention", "preset", "seed", "config", "metrics", "device", "versions",
                "git", "date"):
        assert key in record
    m = record["metrics"]
    for key in ("best_val_accuracy", "test_accuracy_at_best_val", "test_accuracy_at_last", "steps",
                "wall_time_s", "steps_per_s", "peak_memory"):
        assert m[key] is not None, key
    assert m["steps"] == record["config"]["train"]["num_steps"]
    lines = (tmp_path / "work" / "metrics.jsonl").read_text().splitlines()
    assert {json.loads(x)["split"] for x in lines} >= {"train", "val", "test_at_last"}

    assert leaderboard.main(["--results-dir", str(tmp_path / "results")]) == 0
    board = (tmp_path / "results" / "LEADERBOARD.md").read_bytes()
    assert b"| cosformer | " in board and b"Preset `tiny`" in board
    assert f"{100 * m['test_accuracy_at_best_val']:.2f} (1)".encode() in board
    leaderboard.main(["--results-dir", str(tmp_path / "results")])
    assert (tmp_path / "results" / "LEADERBOARD.md").read_bytes() == board  # same bytes

    # the same command in the same workdir reports the completed run and writes nothing new
    second = run_module_in_process(cmd)  # the first run was the command itself; this, its main()
    assert second.returncode == 0, second.stderr[-3000:]
    assert "existing result" in second.stdout and str(files[0]) in second.stdout
    assert f"{m['test_accuracy_at_last']:.4f} at the last step" in second.stdout
    assert sorted((tmp_path / "results" / "runs").glob("*.json")) == files


@pytest.mark.parametrize("attn", ["softmax", "linear"])
def test_out_of_memory_is_a_clear_error(tmp_path, capsys, monkeypatch, attn):
    import jax
    import jax.numpy as jnp

    import lra.train

    def allocate_too_much(*args, **kwargs):  # XLA's own error: 256 GiB fails at once on the host
        jax.jit(lambda: jnp.ones((2**36,)) * 2)().block_until_ready()

    monkeypatch.setattr(lra.train, "train_and_evaluate", allocate_too_much)
    code = run_cli.main(["--task", "listops", "--attn", attn, "--preset", "tiny",
                     "--workdir", str(tmp_path / "wd"), "--data-dir", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 1
    assert "out of memory during listops/" + attn in err and "RESOURCE_EXHAUSTED" in err
    assert "Traceback" not in err and "train.grad_accum=K" in err and "model.remat=true" in err
    assert ("attn.query_chunk=512" in err) == (attn == "softmax")


def test_print_config_shows_every_option_with_its_default(capsys):
    """Fails on a05bdf0 (``"attn": {}`` and ``"data": {}``: defaults hidden)."""
    from lra import attention, tasks

    code = run_cli.main(["--task", "listops", "--attn", "performer", "--set", "attn.nb_features=64",
                         "--print-config"])
    assert code == 0
    cfg = json.loads(capsys.readouterr().out)
    assert cfg["attn"] == {**attention.options("performer"), "nb_features": 64}
    assert cfg["attn"]["kernel"] == "softmax" and cfg["attn"]["redraw"] is True
    assert cfg["data"] == tasks.data_options("listops")  # the paper preset keeps every default
