"""The accelerator window (scripts/device_window.sh, lra/bench/device_check.py) on CPU: its schedule,
its merge of bench parts and its device lock as functions, and the whole script at toy sizes in the
phase order of the real one, run to its end and killed at random moments: no typo waits for a GPU,
and a window cut anywhere still returns what it finished."""

import json
import os
import random
import re
import signal
import subprocess
import sys
import tarfile
import time
import tomllib
from pathlib import Path

import psutil
import pytest
from helpers import REPO
from packaging.requirements import Requirement

from lra import stop_signals
from lra.bench import device_check
from lra.bench.steps import wait_for_device_lock
from lra.leaderboard.load import check_efficiency, check_run

TINY_BENCH = ["--bench-set", "model.num_layers=1", "--bench-set", "model.emb_dim=32", "--bench-set",
              "model.qkv_dim=32", "--bench-set", "model.mlp_dim=64", "--bench-set", "model.num_heads=2"]
TINY_TRAIN = ["--train-preset", "tiny", "--train-set", "data.train_size=64", "--train-set",
              "data.val_size=16", "--train-set", "data.test_size=16", "--train-set",
              "train.num_steps=2", "--train-set", "train.checkpoint_every=2"]
# Every phase with two of everything: two probes, two runs at once (--share-cap 2), two bench
# groups compiling at once, at sizes a 2-core CPU takes in seconds.
TOY_WINDOW = ["--lengths", "32", "--bench-attn", "cosformer,linear", "--bench-group-size", "1",
              "--bench-parallel", "2", "--batch", "2", "--steps", "1", "--warmup", "0",
              "--train-attn", "softmax,linear", "--eval-every", "1", "--scan-length", "40",
              "--probe-steps", "2", "--probe-parallel", "2", "--share-cap", "2",
              "--max-at-once", "2", "--peak-size", "256", *TINY_BENCH, *TINY_TRAIN]
# The real boxes scaled to a half (about 290 s in all): the toy phases take seconds each on a
# quiet 2-core host, and a few times that on a busy one.
SCALE = 0.5
TOY_SCALE = ["--time-scale", str(SCALE), "--grace", "4"]


def _summary(results_dir):
    (path,) = (results_dir / "efficiency").glob("device-check__*.jsonl")
    return json.loads(path.read_text())


# ---------------------------------------------------------------- the schedule of the ListOps runs

def _probe(predicted, share=0.5, peak=None, limit=None):
    """A probe record whose predicted run takes ``predicted`` seconds."""
    return {"ready_s": predicted - 100.0, "num_steps": 100, "sync_s": 1.0, "eval_batches": 0,
            "eval_s": 0.0, "share": share, "peak_bytes": peak, "bytes_limit": limit}


def _schedule(queue, running, left, probes, longest=None, cap=0.9, at_once=3):
    return device_check.schedule(queue, running, left, probes, longest_s=longest, share_cap=cap,
                                 max_at_once=at_once)


def test_a_run_that_cannot_finish_does_not_start_and_a_shorter_one_later_may():
    probes = {"softmax": _probe(300), "cosformer": _probe(200, share=0.9), "linear": _probe(100)}
    start, drop = _schedule(["softmax", "cosformer", "linear"], [], 250, probes)
    # softmax needs 1.15 x 300 s: dropped; cosformer fits and keeps the device busy (0.9)
    assert start == ["cosformer"] and list(drop) == ["softmax"]
    assert "predicted 300 s" in drop["softmax"] and "250 s left" in drop["softmax"]
    # linear fits in time but not beside cosformer: it waits (and is not dropped)
    start, drop = _schedule(["linear"], ["cosformer"], 200, probes)
    assert start == [] and drop == {}
    assert _schedule(["linear"], [], 200, probes) == (["linear"], {})


