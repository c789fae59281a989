"""Result files: one JSON per run, written atomically, never overwritten.

A record holds what DESIGN.md lists: task, attention, preset, seed, the full resolved config, the
metrics, the device, package versions, the git commit and the date, plus the evaluation history
(step, validation accuracy and loss at each evaluation) that the leaderboard's learning curves draw.
``lra.leaderboard`` reads only these files. ``build_record`` makes every record ``lra.run`` writes.

Format version 2 (``"format_version": 2``; a file without the field is version 1) adds:

* ``overrides``: {dotted config key: resolved value} for every key given with ``--set`` and every
  other key where the resolved config differs from the one of its (task, attention, preset,
  protocol) alone, seed aside; ``{}`` for a run of the preset as it is. A leaderboard cell holds
  only runs whose ``overrides`` is empty.
* ``data.fingerprint``: the data the run read (``lra.data_fingerprint``).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import platform
import secrets
import subprocess
from importlib import metadata
from pathlib import Path
from typing import Any

from lra import atomic

FORMAT_VERSION = 2

# The protocol's headline test accuracy, a field of ``metrics`` (docs/families-and-protocols.md "Two
# protocols"): LRA's Table 1 reports the last step, the modern recipes the best-validation step. A
# fact of the format, read by the core (``lra.selection``) and the reporting (``lra.leaderboard``).
HEADLINE = {"lra": "test_accuracy_at_last", "modern": "test_accuracy_at_best_val"}

PACKAGES = ("jax", "jaxlib", "flax", "optax", "orbax-checkpoint", "grain", "numpy", "lra")


def versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "not installed"
    return out


def git_commit() -> dict[str, Any]:
    """The commit of the source tree that ran, and whether it had uncommitted changes."""
    root = Path(__file__).resolve().parent.parent
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True,
                                text=True, timeout=10, check=True).stdout.strip()
        dirty = bool(subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                                    cwd=root, capture_output=True, text=True, timeout=10,
                                    check=True).stdout.strip())
    except (OSError, subprocess.SubprocessError):
        return {"commit": "unknown", "dirty": None}
    return {"commit": commit, "dirty": dirty}


def host_info() -> dict[str, Any]:
    """The host CPU: its model name (``/proc/cpuinfo``, else ``platform.processor()``) and the
    cores this process may run on. On CPU this is what sets the speed, and the XLA device kind is
    only "cpu": two machines' bench files differ by 5x with the same device record without it."""
    cpu = ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            cpu = next((line.split(":", 1)[1].strip() for line in f
                        if line.startswith("model name")), "")
    except OSError:
        pass
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 0
    return {"cpu": cpu or platform.processor() or "unknown", "cores": cores}


def device_info() -> dict[str, Any]:
    import jax

    devices = jax.devices()
    return {"platform": devices[0].platform, "kind": devices[0].device_kind,
            "count": len(devices), "process_count": jax.process_count(), "host": host_info()}


def peak_memory_bytes() -> dict[str, Any]:
    """Accelerator peak bytes in use where the runtime reports it, else the process's peak RSS."""
    import jax

    stats = jax.local_devices()[0].memory_stats()
    if stats and "peak_bytes_in_use" in stats:
        return {"bytes": int(stats["peak_bytes_in_use"]), "source": "device peak_bytes_in_use"}
    import resource

    rss_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {"bytes": int(rss_kib) * 1024, "source": "process peak RSS (CPU)"}


def default_results_dir() -> Path:
    """Where a user's result files go when no ``--results-dir`` is given: ``$LRA_RESULTS_DIR``,
    else ``my-results`` in the current folder (not tracked by git). The project's reference set,
    ``results/``, is written only when named: ``--results-dir results``."""
    return Path(os.environ.get("LRA_RESULTS_DIR") or USER_RESULTS_DIR)


USER_RESULTS_DIR = "my-results"
REFERENCE_RESULTS_DIR = "results"
RESULTS_DIR_HELP = (f"default: $LRA_RESULTS_DIR, else {USER_RESULTS_DIR}/ (your runs; the project's "
                    f"reference set {REFERENCE_RESULTS_DIR}/ is written only when named)")


