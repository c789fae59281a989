"""What a leaderboard cell holds (only runs of its preset's config) and every bad input of
``lra.leaderboard`` and ``lra.curves`` as one line: run, bench and peers files, metrics files, paths.

The tests marked "fails on main 9185bb1" reproduce the bugs of issue 23 there."""

import copy
import json
import os
import shutil
import subprocess

import pytest
from helpers import REPO, bench_record, preset_config, run_record

from lra import curves, leaderboard
from lra.leaderboard import identity, load
from lra.metrics_log import MetricsLog

ROOT = os.geteuid() == 0  # permissions do not stop root: those cases are skipped there


def _write(results, name, record):
    (results / "runs").mkdir(parents=True, exist_ok=True)
    (results / "runs" / f"{name}.json").write_text(json.dumps(record))


def _v2(record, overrides=None):
    return {**record, "format_version": 2, "overrides": overrides or {},
            "data": {"evaluated": {"val": 1000, "test_at_last": 1000, "test_at_best_val": 1000},
                     "fingerprint": {"sha256": "a" * 64, "generator": {"name": "g", "version": 1},
                                     "files": {"listops/x.tsv": {"bytes": 10, "sha256": "b" * 64}}}}}


def _rows(text, family):
    return [line for line in text.splitlines() if line.startswith(f"| {family} ")]


# ----------------------------------------------------------------------------------------------
# A cell holds only runs of its own config.


def test_a_cell_holds_only_the_preset_run_not_an_overridden_one(tmp_path):
    """Fails on main 9185bb1: the newer `--set train.num_steps=2` run replaced the preset's seed 0."""
    results = tmp_path / "results"
    _write(results, "preset", run_record("listops", "softmax", "small", 0, 0.40, 0.40))
    override = run_record("listops", "softmax", "small", 0, 0.12, 0.11)
    override["config"]["train"]["num_steps"] = 2
    override["metrics"]["steps"] = 2
    override["date"] = "2026-02-01T00:00:00Z"  # newer
    _write(results, "override", _v2(override, {"train.num_steps": 2}))
    text = leaderboard.render(results)
    headline = text.split("Test accuracy at the best-validation step")[0]
    assert "| softmax | **40.00 (1)** |" in headline
    assert "| softmax [train.num_steps=2] | 11.00 (1) |" in headline  # its own row, not ranked
    assert "runs whose config is not the preset's" in headline
    assert "Superseded" not in text


def test_a_v1_run_with_another_config_is_not_averaged_with_the_preset(tmp_path):
    """Fails on main 9185bb1: another seed of an overridden run was averaged in as "2 seeds"."""
    results = tmp_path / "results"
    _write(results, "preset", run_record("listops", "softmax", "small", 0, 0.40, 0.40))
    other = run_record("listops", "softmax", "small", 1, 0.20, 0.20)
    other["config"]["train"]["lr"] = 0.5  # v1: no overrides field, but the config says it
    _write(results, "other", other)
    text = leaderboard.render(results)
    assert "| softmax | **40.00 (1)** |" in text
    assert "| softmax [train.lr=0.5] | 20.00 (1) |" in text
    assert "(2)" not in text.split("## Measured, modern")[0]


def _on_data(record, sha, date="2026-01-01T00:00:00Z"):
    out = _v2({**record, "date": date})
    out["data"]["fingerprint"]["sha256"] = sha
    return out