def test_runs_share_the_device_while_their_shares_and_memory_fit():
    probes = {"a": _probe(100, 0.4), "b": _probe(100, 0.4), "c": _probe(100, 0.4)}
    assert _schedule(["a", "b", "c"], [], 500, probes)[0] == ["a", "b"]  # 0.4 + 0.4 <= 0.9
    assert _schedule(["a", "b", "c"], [], 500, probes, cap=2.0, at_once=2)[0] == ["a", "b"]
    assert _schedule(["a", "b", "c"], [], 500, probes, cap=2.0)[0] == ["a", "b", "c"]
    gib = 2**30
    big = {f: _probe(100, 0.3, peak=50 * gib, limit=80 * gib) for f in "ab"}
    assert _schedule(["a", "b"], [], 500, big)[0] == ["a"]  # 100 GiB of peaks > 80 GiB
    # order is kept: b fits in time but not beside a, so the shorter c waits too
    probes = {"a": _probe(100, 0.6), "b": _probe(100, 0.6), "c": _probe(50, 0.2)}
    assert _schedule(["b", "c"], ["a"], 500, probes) == ([], {})


def test_without_probes_runs_go_one_at_a_time_each_within_the_longest_so_far():
    assert _schedule(["a", "b"], [], 100, {}) == (["a"], {})  # the first: no estimate, it starts
    assert _schedule(["b"], ["a"], 100, {}) == ([], {})  # one at a time
    start, drop = _schedule(["b", "c"], [], 100, {}, longest=90)  # 1.15 x 90 > 100
    assert start == [] and list(drop) == ["b", "c"] and "longest run took 90 s" in drop["b"]
    # with probes, a family whose probe failed does not start
    assert _schedule(["a", "b"], [], 1000, {"b": _probe(10)}) == (
        ["b"], {"a": "no probe result (the probe failed or was cut)"})


# ---------------------------------------------------------------- the bench parts, the device lock

def _part(families, speed):
    rows = [{"attention": a, "length": n, "status": "ok", "reason": None, "steps_per_s": speed[a],
             "step_time_s": {"median": 1 / speed[a]}, "memory": {"bytes": 1000.0 * n},
             "flops": {"per_step": 1e9}, "speed_vs_softmax": speed[a] / speed["softmax"]}
            for a in ["softmax", *families] for n in (64, 128)]
    return {"schema": "lra.bench/1", "kind": "efficiency", "task": "text", "dtype": "bfloat16",
            "batch": 2, "steps": 1, "warmup": 0, "memory_method": "m", "results": rows,
            "families": sorted(["softmax", *families]), "date": "2026-12-05T00:00:00Z",
            "device": {"kind": "cpu", "count": 1, "platform": "cpu"}, "git": {"commit": "abc"},
            "command": ["python", "-m", "lra.bench", "--attn", ",".join(families)]}


def test_bench_parts_merge_into_one_valid_file_with_each_process_s_own_ratios():
    one, two = _part(["cosformer"], {"softmax": 2.0, "cosformer": 4.0}), \
        _part(["linear"], {"softmax": 1.0, "linear": 3.0})
    merged = device_check.merge_bench_parts([one, two], ["p0.json", "p1.json"])
    check_efficiency(merged)
    assert merged["families"] == ["cosformer", "linear", "softmax"]
    rows = {(r["attention"], r["length"]): r for r in merged["results"]}
    assert len(merged["results"]) == 6 and rows[("softmax", 64)]["steps_per_s"] == 2.0  # the first
    assert rows[("linear", 64)]["speed_vs_softmax"] == 3.0  # against its own process's softmax
    assert merged["slopes"]["cosformer"]["memory"] == pytest.approx(1.0)
    assert [p["file"] for p in merged["parts"]] == ["p0.json", "p1.json"]


def test_the_device_lock_is_exclusive_and_a_stop_signal_ends_the_wait(tmp_path):
    lock = tmp_path / "device.lock"
    held = wait_for_device_lock(lock)
    stops = stop_signals.StopSignals()
    stops.requested = "SIGTERM"
    with pytest.raises(stop_signals.Stopped):
        wait_for_device_lock(lock, stops)  # held: it waits, and the signal ends the wait
    os.close(held)
    os.close(wait_for_device_lock(lock, stops))  # free: taken at once


