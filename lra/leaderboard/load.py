"""Reading result files: run files (``runs/*.json``), bench files (``efficiency/*.json``) and peers
files (``efficiency/peers-cpu-*.jsonl``), each checked whole before any table uses it, and the labels
that group them.

A file that fails a check is skipped with one line naming it and the field (``skipped``); the rest
is published. Run files: ``format_version`` 1 (absent: every file written before versions) or 2
(adds ``overrides`` and ``data.fingerprint``); any other version is refused. Files of
``lra.evaluate`` (a top-level ``evaluation_of``) evaluate a checkpoint of a run: they are never a
seed, and are listed apart (``evaluations``), not reported as broken.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import re
from pathlib import Path
from typing import Any

from lra import config as lra_config
from lra.bench.efficiency import SCHEMA
from lra.leaderboard import identity, names
from lra.leaderboard.published import TASKS

FORMAT_VERSIONS = (1, 2)
PROTOCOLS = ("lra", "modern")
_HEX64 = re.compile(r"[0-9a-f]{64}")


class ResultFileError(ValueError):
    pass


# ----------------------------------------------------------------------------------------------
# Field checks: each raises ResultFileError naming the dotted field and what was expected.


# The largest integer a file may hold (int64's): JSON has no bound, but every reader turns a number
# into a float to print or divide it, and 10**400 has none (OverflowError).
MAX_INTEGER = 2**63 - 1


def _integer(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and abs(value) <= MAX_INTEGER


def _number(value: Any) -> bool:
    """A finite float, or an integer within ``MAX_INTEGER``: a number every reader can print."""
    return _integer(value) or (isinstance(value, float) and math.isfinite(value))


def _get(record: dict[str, Any], field: str, *, optional: bool = False) -> Any:
    """``record``'s value at the dotted ``field`` (None where optional and absent)."""
    node: Any = record
    parts = field.split(".")
    for i, part in enumerate(parts):
        if not isinstance(node, dict):
            raise ResultFileError(f"{'.'.join(parts[:i])}: expected an object, got {_kind(node)}")
        if part not in node:
            if optional:
                return None
            raise ResultFileError(f"{field}: missing")
        node = node[part]
    return node


def _kind(value: Any) -> str:
    return "null" if value is None else f"{type(value).__name__} {value!r}"[:80]


def _need(record: dict[str, Any], field: str, what: str, *, optional: bool = False,
          low: float | None = None, high: float | None = None, nullable: bool = False) -> Any:
    """The value at ``field``, checked to be ``what`` ("str", "int", "number", "object", "list",
    "bool") within [low, high]; None is allowed where ``nullable`` (or ``optional`` and absent)."""
    value = _get(record, field, optional=optional)
    if value is None and (nullable or optional):
        return None
    ok = {"str": lambda v: isinstance(v, str) and v != "", "int": _integer, "number": _number,
          "object": lambda v: isinstance(v, dict), "list": lambda v: isinstance(v, list),
          "bool": lambda v: isinstance(v, bool)}[what](value)
    expected = {"str": "a non-empty string", "int": "an integer", "number": "a finite number",
                "object": "an object", "list": "a list", "bool": "true or false"}[what]
    if not ok and what in ("int", "number") and isinstance(value, int) and not isinstance(value, bool):
        expected = f"{expected} within ±(2**63 - 1)"  # an integer too large (MAX_INTEGER)
    if ok and low is not None and value < low:
        ok, expected = False, f"{expected} >= {low}"
    if ok and high is not None and value > high:
        ok, expected = False, f"{expected} <= {high}"
    if not ok:
        raise ResultFileError(f"{field}: expected {expected}, got {_kind(value)}")
    return value


def _accuracy(record: dict[str, Any], field: str, *, nullable: bool = True) -> float | None:
    return _need(record, field, "number", low=0, high=1, nullable=nullable,
                 optional=nullable)


def _date(record: dict[str, Any], field: str = "date") -> None:
    value = _need(record, field, "str")
    try:
        dt.datetime.strptime(value, "%Y-%m-%dT%H:%M:%SZ")
    except ValueError:
        raise ResultFileError(f"{field}: expected a UTC time like 2026-01-31T12:00:00Z, got "
                              f"{value!r}") from None