def test_a_run_on_other_data_is_not_averaged_with_the_cell(tmp_path):
    """Fails on 040ea93: a preset run and a same-config run on other data (another
    data.fingerprint.sha256) were averaged into one cell as "2 seeds"."""
    results = tmp_path / "results"
    a, b = "1a2b3c4d" + "0" * 56, "9f8e7d6c" + "0" * 56
    for seed, acc in ((0, 0.40), (1, 0.42)):
        _write(results, f"a{seed}", _on_data(run_record("listops", "softmax", "small", seed, acc, acc), a))
    _write(results, "linear", _on_data(run_record("listops", "linear", "small", 0, 0.3, 0.3), a))
    # seed 2 and a newer seed 0 on other data: neither joins nor replaces the column's runs
    _write(results, "b2", _on_data(run_record("listops", "softmax", "small", 2, 0.10, 0.10), b))
    _write(results, "b0", _on_data(run_record("listops", "softmax", "small", 0, 0.12, 0.12), b,
                                   "2026-03-01T00:00:00Z"))
    text = leaderboard.render(results)
    headline = text.split("Test accuracy at the best-validation step")[0]
    assert "| softmax | **41.00 ± 1.41" in headline and "(2)** |" in _rows(headline, "softmax")[0]
    assert "| softmax [data 9f8e7d6c] | 11.00 ± 1.41" in headline  # its own row, unranked
    assert "Superseded" not in text
    # a v1 run (no fingerprint) keeps its place in the preset's cell
    _write(results, "v1", run_record("listops", "softmax", "small", 3, 0.44, 0.44))
    runs = load.load_runs(results)
    assert {r["_file"]: r["_row"] for r in runs if r["seed"] == 3} == {"v1.json": "softmax"}
    assert {r["_row"] for r in runs} == {"softmax", "linear", "softmax [data 9f8e7d6c]"}


def test_non_semantic_keys_and_the_cls_global_token_stay_in_the_cell(tmp_path):
    results = tmp_path / "results"
    a = run_record("listops", "local", "small", 0, 0.40, 0.40)
    b = run_record("listops", "local", "small", 1, 0.42, 0.42)
    b["config"]["train"]["log_every"] = 1  # logging only
    b["config"]["attn"]["global_tokens"] = 1  # what the CLS rule sets
    _write(results, "a", a)
    _write(results, "b", b)
    assert "| local | **41.00 ± 1.41" in leaderboard.render(results)
    assert identity.differences({**b, "config": {**b["config"], "attn": {"global_tokens": 0}}}) \
        == {"attn.global_tokens": 0}


def test_the_jax_free_preset_resolution_is_lra_config_load():
    """identity.preset_config copies lra.config.load's layer order: this holds them together (every
    family on one task, and four families with deltas or rules on every task, preset, protocol)."""
    from lra import attention, config

    cases = [("listops", a, "tiny", p) for a in attention.available() for p in config.PROTOCOLS]
    cases += [(t, a, pr, p) for t in ("listops", "text", "retrieval", "image", "pathfinder", "pathx")
              for a in ("softmax", "performer", "local", "s5") for pr in config.PRESETS
              for p in config.PROTOCOLS]
    for task, attn, preset, proto in cases:
        resolved = config.load(task, attn, preset=preset, protocol=proto, seed=3).to_dict()
        assert identity.differences({"config": resolved}) == {}, (task, attn, preset, proto)
    changed = config.load("listops", "softmax", preset="small",
                          overrides=["train.num_steps=2", "model.dropout=0.2"]).to_dict()
    assert identity.differences({"config": changed}) == {"model.dropout": 0.2, "train.num_steps": 2}


def test_no_committed_run_is_in_another_configs_cell():
    """Every committed run is its preset's config, except, on the recall track, in the keys its
    table shows as a column or beside the cell (recall.AXES: the length, the width, the learning
    rate of the grid)."""
    from lra.leaderboard import recall

    runs = load.load_runs(REPO / "results")
    lra_runs, recall_runs = recall.split(runs)
    assert lra_runs and [r["_file"] for r in lra_runs if r["_diff"]] == []
    assert [r["_file"] for r in recall_runs if set(r["_diff"]) - set(recall.AXES)] == []


# ----------------------------------------------------------------------------------------------
# Run files: each bad one is skipped in one line naming it and the field; the rest is published.


def _good():
    r = run_record("listops", "softmax", "small", 0, 0.40, 0.39)
    r["metrics"]["best_val_step"] = 100
    r["eval_history"] = {"step": [50, 100], "val_accuracy": [0.3, 0.40], "val_loss": [2.0, 1.5]}
    r["data"] = {"evaluated": {"val": 1000, "test_at_best_val": 1000, "test_at_last": 1000}}
    return r