def test_bench_groups_put_the_listops_order_first_and_leave_softmax_to_each_process():
    groups = device_check.bench_groups("all", 2)
    assert groups[0] == ["cosformer", "linear"] and groups[1] == ["performer", "linformer"]
    flat = [f for g in groups for f in g]
    assert "softmax" not in flat and len(flat) == len(set(flat)) and "mamba" in flat
    assert device_check.bench_groups("softmax", 3) == [["softmax"]]


def test_the_carried_wheels_match_pyproject():
    script = (REPO / "scripts" / "device_wheels.sh").read_text()
    lists = {name: re.search(rf'^{name}="([^"]*)"', script, re.M).group(1).split()
             for name in ("WHEELS", "ON_MACHINE", "NOT_NEEDED")}
    pins = dict(w.split("==") for w in lists["WHEELS"])
    deps = [Requirement(d) for d in
            tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]]
    norm = lambda name: re.sub(r"[-_.]+", "-", name).lower()  # noqa: E731
    listed = [norm(n) for n in [*pins, *lists["ON_MACHINE"], *lists["NOT_NEEDED"]]]
    assert sorted(listed) == sorted(set(listed))  # each name in one list only
    for dep in deps:
        assert norm(dep.name) in listed, f"{dep.name}: in none of device_wheels.sh's lists"
        pin = {norm(k): v for k, v in pins.items()}.get(norm(dep.name))
        assert pin is None or dep.specifier.contains(pin), f"{dep.name}=={pin} outside {dep}"


# ---------------------------------------------------------------- the whole window at toy sizes