# ----------------------------------------------------------------------------------------------
# Run files.


def known_tasks() -> tuple[str, ...]:
    """Every registered task, LRA's six first (in LRA's order), then the others by name."""
    from lra import tasks

    return TASKS + tuple(sorted(set(tasks.available()) - set(TASKS)))


def task_columns(records: list[dict[str, Any]]) -> list[str]:
    """The task columns of a table: LRA's six always, then any other task that has a run here."""
    present = {r["task"] for r in records}
    return [t for t in known_tasks() if t in TASKS or t in present]


def format_version(record: dict[str, Any]) -> int:
    version = record.get("format_version", 1)
    if not _integer(version) or version not in FORMAT_VERSIONS:
        raise ResultFileError(f"format_version: {_kind(version)}; this leaderboard reads "
                              f"{' and '.join(map(str, FORMAT_VERSIONS))}")
    return version


def is_evaluation(record: Any) -> bool:
    """A file of ``lra.evaluate --write-result``: an evaluation of a run's checkpoint, not a seed."""
    return isinstance(record, dict) and "evaluation_of" in record


def _check_identity(record: dict[str, Any]) -> None:
    task = _need(record, "task", "str")
    if task not in known_tasks():
        raise ResultFileError(f"task: unknown task {task!r} (known: {', '.join(known_tasks())})")
    _need(record, "attention", "str")
    _need(record, "preset", "str")
    _need(record, "seed", "int", low=0)
    proto = _need(record, "protocol", "str", optional=True)
    if proto is not None and proto not in PROTOCOLS:
        raise ResultFileError(f"protocol: {proto!r}, expected one of {', '.join(PROTOCOLS)}")
    _need(record, "config", "object")
    for section in ("model", "train", "data", "attn"):
        _need(record, f"config.{section}", "object")
    cfg = lra_config.with_protocol(record["config"])
    for key in ("task", "attention", "preset", "seed", "protocol"):
        mine = record.get(key, "lra") if key == "protocol" else record[key]
        if key not in cfg:
            raise ResultFileError(f"config.{key}: missing")
        if cfg[key] != mine or isinstance(cfg[key], bool):
            raise ResultFileError(f"config.{key} is {cfg[key]!r} but {key} is {mine!r}")
    _need(record, "config.train.num_steps", "int", low=1)
    _check_attention_file(record)


def _check_attention_file(record: dict[str, Any]) -> None:
    """A one-file family's run (``--attn path.py:Class``) names the file's version in its
    ``attention`` (``<name>@<8 hex digits of the file's SHA-256>``, attention/_file.py)."""
    if _need(record, "attention_file", "object", optional=True) is None:
        return
    for key in ("path", "class", "sha256"):
        _need(record, f"attention_file.{key}", "str")
    for key in ("display_name", "kind"):
        _need(record, f"attention_file.{key}", "str", optional=True)
    sha = record["attention_file"]["sha256"]
    if not re.fullmatch(r"[0-9a-f]{64}", sha):
        raise ResultFileError(f"attention_file.sha256: expected 64 hex digits, got {sha!r}")
    if not record["attention"].endswith(f"@{sha[:8]}"):
        raise ResultFileError(f"attention: {record['attention']!r} does not end with the file's "
                              f"hash @{sha[:8]}")


def _check_metrics(record: dict[str, Any]) -> None:
    _need(record, "metrics", "object")
    _accuracy(record, "metrics.test_accuracy_at_last", nullable=False)
    for key in ("test_accuracy_at_best_val", "best_val_accuracy", "final_val_accuracy"):
        _accuracy(record, f"metrics.{key}")
    num_steps = record["config"]["train"]["num_steps"]
    steps = _need(record, "metrics.steps", "int", low=1)
    if steps > num_steps:
        raise ResultFileError(f"metrics.steps: {steps} is more than config.train.num_steps "
                              f"{num_steps}")
    _need(record, "metrics.wall_time_s", "number", low=0)
    _need(record, "metrics.steps_per_s", "number", low=0, optional=True)
    _need(record, "metrics.final_train_loss", "number", low=0, optional=True)
    _need(record, "metrics.num_params", "int", low=0, optional=True)
    if _need(record, "metrics.peak_memory", "object", optional=True) is not None:
        _need(record, "metrics.peak_memory.bytes", "int", low=0)
    best_step = _need(record, "metrics.best_val_step", "int", low=0, high=steps, optional=True)
    if _need(record, "eval_history", "object", optional=True) is not None:
        _check_eval_history(record, steps, best_step)