def _set(path, value):
    def mutate(r):
        node = r
        *parents, last = path.split(".")
        for p in parents:
            node = node[p]
        if value is KeyError:
            del node[last]
        else:
            node[last] = value
        return r
    return mutate


RUN_CASES = [  # (case, mutation, what the line says)
    ("not an object", lambda r: [r], "expected a JSON object"),
    ("format version 3", _set("format_version", 3), "format_version: int 3; this leaderboard reads 1 and 2"),
    ("format version text", _set("format_version", "2"), "format_version: str '2'"),
    ("no task", _set("task", KeyError), "task: missing"),
    ("task a number", _set("task", 7), "task: expected a non-empty string"),
    ("unknown task", _set("task", "sudoku"), "unknown task 'sudoku'"),
    ("seed negative", _set("seed", -1), "seed: expected an integer >= 0"),
    ("seed a bool", _set("seed", True), "seed: expected an integer"),
    ("protocol unknown", _set("protocol", "fancy"), "protocol: 'fancy'"),
    ("config not an object", _set("config", []), "config: expected an object"),
    ("config without train", _set("config.train", KeyError), "config.train: missing"),
    ("config of another family", _set("config.attention", "linear"),
     "config.attention is 'linear' but attention is 'softmax'"),
    ("config of another seed", _set("config.seed", 4), "config.seed is 4 but seed is 0"),
    ("config of another preset", _set("config.preset", "tiny"), "config.preset is 'tiny'"),
    ("config of another protocol", _set("config.protocol", "modern"), "config.protocol is 'modern'"),
    ("num_steps zero", _set("config.train.num_steps", 0), "config.train.num_steps: expected an integer >= 1"),
    ("no metrics", _set("metrics", KeyError), "metrics: missing"),
    ("accuracy as text", _set("metrics.test_accuracy_at_last", "0.5"),
     "metrics.test_accuracy_at_last: expected a finite number"),
    ("accuracy in percent", _set("metrics.test_accuracy_at_last", 39.0),
     "metrics.test_accuracy_at_last: expected a finite number <= 1"),
    ("accuracy NaN", _set("metrics.test_accuracy_at_best_val", float("nan")),
     "metrics.test_accuracy_at_best_val: expected a finite number"),
    ("best val negative", _set("metrics.best_val_accuracy", -0.1), "metrics.best_val_accuracy"),
    ("steps beyond the config", _set("metrics.steps", 5000),
     "metrics.steps: 5000 is more than config.train.num_steps 1000"),
    ("steps a float", _set("metrics.steps", 100.0), "metrics.steps: expected an integer"),
    ("wall time missing", _set("metrics.wall_time_s", KeyError), "metrics.wall_time_s: missing"),
    ("peak memory text", _set("metrics.peak_memory", "1 GiB"), "metrics.peak_memory: expected an object"),
    ("best step not evaluated", _set("metrics.best_val_step", 70),
     "metrics.best_val_step: 70 is not a step of eval_history"),
    ("best step after the end", _set("metrics.best_val_step", 101), "metrics.best_val_step: expected"),
    ("best val not the history's", _set("metrics.best_val_accuracy", 0.5),
     "metrics.best_val_accuracy: 0.5 is not the best of eval_history"),
    ("history lengths", _set("eval_history.val_loss", [1.0]), "eval_history.val_loss: 1 values for 2 steps"),
    ("history steps unsorted", _set("eval_history.step", [100, 50]), "eval_history.step[1]"),
    ("history accuracy text", _set("eval_history.val_accuracy", ["a", 0.4]),
     "eval_history.val_accuracy[0]"),
    ("zero examples", _set("data.evaluated.val", 0), "saw zero examples (val)"),
    ("examples text", _set("data.evaluated.val", "many"), "data.evaluated.val: expected an integer"),
    ("no device", _set("device", KeyError), "device: missing"),
    ("device count zero", _set("device.count", 0), "device.count: expected an integer >= 1"),
    ("git not an object", _set("git", "abc"), "git: expected an object"),
    ("date not a date", _set("date", "yesterday"), "date: expected a UTC time"),
    ("preempted", _set("status", "preempted"), "status: 'preempted', expected 'completed'"),
    ("unknown preset", lambda r: _set("config.preset", "huge")(_set("preset", "huge")(r)),
     "the preset 'huge' of listops"),
    ("tracker without a run id", _set("tracker", {"name": "wandb"}), "tracker.run_id: missing"),
    ("tracker not an object", _set("tracker", "wandb"), "tracker: expected an object"),
    ("v2 without overrides", lambda r: {k: v for k, v in _v2(r).items() if k != "overrides"},
     "overrides: missing"),
    ("v2 override not in the config", lambda r: _v2(r, {"train.num_steps": 7}),
     "overrides.train.num_steps is 7 but config has 1000"),
    ("v2 override unknown key", lambda r: _v2(r, {"train.nope": 1}), "overrides.train.nope: not a key"),
    ("v2 without fingerprint", lambda r: _set("data.fingerprint", KeyError)(_v2(r)),
     "data.fingerprint: missing"),
    ("v2 fingerprint not hex", lambda r: _set("data.fingerprint.sha256", "xyz")(_v2(r)),
     "data.fingerprint.sha256: 'xyz' is not a sha256"),
    ("v2 fingerprint file size", lambda r: _set("data.fingerprint.files", {"a": {"bytes": -1}})(_v2(r)),
     "data.fingerprint.files['a'].bytes"),
]


