"""Rebuild ``<results-dir>/LEADERBOARD.md`` and its figures from the result files alone.

    python -m lra.leaderboard [--results-dir results]

Measured runs (``runs/*.json``) are grouped by preset and device; each cell is the mean ± sample
standard deviation of test accuracy over seeds (n in brackets). The headline table is test accuracy
at the LAST step, what LRA reported; test accuracy at the best-validation step follows as a second
table (on Text, validation is the test split, so that table's Text column is selected on test).
Efficiency files (``efficiency/*.json``, written by ``python -m lra.bench``) give a table like
LRA's Table 2 per device, task, batch and dtype (the latest file of each), with PNG figures under
``figures/``: LRA's bubble chart (speed vs softmax, accuracy, memory) and log-log scaling curves
with fitted slopes. Published numbers follow in their own tables, marked "published". The same files
give the same bytes, figures included.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tasks
from lra import curves, efficiency, figures, published

TASKS = published.TASKS
AVG_TASKS = TASKS[:5]  # LRA's average leaves Path-X out


class ResultFileError(ValueError):
    pass


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def check_run(record: Any) -> None:
    """Raise ``ResultFileError`` saying what makes ``record`` unusable for the tables."""
    if not isinstance(record, dict):
        raise ResultFileError(f"expected a JSON object, got {type(record).__name__}")
    for key in ("task", "attention", "preset", "seed", "metrics", "device", "git"):
        if key not in record:
            raise ResultFileError(f"no {key!r}")
    if record["task"] not in TASKS:
        raise ResultFileError(f"unknown task {record['task']!r} (known: {', '.join(TASKS)})")
    device, metrics = record["device"], record["metrics"]
    if not isinstance(device, dict) or not {"kind", "count"} <= device.keys():
        raise ResultFileError("'device' lacks 'kind' or 'count'")
    if not isinstance(metrics, dict):
        raise ResultFileError("'metrics' is not an object")
    for key in ("test_accuracy_at_last", "test_accuracy_at_best_val"):
        value = metrics.get(key)
        if not (value is None and key != "test_accuracy_at_last") and not (
                _number(value) and 0 <= value <= 1):
            raise ResultFileError(f"metrics.{key} is {value!r}, not an accuracy in [0, 1]")
    for key in ("steps", "wall_time_s"):
        if not _number(metrics.get(key)):
            raise ResultFileError(f"metrics.{key} is {metrics.get(key)!r}, not a number")
    evaluated = (record.get("data") or {}).get("evaluated", {})  # files before provenance lack it
    empty = [split for split, n in evaluated.items() if n == 0]
    if empty:
        raise ResultFileError(f"its evaluation saw zero examples ({', '.join(empty)})")
    if not isinstance(record["git"], dict) or not isinstance(record["git"].get("commit"), str):
        raise ResultFileError("'git' lacks 'commit'")


def load_runs(results_dir: Path, skipped: list[str] | None = None) -> list[dict[str, Any]]:
    """The valid result files of ``results_dir/runs``; each invalid or unreadable one is skipped
    and described in ``skipped`` (an error if ``skipped`` is None)."""
    runs = []
    for path in sorted((Path(results_dir) / "runs").glob("*.json")):
        try:
            try:
                record = json.loads(path.read_bytes().decode("utf-8"))
            except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
                raise ResultFileError(f"unreadable ({type(err).__name__}: {err})") from None
            check_run(record)
        except ResultFileError as err:
            if skipped is None:
                raise ResultFileError(f"{path}: not a valid result file ({err})") from None
            skipped.append(f"{path}: {err}")
            continue
        record["_file"] = path.name
        runs.append(record)
    return runs


def _device_label(record: dict[str, Any]) -> str:
    d = record["device"]
    return f"{d['kind']} x{d['count']}"


def _bench_device_label(record: dict[str, Any]) -> str:
    """The device of a bench file, with the host CPU on CPU: speed there is the host's, and the
    device record alone ("cpu x1") cannot tell two machines apart (results.host_info)."""
    label, d = _device_label(record), record["device"]
    if d.get("platform", d["kind"]) != "cpu":
        return label
    host = d.get("host")  # files written before the host was recorded keep the plain label
    return f"{label} ({host['cpu']}, {host['cores']} cores)" if host else label


# Two-sided 95% Student-t quantiles t(0.975, df) for df = n - 1 = 1..30 (printed tables, 3
# decimals; scipy is not a dependency); beyond 30 the normal 1.96 (at df = 40 the exact value is
# 2.021, so intervals there are up to 3% too narrow).
T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
        2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
        2.052, 2.048, 2.045, 2.042)

CELL_LEGEND = ("Each cell: mean ± sample std over seeds [95% Student-t interval of the mean] (n "
               "seeds); **bold**: the task's best mean; ≈: its interval overlaps the best's "
               "(tied with it: no real difference shown); †: fewer seeds than the table's usual n.")


def t975(df: int) -> float:
    return T975[df - 1] if df <= len(T975) else 1.96


@dataclass(frozen=True)
class CellStats:
    """Seeds of one (family, task) cell, in percent: the interval is mean ± t * std / sqrt(n)."""

    n: int
    mean: float
    std: float | None = None  # sample std (n - 1), where n >= 2
    low: float | None = None
    high: float | None = None


def cell_stats(values: list[float]) -> CellStats | None:
    """Statistics of accuracies in [0, 1], as percentages; None without values. The values are
    sorted first so that the same seeds in another file order give the same bytes."""
    if not values:
        return None
    pct = sorted(100.0 * v for v in values)
    mean = statistics.fmean(pct)
    if len(pct) == 1:
        return CellStats(1, mean)
    std = statistics.stdev(pct)
    half = t975(len(pct) - 1) * std / math.sqrt(len(pct))
    return CellStats(len(pct), mean, std, mean - half, mean + half)


def _cell(s: CellStats | None, *, best: bool = False, tied: bool = False, few: bool = False) -> str:
    if s is None:
        return "—"
    text = (f"{s.mean:.2f} (1)" if s.std is None else
            f"{s.mean:.2f} ± {s.std:.2f} [{s.low:.2f}, {s.high:.2f}] ({s.n})")
    return (f"**{text}**" if best else text) + (" ≈" if tied else "") + (" †" if few else "")


def marked_cells(cells: dict[tuple[str, str], list[float]], attns: list[str],
                 task_names: list[str]) -> dict[tuple[str, str], str]:
    """Every (attention, task) cell's text with its markers: per task the best mean in bold, the
    families whose 95% interval overlaps the best's marked tied (only where both have n >= 2), and
    cells with fewer seeds than the table's most common n (the larger on a tie) flagged."""
    stats = {(a, t): cell_stats(cells.get((a, t), [])) for a in attns for t in task_names}
    counts = Counter(s.n for s in stats.values() if s is not None)
    usual = max(counts, key=lambda n: (counts[n], n)) if counts else 0
    out = {}
    for t in task_names:
        column = {a: stats[(a, t)] for a in attns if stats[(a, t)] is not None}
        best = max(column, key=lambda a: column[a].mean) if column else None  # first in name order
        top = column.get(best)
        for a in attns:
            s = stats[(a, t)]
            tied = (s is not None and a != best and top.low is not None and s.low is not None
                    and s.low <= top.high and top.low <= s.high)
            out[(a, t)] = _cell(s, best=a == best, tied=tied, few=s is not None and s.n < usual)
    return out


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return out


