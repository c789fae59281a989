"""One reader for every number (``lra.leaderboard.reader``): ``lra.reproduce``, ``lra.sweep``'s
skip check, ``--dry-run`` and ``--select``, and the leaderboard's Markdown, CSV and LaTeX see the
same cells from the same files, and skip the same bad files with the same line.

Each test names the bug it reproduces on main a05bdf0 (issue 41), where it failed."""

import csv
import io
import json
import math
import re

import pytest
from helpers import result_record, run_record

from lra import config as config_lib
from lra import reproduce, skip_check, sweep
from lra import run as run_cli
from lra.data import default_data_dir
from lra.leaderboard import reader
from lra.leaderboard.build import build_all

A, B = "a" * 64, "b" * 64  # two data fingerprints: A is the column's (most runs read it)


def _on(record, sha, date="2026-01-01T00:00:00Z"):
    return {**record, "format_version": 2, "overrides": {}, "date": date,
            "data": {"evaluated": {"val": 1000, "test_at_last": 1000, "test_at_best_val": 1000},
                     "fingerprint": {"sha256": sha, "generator": {"name": "g", "version": 1},
                                     "files": {}}}}


def _write(results_dir, name, record, raw=None):
    (results_dir / "runs").mkdir(parents=True, exist_ok=True)
    (results_dir / "runs" / f"{name}.json").write_text(raw if raw is not None else json.dumps(record))


BAD = {  # file name -> (record or raw text, the field its skip line names)
    "accuracy_1_5": (lambda r: r["metrics"].update(test_accuracy_at_last=1.5), "<= 1"),
    "failed": (lambda r: r.update(status="failed"), "status: 'failed'"),
    "nan": (lambda r: r["metrics"].update(test_accuracy_at_last=math.nan), "a finite number"),
    "date_number": (lambda r: r.update(date=20260101), "date: expected a non-empty string"),
    "no_evaluated": (lambda r: r["data"].pop("evaluated"), "data.evaluated: missing"),
}


@pytest.fixture
def mixed(tmp_path):
    """softmax seeds 0 and 1 on the column's data, seed 2 on other data; linear seeds 0 and 1;
    and one file of each kind the leaderboard skips."""
    res = tmp_path / "results"
    for seed, acc in ((0, 0.40), (1, 0.42)):
        _write(res, f"softmax{seed}", _on(run_record("listops", "softmax", "small", seed, acc, acc), A))
        _write(res, f"linear{seed}", _on(run_record("listops", "linear", "small", seed, 0.3, 0.3), A))
    _write(res, "softmax2_other", _on(run_record("listops", "softmax", "small", 2, 0.9, 0.9), B))
    for name, (mutate, _) in BAD.items():
        record = _on(run_record("listops", "softmax", "small", 3, 0.5, 0.5), A)
        mutate(record)
        _write(res, name, record)
    _write(res, "not_an_object", None, raw="[1, 2]")
    return res


def _leaderboard_skips(res):
    skipped: list[str] = []
    build_all(res, skipped)
    return sorted(f"warning: skipped {line}" for line in skipped)


def _stderr_skips(err):
    return sorted(ln for ln in err.splitlines() if ln.startswith("warning: skipped "))


def test_the_reader_skips_each_bad_file_with_one_line_naming_the_field(mixed):
    result_set = reader.read(mixed)
    lines = {line.split(": ", 1)[0].rsplit("/", 1)[1]: line for line in result_set.skipped}
    assert set(lines) == {f"{name}.json" for name in BAD} | {"not_an_object.json"}
    for name, (_, field) in BAD.items():
        assert field in lines[f"{name}.json"], lines[f"{name}.json"]
    assert "expected a JSON object, got list" in lines["not_an_object.json"]
    keys = {str(k.row): len(v) for k, v in result_set.cells().items()}
    assert keys == {"linear": 2, "softmax": 2, "softmax [data bbbbbbbb]": 1}


