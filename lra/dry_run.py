"""What ``lra.sweep --dry-run`` says of each cell besides its action: is its data there, and how
long will it take.

* **Data.** A cell to run or resume whose data is not in the data directory is flagged: ``data
  missing`` with the command that prepares it (``python -m lra.data prepare --task T``, or the one
  the task's own message names, e.g. ``lra.data fetch-release`` for data that only the official
  release holds), or ``data generated on first use`` for a task whose generator writes it
  (``Provenance.origin == "generated"``). Nothing is read or generated: the task is built and its
  provenance's files looked for.
* **Time.** A cell's expected time is its ``train.num_steps`` over a measured steps/s of the same
  (family, task, device kind and count) and the same step: the valid result files (the one
  reader) under the sweep's ``--results-dir`` and the project's reference set (``results/`` of
  the source tree) whose config equals the cell's but for the keys that do not change what a step
  computes (``STEP_FREE``: seed, learning rate and schedule, step and evaluation counts, split
  sizes); the median where there are several. It counts training steps only (evaluation,
  compilation and data preparation come on top). A bench file (``lra.bench``) times another model
  and batch than a cell's, so it is not used. A cell without such a run is said to have none.
"""

from __future__ import annotations

import json
import re
import statistics
from collections import defaultdict
from pathlib import Path
from typing import Any, TextIO

from lra import config as config_lib

# Keys that change the number of steps or their values, not what one step computes.
STEP_FREE = ("seed", "train.lr", "train.schedule", "train.warmup_steps", "train.weight_decay",
             "train.b1", "train.b2", "train.eps", "train.grad_clip", "train.ssm_lr",
             "train.num_steps", "train.eval_every", "train.eval_batches", "train.checkpoint_every",
             "train.log_every", "train.chance_patience", "data.train_size", "data.val_size",
             "data.test_size")
_COMMAND = re.compile(r"`(python -m lra\.[^`]+)`")


def data_state(config: config_lib.Config, data_dir: Path) -> tuple[str, str]:
    """("present" | "generated" | "missing", how to prepare it) for the data ``config`` reads."""
    from lra import tasks

    prepare = f"python -m lra.data prepare --task {config.task} --data-dir {data_dir}" + "".join(
        f" --set {k}={v}" for k, v in sorted(config.data.items()))
    try:
        provenance = tasks.build(config.task, data_dir, **config.data).provenance()
    except tasks.DataError as err:  # the task cannot even say where it would read: its message says how
        found = _COMMAND.search(str(err))
        return "missing", found[1] if found else prepare
    paths = {Path(data_dir) / f.split(" (")[0] for f in provenance.files.values()}  # tfds: "dir (split)"
    if all(p.exists() for p in paths):
        return "present", ""
    return ("generated" if provenance.origin == "generated" else "missing"), prepare


def step_key(config: dict[str, Any]) -> str:
    """A resolved config without ``STEP_FREE``: runs with equal keys compute the same step."""
    flat = config_lib.flatten(config_lib.with_protocol(json.loads(json.dumps(config))))
    return json.dumps({k: v for k, v in flat.items() if k not in STEP_FREE}, sort_keys=True)


def reference_dir() -> Path:
    """The project's reference set: ``results/`` beside the package in a source tree."""
    from lra.results import REFERENCE_RESULTS_DIR

    return Path(__file__).resolve().parent.parent / REFERENCE_RESULTS_DIR


def folders(results_dir: Path) -> list[Path]:
    """Where measured runs are looked for: the sweep's ``--results-dir`` and the reference set."""
    out = []
    for folder in (Path(results_dir), reference_dir()):
        if folder.resolve() not in {f.resolve() for f in out}:
            out.append(folder)
    return out


def measured(runs) -> dict[tuple[str, str, int], list[float]]:
    """{(step_key, device kind, device count): [steps/s of each run]} of valid result records
    (``lra.sweep`` reads them with the one reader)."""
    out: dict[tuple[str, str, int], list[float]] = defaultdict(list)
    for r in runs:
        speed, device = r["metrics"].get("steps_per_s"), r.get("device") or {}
        if speed:
            out[(step_key(r["config"]), str(device.get("kind")), int(device.get("count", 1)))
                ].append(float(speed))
    return dict(out)