@pytest.mark.parametrize("case,mutate,expected", RUN_CASES, ids=[c[0] for c in RUN_CASES])
def test_a_bad_run_file_is_one_line_naming_the_field(case, mutate, expected, tmp_path, capsys):
    results = tmp_path / "results"
    _write(results, "good", _good())
    _write(results, "bad", mutate(copy.deepcopy(_good())))
    lines, _ = [], None
    runs = load.load_runs(results, lines)
    assert [r["_file"] for r in runs] == ["good.json"]
    assert len(lines) == 1 and "bad.json: " in lines[0] and expected in lines[0], lines


def test_a_run_with_and_one_without_a_tracker_are_both_read(tmp_path):
    results = tmp_path / "results"
    _write(results, "plain", _good())
    tracked = {**_good(), "seed": 1, "config": preset_config("listops", "softmax", "small", 1),
               "tracker": {"name": "wandb", "run_id": "0123abcd", "project": "p", "entity": None,
                           "group": None, "tags": []}}
    _write(results, "tracked", tracked)
    skipped = []
    assert len(load.load_runs(results, skipped)) == 2 and skipped == []


def test_a_v2_preset_run_and_a_good_v1_run_are_both_read(tmp_path):
    results = tmp_path / "results"
    _write(results, "v1", _good())
    _write(results, "v2", _v2({**_good(), "seed": 1, "config": preset_config("listops", "softmax",
                                                                            "small", 1)}))
    skipped = []
    assert len(load.load_runs(results, skipped)) == 2 and skipped == []


def test_an_evaluation_file_is_listed_apart_not_warned_about(tmp_path, capsys):
    results = tmp_path / "results"
    _write(results, "run", _good())
    _write(results, "run__eval-last100-test",
           {"task": "listops", "evaluation_of": {"step": 100}, "metrics": {"accuracy": 0.1}})
    assert leaderboard.main(["--results-dir", str(results)]) == 0
    assert "skipped" not in capsys.readouterr().err
    text = (results / "LEADERBOARD.md").read_text()
    assert "Evaluations of checkpoints" in text and "`run__eval-last100-test.json`" in text
    assert "| softmax | **39.00 (1)** |" in text  # the evaluation is not a second seed