def _json_bytes(data: Any) -> bytes:
    return (json.dumps(data, indent=2, sort_keys=True) + "\n").encode()


def write_json_atomic(path: Path, data: Any) -> None:
    """Replace ``path`` with ``data`` at once (a rename): readers see the old or the new file."""
    atomic.replace(path, _json_bytes(data))


def run_path(results_dir: Path, record: dict[str, Any]) -> Path:
    """The result file name of ``record`` under ``<results_dir>/runs/``, unique here and on any
    other machine: ``<task>__<attn>__<preset>__seed<N>__<platform><count>__<UTC stamp>__<8 hex>``.

    Nothing is created: ``write_new`` writes the file whole under this name.
    """
    stamp = record["date"].replace(":", "").replace("-", "")[:15]
    # A random suffix: result files from many machines merge by copying into one runs/, and the
    # same cell can finish on two machines in the same second.
    preset = record["preset"] + ("" if record.get("protocol", "lra") == "lra"
                                 else f"-{record['protocol']}")
    base = (f"{record['task']}__{record['attention']}__{preset}__seed{record['seed']}__"
            f"{record['device']['platform']}{record['device']['count']}__{stamp}__"
            f"{secrets.token_hex(4)}")
    return Path(results_dir) / "runs" / f"{base}.json"


def write_new(path: Path, record: dict[str, Any]) -> None:
    """Write ``record`` to ``path``, which must not exist, all at once (``lra.atomic.create``): a
    kill never leaves a partial or empty result file and an existing one is never replaced."""
    atomic.create(path, _json_bytes(record))  # FileExistsError if the name is taken


def write_run(results_dir: Path, record: dict[str, Any]) -> Path:
    """Write ``record`` under ``<results_dir>/runs/`` with a name no other run can take."""
    for _ in range(100):
        path = run_path(results_dir, record)
        try:
            write_new(path, record)
        except FileExistsError:
            continue
        return path
    raise RuntimeError(f"could not find a free result file name in {Path(results_dir) / 'runs'}")


def eval_history(curve: list[list[float]]) -> dict[str, list]:
    """The validation curve, column by column: {"step", "val_accuracy", "val_loss"}.

    ``curve``: [step, accuracy, loss] per evaluation. Accuracies are rounded to 6 decimals, losses
    to 5 (the curve is for figures; the metrics keep full precision).
    """
    return {"step": [int(s) for s, _, _ in curve],
            "val_accuracy": [round(float(a), 6) for _, a, _ in curve],
            "val_loss": [round(float(v), 5) for _, _, v in curve]}


def _plain(value: Any) -> Any:
    return json.loads(json.dumps(value))  # as a result file holds it (lists, not tuples)


def config_overrides(config, pairs: list[str] | tuple[str, ...] = ()) -> dict[str, Any]:
    """{dotted key: resolved value} of the keys ``pairs`` (``--set KEY=VALUE``) set, and of every
    key where ``config`` differs from ``lra.config.load`` of its task, attention, preset, protocol
    and seed with no overrides (a config built in code). ``{}`` for a preset run."""
    from lra import config as config_lib

    resolved = config_lib.flatten(_plain(config.to_dict()))
    keys = {key for key, _ in config_lib.parse_overrides(list(pairs))}
    try:
        preset = config_lib.load(config.task, config.attention, preset=config.preset,
                                 seed=config.seed, protocol=config.protocol)
        keys |= set(config_lib.config_diff(_plain(preset.to_dict()), _plain(config.to_dict())))
    except Exception:  # the preset alone does not resolve (an override made it valid, or a task
        pass  # registered in code only): the --set keys are all that is known
    # A key the override names that is not a leaf (a whole dict) or absent resolves to what holds.
    return {k: resolved.get(k) for k in sorted(keys)}