HEADLINE = "test_accuracy_at_last"
BEST_VAL = "test_accuracy_at_best_val"
HEADLINE_AND_SECOND = (
    (HEADLINE, "**Test accuracy at the last step** (LRA's protocol; the headline)"),
    (BEST_VAL, "Test accuracy at the best-validation step"),
)


def _column(task: str, metric: str) -> str:
    """A task's column header; marked where best-validation selection is selection on test."""
    try:
        on_test = tasks.family(task).validation_is_test
    except tasks.UnknownTaskError:
        on_test = False
    return f"{task} (validation = test split)" if metric == BEST_VAL and on_test else task


def protocol(record: dict[str, Any]) -> str:
    """The protocol of a result file (``lra`` when it records none: written before protocols)."""
    return record.get("protocol") or record.get("config", {}).get("protocol") or "lra"


MODERN_HEADLINE_AND_SECOND = (
    (BEST_VAL, "**Test accuracy at the best-validation step** (the modern protocol's selection; "
               "the headline)"),
    (HEADLINE, "Test accuracy at the last step"),
)


def accuracy_section(runs: list[dict[str, Any]],
                     metrics: tuple[tuple[str, str], ...] = HEADLINE_AND_SECOND) -> list[str]:
    groups: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for r in runs:
        groups[(r["preset"], _device_label(r))].append(r)
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
            lines += _table(["attention", *columns, "avg (5 tasks)"], rows) + [""]
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