def _check_eval_history(record: dict[str, Any], steps: int, best_step: int | None) -> None:
    """``eval_history``: increasing steps within the run's, an accuracy and a loss at each, and the
    best validation step and accuracy of ``metrics`` among them."""
    history = record["eval_history"]
    hsteps = _need(record, "eval_history.step", "list")
    for key in ("val_accuracy", "val_loss"):
        values = _need(record, f"eval_history.{key}", "list")
        if len(values) != len(hsteps):
            raise ResultFileError(f"eval_history.{key}: {len(values)} values for {len(hsteps)} steps")
    for i, s in enumerate(hsteps):
        if not _integer(s) or not 0 <= s <= steps or (i and s <= hsteps[i - 1]):
            raise ResultFileError(f"eval_history.step[{i}]: {_kind(s)}, expected increasing "
                                  f"integers in [0, metrics.steps {steps}]")
    for i, (a, v) in enumerate(zip(history["val_accuracy"], history["val_loss"])):
        if not (_number(a) and 0 <= a <= 1):
            raise ResultFileError(f"eval_history.val_accuracy[{i}]: {_kind(a)}, not an accuracy")
        if not (_number(v) and v >= 0):
            raise ResultFileError(f"eval_history.val_loss[{i}]: {_kind(v)}, not a loss")
    if best_step is not None and hsteps and best_step not in hsteps:
        raise ResultFileError(f"metrics.best_val_step: {best_step} is not a step of eval_history")
    best = record["metrics"].get("best_val_accuracy")
    if best is not None and hsteps and abs(max(history["val_accuracy"]) - best) > 1e-6:
        raise ResultFileError(f"metrics.best_val_accuracy: {best} is not the best of "
                              f"eval_history.val_accuracy ({max(history['val_accuracy'])})")


def _check_class_counts(record: dict[str, Any]) -> None:
    """Examples per class of each split (``lra.train.split_class_counts``): the at-chance mark's
    majority class."""
    for split, counts in (_need(record, "data.class_counts", "object", optional=True) or {}).items():
        if not (isinstance(counts, list) and counts
                and all(_integer(c) and c >= 0 for c in counts)):
            raise ResultFileError(f"data.class_counts.{split}: {_kind(counts)}, not a list of "
                                  f"example counts per class")


def _check_data(record: dict[str, Any], version: int) -> None:
    if _need(record, "data", "object", optional=version == 1) is None:
        return
    evaluated = _need(record, "data.evaluated", "object", optional=version == 1) or {}
    for split in evaluated:
        _need(record, f"data.evaluated.{split}", "int", low=0)
    # the examples of each split: the at-chance mark reads the test split's where evaluated lacks it
    for split in _need(record, "data.examples", "object", optional=True) or {}:
        _need(record, f"data.examples.{split}", "int", low=0, nullable=True)
    _check_class_counts(record)
    empty = [split for split, n in evaluated.items() if n == 0]
    if empty:
        raise ResultFileError(f"data.evaluated: its evaluation saw zero examples ({', '.join(empty)})")
    if version < 2:
        return
    _need(record, "data.fingerprint", "object")
    digest = _need(record, "data.fingerprint.sha256", "str")
    if not _HEX64.fullmatch(digest):
        raise ResultFileError(f"data.fingerprint.sha256: {digest!r} is not a sha256 hex digest")
    files = _need(record, "data.fingerprint.files", "object")
    for rel, entry in files.items():
        if not isinstance(entry, dict):
            raise ResultFileError(f"data.fingerprint.files[{rel!r}]: expected an object")
        if not (_integer(entry.get("bytes")) and entry["bytes"] >= 0):
            raise ResultFileError(f"data.fingerprint.files[{rel!r}].bytes: {_kind(entry.get('bytes'))}")
        if not (isinstance(entry.get("sha256"), str) and _HEX64.fullmatch(entry["sha256"])):
            raise ResultFileError(f"data.fingerprint.files[{rel!r}].sha256: "
                                  f"{_kind(entry.get('sha256'))}")
    _need(record, "data.fingerprint.generator", "object", nullable=True)


