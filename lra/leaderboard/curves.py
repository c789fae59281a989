"""The leaderboard's learning curves, from result files alone: validation accuracy per (task,
preset), from each file's ``eval_history``; and the chance levels both curve commands draw."""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any

import tasks
from lra.leaderboard import figures

FIGURE_PREFIX = "curves-"
FIGURES_DIR = "figures"


class CurvesError(ValueError):
    """Metrics that cannot be drawn; the message names the file and why."""


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

