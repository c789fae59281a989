"""`python -m lra.curves` from metrics.jsonl alone; the leaderboard's learning curves from result files."""

import json
import subprocess
import sys

import pytest

from lra import curves, leaderboard
from lra.leaderboard import identity
from lra.leaderboard.curves import chance_level
from lra.metrics_log import MetricsLog

PNG = b"\x89PNG\r\n\x1a\n"


def _workdir(path, attention, seed, accuracies, task="listops"):
    log = MetricsLog(path, resume_step=0,
                     run={"task": task, "attention": attention, "preset": "small", "seed": seed})
    for i, acc in enumerate(accuracies, 1):
        log.train(10 * i, {"loss": 2.0 / i, "accuracy": acc, "lr": 1e-3, "grad_norm": 1.0},
                  timed_steps=10 * i, train_time_s=float(i))
        log.write(10 * i, "val", {"accuracy": acc, "loss": 2.0 / i, "examples": 100})
    log.close()
    return path


@pytest.fixture
def workdirs(tmp_path):
    return [_workdir(tmp_path / "a", "softmax", 0, [0.1, 0.2, 0.35]),
            _workdir(tmp_path / "b", "linear", 0, [0.1, 0.15, 0.2]),
            _workdir(tmp_path / "c", "linear", 1, [0.12, 0.18, 0.25]),
            _workdir(tmp_path / "d", "softmax", 0, [0.5, 0.5, 0.51], task="pathfinder")]


def test_curves_are_byte_identical_across_calls(workdirs, tmp_path):
    outs = [tmp_path / "one.png", tmp_path / "two.png"]
    for out in outs:
        assert curves.main([*map(str, workdirs), "--out", str(out)]) == 0
    one, two = (p.read_bytes() for p in outs)
    assert one.startswith(PNG) and len(one) > 10_000 and one == two
    other = tmp_path / "loss.png"
    assert curves.main([*map(str, workdirs[:2]), "--metric", "val_loss", "--out", str(other)]) == 0
    assert other.read_bytes() != one


def test_chance_lines_come_from_the_task_registry():
    assert chance_level("listops", "val_accuracy") == (0.1, "1/10")
    assert chance_level("pathfinder", "train_accuracy") == (0.5, "1/2")
    level, how = chance_level("pathfinder", "val_loss")
    assert how == "ln 2" and level == pytest.approx(0.6931, abs=1e-4)
    assert chance_level("listops", "train_lr") is None


def test_an_mqar_run_draws_without_a_chance_line(workdirs, tmp_path):
    """MQAR's classes are its vocabulary, a data option: the task's name does not say its chance, so
    no line is drawn for it (a traceback on 1ef2ba0: the class declares no num_classes)."""
    assert chance_level("mqar", "val_accuracy") is None
    mqar = _workdir(tmp_path / "m", "softmax", 0, [0.01, 0.4, 0.99], task="mqar")
    out = tmp_path / "mqar.png"
    assert curves.main([str(mqar), str(workdirs[0]), "--out", str(out)]) == 0
    assert out.read_bytes().startswith(PNG)


def test_curve_points_and_legend_come_from_metrics_jsonl(workdirs):
    run, records = curves.load_workdir(workdirs[2])
    assert (run["task"], run["attention"], run["seed"]) == ("listops", "linear", 1)
    assert curves.points(records, "val_accuracy") == ([10, 20, 30], [0.12, 0.18, 0.25])
    assert curves.points(records, "train_steps_per_s")[0] == [20, 30]


def test_a_workdir_without_metrics_fails_in_one_line(workdirs, tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    cmd = [sys.executable, "-m", "lra.curves", str(workdirs[0]), str(empty), "--out",
           str(tmp_path / "x.png")]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert out.returncode == 1
    assert out.stderr.strip().splitlines() == [
        f"error: {empty / 'metrics.jsonl'}: not found; {empty} is not the --workdir of a "
        f"`python -m lra.run` that has logged metrics"]
    assert not (tmp_path / "x.png").exists()


def test_old_or_unfinished_logs_fail_clearly(tmp_path, capsys):
    old = tmp_path / "old"
    old.mkdir()
    (old / "metrics.jsonl").write_text(json.dumps({"step": 5, "split": "train", "loss": 1.0}) + "\n")
    assert curves.main([str(old), "--out", str(tmp_path / "x.png")]) == 1
    assert "no run record" in capsys.readouterr().err
    fresh = tmp_path / "fresh"
    MetricsLog(fresh, resume_step=0, run={"task": "listops", "attention": "softmax",
                                          "preset": "tiny", "seed": 0}).close()
    assert curves.main([str(fresh), "--out", str(tmp_path / "x.png")]) == 1
    assert "no val_accuracy yet" in capsys.readouterr().err
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "metrics.jsonl").write_text("not json\n{}\n")
    assert curves.main([str(bad), "--out", str(tmp_path / "x.png")]) == 1
    assert f"{bad / 'metrics.jsonl'}:1: not a metrics record" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_info:
        curves.main([str(fresh), "--metric", "accuracy"])
    assert exit_info.value.code == 2


# ----------------------------------------------------------------------------------------------
# The leaderboard's figures.