def test_reproduce_keeps_other_data_apart_and_skips_what_the_leaderboard_skips(mixed, capsys):
    """Fails on a05bdf0: reproduce averaged seed 2 (other data) with seeds 0 and 1 as one cell,
    counted the file with accuracy 1.5 and the failed run, and ended in a traceback on the NaN."""
    code = reproduce.main(["lra/softmax/listops", "--preset", "small", "--seeds", "0,1,2",
                           "--no-run", "--results-dir", str(mixed)])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert _stderr_skips(err) == _leaderboard_skips(mixed)
    board = build_all(mixed, [])["markdown"].split("Test accuracy at the best-validation step")[0]
    rows = {ln.split(" | ")[1]: ln for ln in out.splitlines() if ln.startswith("| 36.37 | ")}
    assert set(rows) == {"softmax on cpu x1", "softmax [data bbbbbbbb] on cpu x1"}
    preset = rows["softmax on cpu x1"].split(" | ")[2]
    other = rows["softmax [data bbbbbbbb] on cpu x1"].split(" | ")[2]
    assert preset.endswith("(2)") and other == "90.00 (1)"
    assert f"| softmax | **{preset}**" in board  # the leaderboard's cell, same text
    assert f"| softmax [data bbbbbbbb] | {other}" in board
    assert "never one mean" in out


def test_reproduce_one_line_for_a_folder_of_bad_files_only(tmp_path, capsys):
    """Fails on a05bdf0: a NaN, a missing data.evaluated or a numeric date ended in a traceback."""
    res = tmp_path / "results"
    for name, (mutate, _) in BAD.items():
        record = _on(run_record("listops", "softmax", "small", 0, 0.5, 0.5), A)
        mutate(record)
        _write(res, name, record)
    code = reproduce.main(["lra/softmax/listops", "--preset", "small", "--seeds", "0",
                           "--no-run", "--results-dir", str(res)])
    out, err = capsys.readouterr()
    assert code == 1 and "Traceback" not in err
    assert _stderr_skips(err) == _leaderboard_skips(res)
    assert "1 of 1 seeds have no result yet" in out


# ----------------------------------------------------------------------------------------------
# The sweep: skip check, --dry-run and --select through the same reader.

TINY = ["--preset", "tiny", "--set", "data.train_size=64", "--set", "data.val_size=16",
        "--set", "data.test_size=16"]


def _config(seed, *sets):
    args = run_cli.parser().parse_args(["--task", "listops", "--attn", "softmax", "--seed",
                                        str(seed), *TINY, *(x for s in sets for x in ("--set", s))])
    return run_cli.resolve_config(args)


def _now(config):
    return skip_check.data_now(config, default_data_dir())


def _grid_args(tmp_path, *extra):
    return ["--task", "listops", "--attn", "softmax", "--seeds", "0", *TINY,
            "--grid", "train.lr=1e-3,3e-3", "--results-dir", str(tmp_path / "res"),
            "--workdirs", str(tmp_path / "wd"), *extra]


def test_select_never_chooses_a_nan_or_a_result_that_dry_run_calls_a_conflict(tmp_path, capsys):
    """Fails on a05bdf0: --select chose lr=3e-3 from a result made on other data, which --dry-run
    calls a conflict; with a NaN validation accuracy it chose the NaN (both exit 0). Neither
    counts as done, so the grid is not whole and nothing is chosen over its other half (issue 52:
    a choice is made over the whole grid)."""
    res = tmp_path / "res"
    good, other = _config(0, "train.lr=1e-3"), _config(0, "train.lr=3e-3")
    now = _now(other)
    elsewhere = {**now, "sha256": "0" * 64, "generator": {**now["generator"], "version": -1}}
    _write(res, "good", result_record(good.to_dict(), val=0.30, fingerprint=_now(good)))
    _write(res, "other_data", result_record(other.to_dict(), val=0.90, fingerprint=elsewhere))
    assert sweep.main(_grid_args(tmp_path, "--dry-run")) == 0
    dry = capsys.readouterr().out
    assert "conflict listops/softmax [train.lr=3e-3] seed 0: result other_data.json was made on " \
           "other data" in dry
    assert sweep.main(_grid_args(tmp_path, "--select")) == 1
    out = capsys.readouterr().out
    assert "chosen train" not in out and "listops/softmax: not chosen: 1 of 2 cells" in out
    assert "listops/softmax [train.lr=3e-3] seed 0 (conflict: result other_data.json" in out
    assert not (res / "selections").exists()

    nan = result_record(other.to_dict(), val=math.nan, fingerprint=_now(other))
    _write(res, "other_data", nan)  # now on this data, but its validation accuracy is NaN
    assert sweep.main(_grid_args(tmp_path, "--select")) == 1
    out, err = capsys.readouterr()
    assert "chosen train" not in out and "[train.lr=3e-3] seed 0 (run" in out
    assert not (res / "selections").exists()
    assert any("other_data.json: metrics.best_val_accuracy: expected a finite number" in ln
               for ln in _stderr_skips(err))