def target_device(args) -> tuple[str, int]:
    """The device kind and count a cell of this sweep runs on: this machine's GPUs (each cell
    ``--gpus-per-task`` of them, else all), else its CPU."""
    from lra import cluster

    try:
        gpus = cluster.find_gpus(getattr(args, "gpus", None))
    except ValueError:
        gpus = None
    if gpus is None or not gpus.ids or getattr(args, "gpus_per_task", None) == 0:
        return "cpu", 1
    return gpus.kind() or "gpu", getattr(args, "gpus_per_task", None) or len(gpus.ids)


def clock(seconds: float) -> str:
    """``h:mm:ss`` (the sweep's progress lines and the dry run's estimates)."""
    s = round(seconds)
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


def annotate(plans, args, data_dir: Path, runs) -> tuple[dict[int, str], list[str]]:
    """{id of a plan: what its line adds} and the summary lines, for the cells to run or resume;
    ``runs``: the valid result records of ``folders`` (the measured step times)."""
    kind, count = target_device(args)
    speeds = measured(runs)
    notes: dict[int, str] = {}
    states: dict[str, tuple[str, str]] = {}
    missing: dict[tuple[str, str], list[str]] = defaultdict(list)
    generated: dict[str, int] = defaultdict(int)
    total, timed, untimed = 0.0, 0, 0
    for p in plans:
        if p.action not in ("run", "resume"):
            continue
        config = config_lib.Config.from_dict(json.loads(p.config_key))
        data_key = json.dumps([config.task, config.data], sort_keys=True, default=str)
        state, how = states.setdefault(data_key, data_state(config, data_dir))
        tags = []
        if state == "missing":
            tags.append("DATA MISSING")
            missing[(config.task, how)].append(str(p.cell))
        elif state == "generated":
            tags.append("data generated on first use")
            generated[config.task] += 1
        found = speeds.get((step_key(config.to_dict()), kind, count))
        if found:
            seconds = config.train.num_steps / statistics.median(found)
            total, timed = total + seconds, timed + 1
            tags.append(f"~{clock(seconds)}" + (" at most (it resumes)" if p.action == "resume"
                                                else ""))
        else:
            untimed += 1
        notes[id(p)] = ", ".join(tags)
    return notes, _summary(missing, generated, (total, timed, untimed), f"{count} x {kind}")


def _summary(missing, generated, times, device: str) -> list[str]:
    lines = []
    for (task, how), cells in sorted(missing.items()):
        then = "" if "--data-dir" in how else " (then pass --data-dir DIR)"
        lines.append(f"data missing for {len(cells)} {task} cell{'s' * (len(cells) > 1)} (they "
                     f"would fail): prepare it first with `{how}`{then}")
    if generated:
        lines.append("data generated on first use (by the first cell that reads it) for: "
                     + ", ".join(f"{t} ({n} cells)" for t, n in sorted(generated.items()))
                     + "; or ahead with `python -m lra.data prepare --task TASK`")
    total, timed, untimed = times
    if timed:
        lines.append(f"expected time on {device}: {clock(total)} in all for the {timed} cells "
                     f"with a measured step time (training steps only: evaluation, compiling and "
                     f"data preparation come on top)")
    if untimed:
        lines.append(f"no measured step time on {device} for {untimed} cells (no valid result of "
                     f"the same family, task and step on that device under --results-dir or the "
                     f"reference set): no time estimate for them")
    return lines


def print_dry_run(plans, args, data_dir: Path, runs, stream: TextIO) -> None:
    """The dry run: one line per cell (action, cell, where, and its data and time), the counts,
    then the data and time summary."""
    notes, summary = annotate(plans, args, data_dir, runs)
    for p in plans:
        extra = f" [{notes[id(p)]}]" if notes.get(id(p)) else ""
        print(f"{p.action:8} {p.cell}" + (f": {p.detail}" if p.detail else f" in {p.workdir}")
              + extra, file=stream)
    counts = {a: sum(p.action == a for p in plans) for a in ("run", "resume", "skip", "conflict",
                                                            "invalid")}
    print(", ".join(f"{n} {a}" for a, n in counts.items() if n or a != "invalid")
          + f" ({len(plans)} cells)", file=stream)
    for line in summary:
        print(line, file=stream)