# ----------------------------------------------------------------------------------------------
# Efficiency (python -m lra.bench result files).

FIGURES_DIR = "figures"
FIGURE_PREFIX = "efficiency-"
PRESET_ORDER = {"paper": 0, "small": 1, "tiny": 2}


def load_efficiency(results_dir: Path) -> list[dict[str, Any]]:
    records = []
    for path in sorted((Path(results_dir) / "efficiency").glob("*.json")):
        try:
            record = json.loads(path.read_text())
            if record["schema"] != efficiency.SCHEMA:
                raise KeyError(f"schema {record['schema']!r}, expected {efficiency.SCHEMA!r}")
            for r in record["results"]:
                r["attention"], r["length"], r["status"]
            record["device"]["kind"], record["task"], record["batch"], record["dtype"]
            record["_file"] = path.name
        except (json.JSONDecodeError, KeyError, TypeError) as err:
            raise ResultFileError(f"{path}: not a valid efficiency file ({err!r})") from err
        records.append(record)
    return records


def _ratio(x: float | None) -> str:
    return "" if x is None else f" ({x:.2f}x)"


def _num(x: float) -> str:
    return f"{x:.3g}" if x < 1000 else f"{x:.0f}"


def _family_order(names) -> list[str]:
    return sorted(names, key=lambda n: (n != "softmax", n))


def _common_length(ok: dict[tuple[str, int], dict], families: list[str], lengths: list[int]) -> int | None:
    """The longest length where softmax and every family measured anywhere have a result."""
    measured = {a for a, _ in ok}
    full = [n for n in lengths if all((a, n) in ok for a in measured)]
    if full:
        return max(full)
    with_base = [n for n in lengths if ("softmax", n) in ok]
    return max(with_base) if with_base else None


def _accuracy_by_family(runs: list[dict[str, Any]], families: list[str]):
    """Mean headline test accuracy (at the last step, %) per family from the runs of one preset.

    The preset is the one whose runs cover the most of ``families`` (ties: paper, small, tiny). The
    mean is over the tasks every covered family has, or over each family's own tasks if none is shared.
    Returns (preset, tasks or None, {family: accuracy}) or None without runs.
    """
    by_preset: dict[str, dict[str, dict[str, list[float]]]] = defaultdict(lambda: defaultdict(dict))
    for r in runs:
        value = r["metrics"].get(HEADLINE)
        if r["attention"] in families and value is not None:
            by_preset[r["preset"]][r["attention"]].setdefault(r["task"], []).append(100.0 * value)
    if not by_preset:
        return None
    preset = min(by_preset, key=lambda p: (-len(by_preset[p]), PRESET_ORDER.get(p, 9), p))
    cover = by_preset[preset]
    shared = set.intersection(*(set(t) for t in cover.values()))
    tasks = sorted(shared) if shared else None
    acc = {a: statistics.fmean(statistics.fmean(v) for t, v in per.items()
                               if tasks is None or t in shared)
           for a, per in cover.items()}
    return preset, tasks, acc