def test_grid_values_that_resolve_to_one_config_are_one_point(tmp_path, capsys):
    """Fails on a05bdf0: --grid train.lr=1e-3,0.001 planned (and trained) the same config twice in
    two work directories, and --select counted its one seed as (2)."""
    args = ["--task", "listops", "--attn", "softmax", "--seeds", "0", *TINY,
            "--grid", "train.lr=1e-3,0.001", "--results-dir", str(tmp_path / "res"),
            "--workdirs", str(tmp_path / "wd")]
    assert sweep.main([*args, "--dry-run"]) == 0
    out, err = capsys.readouterr()
    assert "1 run, 0 resume, 0 skip, 0 conflict (1 cells)" in out
    assert ("listops/softmax [train.lr=1e-3] seed 0 is the same config as listops/softmax "
            "[train.lr=0.001] seed 0" in err)
    config = _config(0, "train.lr=1e-3")
    _write(tmp_path / "res", "one", result_record(config.to_dict(), fingerprint=_now(config)))
    assert sweep.main([*args, "--select"]) == 0
    out = capsys.readouterr().out
    assert "chosen train.lr=0.001: test 40.00 ± 0.00 (1)" in out


def test_a_long_grid_value_gets_a_short_stable_work_directory(tmp_path, capsys):
    """Fails on a05bdf0: a 300-character value made a work-directory name over 255 bytes (OSError
    'File name too long' when the cell started)."""
    value = "x" * 300
    cell = sweep.Cell("listops", "softmax", (("model.pooling", value),), 0)
    name = sweep.workdir_for(cell, "listops-softmax-tiny-seed0")
    assert name == sweep.workdir_for(cell, "listops-softmax-tiny-seed0")  # stable
    assert len(name.encode()) < 128 and name.startswith("listops-softmax-tiny-seed0__grid-")
    (tmp_path / name).mkdir()  # a name the file system takes
    short = sweep.Cell("listops", "softmax", (("train.lr", "1e-3"),), 0)
    assert sweep.workdir_for(short, "w") == "w__train.lr=1e-3"  # short values: as before


def test_an_empty_shard_is_success(tmp_path, capsys):
    """Fails on a05bdf0: a shard with no cell ran nothing, then failed its task (exit 1) when the
    leaderboard found no results folder."""
    code = sweep.main(["--task", "listops", "--attn", "softmax", "--seeds", "0", *TINY,
                       "--shard", "3/4", "--results-dir", str(tmp_path / "res"),
                       "--workdirs", str(tmp_path / "wd")])
    assert code == 0
    assert "shard 3/4 holds no cell of this grid; nothing to do" in capsys.readouterr().err
    assert not (tmp_path / "res").exists()


# ----------------------------------------------------------------------------------------------
# The leaderboard's own outputs: LaTeX and CSV keep variant rows apart; equal means are tied.


def _tex_tables(tex):
    return re.split(r"\\begin\{table\*?\}", tex)[1:]