def _record(attention, seed, history):
    record = {"task": "listops", "attention": attention, "preset": "small", "seed": seed,
              "config": identity.nested(identity.preset_config("listops", attention, "small", "lra"),
                                        seed),
              "metrics": {"best_val_accuracy": max(history) if history else 0.3,
                          "test_accuracy_at_best_val": 0.3, "test_accuracy_at_last": 0.3,
                          "steps": 30, "wall_time_s": 6.0, "steps_per_s": 5.0},
              "device": {"platform": "cpu", "kind": "cpu", "count": 1, "process_count": 1},
              "versions": {}, "git": {"commit": "0123456789abcdef", "dirty": False},
              "date": "2026-01-01T00:00:00Z", "status": "completed"}
    if history:
        record["eval_history"] = {"step": [10, 20, 30], "val_accuracy": history,
                                  "val_loss": [2.0, 1.8, 1.7]}
    return record


def test_leaderboard_draws_one_learning_curve_figure_per_task_and_preset(tmp_path):
    runs = tmp_path / "results" / "runs"
    runs.mkdir(parents=True)
    for name, seed, hist in (("softmax", 0, [0.2, 0.3, 0.35]), ("softmax", 1, [0.2, 0.25, 0.3]),
                             ("linear", 0, [0.15, 0.2, 0.25]), ("local", 0, None)):
        (runs / f"listops__{name}__small__seed{seed}.json").write_text(
            json.dumps(_record(name, seed, hist)))
    results = tmp_path / "results"
    assert leaderboard.main(["--results-dir", str(results)]) == 0
    text = (results / "LEADERBOARD.md").read_text()
    assert "![validation accuracy against step, listops, preset small]" \
           "(figures/curves-listops-small.png)" in text
    assert "1 run(s) of this group have no evaluation history" in text
    png = (results / "figures" / "curves-listops-small.png").read_bytes()
    assert png.startswith(PNG)
    assert leaderboard.main(["--results-dir", str(results)]) == 0
    assert (results / "figures" / "curves-listops-small.png").read_bytes() == png
    # without histories the figure goes (stale) and the section says why
    for path in runs.iterdir():
        record = json.loads(path.read_text())
        record.pop("eval_history", None)
        path.write_text(json.dumps(record))
    assert leaderboard.main(["--results-dir", str(results)]) == 0
    assert not (results / "figures" / "curves-listops-small.png").exists()
    assert "No result file holds an evaluation history yet" in (results / "LEADERBOARD.md").read_text()


def test_the_out_suffix_names_the_format(workdirs, tmp_path, capsys):
    """Fails on a05bdf0 (PNG bytes under any name)."""
    magic = {"png": PNG, "svg": b"<?xml", "pdf": b"%PDF"}
    for fmt, start in magic.items():
        out = tmp_path / f"curves.{fmt}"
        assert curves.main([*map(str, workdirs), "--out", str(out), "--width", "column"]) == 0
        data = out.read_bytes()
        assert data.startswith(start), fmt
        if fmt == "pdf":
            assert b"/Type3" not in data and b"/FontFile2" in data
        assert curves.main([*map(str, workdirs), "--out", str(out), "--width", "column"]) == 0
        assert out.read_bytes() == data  # deterministic in every format
    assert curves.main([*map(str, workdirs), "--out", str(tmp_path / "curves.jpg")]) == 1
    assert "'.jpg' names no format this writes; end the name in .png, .svg or .pdf" in \
        capsys.readouterr().err
    assert not (tmp_path / "curves.jpg").exists()


def test_curves_axis_in_words_no_title_serif_and_a_hidden_curve_still_shows(tmp_path):
    """Issue 54 item 8, fails on 049feb4: the axis read `val_accuracy`, the title could not be
    left out, no serif face, and two runs that scored the same drew one curve over the other."""
    same = [_workdir(tmp_path / "a", "softmax", 0, [0.1, 0.2, 0.3]),
            _workdir(tmp_path / "b", "linear", 0, [0.1, 0.2, 0.3])]
    svg = curves.draw(same, "val_accuracy", "svg", "column").decode()
    assert "validation accuracy (%)" in svg and "val_accuracy" not in svg
    assert "Validation accuracy against training step" in svg
    bare = curves.draw(same, "val_accuracy", "svg", "column", title=False, serif=True).decode()
    assert "against training step" not in bare
    assert "DejaVu Serif" in bare or "DejaVuSerif" in bare
    assert curves.main([*map(str, same), "--no-title", "--serif", "--out",
                        str(tmp_path / "c.pdf")]) == 0
    # the first curve's hollow markers are larger than the second's: drawn over, both show
    from lra.leaderboard import figures
    fig = figures.learning_curves(
        [{"label": "a", "family": "softmax", "steps": [1, 2], "values": [0.1, 0.2]},
         {"label": "b", "family": "linear", "steps": [1, 2], "values": [0.1, 0.2]}],
        chance=[], title=None, ylabel="y", width=figures.COLUMN_WIDTH, percent=True)
    first, second = fig.axes[0].get_lines()[:2]
    assert first.get_markersize() > second.get_markersize()
    assert first.get_markerfacecolor() == "none" and fig.axes[0].get_title() == ""
