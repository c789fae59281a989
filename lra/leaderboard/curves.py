"""The leaderboard's learning curves, from result files alone: validation accuracy per (task,
preset), from each file's ``eval_history``; and the chance levels both curve commands draw."""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any

from lra import tasks
from lra.leaderboard import figures, names

FIGURE_PREFIX = "curves-"
FIGURES_DIR = "figures"


class CurvesError(ValueError):
    """Metrics that cannot be drawn; the message names the file and why."""


def chance_level(task: str, metric: str) -> tuple[float, str] | None:
    """(level, how it is computed) for accuracy and loss metrics; None for the others, and for a
    task whose number of classes is a data option (MQAR's vocabulary: the task's class declares no
    ``num_classes``), where the task's name alone does not say it."""
    try:
        classes = getattr(tasks.family(task), "num_classes", None)
    except tasks.UnknownTaskError as err:
        raise CurvesError(str(err)) from None
    if not isinstance(classes, int):
        return None
    if metric.endswith("_accuracy"):
        return 1.0 / classes, f"1/{classes}"
    if metric.endswith("_loss"):
        return math.log(classes), f"ln {classes}"
    return None


def chance_lines(task_names: list[str], metric: str) -> list[tuple[float, str]]:
    by_level: dict[tuple[float, str], list[str]] = defaultdict(list)
    for task in sorted(set(task_names)):
        level = chance_level(task, metric)
        if level is not None:
            by_level[level].append(task)
    return [(level, f"chance ({how}): {', '.join(names)}") for (level, how), names in
            sorted(by_level.items())]



def family_band(family: str, histories: list[dict[str, list]]) -> dict[str, Any]:
    """One panel of ``figures.family_curves``: the mean and min-max of validation accuracy over the
    seeds' ``eval_history``, at the steps every seed evaluated."""
    common = sorted(set.intersection(*(set(h["step"]) for h in histories)))
    at = [dict(zip(h["step"], h["val_accuracy"])) for h in histories]
    values = [[a[s] for a in at] for s in common]
    return {"family": family, "n": len(histories), "steps": common,
            "mean": [sum(v) / len(v) for v in values], "low": [min(v) for v in values],
            "high": [max(v) for v in values]}


def leaderboard_section(runs: list[dict[str, Any]]) -> tuple[list[str], figures.Figures]:
    """Markdown lines and {figure file: bytes} (PNG, SVG, PDF at full width; SVG, PDF in one column,
    ``figures.SIZES``; drawn when read): validation accuracy per (task, preset), from the preset
    runs (``_diff`` empty) only."""
    groups: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for r in runs:
        if not r.get("_diff"):
            groups[(r["task"], r["preset"])].append(r)
    lines = ["## Learning curves", ""]
    figs = figures.Figures()
    for task, preset in sorted(groups):
        group = groups[(task, preset)]
        drawn = [r for r in group if (r.get("eval_history") or {}).get("step")]
        if not drawn:
            continue
        devices = {(r["device"]["kind"], r["device"]["count"]) for r in drawn}
        by_family: dict[str, list[dict]] = defaultdict(list)
        shown: dict[str, str] = {}  # panel key -> its title: the paper's name of the family
        for r in drawn:
            where = f" ({r['device']['kind']} x{r['device']['count']})" if len(devices) > 1 else ""
            by_family[r["attention"] + where].append(r["eval_history"])
            shown[r["attention"] + where] = names.family_name(r["attention"]) + where
        panels = [{**family_band(name, by_family[name]), "title": shown[name]}
                  for name in sorted(by_family, key=lambda n: (not n.startswith("softmax"),
                                                               shown[n].lower()))]
        stem = f"{FIGURE_PREFIX}{figures.slug(task)}-{figures.slug(preset)}"
        drawn_figure = figures.family_curves(
            panels, chance=chance_lines([task], "val_accuracy"),
            title=f"Validation accuracy during training: {names.task_name(task)}, preset {preset}",
            ylabel="validation accuracy (%)")
        figs.add(stem, drawn_figure)
        name = f"{stem}.png"
        left_out = len(group) - len(drawn)
        lines += [f"### `{task}`, preset `{preset}`", "",
                  f"![validation accuracy against step, {task}, preset {preset}]({FIGURES_DIR}/{name})",
                  "", f"Validation accuracy during training, one panel per family: the line is the "
                  f"mean over its seeds, the band the lowest to the highest seed, at the evaluation "
                  f"steps every seed has; grey: the other families' means; dashed: chance "
                  f"({chance_level(task, 'val_accuracy')[1]}). Vector versions: `{stem}.svg`, "
                  f"`{stem}.pdf`."
                  + (f" {left_out} run(s) of this group have no evaluation history in their result "
                     f"file and are left out." if left_out else ""), ""]
    if not figs:
        lines += ["No result file holds an evaluation history yet (runs record one in "
                  "`eval_history`); runs without one are left out of the curves.", ""]
    return lines, figs

