"""The measured accuracy tables: one per (preset, device) and headline metric, and the runs
behind them."""

from __future__ import annotations

import statistics
from collections import defaultdict
from typing import Any

import tasks
from lra.leaderboard.cells import CELL_LEGEND, marked_cells, md_table
from lra.leaderboard.load import device_label
from lra.leaderboard.published import TASKS

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


def _column(task: str, metric: str) -> str:
    """A task's column header; marked where best-validation selection is selection on test."""
    try:
        on_test = tasks.family(task).validation_is_test
    except tasks.UnknownTaskError:
        on_test = False
    return f"{task} (validation = test split)" if metric == BEST_VAL and on_test else task


def accuracy_section(runs: list[dict[str, Any]],
                     metrics: tuple[tuple[str, str], ...] = HEADLINE_AND_SECOND) -> list[str]:
    groups: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for r in runs:
        groups[(r["preset"], device_label(r))].append(r)
    lines: list[str] = []
    preset_order = {"paper": 0, "small": 1, "tiny": 2}
    for preset, device in sorted(groups, key=lambda g: (preset_order.get(g[0], 9), g)):
        group = groups[(preset, device)]
        lines += [f"### Preset `{preset}` on {device}", ""]
        for metric, title in metrics:
            cells: dict[tuple[str, str], list[float]] = defaultdict(list)
            for r in group:
                value = r["metrics"].get(metric)
                if value is not None:
                    cells[(r["attention"], r["task"])].append(value)
            attns = sorted({r["attention"] for r in group})
            rows = []
            marked = marked_cells(cells, attns, list(TASKS))
            for a in attns:
                row = [a] + [marked[(a, t)] for t in TASKS]
                means = [statistics.fmean(cells[(a, t)]) for t in AVG_TASKS if cells[(a, t)]]
                row.append(f"{100 * statistics.fmean(means):.2f}" if len(means) == len(AVG_TASKS)
                           else "—")
                rows.append(row)
            lines += [f"{title} (%). {CELL_LEGEND}", ""]
            columns = [_column(t, metric) for t in TASKS]
            lines += md_table(["attention", *columns, "avg (5 tasks)"], rows) + [""]
        speed_rows = []
        for r in sorted(group, key=lambda r: (r["task"], r["attention"], r["seed"], r["_file"])):
            m = r["metrics"]
            mem = m.get("peak_memory") or {}
            speed_rows.append([r["task"], r["attention"], str(r["seed"]), str(m["steps"]),
                               f"{m['steps_per_s']:.2f}" if m.get("steps_per_s") else "—",
                               f"{m['wall_time_s'] / 60:.1f}",
                               f"{mem.get('bytes', 0) / 2**30:.2f}" if mem else "—",
                               r["git"]["commit"][:10], f"`{r['_file']}`"])
        lines += ["Runs (peak memory: device peak on accelerators, process peak RSS on CPU):", ""]
        lines += md_table(["task", "attention", "seed", "steps", "steps/s", "wall min",
                         "peak mem GiB", "commit", "file"], speed_rows) + [""]
    return lines

