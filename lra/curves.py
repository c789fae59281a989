"""Learning curves: one metric against training step for several runs on one figure.

    python -m lra.curves WORKDIR [WORKDIR ...] [--metric val_accuracy] [--out FILE.png]

Each work directory's ``metrics.jsonl`` is all it reads: its first record names the run (task,
attention, preset, seed; the legend says task/family/seed) and the others give the metric, one
point per step. The task's chance level comes from the task registry (the task's number of
classes C): 1/C for accuracies and ln C, the cross-entropy of a uniform guess, for losses. The PNG
is byte-deterministic (see ``lra.figures``): the same files give the same bytes.

``leaderboard_section`` draws the leaderboard's learning curves from result files alone: one figure
per (task, preset) of validation accuracy at each evaluation, from each file's ``eval_history``;
runs whose file has none are left out. Exit status of the command: 0 written, 1 a work directory
without usable metrics, 2 a bad command line.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import tasks
from lra import figures
from lra.metrics_log import METRICS_FILE, RUN_SPLIT, read_jsonl

# --metric NAME -> (split, value) in metrics.jsonl.
METRICS = {
    "val_accuracy": ("val", "accuracy"), "val_loss": ("val", "loss"),
    "train_loss": ("train", "loss"), "train_accuracy": ("train", "accuracy"),
    "train_lr": ("train", "lr"), "train_grad_norm": ("train", "grad_norm"),
    "train_steps_per_s": ("train", "steps_per_s"),
}
FIGURE_PREFIX = "curves-"
FIGURES_DIR = "figures"


class CurvesError(ValueError):
    """A work directory whose metrics cannot be drawn; the message names the file and why."""


def load_workdir(workdir: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(the run record, every record) of ``workdir/metrics.jsonl``."""
    path = Path(workdir) / METRICS_FILE
    if not path.is_file():
        raise CurvesError(f"{path}: not found; {workdir} is not the --workdir of a "
                          f"`python -m lra.run` that has logged metrics")
    try:
        records = read_jsonl(path)
    except ValueError as err:
        raise CurvesError(str(err)) from None
    runs = [r for r in records if r["split"] == RUN_SPLIT]
    if not runs:
        raise CurvesError(f"{path}: no run record (split {RUN_SPLIT!r}, naming task, attention and "
                          f"seed); it was written before lra logged one: re-run the training")
    return runs[0], records


def points(records: list[dict[str, Any]], metric: str) -> tuple[list[int], list[float]]:
    """Steps and values of ``metric``, sorted by step (the last record of a step wins)."""
    split, key = METRICS[metric]
    by_step = {r["step"]: r[key] for r in records if r["split"] == split and r.get(key) is not None}
    steps = sorted(by_step)
    return steps, [float(by_step[s]) for s in steps]


def chance_level(task: str, metric: str) -> tuple[float, str] | None:
    """(level, how it is computed) for accuracy and loss metrics; None for the others."""
    try:
        classes = tasks.family(task).num_classes
    except tasks.UnknownTaskError as err:
        raise CurvesError(str(err)) from None
    if metric.endswith("_accuracy"):
        return 1.0 / classes, f"1/{classes}"
    if metric.endswith("_loss"):
        return math.log(classes), f"ln {classes}"
    return None


def _chance_lines(task_names: list[str], metric: str) -> list[tuple[float, str]]:
    by_level: dict[tuple[float, str], list[str]] = defaultdict(list)
    for task in sorted(set(task_names)):
        level = chance_level(task, metric)
        if level is not None:
            by_level[level].append(task)
    return [(level, f"chance ({how}): {', '.join(names)}") for (level, how), names in
            sorted(by_level.items())]


def draw(workdirs: list[Path], metric: str) -> bytes:
    """The PNG of ``metric`` against step for every work directory."""
    series, task_names = [], []
    loaded = [(wd, *load_workdir(wd)) for wd in workdirs]
    several_presets = len({run.get("preset") for _, run, _ in loaded}) > 1
    for wd, run, records in loaded:
        steps, values = points(records, metric)
        if not steps:
            split, _ = METRICS[metric]
            raise CurvesError(f"{Path(wd) / METRICS_FILE}: no {metric} yet (no {split!r} record "
                              f"holds it); choose another --metric or wait for the run to log one")
        label = f"{run['task']}/{run['attention']}/seed {run['seed']}"
        series.append({"label": label + (f" ({run['preset']})" if several_presets else ""),
                       "family": run["attention"], "steps": steps, "values": values})
        task_names.append(run["task"])
    return figures.learning_curves(series, chance=_chance_lines(task_names, metric),
                                   title=f"{metric} against training step", ylabel=metric)


# ----------------------------------------------------------------------------------------------
# The leaderboard's learning curves, from result files.


def leaderboard_section(runs: list[dict[str, Any]]) -> tuple[list[str], dict[str, bytes]]:
    """Markdown lines and {figure file: PNG bytes}: validation accuracy per (task, preset)."""
    groups: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for r in runs:
        groups[(r["task"], r["preset"])].append(r)
    lines = ["## Learning curves", ""]
    figs: dict[str, bytes] = {}
    for task, preset in sorted(groups):
        group = groups[(task, preset)]
        drawn = [r for r in group if (r.get("eval_history") or {}).get("step")]
        if not drawn:
            continue
        drawn.sort(key=lambda r: (r["attention"] != "softmax", r["attention"], r["seed"],
                                  r["device"]["kind"], r["_file"]))
        devices = {(r["device"]["kind"], r["device"]["count"]) for r in drawn}
        series = []
        for r in drawn:
            h = r["eval_history"]
            where = f" ({r['device']['kind']} x{r['device']['count']})" if len(devices) > 1 else ""
            series.append({"label": f"{r['attention']}/seed {r['seed']}{where}",
                           "family": r["attention"], "steps": h["step"], "values": h["val_accuracy"]})
        name = f"{FIGURE_PREFIX}{figures.slug(task)}-{figures.slug(preset)}.png"
        figs[name] = figures.learning_curves(
            series, chance=_chance_lines([task], "val_accuracy"),
            title=f"Validation accuracy during training: {task}, preset {preset}",
            ylabel="validation accuracy")
        left_out = len(group) - len(drawn)
        lines += [f"### `{task}`, preset `{preset}`", "",
                  f"![validation accuracy against step, {task}, preset {preset}]({FIGURES_DIR}/{name})",
                  "", f"Validation accuracy at each evaluation of each run; dashed: chance "
                  f"({chance_level(task, 'val_accuracy')[1]})."
                  + (f" {left_out} run(s) of this group have no evaluation history in their result "
                     f"file and are left out." if left_out else ""), ""]
    if not figs:
        lines += ["No result file holds an evaluation history yet (runs record one in "
                  "`eval_history`); runs without one are left out of the curves.", ""]
    return lines, figs


# ----------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m lra.curves", description=__doc__.split("\n")[0])
    p.add_argument("workdirs", nargs="+", type=Path, metavar="WORKDIR",
                   help="work directories of `python -m lra.run` (each holds metrics.jsonl)")
    p.add_argument("--metric", default="val_accuracy", choices=sorted(METRICS))
    p.add_argument("--out", type=Path, default=None,
                   help="PNG file to write (default: curves-<metric>.png here)")
    args = p.parse_args(argv)
    out = args.out or Path(f"curves-{args.metric}.png")
    try:
        png = draw(args.workdirs, args.metric)
    except CurvesError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(png)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
