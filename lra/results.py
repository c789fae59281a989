"""Result files: one JSON per run, written atomically, never overwritten.

A record holds what DESIGN.md lists: task, attention, preset, seed, the full resolved config, the
metrics, the device, package versions, the git commit and the date, plus the evaluation history
(step, validation accuracy and loss at each evaluation) that the leaderboard's learning curves draw.
``lra.leaderboard`` reads only these files.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import platform
import secrets
import subprocess
import tempfile
from importlib import metadata
from pathlib import Path
from typing import Any

import jax

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
    devices = jax.devices()
    return {"platform": devices[0].platform, "kind": devices[0].device_kind,
            "count": len(devices), "process_count": jax.process_count(), "host": host_info()}


def peak_memory_bytes() -> dict[str, Any]:
    """Accelerator peak bytes in use where the runtime reports it, else the process's peak RSS."""
    stats = jax.local_devices()[0].memory_stats()
    if stats and "peak_bytes_in_use" in stats:
        return {"bytes": int(stats["peak_bytes_in_use"]), "source": "device peak_bytes_in_use"}
    import resource

    rss_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {"bytes": int(rss_kib) * 1024, "source": "process peak RSS (CPU)"}


def _write_beside(path: Path, data: Any, publish) -> None:
    """Write ``data`` as JSON to a temporary file next to ``path``, then ``publish(tmp, path)``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(data, f, indent=2, sort_keys=True)
            f.write("\n")
        publish(tmp, path)
    finally:
        Path(tmp).unlink(missing_ok=True)


def write_json_atomic(path: Path, data: Any) -> None:
    """Replace ``path`` with ``data`` at once (a rename): readers see the old or the new file."""
    _write_beside(path, data, os.replace)


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
    """Write ``record`` to ``path``, which must not exist, all at once: the JSON goes to a temporary
    file that a hard link then claims under its name, so a kill never leaves a partial or empty
    result file and an existing one is never replaced."""
    _write_beside(path, record, os.link)  # FileExistsError if the name is taken


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


def now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