def _check_overrides(record: dict[str, Any], version: int) -> None:
    if version < 2:
        return
    overrides = _need(record, "overrides", "object")
    flat = lra_config.flatten(record["config"])
    for key, value in overrides.items():
        if key not in flat:
            raise ResultFileError(f"overrides.{key}: not a key of config")
        if not identity.same(flat[key], value):
            raise ResultFileError(f"overrides.{key} is {value!r} but config has {flat[key]!r}")


def check_run(record: Any) -> None:
    """Raise ``ResultFileError`` naming the first field that makes ``record`` unusable: types,
    ranges, and agreement between the fields and with the config."""
    if not isinstance(record, dict):
        raise ResultFileError(f"expected a JSON object, got {type(record).__name__}")
    version = format_version(record)
    _check_identity(record)
    _check_metrics(record)
    _check_data(record, version)
    _check_overrides(record, version)
    _need(record, "device", "object")
    _need(record, "device.kind", "str")
    _need(record, "device.count", "int", low=1)
    _need(record, "git", "object")
    _need(record, "git.commit", "str")
    _date(record)
    _check_tracker(record)
    status = record.get("status", "completed")
    if status != "completed":
        raise ResultFileError(f"status: {status!r}, expected 'completed'")
    if identity.differences(record) is None:
        raise ResultFileError(f"config: the preset {record['preset']!r} of {record['task']} "
                              f"({record.get('protocol', 'lra')} protocol) cannot be resolved here "
                              f"(no configs/{record['task']}.py, or an unknown preset): its cell is "
                              f"unknown")


def _check_tracker(record: dict[str, Any]) -> None:
    """``tracker`` (optional; files of runs without an experiment tracker have none): the tracker's
    name and run id (``lra.tracker.Wandb.record``)."""
    if "tracker" not in record:
        return
    _need(record, "tracker", "object")
    _need(record, "tracker.name", "str")
    _need(record, "tracker.run_id", "str")


def _read_json(path: Path) -> Any:
    try:
        record = json.loads(path.read_bytes().decode("utf-8"))
    # ValueError: an integer of over 4300 digits (Python's limit); RecursionError: nested too deep
    except (OSError, ValueError, RecursionError) as err:
        raise ResultFileError(f"unreadable ({type(err).__name__}: {err})") from None
    _check_text(record)
    return record