def build_record(config, *, overrides: list[str] | tuple[str, ...] = (), task_facts: dict,
                 history, provenance, fingerprint: dict[str, Any], examples: dict[str, int],
                 class_counts: dict[str, list[int]] | None = None,
                 test_last: dict[str, Any], steps: int, num_params: int, params_sha256: str,
                 batch_stats_sha256: str, fusions: dict[str, Any], git: dict[str, Any],
                 status: str, tracker: dict[str, Any] | None = None,
                 config_file: dict[str, str] | None = None) -> dict[str, Any]:
    """The result record of a finished run (format version ``FORMAT_VERSION``).

    ``history``: ``lra.train.History``; ``provenance``: ``tasks.Provenance``; ``fingerprint``:
    ``lra.data_fingerprint.fingerprint``; ``test_last``: the last step's test evaluation
    {accuracy, loss, examples}; ``overrides``: the ``--set`` pairs (``config_overrides``);
    ``class_counts``: {split: examples per class} where the splits' labels are at hand
    (``lra.train.split_class_counts``), kept as ``data.class_counts``;
    ``tracker``: the experiment tracker's run (``lra.tracker.Wandb.record``: name, run_id, project,
    entity, group, tags), kept as the record's ``tracker`` field only when the run used one;
    ``config_file``: the ``--config`` file's path and SHA-256, the ``config_file`` field only when
    the run was given one (its values are in ``config`` like any other). A run of a one-file family
    records the file as ``attention_file`` (``attention.file_source``)."""
    record = {
        "format_version": FORMAT_VERSION,
        "task": config.task, "attention": config.attention, "preset": config.preset,
        "protocol": config.protocol, "seed": config.seed, "config": config.to_dict(),
        "overrides": config_overrides(config, overrides),
        "task_facts": task_facts,
        "eval_history": eval_history(history.val_curve),
        "data": {**provenance.to_dict(), "fingerprint": fingerprint,
                 "examples": dict(examples),
                 "evaluated": {"val": history.last_val.get("examples", 0),
                               "test_at_best_val": history.test_at_best.get("examples", 0),
                               "test_at_last": test_last["examples"]},
                 **({"class_counts": class_counts} if class_counts else {})},
        "metrics": {
            "best_val_accuracy": history.best_val_accuracy,
            "best_val_step": history.best_step,
            "test_accuracy_at_best_val": history.test_at_best.get("accuracy"),
            "test_accuracy_at_last": test_last["accuracy"],
            "final_val_accuracy": history.last_val.get("accuracy"),
            "final_train_loss": history.last_train.get("loss"),
            "steps": steps,
            "wall_time_s": round(history.wall_time_s, 3),
            "steps_per_s": (round(history.timed_steps / history.train_time_s, 4)
                            if history.train_time_s > 0 else None),
            "peak_memory": peak_memory_bytes(),
            "num_params": num_params,
            "params_sha256": params_sha256,
            "batch_stats_sha256": batch_stats_sha256,
        },
        "device": device_info(),
        "xla_cpu_fusions": fusions,
        "versions": versions(),
        "git": git_record(git, history.code),
        "date": now(),
        "status": status,
    }
    if tracker is not None:
        record["tracker"] = dict(tracker)
    if config_file is not None:
        record["config_file"] = dict(config_file)
    from lra import attention

    source = attention.file_source(config.attention)
    if source is not None:  # a one-file family (--attn path.py:Class): which file, which version
        record["attention_file"] = source
    return record


def code_sessions(code: list[list]) -> list[dict[str, Any]]:
    """``lra.train.History.code`` ([from_step, commit, dirty] per change of code) as records."""
    return [{"from_step": s, "commit": c, "dirty": d} for s, c, d in code]


def git_record(git: dict[str, Any], code: list[list]) -> dict[str, Any]:
    """``git`` (this session's code, the last of ``code``), plus, for a run resumed under other
    code, ``sessions`` (``code_sessions``) and ``dirty`` true if any session's was."""
    if len(code) < 2:
        return dict(git)
    return {**git, "dirty": any(d for _, _, d in code), "sessions": code_sessions(code)}


def now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