def test_latex_keeps_override_and_other_data_rows_out_of_the_ranked_table(tmp_path):
    """Fails on a05bdf0: `softmax [train.num_steps=2]` and `softmax [data bbbbbbbb]` sat in the
    preset's table, under "bold: best", and the override row was bold there."""
    res = tmp_path / "results"
    for seed in (0, 1):
        _write(res, f"s{seed}", _on(run_record("listops", "softmax", "small", seed, 0.4, 0.4), A))
    override = _on(run_record("listops", "softmax", "small", 0, 0.9, 0.9), A)
    override["config"]["train"]["num_steps"] = 2
    override["metrics"]["steps"] = 2
    override["overrides"] = {"train.num_steps": 2}
    _write(res, "override", override)
    _write(res, "other", _on(run_record("listops", "softmax", "small", 3, 0.8, 0.8), B))
    tex = build_all(res, [])["tex"]
    ranked, variants = [t for t in _tex_tables(tex) if "Published" not in t]
    assert "{bold}: the task's best" in ranked and "num\\_steps" not in ranked
    assert "data bbbbbbbb" not in ranked
    assert "not ranked" in variants and "\\textbf" not in variants
    assert "num\\_steps=2" in variants and "data bbbbbbbb" in variants


def test_grid_runs_on_other_data_never_push_the_preset_runs_out_of_the_ranked_table(tmp_path):
    """Issue 52 item 5, fails on 69b79f7: the column's data was the fingerprint most runs read,
    grid and --set runs counted; three grid points on other data relabelled the preset's only run
    `softmax [data aaaaaaaa]` and the ranked table had no row. The preset's own runs choose."""
    res = tmp_path / "results"
    _write(res, "preset", _on(run_record("listops", "softmax", "small", 0, 0.4, 0.4), A))
    for steps in (2, 3, 4):
        override = _on(run_record("listops", "softmax", "small", 0, 0.5, 0.5), B)
        override["config"]["train"]["num_steps"] = override["metrics"]["steps"] = steps
        override["overrides"] = {"train.num_steps": steps}
        _write(res, f"grid{steps}", override)
    rows = {str(k.row) for k in reader.read(res).cells()}
    assert rows == {"softmax", *(f"softmax [train.num_steps={n}, data bbbbbbbb]" for n in (2, 3, 4))}
    ranked = build_all(res, [])["markdown"].split("Test accuracy at the best-validation step")[0]
    assert "| softmax | **40.00 (1)** |" in ranked
    # without a preset run in the column, the runs there decide, as before
    (res / "runs" / "preset.json").unlink()
    assert "softmax [train.num_steps=2]" in {str(k.row) for k in reader.read(res).cells()}


def test_equal_means_are_both_best_and_neither_is_merely_tied(tmp_path):
    """Fails on a05bdf0: of two families with the same mean, the first by name was bold and
    best=1, the other neither best nor tied."""
    res = tmp_path / "results"
    for family in ("linear", "softmax"):
        for seed, acc in ((0, 0.40), (1, 0.42)):
            _write(res, f"{family}{seed}", _on(run_record("listops", family, "small", seed, acc, acc), A))
    out = build_all(res, [])
    rows = [r for r in csv.DictReader(io.StringIO(out["csv"])) if r["preset"] == "small"
            and r["metric"] == "test_accuracy_at_last" and r["task"] == "listops"]
    assert {(r["family"], r["best"], r["tied"]) for r in rows} == {("linear", "1", "0"),
                                                                 ("softmax", "1", "0")}
    assert "| linear | **41.00" in out["markdown"] and "| softmax | **41.00" in out["markdown"]


# ----------------------------------------------------------------------------------------------
# The sweep's grid points are the resolved config's typed values.


def test_config_types_are_compared_as_the_config_holds_them():
    """The selection's grid points are the resolved (typed) values: 1e-3 and 0.001 are one."""
    assert config_lib.flatten(_config(0, "train.lr=1e-3").to_dict())["train.lr"] == 0.001
