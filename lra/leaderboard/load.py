"""Reading result files: run files (``runs/*.json``) and bench files (``efficiency/*.json``),
each checked before any table uses it, and the labels that group them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from lra.bench.efficiency import SCHEMA
from lra.leaderboard.published import TASKS


class ResultFileError(ValueError):
    pass


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def check_run(record: Any) -> None:
    """Raise ``ResultFileError`` saying what makes ``record`` unusable for the tables."""
    if not isinstance(record, dict):
        raise ResultFileError(f"expected a JSON object, got {type(record).__name__}")
    for key in ("task", "attention", "preset", "seed", "metrics", "device", "git"):
        if key not in record:
            raise ResultFileError(f"no {key!r}")
    if record["task"] not in TASKS:
        raise ResultFileError(f"unknown task {record['task']!r} (known: {', '.join(TASKS)})")
    device, metrics = record["device"], record["metrics"]
    if not isinstance(device, dict) or not {"kind", "count"} <= device.keys():
        raise ResultFileError("'device' lacks 'kind' or 'count'")
    if not isinstance(metrics, dict):
        raise ResultFileError("'metrics' is not an object")
    for key in ("test_accuracy_at_last", "test_accuracy_at_best_val"):
        value = metrics.get(key)
        if not (value is None and key != "test_accuracy_at_last") and not (
                _number(value) and 0 <= value <= 1):
            raise ResultFileError(f"metrics.{key} is {value!r}, not an accuracy in [0, 1]")
    for key in ("steps", "wall_time_s"):
        if not _number(metrics.get(key)):
            raise ResultFileError(f"metrics.{key} is {metrics.get(key)!r}, not a number")
    evaluated = (record.get("data") or {}).get("evaluated", {})  # files before provenance lack it
    empty = [split for split, n in evaluated.items() if n == 0]
    if empty:
        raise ResultFileError(f"its evaluation saw zero examples ({', '.join(empty)})")
    if not isinstance(record["git"], dict) or not isinstance(record["git"].get("commit"), str):
        raise ResultFileError("'git' lacks 'commit'")


def load_runs(results_dir: Path, skipped: list[str] | None = None) -> list[dict[str, Any]]:
    """The valid result files of ``results_dir/runs``; each invalid or unreadable one is skipped
    and described in ``skipped`` (an error if ``skipped`` is None)."""
    runs = []
    for path in sorted((Path(results_dir) / "runs").glob("*.json")):
        try:
            try:
                record = json.loads(path.read_bytes().decode("utf-8"))
            except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
                raise ResultFileError(f"unreadable ({type(err).__name__}: {err})") from None
            check_run(record)
        except ResultFileError as err:
            if skipped is None:
                raise ResultFileError(f"{path}: not a valid result file ({err})") from None
            skipped.append(f"{path}: {err}")
            continue
        record["_file"] = path.name
        runs.append(record)
    return runs


def load_efficiency(results_dir: Path) -> list[dict[str, Any]]:
    records = []
    for path in sorted((Path(results_dir) / "efficiency").glob("*.json")):
        try:
            record = json.loads(path.read_text())
            if record["schema"] != SCHEMA:
                raise KeyError(f"schema {record['schema']!r}, expected {SCHEMA!r}")
            for r in record["results"]:
                r["attention"], r["length"], r["status"]
            record["device"]["kind"], record["task"], record["batch"], record["dtype"]
            record["_file"] = path.name
        except (json.JSONDecodeError, KeyError, TypeError) as err:
            raise ResultFileError(f"{path}: not a valid efficiency file ({err!r})") from err
        records.append(record)
    return records


def protocol(record: dict[str, Any]) -> str:
    """The protocol of a result file (``lra`` when it records none: written before protocols)."""
    return record.get("protocol") or record.get("config", {}).get("protocol") or "lra"


def device_label(record: dict[str, Any]) -> str:
    d = record["device"]
    return f"{d['kind']} x{d['count']}"


def bench_device_label(record: dict[str, Any]) -> str:
    """The device of a bench file, with the host CPU on CPU: speed there is the host's, and the
    device record alone ("cpu x1") cannot tell two machines apart (results.host_info)."""
    label, d = device_label(record), record["device"]
    if d.get("platform", d["kind"]) != "cpu":
        return label
    host = d.get("host")  # files written before the host was recorded keep the plain label
    return f"{label} ({host['cpu']}, {host['cores']} cores)" if host else label


def newest_per_seed(runs: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[str]]:
    """One run per (task, attention, preset, protocol, device, seed): the newest (by date, then file
    name). A seed measured twice (a re-run after a fix, a re-run with --force) is one seed, not
    two: counting both would shrink the interval with a repeated measurement. Returns the kept runs
    and the superseded files' names."""
    newest: dict[tuple, dict[str, Any]] = {}
    for r in sorted(runs, key=lambda r: (r.get("date", ""), r["_file"])):
        key = (r["task"], r["attention"], r["preset"], protocol(r), device_label(r), r["seed"])
        newest[key] = r
    kept = {id(r) for r in newest.values()}
    return ([r for r in runs if id(r) in kept],
            sorted(r["_file"] for r in runs if id(r) not in kept))

