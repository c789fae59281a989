"""Rebuild ``<results-dir>/LEADERBOARD.md`` from the result files alone.

    python -m lra.leaderboard [--results-dir results]

Measured runs are grouped by preset and device; each cell is the mean ± sample standard deviation of
test accuracy over seeds (n in brackets), both at the best-validation step and at the last step.
Published numbers follow in their own tables, marked "published". The same files give the same bytes.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

from lra import published

TASKS = published.TASKS
AVG_TASKS = TASKS[:5]  # LRA's average leaves Path-X out


class ResultFileError(ValueError):
    pass


def load_runs(results_dir: Path) -> list[dict[str, Any]]:
    runs = []
    for path in sorted((Path(results_dir) / "runs").glob("*.json")):
        try:
            record = json.loads(path.read_text())
            record["metrics"]["test_accuracy_at_last"]
            record["_file"] = path.name
        except (json.JSONDecodeError, KeyError, TypeError) as err:
            raise ResultFileError(f"{path}: not a valid result file ({err!r})") from err
        runs.append(record)
    return runs


def _device_label(record: dict[str, Any]) -> str:
    d = record["device"]
    return f"{d['kind']} x{d['count']}"


def _cell(values: list[float]) -> str:
    if not values:
        return "—"
    pct = [100.0 * v for v in values]
    mean = statistics.fmean(pct)
    if len(pct) == 1:
        return f"{mean:.2f} (1)"
    return f"{mean:.2f} ± {statistics.stdev(pct):.2f} ({len(pct)})"


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return out


def accuracy_section(runs: list[dict[str, Any]]) -> list[str]:
    groups: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for r in runs:
        groups[(r["preset"], _device_label(r))].append(r)
    lines: list[str] = []
    preset_order = {"paper": 0, "small": 1, "tiny": 2}
    for preset, device in sorted(groups, key=lambda g: (preset_order.get(g[0], 9), g)):
        group = groups[(preset, device)]
        lines += [f"### Preset `{preset}` on {device}", ""]
        for metric, title in (("test_accuracy_at_best_val", "test accuracy at the best-validation step"),
                              ("test_accuracy_at_last", "test accuracy at the last step")):
            cells: dict[tuple[str, str], list[float]] = defaultdict(list)
            for r in group:
                value = r["metrics"].get(metric)
                if value is not None:
                    cells[(r["attention"], r["task"])].append(value)
            attns = sorted({r["attention"] for r in group})
            rows = []
            for a in attns:
                row = [a] + [_cell(cells[(a, t)]) for t in TASKS]
                means = [statistics.fmean(cells[(a, t)]) for t in AVG_TASKS if cells[(a, t)]]
                row.append(f"{100 * statistics.fmean(means):.2f}" if len(means) == len(AVG_TASKS)
                           else "—")
                rows.append(row)
            lines += [f"{title.capitalize()} (%, mean ± std over seeds, (n)):", ""]
            lines += _table(["attention", *TASKS, "avg (5 tasks)"], rows) + [""]
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
        lines += _table(["task", "attention", "seed", "steps", "steps/s", "wall min",
                         "peak mem GiB", "commit", "file"], speed_rows) + [""]
    return lines


def published_section() -> list[str]:
    lines = []
    for title, table in published.SOURCES:
        lines += [f"### Published: {title}", ""]
        rows = []
        for attn in sorted(table):
            vals = table[attn]
            cells = ["—" if v is None else (v if isinstance(v, str) else f"{v:.2f}") for v in vals]
            nums = [v for v in vals[:5] if isinstance(v, float)]
            avg = f"{statistics.fmean(nums):.2f}" if len(nums) == 5 else "—"
            rows.append([attn, *cells, avg, "published"])
        lines += _table(["attention", *TASKS, "avg (5 tasks)", "source"], rows) + [""]
    return lines


def render(results_dir: Path) -> str:
    runs = load_runs(results_dir)
    lines = ["# LRA leaderboard", "",
             "Generated by `python -m lra.leaderboard` from the result files in `runs/`; do not edit.",
             "Accuracies are test accuracy in percent. Measured rows and published rows are kept in "
             "separate tables: they come from different code, hardware and budgets.", "",
             "## Measured", ""]
    lines += accuracy_section(runs) if runs else ["No result files yet.", ""]
    lines += ["## Published reference rows (not measured here)", ""]
    lines += published_section()
    return "\n".join(lines).rstrip() + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m lra.leaderboard", description=__doc__.split("\n")[0])
    p.add_argument("--results-dir", type=Path, default=Path("results"))
    args = p.parse_args(argv)
    try:
        text = render(args.results_dir)
    except ResultFileError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    out = args.results_dir / "LEADERBOARD.md"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
