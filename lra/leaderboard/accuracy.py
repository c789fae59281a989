"""The measured accuracy tables: one per (preset, device) and headline metric, and the runs
behind them."""

from __future__ import annotations

import statistics
from collections import defaultdict
from typing import Any

from lra import tasks
from lra.leaderboard import budget, identity
from lra.leaderboard.cells import CELL_LEGEND, cell_objects, md_code, md_table, md_text
from lra.leaderboard.curves import CurvesError, chance_level
from lra.leaderboard.load import device_label, task_columns
from lra.leaderboard.published import TASKS
from lra.metrics_log import standard_error

AVG_TASKS = TASKS[:5]  # LRA's average leaves Path-X out


HEADLINE = "test_accuracy_at_last"


BEST_VAL = "test_accuracy_at_best_val"


HEADLINE_AND_SECOND = (
    (HEADLINE, "**Test accuracy at the last step** (LRA's protocol; the headline)"),
    (BEST_VAL, "Test accuracy at the best-validation step"),
)


MODERN_HEADLINE_AND_SECOND = (
    (BEST_VAL, "**Test accuracy at the best-validation step** (the modern protocol's selection; "
               "the headline)"),
    (HEADLINE, "Test accuracy at the last step"),
)


# The test split each headline metric was measured on (``data.evaluated`` of a run file).
EVALUATED = {HEADLINE: "test_at_last", BEST_VAL: "test_at_best_val"}


def majority_share(record: dict[str, Any], n: int) -> float | None:
    """The share of its test split's most common class (what a constant predictor scores at
    best), from the file's ``data.class_counts.test``; None where the file does not record it or
    the counts are not of the ``n`` examples evaluated (an evaluation cut short)."""
    counts = ((record.get("data") or {}).get("class_counts") or {}).get("test")
    if not counts or sum(counts) != n:
        return None
    return max(counts) / n


def at_chance(record: dict[str, Any], metric: str) -> bool | None:
    """Whether ``record``'s ``metric`` is at chance: within one standard error of 1/classes on the
    examples it was measured on, sqrt(p (1 - p) / n) (the rule of the at-chance notice,
    ``lra.metrics_log``), or no better than predicting the test split's majority class for every
    example (``majority_share``, where the file records the split's class counts). None where the
    file does not say how many examples that was."""
    value = record["metrics"].get(metric)
    data = record.get("data") or {}
    n = (data.get("evaluated") or {}).get(EVALUATED.get(metric, ""))
    n = n if n else (data.get("examples") or {}).get("test")
    if value is None or not n:
        return None
    majority = majority_share(record, n)
    if majority is not None and value <= majority + 1e-9:  # a file's float of k/n
        return True
    try:
        level = chance_level(record["task"], "test_accuracy")  # 1/classes, for either metric
    except CurvesError:  # a task no longer registered here
        return None
    if level is None:  # a task whose classes are a data option
        return None
    return abs(value - level[0]) <= standard_error(level[0], n)


def _column(task: str, metric: str) -> str:
    """A task's column header; marked where best-validation selection is selection on test."""
    try:
        on_test = tasks.family(task).validation_is_test
    except tasks.UnknownTaskError:
        on_test = False
    return f"{task} (validation = test split)" if metric == BEST_VAL and on_test else task