def efficiency_section(records: list[dict[str, Any]], runs: list[dict[str, Any]]):
    """Markdown lines and {figure file: PNG bytes} for the latest bench file of each setting."""
    if not records:
        return ["No efficiency files yet: run `python -m lra.bench` (see README).", ""], {}
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for rec in records:
        groups[(_bench_device_label(rec), rec["task"], rec["batch"], rec["dtype"])].append(rec)
    lines: list[str] = [
        "Training steps per second (the median of the timed steps, families timed round-robin in "
        "one process) and peak memory per device, at each input length; in brackets the ratio to "
        "`softmax` measured in the same run, as in LRA's Table 2. Slopes are least-squares fits of "
        "log(time per step) and log(memory) against log(length): 2 is quadratic, 1 linear; memory "
        "includes the parameters and optimizer state, which do not grow with length.", ""]
    figs: dict[str, bytes] = {}
    for key in sorted(groups):
        history = sorted(groups[key], key=lambda r: (r["date"], r["_file"]))
        rec = history[-1]
        more, figs_more = _efficiency_table(rec, runs, key)
        lines += more
        figs.update(figs_more)
        if len(history) > 1:
            lines += ["Earlier files for this setting (not shown): "
                      + ", ".join(f"`{r['_file']}`" for r in history[:-1]), ""]
    return lines, figs


def _fusions_line(ok: dict[tuple[str, int], dict[str, Any]], families: list[str],
                  lengths: list[int]) -> list[str]:
    """Which step program each config timed (``lra.xla_cpu``), for bench files that record it."""
    chosen = {k: r["xla_cpu_fusions"] for k, r in ok.items() if r.get("xla_cpu_fusions")}
    if not chosen:
        return []
    sources = sorted({c["source"] for c in chosen.values()})
    how = ("the faster of the two, as `lra.run --xla-cpu-fusions auto` picks it"
           if sources == ["auto"] else "source: " + ", ".join(sources))
    off = []
    for a in families:
        have = [n for n in lengths if (a, n) in chosen]
        without = [n for n in have if chosen[(a, n)]["choice"] == "off"]
        if without:
            off.append(f"{a} ({'every length' if without == have else ', '.join(map(str, without))})")
    what = ("without XLA:CPU's YNN fusions for " + ", ".join(off) + "; with them for the rest"
            if off else "with XLA:CPU's YNN fusions for every config")
    return [f"Step program timed ({how}): {what}.", ""]