def test_a_merged_runs_folder_builds_from_what_it_can_read(tmp_path, capsys):
    results = tmp_path / "results"
    _write(results, "good", _good())
    (results / "runs" / "folder.json").mkdir()  # a folder with a result file's name
    (results / "runs" / "binary.json").write_bytes(b"\x00\xff\xfe")
    (results / "runs" / "cut.json").write_text(json.dumps(_good())[:100])  # cut short by a copy
    (results / "runs" / "empty.json").write_text("")
    assert leaderboard.main(["--results-dir", str(results)]) == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert sorted(line.split("/")[-1].split(":")[0] for line in err) == [
        "binary.json", "cut.json", "empty.json"]
    assert "| softmax | **39.00 (1)** |" in (results / "LEADERBOARD.md").read_text()


# ----------------------------------------------------------------------------------------------
# Bench and peers files.


def _bench_set(path, value):
    def mutate(r):
        node = r
        *parents, last = path.split(".")
        for p in parents:
            node = node[int(p)] if isinstance(node, list) else node[p]
        if value is KeyError:
            del node[last]
        else:
            node[last] = value
        return r
    return mutate


BENCH_CASES = [
    ("a list", lambda r: [r], "expected a JSON object"),
    ("other schema", _bench_set("schema", "lra.bench/0"), "schema: str 'lra.bench/0'"),
    ("no task", _bench_set("task", KeyError), "task: missing"),
    ("batch text", _bench_set("batch", "4"), "batch: expected an integer"),
    ("no date", _bench_set("date", KeyError), "date: missing"),
    ("host without cores", _bench_set("device.host", {"cpu": "x"}), "device.host.cores: missing"),
    ("results empty", _bench_set("results", []), "results: empty"),
    ("result not an object", _bench_set("results", [3]), "results[0]: expected an object"),
    ("result without length", _bench_set("results.0.length", KeyError), "results[0].length: missing"),
    ("ok without timing", _bench_set("results.0.step_time_s", KeyError),
     "results[0].step_time_s.median: missing"),
    ("memory text", _bench_set("results.0.memory.bytes", "1"), "results[0].memory.bytes: expected"),
    ("skipped without reason", _bench_set("results.8.reason", KeyError), "results[8].reason: missing"),
]


@pytest.mark.parametrize("case,mutate,expected", BENCH_CASES, ids=[c[0] for c in BENCH_CASES])
def test_a_bad_bench_file_is_one_line_naming_the_field(case, mutate, expected, tmp_path):
    eff = tmp_path / "efficiency"
    eff.mkdir()
    (eff / "good.json").write_text(json.dumps(bench_record()))
    (eff / "bad.json").write_text(json.dumps(mutate(bench_record())))
    skipped = []
    assert [r["_file"] for r in load.load_efficiency(tmp_path, skipped)] == ["good.json"]
    assert len(skipped) == 1 and "bad.json: " in skipped[0] and expected in skipped[0], skipped


def _peer(**fields):
    return json.dumps({"peer": "torch_sdpa", "mechanism": "softmax", "kind": "core", "seq_len": 1024,
                       "status": "ok", "fwdbwd_ms_median": 5.0, "fwdbwd_probe_gflops": [300],
                       **fields})


PEERS_CASES = [
    ("not json", "{", "unreadable (JSONDecodeError"),
    ("a list line", "[1, 2]", "line 1: expected a JSON object"),
    ("no peer", json.dumps({"mechanism": "softmax", "status": "ok", "fwdbwd_ms_median": 1.0}),
     "line 1.peer: missing"),
    ("length text", _peer(seq_len="1024"), "line 1.seq_len: expected an integer"),
    ("time text", _peer(fwdbwd_ms_median="fast"), "line 1.fwdbwd_ms_median: expected"),
    ("probes text", _peer(fwdbwd_probe_gflops=["x"]), "line 1.fwdbwd_probe_gflops"),
    ("header without command", json.dumps({"peers_run": {"git": "abc"}}),
     "line 1.peers_run.command: missing"),
]