def _table(group: list[dict], metric: str, title: str, *, ranked: bool,
           collect: list[dict[str, Any]] | None = None, where: dict[str, str] | None = None,
           tasks: frozenset[str] | None = None) -> list[str]:
    """One accuracy table: a row per row label (the family, plus its differing keys). Each cell
    (a ``cells.Cell``) is also appended to ``collect`` with ``where`` (protocol, preset, device),
    for the CSV and LaTeX outputs."""
    cells: dict[tuple[str, str], list[float]] = defaultdict(list)
    chance: dict[tuple[str, str], int] = defaultdict(int)
    for r in group:
        value = r["metrics"].get(metric)
        if value is not None:
            cells[(r["_row"], r["task"])].append(value)
            chance[(r["_row"], r["task"])] += bool(at_chance(r, metric))
    attns = sorted({r["_row"] for r in group})
    rows = []
    where = {**(where or {}), "budget": budget.budget(group), "hardware": budget.hardware(group)}
    columns = [t for t in task_columns(group) if tasks is None or t in tasks]
    objects = cell_objects(cells, attns, columns, ranked=ranked, at_chance=chance)
    marked = {k: c.text() for k, c in objects.items()}
    if collect is not None:
        family = {r["_row"]: r["attention"] for r in group}
        diff = {r["_row"]: identity.variant_label(r["_diff"]) for r in group}
        per_task = budget.budgets(group)
        collect += [{**where, "task_budget": per_task[t], "metric": metric, "task": t, "row": a,
                     "family": family[a], "overrides": diff[a], "cell": objects[(a, t)]}
                    for a in attns for t in columns if objects[(a, t)].stats is not None]
    # The average column only where some row has all five of LRA's averaged tasks.
    averaged = any(all(cells[(a, t)] for t in AVG_TASKS) for a in attns)
    for a in attns:
        row = [md_text(a)] + [marked[(a, t)] for t in columns]
        means = [statistics.fmean(cells[(a, t)]) for t in AVG_TASKS if cells[(a, t)]]
        if averaged:
            row.append(f"{100 * statistics.fmean(means):.2f}" if len(means) == len(AVG_TASKS)
                       else "—")
        rows.append(row)
    return [f"{title} (%). {CELL_LEGEND}", "",
            f"Budget: {md_text(where['budget'])}. Hardware: {md_text(where['hardware'])}.", ""] + md_table(
        ["attention", *(_column(t, metric) for t in columns)] + (["avg (5 tasks)"] if averaged else []),
        rows) + [""]


def accuracy_section(runs: list[dict[str, Any]],
                     metrics: tuple[tuple[str, str], ...] = HEADLINE_AND_SECOND, *,
                     protocol: str = "lra", collect: list[dict[str, Any]] | None = None,
                     tasks: frozenset[str] | None = None) -> list[str]:
    """The tables of one protocol, per (preset, device); every cell also goes to ``collect``.
    ``tasks``: the columns kept (``--tasks``; None: LRA's six and any other with a run)."""
    groups: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for r in runs:
        groups[(r["preset"], device_label(r))].append(r)
    lines: list[str] = []
    preset_order = {"paper": 0, "small": 1, "tiny": 2}
    for preset, device in sorted(groups, key=lambda g: (preset_order.get(g[0], 9), g)):
        group = groups[(preset, device)]
        lines += [f"### Preset {md_code(preset)} on {md_text(device)}", ""]
        preset_runs = [r for r in group if not r["_diff"]]
        variants = [r for r in group if r["_diff"]]
        for metric, title in metrics:
            where = {"protocol": protocol, "preset": preset, "device": device}
            if preset_runs:
                lines += _table(preset_runs, metric, title, ranked=True, collect=collect, where=where,
                                tasks=tasks)
            if variants:
                lines += _table(variants, metric, f"{title}, runs whose config is not the preset's "
                                f"or whose data is not the column's (own rows, never ranked with "
                                f"it; in brackets the keys that differ, or the data's fingerprint)",
                                ranked=False, collect=collect, where=where, tasks=tasks)
        speed_rows = []
        for r in sorted(group, key=lambda r: (r["task"], r["_row"], r["seed"], r["_file"])):
            m = r["metrics"]
            mem = m.get("peak_memory") or {}
            speed_rows.append([md_text(r["task"]), md_text(r["_row"]), str(r["seed"]), str(m["steps"]),
                               f"{m['steps_per_s']:.2f}" if m.get("steps_per_s") else "—",
                               f"{m['wall_time_s'] / 60:.1f}",
                               f"{mem.get('bytes', 0) / 2**30:.2f}" if mem else "—",
                               md_text(r["git"]["commit"][:10]), md_code(r["_file"])])
        lines += ["Runs (peak memory: device peak on accelerators, process peak RSS on CPU):", ""]
        lines += md_table(["task", "attention", "seed", "steps", "steps/s", "wall min",
                         "peak mem GiB", "commit", "file"], speed_rows) + [""]
    return lines