def _efficiency_table(rec: dict[str, Any], runs: list[dict[str, Any]], key: tuple):
    device, task, batch, dtype = key
    lengths = sorted({r["length"] for r in rec["results"]})
    ok = {(r["attention"], r["length"]): r for r in rec["results"] if r["status"] == "ok"}
    families = _family_order({r["attention"] for r in rec["results"]})
    peak = rec.get("matmul_peak", {}).get("flops_per_s")
    longest = max(lengths)
    lines = [f"### `{task}` model, batch {batch}, {dtype}, on {device}", "",
             f"File `{rec['_file']}` (commit {rec['git']['commit'][:10]}, {rec['date']}, median of "
             f"{rec['steps']} timed steps after {rec['warmup']} untimed warm-up step(s)). Memory: "
             f"{rec['memory_method']}."
             + (f" Measured matmul peak of this device: {peak / 1e9:.1f} GFLOP/s." if peak else ""),
             ""]
    header = (["attention"] + [f"steps/s {n}" for n in lengths] + [f"memory GiB {n}" for n in lengths]
              + ["time slope", "memory slope", f"GFLOP/step {longest}",
                 f"softmax's FLOPs / these {longest}", f"% of peak {longest}"])
    rows, skipped = [], []
    softmax_last = ok.get(("softmax", longest))
    for a in families:
        speed, mem = [], []
        xs, ts, ms = [], [], []
        for n in lengths:
            r = ok.get((a, n))
            if r is None:
                speed.append("skipped")
                mem.append("skipped")
                continue
            base = a == "softmax"
            speed.append(_num(r["steps_per_s"]) + ("" if base else _ratio(r.get("speed_vs_softmax"))))
            mem.append(_num(r["memory"]["bytes"] / 2**30)
                       + ("" if base else _ratio(r.get("memory_vs_softmax"))))
            xs.append(n)
            ts.append(r["step_time_s"]["median"])
            ms.append(r["memory"]["bytes"])
        kt, km = efficiency.loglog_slope(xs, ts), efficiency.loglog_slope(xs, ms)
        last = ok.get((a, longest))
        flops = _num(last["flops"]["per_step"] / 1e9) if last else "—"
        bound = (f"{softmax_last['flops']['per_step'] / last['flops']['per_step']:.2f}x"
                 if last and softmax_last and a != "softmax" else "—")
        frac = f"{100 * last['fraction_of_peak']:.1f}" if last and last.get("fraction_of_peak") else "—"
        rows.append([a, *speed, *mem, "—" if kt is None else f"{kt:.2f}",
                     "—" if km is None else f"{km:.2f}", flops, bound, frac])
    for r in sorted(rec["results"], key=lambda r: (r["attention"], r["length"])):
        if r["status"] != "ok":
            skipped.append(f"- `{r['attention']}` at {r['length']}: {r['reason']}")
    lines += _table(header, rows) + [""]
    checks = sorted(r["memory"]["rss_growth_vs_compiled_transient"] for r in ok.values()
                    if r["memory"].get("rss_growth_vs_compiled_transient") is not None)
    if checks:
        lines += [f"Cross-check: during each config's first step the process's resident memory grew by "
                  f"{checks[0]:.2f}-{checks[-1]:.2f}x (median {statistics.median(checks):.2f}x) the "
                  f"compiled temporaries plus unaliased outputs.", ""]
    lines += _fusions_line(ok, families, lengths)
    lines += ["FLOPs per step: XLA's cost analysis, or where the step has loops (which XLA counts once) "
              "the matmul and convolution FLOPs of the jaxpr with scans multiplied out, whichever is "
              "larger; % of peak = FLOPs x steps/s / the matmul peak. \"softmax's FLOPs / these\" is "
              "the speed ratio to softmax that a family would show at softmax's % of peak: a ratio "
              "in steps/s above it means the family runs its FLOPs faster than softmax does, below "
              "it slower.", ""]
    if skipped:
        lines += ["Skipped configurations:", "", *skipped, ""]

    figs: dict[str, bytes] = {}
    stem = f"{FIGURE_PREFIX}{figures.slug(device)}-{figures.slug(task)}-b{batch}-{dtype}"
    series = {a: [(n, ok[(a, n)]["step_time_s"]["median"], ok[(a, n)]["memory"]["bytes"])
                  for n in lengths if (a, n) in ok] for a in families}
    series = {a: pts for a, pts in series.items() if pts}
    setting = f"{task} model, batch {batch}, {dtype}, {device}"
    if series:
        name = f"{stem}-scaling.png"
        figs[name] = figures.scaling_curves(series, title=f"Scaling with length: {setting}")
        lines += [f"![time and memory against length, {setting}]({FIGURES_DIR}/{name})", ""]
    at = _common_length(ok, families, lengths)
    acc = _accuracy_by_family(runs, families)
    if at is None or acc is None:
        lines += ["Bubble chart: needs softmax measured here and accuracy result files in `runs/`.", ""]
        return lines, figs
    preset, tasks, accuracy = acc
    points = [{"name": a, "x": ok[(a, at)]["speed_vs_softmax"], "y": accuracy[a],
               "memory": ok[(a, at)]["memory"]["bytes"]}
              for a in families if a in accuracy and (a, at) in ok and ok[(a, at)].get("speed_vs_softmax")]
    if not points:
        lines += ["Bubble chart: no family has both accuracy runs and a measurement here.", ""]
        return lines, figs
    over = ", ".join(tasks) if tasks else "each family's own tasks"
    left_out = [a for a in families if a not in {p["name"] for p in points}]
    name = f"{stem}-bubble.png"
    figs[name] = figures.bubble_chart(
        points, title=f"Speed, accuracy and memory at length {at}: {setting}",
        xlabel=f"steps/s relative to softmax at length {at}",
        ylabel=f"mean test accuracy at the last step (%), preset {preset}, over {over}")
    lines += [f"![speed vs accuracy, bubble area = memory, {setting}]({FIGURES_DIR}/{name})", "",
              f"Bubble chart: x = speed relative to softmax at length {at}, y = mean test accuracy at "
              f"the last step over seeds (preset `{preset}`, over {over}), bubble area = "
              f"peak memory at length {at}."
              + (f" Not shown (no accuracy runs or no measurement at {at}): {', '.join(left_out)}."
                 if left_out else ""), ""]
    return lines, figs