def _window(tmp: Path, *extra: str) -> subprocess.Popen:
    """``bash scripts/device_window.sh`` at toy sizes, its own session, files under ``tmp``."""
    env = {**os.environ, "OUT": str(tmp / "out"), "LRA_WINDOW_DIR": str(tmp / "window"),
           "PYTHON": sys.executable, "PYTHONPATH": str(REPO)}
    return subprocess.Popen(["bash", "scripts/device_window.sh", *TOY_WINDOW, *TOY_SCALE, *extra],
                            cwd=REPO, env=env, start_new_session=True, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


def _kill_session(proc: subprocess.Popen) -> None:
    """SIGKILL every process of the window's session (the script, the check, its children), as
    the device tool does at its time limit."""
    for _ in range(3):  # a child may be starting while the others die
        for p in psutil.process_iter(["pid"]):
            try:
                if os.getsid(p.info["pid"]) == proc.pid:
                    os.kill(p.info["pid"], signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                continue
        time.sleep(0.2)
    proc.wait()


def _check_bundle(tmp: Path, bundle: Path | None = None) -> dict:
    """What the window returned is valid, and every cell finished on its disk is in it unless the
    returned summary shows that cell still running (in flight at the kill). Returns the summary."""
    results, bundle = tmp / "window" / "results", bundle or tmp / "out" / "results.tar.gz"
    cells = sorted(str(p.relative_to(results)) for p in results.rglob("*.json"))
    if not bundle.exists():
        assert cells == [], "cells finished but no bundle"
        return {}
    got = _valid_members(bundle)
    (name,) = [n for n in got if n.startswith("efficiency/device-check__")]
    summary = json.loads(got[name])
    phases = {p["phase"]: p for p in summary["phases"]}
    in_flight = _in_flight_and_listed(phases, got)
    running = {r["attention"] for r in phases.get("listops", {}).get("runs", [])
               if r["status"] == "running"}
    for cell in cells:
        if cell.startswith("efficiency/") or cell in in_flight:
            continue  # the merged bench file is rewritten from the parts; a cell in flight
        if cell.startswith("runs/") and json.loads((results / cell).read_text())["attention"] \
                in running:
            continue
        if cell.startswith("bench-parts/") and any(
                g["status"] == "running" and cell.split("/")[1] in " ".join(g["command"])
                for g in phases.get("bench", {}).get("groups", [])):
            continue
        assert got.get(cell) == (results / cell).read_bytes(), f"{cell} finished, not returned"
    return summary


def _valid_members(bundle: Path) -> dict[str, bytes]:
    """{path under results/: bytes} of the bundle's files, each run and efficiency file valid and
    every other JSON file parseable."""
    with tarfile.open(bundle) as tar:
        got = {m.name.removeprefix("results/"): tar.extractfile(m).read()
               for m in tar.getmembers() if m.isfile()}
    for name, data in got.items():
        if name.startswith("runs/"):
            check_run(json.loads(data))
        elif name.startswith(("efficiency/", "bench-parts/")) and name.endswith(".json"):
            check_efficiency(json.loads(data))
        elif name.endswith(".json"):
            json.loads(data)
    return got


def _in_flight_and_listed(phases: dict, got: dict[str, bytes]) -> set[str]:
    """The cells the summary shows in flight; and every file the summary lists as written is in
    the bundle."""
    in_flight = set()
    for phase, entry in phases.items():
        if phase in ("data", "kernels") and entry["status"] == "running":
            in_flight.add({"data": "data__listops.json",
                           "kernels": "kernels__causal_scan.json"}[phase])
    for family, cell in phases.get("probe", {}).get("families", {}).items():
        (in_flight if cell["status"] == "running" else set()).add(f"probe/{family}.json")
        if cell["status"] == "ok":
            assert f"probe/{family}.json" in got
    for run in phases.get("listops", {}).get("runs", []):
        if run.get("result_file"):
            assert f"runs/{run['result_file']}" in got
    for group in phases.get("bench", {}).get("groups", []):
        if group.get("file"):
            assert group["file"] in got
    return in_flight


@pytest.mark.slow
def test_the_window_at_toy_sizes_whole_and_killed_at_random_moments(tmp_path):
    """The whole script to its end (every phase passes, in order, under the real boxes scaled to a
    half), then killed (SIGKILL to all its processes) at a random moment of a second run: the
    bundle holds every finished cell, valid. LRA_KILL_SEED replays a draw."""
    begin = time.perf_counter()
    proc = _window(tmp_path / "whole")
    output, _ = proc.communicate(timeout=400)
    took = time.perf_counter() - begin
    assert proc.returncode == 0, output[-3000:]
    summary = _check_bundle(tmp_path / "whole")
    assert [p["phase"] for p in summary["phases"]] == list(device_check.PHASES), output[-2000:]
    assert all(p["status"] == "ok" for p in summary["phases"]) and summary["ok"]
    plan = {p: b * SCALE for p, b in device_check.BOXES.items()}
    assert summary["boxes_s"]["data"] == pytest.approx(plan["data"], abs=0.1)
    assert sum(summary["boxes_s"].values()) < (585 - 10) * SCALE  # set-up came off the window
    phases = {p["phase"]: p for p in summary["phases"]}
    softmax = _check_whole_window_cells(tmp_path / "whole", phases)
    # the check can fail: a bundle without one finished run is refused
    out = tmp_path / "whole" / "out"
    with tarfile.open(out / "results.tar.gz") as tar, \
            tarfile.open(tmp_path / "lacking.tar.gz", "w:gz") as lacking:
        for member in tar.getmembers():
            if member.name != f"results/runs/{softmax['result_file']}":
                lacking.addfile(member, tar.extractfile(member) if member.isfile() else None)
    with pytest.raises(AssertionError):
        _check_bundle(tmp_path / "whole", tmp_path / "lacking.tar.gz")

    # One kill at a random moment per run of the suite (each CI run draws another; LRA_KILL_SEED
    # replays a draw): a second kill in the same run doubled the test's time.
    seed = int(os.environ.get("LRA_KILL_SEED", random.randrange(10**6)))
    for i, moment in enumerate([random.Random(seed).uniform(1, took)]):
        proc = _window(tmp_path / f"killed{i}")
        try:
            proc.wait(timeout=moment)
        except subprocess.TimeoutExpired:
            pass
        _kill_session(proc)
        try:
            _check_bundle(tmp_path / f"killed{i}")
        except AssertionError as err:
            raise AssertionError(f"killed at {moment:.1f} s (LRA_KILL_SEED={seed}): {err}") from err


def _check_whole_window_cells(whole: Path, phases: dict) -> dict:
    """The cells of a window that ran to its end at toy sizes, phase by phase; returns the softmax
    run's entry."""
    results = whole / "window" / "results"
    data = json.loads((results / "data__listops.json").read_text())
    assert data["examples"] == {"train": 64, "val": 16, "test": 16} and not data["fsync"]
    # the probe: both families timed; then both runs at once, scheduled from it
    for family in ("softmax", "linear"):
        probe = json.loads((results / "probe" / f"{family}.json").read_text())
        assert probe["predicted_run_s"] == pytest.approx(device_check.predicted_run_s(probe))
        assert probe["num_steps"] == 2 and probe["eval_every"] == 1 and 0 < probe["share"] <= 1
    softmax, linear = phases["listops"]["runs"]
    assert phases["listops"]["schedule"] == "probe" and linear["beside"] == ["softmax"]
    for run in (softmax, linear):
        record = json.loads((results / "runs" / run["result_file"]).read_text())
        check_run(record)
        assert record["attention"] == run["attention"]
        assert record["config"]["train"]["eval_every"] == 1
        assert record["config"]["model"]["dtype"] == "bfloat16"
        assert run["test_accuracy_at_last"] == record["metrics"]["test_accuracy_at_last"]
    # the bench: one process per family, merged into one file
    assert [g["families"] for g in phases["bench"]["groups"]] == [["cosformer"], ["linear"]]
    bench = json.loads((results / phases["bench"]["merged_file"]).read_text())
    check_efficiency(bench)
    assert bench["dtype"] == "bfloat16" and bench["batch"] == 2 and bench["lengths"] == [32]
    assert {r["attention"] for r in bench["results"] if r["status"] == "ok"} == {
        "softmax", "cosformer", "linear"}
    assert bench["config"]["model"]["attention_dropout"] == 0.0  # softmax's cuDNN condition
    kernels = json.loads((results / "kernels__causal_scan.json").read_text())
    assert kernels["ok"] and kernels["length"] == 40 and kernels["interpret"]
    assert "kernels__causal_scan.json" in phases["kernels"]["files"]
    assert sorted(p.name for p in (whole / "out").iterdir()) == [
        "device-check.jsonl", "device_window.log", "preflight.txt", "results.tar.gz"]
    return softmax


@pytest.mark.slow
def test_a_phase_past_its_box_is_cut_and_the_next_still_runs(tmp_path):
    results_dir = tmp_path / "results"
    start = time.perf_counter()
    code = device_check.main(["--results-dir", str(results_dir), "--phases", "listops,kernels",
                              "--box-listops", "3", "--grace", "1", "--train-attn", "softmax,linear",
                              "--workdir", str(tmp_path / "work"), "--data-dir", str(tmp_path / "d"),
                              "--scan-length", "16", *TINY_TRAIN])
    assert code == 1
    listops, kernels = _summary(results_dir)["phases"]
    assert listops["status"] == "cut" and listops["seconds"] < 3 + 2
    assert listops["schedule"] == "one at a time (no probe results)"
    softmax, linear = listops["runs"]
    assert softmax["status"] == "cut" and linear["status"] == "not started"
    assert kernels["phase"] == "kernels" and kernels["status"] == "ok"
    assert time.perf_counter() - start < 120


def test_run_boxed_kills_a_child_that_ignores_sigterm(tmp_path):
    stubborn = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(60)"
    out = device_check.run_boxed([sys.executable, "-c", stubborn], 0.5, tmp_path / "log", grace=0.5)
    assert out["cut"] and out["exit_status"] != 0 and out["seconds"] < 0.5 + 1  # within its box
    done = device_check.run_boxed([sys.executable, "-c", "print('hi')"], 30, tmp_path / "log", 1)
    assert done == {**done, "cut": False, "exit_status": 0}
    assert "hi" in (tmp_path / "log").read_text()


def test_bad_command_lines_are_errors(tmp_path, capsys):
    assert device_check.main(["--results-dir", str(tmp_path), "--phases", "data,nope"]) == 2
    assert "unknown phases ['nope']" in capsys.readouterr().err
    assert device_check.main(["--results-dir", str(tmp_path), "--total", "200"]) == 2
    assert "leaves -95 s for listops" in capsys.readouterr().err