def _check_text(value: Any, where: str = "") -> None:
    """Every string (and key) of a file's JSON is text: a lone surrogate (``"\\udcff"``, which
    JSON allows) is no character, and no output could be written with it."""
    if isinstance(value, dict):
        for key, item in value.items():
            _check_text(key, where)
            _check_text(item, f"{where}.{key}" if where else str(key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            _check_text(item, f"{where}[{i}]")
    elif isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            shown = _shown(value)[:80]
            raise ResultFileError(f"{_shown(where) or 'a key'}: \"{shown}\" holds a lone surrogate "
                                  f"(a \\u escape that is no character)") from None


def _shown(text: str) -> str:
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def printable(path: Path | str) -> str:
    """``path`` as text every stream and file can hold: a byte of the name that is not UTF-8 (which
    Python keeps as a lone surrogate) written ``\\xff``."""
    return str(path).encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def skip_line(path: Path | str, err: Exception) -> str:
    """The one line that says why a file is not read: ``<path>: <field>: <what was expected>``
    (every command that reads result files prints this line for a file it skips)."""
    return f"{printable(path)}: {err}"


def _check_name(path: Path) -> None:
    """A file whose name is not UTF-8 is not read: no table, CSV or web page can print its name."""
    try:
        path.name.encode("utf-8")
    except UnicodeEncodeError:
        raise ResultFileError("file name: not UTF-8 (no output can print it); rename the file") \
            from None


def _skip(path: Path, err: ResultFileError, skipped: list[str] | None, what: str) -> None:
    if skipped is None:
        raise ResultFileError(f"{printable(path)}: not a valid {what} ({err})") from None
    skipped.append(skip_line(path, err))


def _files(folder: Path, pattern: str) -> list[Path]:
    """The files matching ``pattern`` in ``folder`` (none if it is not a folder or unreadable)."""
    try:
        return sorted(p for p in folder.glob(pattern) if not p.is_dir())
    except OSError:
        return []


def load_runs(results_dir: Path, skipped: list[str] | None = None,
              evaluations: list[str] | None = None) -> list[dict[str, Any]]:
    """The valid result files of ``results_dir/runs``, each with ``_file`` (its name), ``_diff``
    (where its config is not its preset's, ``identity.differences``, and its data where it is not
    its column's, ``identity.mark_other_data``) and ``_row`` (its row label: the family, plus the
    differing keys and data). Each invalid or unreadable file is skipped and described
    in ``skipped`` (an error if ``skipped`` is None); evaluation files are named in ``evaluations``."""
    runs = []
    for path in _files(Path(results_dir) / "runs", "*.json"):
        try:
            _check_name(path)
            record = _read_json(path)
            if is_evaluation(record):
                if evaluations is not None:
                    evaluations.append(path.name)
                continue
            check_run(record)
        except ResultFileError as err:
            _skip(path, err, skipped, "result file")
            continue
        record["_file"] = path.name
        record["_diff"] = identity.differences(record)
        if "attention_file" in record:
            names.remember_file_family(record["attention"], record["attention_file"])
        runs.append(record)
    identity.mark_other_data(runs)
    for record in runs:
        label = identity.variant_label(record["_diff"])
        record["_row"] = record["attention"] + (f" {label}" if label else "")
    return runs


# ----------------------------------------------------------------------------------------------
# Bench files.


def check_efficiency(record: Any) -> None:
    """Raise ``ResultFileError`` naming the first field the efficiency tables cannot use."""
    if not isinstance(record, dict):
        raise ResultFileError(f"expected a JSON object, got {type(record).__name__}")
    if record.get("schema") != SCHEMA:
        raise ResultFileError(f"schema: {_kind(record.get('schema'))}, expected {SCHEMA!r}")
    for field in ("task", "dtype", "memory_method", "device.kind", "git.commit"):
        _need(record, field, "str")
    _need(record, "batch", "int", low=1)
    _need(record, "device.count", "int", low=1)
    _need(record, "steps", "int", low=1)
    _need(record, "warmup", "int", low=0)
    _date(record)
    if _need(record, "device.host", "object", optional=True) is not None:
        _need(record, "device.host.cpu", "str")
        _need(record, "device.host.cores", "int", low=1)
    _need(record, "device.platform", "str", optional=True)
    if _need(record, "matmul_peak", "object", optional=True) is not None:
        _need(record, "matmul_peak.flops_per_s", "number", low=0, optional=True)
    results = _need(record, "results", "list")
    if not results:
        raise ResultFileError("results: empty")
    for i, r in enumerate(results):
        where = f"results[{i}]"
        if not isinstance(r, dict):
            raise ResultFileError(f"{where}: expected an object, got {_kind(r)}")
        box = {where: r}
        _need(box, f"{where}.attention", "str")
        _need(box, f"{where}.length", "int", low=1)
        status = _need(box, f"{where}.status", "str")
        if status != "ok":
            _need(box, f"{where}.reason", "str")
            continue
        _need(box, f"{where}.steps_per_s", "number", low=0)
        _need(box, f"{where}.step_time_s.median", "number", low=0)
        _need(box, f"{where}.memory.bytes", "number", low=0)
        _need(box, f"{where}.memory.rss_growth_vs_compiled_transient", "number", optional=True)
        _need(box, f"{where}.flops.per_step", "number", low=0)
        for key in ("speed_vs_softmax", "memory_vs_softmax", "fraction_of_peak"):
            _need(box, f"{where}.{key}", "number", low=0, optional=True)
        if _need(box, f"{where}.xla_cpu_fusions", "object", optional=True) is not None:
            _need(box, f"{where}.xla_cpu_fusions.choice", "str")
            _need(box, f"{where}.xla_cpu_fusions.source", "str")


def load_efficiency(results_dir: Path, skipped: list[str] | None = None) -> list[dict[str, Any]]:
    """The valid bench files of ``results_dir/efficiency``; invalid ones as in ``load_runs``."""
    records = []
    for path in _files(Path(results_dir) / "efficiency", "*.json"):
        try:
            _check_name(path)
            record = _read_json(path)
            check_efficiency(record)
        except ResultFileError as err:
            _skip(path, err, skipped, "efficiency file")
            continue
        record["_file"] = path.name
        records.append(record)
    return records


# ----------------------------------------------------------------------------------------------
# Peers files (lra.bench.peers): a header line, then one line per measured case.


PEERS_PATTERN = "peers-cpu-*.jsonl"


def check_peers_rows(rows: list[Any]) -> None:
    """Raise ``ResultFileError`` naming the first line and field the "vs best peer" table cannot use."""
    for i, r in enumerate(rows, 1):
        where = f"line {i}"
        if not isinstance(r, dict):
            raise ResultFileError(f"{where}: expected a JSON object, got {_kind(r)}")
        box = {where: r}
        if "peers_run" in r:
            header = _need(box, f"{where}.peers_run", "object")
            if header:
                _need(box, f"{where}.peers_run.git", "str")
                _need(box, f"{where}.peers_run.command", "str")
                if _need(box, f"{where}.peers_run.host", "object", optional=True) is not None:
                    _need(box, f"{where}.peers_run.host.cpu", "str")
                    _need(box, f"{where}.peers_run.host.cores", "int", low=1)
            continue
        if r.get("status") != "ok" or "fwdbwd_ms_median" not in r:
            continue
        for key in ("peer", "mechanism", "kind"):
            _need(box, f"{where}.{key}", "str")
        _need(box, f"{where}.seq_len", "int", low=1)
        _need(box, f"{where}.fwdbwd_ms_median", "number", low=0)
        probes = _need(box, f"{where}.fwdbwd_probe_gflops", "list", optional=True)
        if probes is not None and not all(_number(p) for p in probes):
            raise ResultFileError(f"{where}.fwdbwd_probe_gflops: expected numbers, got {probes!r}")


def load_peers(results_dir: Path, skipped: list[str] | None = None) -> list[Path]:
    """The valid peers files of ``results_dir/efficiency``; invalid ones as in ``load_runs``."""
    valid = []
    for path in _files(Path(results_dir) / "efficiency", PEERS_PATTERN):
        try:
            _check_name(path)
            try:
                text = path.read_bytes().decode("utf-8")
                rows = [json.loads(line) for line in text.splitlines() if line.strip()]
                _check_text(rows)
            except (OSError, ValueError, RecursionError) as err:  # as in _read_json
                raise ResultFileError(f"unreadable ({type(err).__name__}: {err})") from None
            check_peers_rows(rows)
        except ResultFileError as err:
            _skip(path, err, skipped, "peers file")
            continue
        valid.append(path)
    return valid


# ----------------------------------------------------------------------------------------------
# Labels.


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


def bench_setting(record: dict[str, Any]) -> tuple[str, str, int, str]:
    """The setting a bench file measures, (device, task, batch, dtype): one section of the
    leaderboard per setting, its newest file shown. A task whose model takes a ``form`` data option
    (MQAR's causal and bidirectional forms, docs/tasks-and-data.md) names it, ``mqar (causal)``: the
    two forms are different models, and a file of one must not hide a file of the other."""
    form = ((record.get("config") or {}).get("data") or {}).get("form")
    task = f"{record['task']} ({form})" if form else record["task"]
    return bench_device_label(record), task, record["batch"], record["dtype"]


def newest_per_seed(runs: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[str]]:
    """One run per (task, row, preset, protocol, device, seed), the row being the family, the
    config keys where the run is not its preset's and its data where not its column's: the newest
    (by date, then file name). A seed measured twice (a re-run after a fix, a re-run with --force)
    is one seed, not two: counting both would shrink the interval with a repeated measurement. A
    run with overrides or on other data is never the preset's run of its seed, so it replaces
    nothing. Returns the kept runs and the superseded files' names."""
    newest: dict[tuple, dict[str, Any]] = {}
    for r in sorted(runs, key=lambda r: (r.get("date", ""), r["_file"])):
        key = (r["task"], r.get("_row", r["attention"]), r["preset"], protocol(r), device_label(r),
               r["seed"])
        newest[key] = r
    kept = {id(r) for r in newest.values()}
    return ([r for r in runs if id(r) in kept],
            sorted(r["_file"] for r in runs if id(r) not in kept))