def published_efficiency_section() -> list[str]:
    lengths = published.TABLE2_LENGTHS
    rows = []
    table = published.LRA_TABLE2
    base_speed = table["softmax"][0]
    for attn in _family_order(table):
        speed, mem = table[attn]
        cells = [f"{s}" + ("" if attn == "softmax" else f" ({s / b:.1f}x)")
                 for s, b in zip(speed, base_speed)]
        rows.append([attn, *cells, *(f"{m:.2f}" for m in mem), "published"])
    header = (["attention"] + [f"steps/s {n}" for n in lengths] + [f"memory GB {n}" for n in lengths]
              + ["source"])
    return (["### Published: LRA Table 2 (efficiency; byte-level Text, batch 32, 4x4 TPU v3, memory "
             "per device)", "", "Speed-ups vs softmax in brackets are computed from the printed speeds "
             "(the paper's own brackets round some differently).", ""] + _table(header, rows) + [""])


def published_section() -> list[str]:
    lines = []
    for title, table in published.SOURCES:
        lines += [f"### Published: {title}", "",
                  "Cells and the average exactly as printed; the last column recomputes the 5-task "
                  "average from the printed cells (it differs where the source's own arithmetic "
                  "does).", ""]
        rows = []
        for attn in sorted(table):
            *vals, printed_avg = table[attn]
            cells = ["—" if v is None else (v if isinstance(v, str) else f"{v:.2f}") for v in vals]
            nums = [v for v in vals[:5] if isinstance(v, float)]
            recomputed = f"{statistics.fmean(nums):.2f}" if len(nums) == 5 else "—"
            rows.append([attn, *cells, f"{printed_avg:.2f}", "published", recomputed])
        lines += _table(["attention", *TASKS, "avg (as printed)", "source",
                         "avg recomputed here (not published)"], rows) + [""]
    return lines


PEER_MECHANISM = {"nystromformer": "nystrom", "local": "local/block", "reformer": "reformer-lsh"}
PROBE_TOLERANCE = 0.15  # ours and the peer compared only when their GEMM probes are this close
HEALTHY_FRACTION = 0.7  # a probe under this fraction of the file's median probe: the machine was slowed


_KIND_MARK = {"module": "ours has q/k/v/out projections, the peer none",
              "core": "the peer has projections, ours none"}