@pytest.mark.parametrize("case,line,expected", PEERS_CASES, ids=[c[0] for c in PEERS_CASES])
def test_a_bad_peers_file_is_one_line_and_the_rest_is_published(case, line, expected, tmp_path):
    """Fails on main 9185bb1 (a missing field or a wrong type crashed the whole leaderboard)."""
    eff = tmp_path / "efficiency"
    eff.mkdir()
    (eff / "peers-cpu-1.jsonl").write_text(_peer() + "\n" + _peer(peer="ours_softmax_kernel") + "\n")
    (eff / "peers-cpu-2.jsonl").write_text(line + "\n")
    skipped = []
    text, _ = leaderboard.build(tmp_path, skipped)
    assert len(skipped) == 1 and "peers-cpu-2.jsonl: " in skipped[0] and expected in skipped[0]
    assert "From `peers-cpu-1.jsonl`" in text and "peers-cpu-2" not in text


# ----------------------------------------------------------------------------------------------
# Paths the leaderboard writes.


def test_an_output_the_leaderboard_cannot_write_is_one_line(tmp_path, capsys):
    results = tmp_path / "results"
    _write(results, "good", _good())
    (results / "leaderboard.csv").mkdir()  # in the way
    assert leaderboard.main(["--results-dir", str(results)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: cannot write the leaderboard under")
    (results / "leaderboard.csv").rmdir()
    shutil.rmtree(results / "figures", ignore_errors=True)
    (results / "figures").write_text("a file where the folder goes")
    assert leaderboard.main(["--results-dir", str(results)]) == 1
    assert len(capsys.readouterr().err.strip().splitlines()) == 1


# ----------------------------------------------------------------------------------------------
# lra.curves: malformed metrics files and outputs it cannot write.


def _metrics(path, lines):
    path.mkdir(parents=True, exist_ok=True)
    (path / "metrics.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


RUN_LINE = {"step": 0, "split": "run", "task": "listops", "attention": "softmax", "preset": "tiny",
            "seed": 0}
CURVES_CASES = [
    ("value text", [RUN_LINE, {"step": 10, "split": "val", "accuracy": "high"}],
     "step 10 holds accuracy = 'high', not a finite number"),
    ("step text", [RUN_LINE, {"step": "ten", "split": "val", "accuracy": 0.2}], "step 'ten'"),
    ("step negative", [RUN_LINE, {"step": -1, "split": "val", "accuracy": 0.2}], "step -1"),
    ("record a list", [RUN_LINE, [1, 2]], "not a metrics record"),
    ("run without task", [{"step": 0, "split": "run", "attention": "softmax", "seed": 0},
                          {"step": 10, "split": "val", "accuracy": 0.2}], "no 'task'"),
    ("unknown task", [{**RUN_LINE, "task": "sudoku"}, {"step": 10, "split": "val", "accuracy": 0.2}],
     "sudoku"),
]


@pytest.mark.parametrize("case,lines,expected", CURVES_CASES, ids=[c[0] for c in CURVES_CASES])
def test_curves_on_malformed_metrics_is_one_line(case, lines, expected, tmp_path, capsys):
    wd = _metrics(tmp_path / "wd", lines)
    assert curves.main([str(wd), "--out", str(tmp_path / "x.png")]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and expected in err[0], err
    assert not (tmp_path / "x.png").exists()


@pytest.fixture
def good_workdir(tmp_path):
    log = MetricsLog(tmp_path / "wd", resume_step=0,
                     run={k: RUN_LINE[k] for k in ("task", "attention", "preset", "seed")})
    log.write(10, "val", {"accuracy": 0.2, "loss": 2.0})
    log.close()
    return tmp_path / "wd"


def test_curves_output_it_cannot_write_is_one_line(good_workdir, tmp_path, capsys):
    a_file = tmp_path / "file"
    a_file.write_text("x")
    cases = [(tmp_path / "missing" / "x.png", "the folder"), (tmp_path, "is a folder"),
             (a_file / "x.png", "is not a folder")]
    if not ROOT:
        locked = tmp_path / "locked"
        locked.mkdir(mode=0o500)
        cases.append((locked / "x.png", "no permission"))
    for out, expected in cases:
        assert curves.main([str(good_workdir), "--out", str(out)]) == 1
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and expected in err[0], (out, err)
    assert curves.main([str(good_workdir), "--out", str(tmp_path / "ok.png")]) == 0


# ----------------------------------------------------------------------------------------------
# Tables and figures for a paper.


def _paper_results(tmp_path):
    results = tmp_path / "results"
    for seed, (best, last) in enumerate(((0.40, 0.39), (0.42, 0.41), (0.10, 0.10))):
        _write(results, f"softmax{seed}", run_record("listops", "softmax", "small", seed, best, last))
    for seed, acc in enumerate((0.30, 0.32)):
        _write(results, f"lin_ear{seed}", run_record("listops", "linear", "small", seed, acc, acc))
    over = run_record("listops", "linear", "small", 0, 0.5, 0.5)
    over["config"]["model"]["num_layers"] = 3
    _write(results, "over", _v2(over, {"model.num_layers": 3}))
    for r in (results / "runs").iterdir():  # evaluated on 1000 examples
        rec = json.loads(r.read_text())
        rec.setdefault("data", {"evaluated": {"test_at_last": 1000, "test_at_best_val": 1000}})
        r.write_text(json.dumps(rec))
    return results


def test_csv_tex_and_markdown_agree_and_mark_seeds_at_chance(tmp_path):
    results = _paper_results(tmp_path)
    assert leaderboard.main(["--results-dir", str(results)]) == 0
    md = (results / "LEADERBOARD.md").read_text()
    rows = (results / "leaderboard.csv").read_text().splitlines()
    assert rows[0].split(",") == list(leaderboard.export.CSV_COLUMNS)
    soft = next(r for r in rows if r.startswith("lra,small,cpu x1,test_accuracy_at_last,listops,softmax,"))
    # seed 2 at 10% on 1000 ten-class examples: within one standard error (0.95%) of 1/10
    # the interval clipped to [0, 100] (issue 45; it was [-13.10, 73.10]) and said so
    assert soft.split(",")[8:18] == ["3", "30.0000", "17.3494", "0.0000", "73.1017", "1", "0", "1",
                                     "0", "1"]
    assert "| 30.00 ± 17.35 [0.00, 73.10] (3) ≈ 1/3 at chance |" in md  # tied with linear
    over = next(r for r in rows if ",linear,[model.num_layers=3]," in r)
    assert over.split(",")[14:17] == ["0", "0", "0"]  # never best, never tied: its own row
    tex = (results / "leaderboard.tex").read_text()
    assert "\\toprule" in tex and "\\textbf{31.00}$^{\\dagger}$ {\\scriptsize $\\pm$1.41}" in tex
    assert "$^{\\circ}$" in tex and "Linear Transformer {\\scriptsize {[}model.num\\_layers=3{]}}" in tex
    assert "Published test accuracy" in tex and "Sinkhorn Transformer$^{a}$ & 33.67" in tex


def test_the_latex_compiles(tmp_path):
    engine = shutil.which("pdflatex") or shutil.which("tectonic")
    if engine is None:
        pytest.skip("no LaTeX engine installed (pdflatex or tectonic)")
    results = _paper_results(tmp_path)
    assert leaderboard.main(["--results-dir", str(results)]) == 0
    (results / "paper.tex").write_text("\\documentclass{article}\\usepackage{booktabs}"
                                       "\\begin{document}\\input{leaderboard.tex}\\end{document}\n")
    args = [engine, "-interaction=nonstopmode", "-halt-on-error", "paper.tex"] \
        if engine.endswith("pdflatex") else [engine, "paper.tex"]
    out = subprocess.run(args, cwd=results, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout[-2000:]
    assert (results / "paper.pdf").stat().st_size > 1000


def test_a_registered_task_beyond_lras_six_gets_its_column(tmp_path, monkeypatch):
    """Fails on main 9185bb1: results of any task but LRA's six were skipped as unknown."""
    import sys
    import types

    from lra import tasks

    module = types.ModuleType("lra.configs.copytask")
    module.BASE, module.PRESETS = {"train.num_steps": 100}, {"small": {"train.lr": 0.01}}
    monkeypatch.setitem(sys.modules, "lra.configs.copytask", module)
    monkeypatch.setattr(tasks, "available", lambda: ["copytask", "image", "listops", "pathfinder",
                                                     "pathx", "retrieval", "text"])
    results = tmp_path / "results"
    _write(results, "lra", run_record("listops", "softmax", "small", 0, 0.40, 0.40))
    rec = run_record("listops", "softmax", "small", 0, 0.90, 0.90)
    rec["task"] = "copytask"
    rec["config"] = identity.nested(identity.preset_config("copytask", "softmax", "small", "lra"))
    _write(results, "copy", rec)
    skipped = []
    text, _ = leaderboard.build(results, skipped)
    assert skipped == []
    assert "| attention | listops | text | retrieval | image | pathfinder | pathx | copytask |" in text
    assert "| softmax | **40.00 (1)** | — | — | — | — | — | **90.00 (1)** |" in text


@pytest.mark.parametrize("signame", ["SIGTERM", "SIGINT"])
def test_a_signal_while_the_leaderboard_writes_exits_75_and_cuts_no_file(tmp_path, signame):
    """Fails on 040ea93 (exit 0: there was no such hook; an outside SIGTERM killed it, -15, and
    SIGINT gave a KeyboardInterrupt traceback), and each output was written in place, so a signal
    mid-write could leave a cut-short LEADERBOARD.md. The hook sends the signal just before the
    outputs are written."""
    import sys

    results = tmp_path / "results"
    _write(results, "good", _good())
    (results / "LEADERBOARD.md").write_text("the earlier page\n")
    env = {**os.environ, "LRA_TEST_SIGNAL_AT": f"write:{signame}"}
    done = subprocess.run([sys.executable, "-m", "lra.leaderboard", "--results-dir", str(results)],
                          capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 75, done.stderr[-2000:]
    assert done.stderr.strip().splitlines() == [
        f"{signame}: stopped; every file is whole (written or as before); re-run the same command"]
    assert (results / "LEADERBOARD.md").read_text() == "the earlier page\n"
    assert not list(results.glob(".*.tmp"))


# ----------------------------------------------------------------------------------------------
# The leaderboard skips and lists the result files it cannot use (issue 11, bug 9).


def test_leaderboard_skips_invalid_result_files(finished, tmp_path, capsys):
    results = tmp_path / "results"
    runs = results / "runs"
    shutil.copytree(finished[1] / "runs", runs)
    good = json.loads(next(runs.iterdir()).read_text())
    bad = {
        "no-device": {k: v for k, v in good.items() if k != "device"},
        "string-accuracy": {**good, "metrics": {**good["metrics"], "test_accuracy_at_last": "0.5"}},
        "unknown-task": {**good, "task": "sudoku"},
        "zero-examples": {**good, "data": {**good["data"],
                                           "evaluated": {**good["data"]["evaluated"], "val": 0}}},
    }
    for name, record in bad.items():
        (runs / f"{name}.json").write_text(json.dumps(record))
    (runs / "x.json").write_bytes(b"\x00\xff\xfe binary")
    assert leaderboard.main(["--results-dir", str(results)]) == 0
    err = capsys.readouterr().err
    for name in (*bad, "x"):
        assert f"{name}.json" in err, name
    assert "(1)" in (results / "LEADERBOARD.md").read_text()  # the valid run, counted once
    assert leaderboard.main(["--results-dir", str(results), "--strict"]) == 1


def test_leaderboard_fails_on_a_missing_results_dir(tmp_path, capsys):
    assert leaderboard.main(["--results-dir", str(tmp_path / "nope")]) == 1
    assert not (tmp_path / "nope").exists()