def peers_section(results_dir: Path) -> list[str]:
    """"vs best peer" tables from ``efficiency/peers-cpu-*.jsonl`` (``shared/tools/peers/peers.py``
    output; ours and the peers measured in one invocation, so one file is one comparison).

    Per (our entry, length): the fastest peer of the same mechanism and the same kind in the same
    file (a module, with q/k/v/out projections, against a module; a core against a core), else the
    fastest of the other kind, marked, since then one side does work the other does not. Then the
    ratio of fwd+bwd medians (ours / peer: below 1 is faster) and each side's GEMM probes (GFLOP/s
    before and after its case). A pair whose probes differ by more than 15% is marked, and so is
    one with any probe under 70% of the file's median probe (the shared machine was slowed down;
    relative, because a healthy probe is ~300 GFLOP/s on one host CPU and ~80 on another, and to
    the median, not the best, so that one fast outlier does not mark a whole file): such a ratio
    measures the machine's load as much as the code.
    """
    files = sorted((Path(results_dir) / "efficiency").glob("peers-cpu-*.jsonl"))
    if not files:
        return []
    lines = ["### Attention layer vs the best third-party implementation (CPU, fwd+bwd)", ""]
    for path in files:
        try:
            rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        except json.JSONDecodeError as err:
            raise ResultFileError(f"{path}: not a valid peers file ({err!r})") from err
        header = next((r for r in rows if "peers_run" in r), {}).get("peers_run", {})
        cases = [r for r in rows if r.get("status") == "ok" and "fwdbwd_ms_median" in r]
        probes = [p for r in cases for p in r.get("fwdbwd_probe_gflops") or []]
        healthy_probe = HEALTHY_FRACTION * statistics.median(probes) if probes else 0.0
        table = []
        for ours in (r for r in cases if r["peer"].startswith("ours_")):
            mech = PEER_MECHANISM.get(ours["mechanism"], ours["mechanism"])
            rivals = [r for r in cases if not r["peer"].startswith("ours_")
                      and r["mechanism"] == mech and r["seq_len"] == ours["seq_len"]]
            if not rivals:
                continue
            alike = [r for r in rivals if r["kind"] == ours["kind"]]
            best = min(alike or rivals, key=lambda r: r["fwdbwd_ms_median"])
            probe = lambda r: statistics.fmean(r.get("fwdbwd_probe_gflops") or [0])  # noqa: E731
            close = abs(probe(ours) - probe(best)) <= PROBE_TOLERANCE * max(probe(ours), probe(best))
            healthy = min(ours.get("fwdbwd_probe_gflops") or [0]) >= healthy_probe and \
                min(best.get("fwdbwd_probe_gflops") or [0]) >= healthy_probe
            ratio = ours["fwdbwd_ms_median"] / best["fwdbwd_ms_median"]
            marks = ([] if alike else [_KIND_MARK.get(ours["kind"], "other kind")]) + \
                ([] if close else ["probes differ"]) + ([] if healthy else ["machine slow"])
            table.append([ours["peer"], str(ours["seq_len"]), f"{ours['fwdbwd_ms_median']:.0f}",
                          f"{best['peer']} ({best['kind']})", f"{best['fwdbwd_ms_median']:.0f}",
                          f"{ratio:.2f}x" + (f" ({', '.join(marks)})" if marks else ""),
                          " / ".join(f"{probe(r):.0f}" for r in (ours, best))])
        host = header.get("host")
        lines += [f"From `{path.name}`" + (f" (code at {header['git']}; `{header['command']}`)"
                                            if header else "")
                  + (f", on {host['cpu']}, {host['cores']} cores" if host else "")
                  + (f", XLA:CPU YNN fusions {header['xla_cpu_fusions']}"
                     if header.get("xla_cpu_fusions") else "") + ":", ""]
        lines += _table(["ours", "L", "ours ms", "best peer", "peer ms", "ours / peer",
                         "probes GFLOP/s (ours / peer)"], sorted(table, key=lambda r: (r[0], int(r[1]))))
        lines += [""]
    return lines


def published_modern_section() -> list[str]:
    lines = ["### Published, modern protocol", "",
             "Each model under its own published recipe (bidirectional mixers, BatchNorm, mean "
             "pooling, best-validation selection, budgets 10-100x LRA's); cells and the 6-task "
             "average as printed, the last column recomputes avg6 from the printed cells.", ""]
    rows = []
    for name, (vals, printed, source) in published.MODERN_PUBLISHED.items():
        rows.append([name, *(f"{v:.2f}" for v in vals),
                     "—" if printed is None else f"{printed:.2f}", f"published: {source}",
                     f"{statistics.fmean(vals):.2f}"])
    lines += _table(["model", *TASKS, "avg6 (as printed)", "source",
                     "avg6 recomputed here (not published)"], rows) + [""]
    return lines


def newest_per_seed(runs: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[str]]:
    """One run per (task, attention, preset, protocol, device, seed): the newest (by date, then file
    name). A seed measured twice (a re-run after a fix, a re-run with --force) is one seed, not
    two: counting both would shrink the interval with a repeated measurement. Returns the kept runs
    and the superseded files' names."""
    newest: dict[tuple, dict[str, Any]] = {}
    for r in sorted(runs, key=lambda r: (r.get("date", ""), r["_file"])):
        key = (r["task"], r["attention"], r["preset"], protocol(r), _device_label(r), r["seed"])
        newest[key] = r
    kept = {id(r) for r in newest.values()}
    return ([r for r in runs if id(r) in kept],
            sorted(r["_file"] for r in runs if id(r) not in kept))


def build(results_dir: Path, skipped: list[str] | None = None) -> tuple[str, dict[str, bytes]]:
    """The leaderboard's markdown and its figures ({file name under figures/: PNG bytes}).
    Invalid result files are listed in ``skipped`` (an error if it is None)."""
    all_runs, superseded = newest_per_seed(load_runs(results_dir, skipped))
    # The two protocols are never ranked together: one table set each (README "Two protocols").
    runs = [r for r in all_runs if protocol(r) == "lra"]
    modern = [r for r in all_runs if protocol(r) == "modern"]
    bench = load_efficiency(results_dir)
    lines = ["# LRA leaderboard", "",
             "Generated by `python -m lra.leaderboard` from the result files in `runs/` and "
             "`efficiency/`; do not edit.",
             "Accuracies are test accuracy in percent. Measured rows and published rows are kept in "
             "separate tables: they come from different code, hardware and budgets.", "",
             "## Measured, LRA protocol", ""]
    lines += accuracy_section(runs) if runs else ["No result files yet.", ""]
    if superseded:
        lines += ["Superseded (a newer file measures the same task, family, preset, protocol, device "
                  "and seed; only the newest counts): " + ", ".join(f"`{f}`" for f in superseded), ""]
    lines += ["## Measured, modern protocol", "",
              "The families' published modern recipes (`--protocol modern`); not comparable with the "
              "LRA-protocol tables above, and never ranked with them.", ""]
    lines += (accuracy_section(modern, MODERN_HEADLINE_AND_SECOND) if modern
              else ["No result files of the modern protocol yet.", ""])
    curve_lines, curve_figs = curves.leaderboard_section(runs)  # learning curves per (task, preset)
    lines += curve_lines
    lines += ["## Measured efficiency", ""]
    eff_lines, figs = efficiency_section(bench, runs)
    figs.update(curve_figs)
    lines += eff_lines
    lines += peers_section(results_dir)
    lines += ["## Published reference rows (not measured here)", ""]
    lines += published_section()
    lines += ["## Published reference rows, modern protocol (not measured here)", ""]
    lines += published_modern_section()
    lines += published_efficiency_section()
    return "\n".join(lines).rstrip() + "\n", figs


def render(results_dir: Path) -> str:
    return build(results_dir)[0]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m lra.leaderboard", description=__doc__.split("\n")[0])
    p.add_argument("--results-dir", type=Path, default=Path("results"))
    p.add_argument("--strict", action="store_true",
                   help="fail (exit 1, nothing written) if any result file is invalid, instead of "
                        "skipping it with a warning")
    args = p.parse_args(argv)
    if not args.results_dir.is_dir():
        print(f"error: --results-dir {args.results_dir} is not a folder", file=sys.stderr)
        return 1
    skipped: list[str] = []
    try:
        text, figs = build(args.results_dir, skipped)
    except ResultFileError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    for line in skipped:
        print(f"{'error' if args.strict else 'warning'}: skipped {line}", file=sys.stderr)
    if skipped and args.strict:
        print(f"error: {len(skipped)} invalid result file(s); nothing written (--strict)",
              file=sys.stderr)
        return 1
    out = args.results_dir / "LEADERBOARD.md"
    out.parent.mkdir(parents=True, exist_ok=True)
    fig_dir = args.results_dir / FIGURES_DIR
    made_before = [p for prefix in (FIGURE_PREFIX, curves.FIGURE_PREFIX)
                   for p in fig_dir.glob(f"{prefix}*.png")]
    for stale in sorted(made_before):  # figures this tool made before
        if stale.name not in figs:
            stale.unlink()
    if figs:
        fig_dir.mkdir(parents=True, exist_ok=True)
    for name, data in figs.items():
        (fig_dir / name).write_bytes(data)
    out.write_text(text)
    print(f"wrote {out}" + (f" and {len(figs)} figures in {fig_dir}" if figs else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
