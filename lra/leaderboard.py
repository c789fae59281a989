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
import statistics
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import tasks
from lra import curves, figures, published

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


def accuracy_section(runs: list[dict[str, Any]]) -> list[str]:
    groups: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for r in runs:
        groups[(r["preset"], _device_label(r))].append(r)
    lines: list[str] = []
    preset_order = {"paper": 0, "small": 1, "tiny": 2}
    for preset, device in sorted(groups, key=lambda g: (preset_order.get(g[0], 9), g)):
        group = groups[(preset, device)]
        lines += [f"### Preset `{preset}` on {device}", ""]
        for metric, title in HEADLINE_AND_SECOND:
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
            lines += [f"{title} (%, mean ± std over seeds, (n)):", ""]
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

BENCH_SCHEMA = "lra.bench/1"
FIGURES_DIR = "figures"
FIGURE_PREFIX = "efficiency-"
PRESET_ORDER = {"paper": 0, "small": 1, "tiny": 2}


def load_efficiency(results_dir: Path) -> list[dict[str, Any]]:
    records = []
    for path in sorted((Path(results_dir) / "efficiency").glob("*.json")):
        try:
            record = json.loads(path.read_text())
            if record["schema"] != BENCH_SCHEMA:
                raise KeyError(f"schema {record['schema']!r}, expected {BENCH_SCHEMA!r}")
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
        groups[(_device_label(rec), rec["task"], rec["batch"], rec["dtype"])].append(rec)
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
              + ["time slope", "memory slope", f"GFLOP/step {longest}", f"% of peak {longest}"])
    rows, skipped = [], []
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
        kt, km = figures.loglog_slope(xs, ts), figures.loglog_slope(xs, ms)
        last = ok.get((a, longest))
        flops = _num(last["flops"]["per_step"] / 1e9) if last else "—"
        frac = f"{100 * last['fraction_of_peak']:.1f}" if last and last.get("fraction_of_peak") else "—"
        rows.append([a, *speed, *mem, "—" if kt is None else f"{kt:.2f}",
                     "—" if km is None else f"{km:.2f}", flops, frac])
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
    lines += ["FLOPs per step: XLA's cost analysis, or where the step has loops (which XLA counts once) "
              "the matmul and convolution FLOPs of the jaxpr with scans multiplied out, whichever is "
              "larger; % of peak = FLOPs x steps/s / the matmul peak.", ""]
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
HEALTHY_PROBE = 200.0   # GFLOP/s; peers.py re-runs cases below it (a healthy probe gives ~300)


def peers_section(results_dir: Path) -> list[str]:
    """"vs best peer" tables from ``efficiency/peers-cpu-*.jsonl`` (``shared/tools/peers/peers.py``
    output; ours and the peers measured in one invocation, so one file is one comparison).

    Per (our entry, length): the fastest peer of the same mechanism in the same file, the ratio of
    fwd+bwd medians (ours / peer: below 1 is faster), and each side's GEMM probes (GFLOP/s before
    and after its case). A pair whose probes differ by more than 15% is marked, and so is one with
    any probe under 200 GFLOP/s (the shared machine was slowed down): such a ratio measures the
    machine's load as much as the code.
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
        table = []
        for ours in (r for r in cases if r["peer"].startswith("ours_")):
            mech = PEER_MECHANISM.get(ours["mechanism"], ours["mechanism"])
            rivals = [r for r in cases if not r["peer"].startswith("ours_")
                      and r["mechanism"] == mech and r["seq_len"] == ours["seq_len"]]
            if not rivals:
                continue
            best = min(rivals, key=lambda r: r["fwdbwd_ms_median"])
            probe = lambda r: statistics.fmean(r.get("fwdbwd_probe_gflops") or [0])  # noqa: E731
            close = abs(probe(ours) - probe(best)) <= PROBE_TOLERANCE * max(probe(ours), probe(best))
            healthy = min(ours.get("fwdbwd_probe_gflops") or [0]) >= HEALTHY_PROBE and \
                min(best.get("fwdbwd_probe_gflops") or [0]) >= HEALTHY_PROBE
            ratio = ours["fwdbwd_ms_median"] / best["fwdbwd_ms_median"]
            marks = ([] if close else ["probes differ"]) + ([] if healthy else ["machine slow"])
            table.append([ours["peer"], str(ours["seq_len"]), f"{ours['fwdbwd_ms_median']:.0f}",
                          f"{best['peer']} ({best['kind']})", f"{best['fwdbwd_ms_median']:.0f}",
                          f"{ratio:.2f}x" + (f" ({', '.join(marks)})" if marks else ""),
                          " / ".join(f"{probe(r):.0f}" for r in (ours, best))])
        lines += [f"From `{path.name}`" + (f" (code at {header['git']}; `{header['command']}`)"
                                            if header else "") + ":", ""]
        lines += _table(["ours", "L", "ours ms", "best peer", "peer ms", "ours / peer",
                         "probes GFLOP/s (ours / peer)"], sorted(table, key=lambda r: (r[0], int(r[1]))))
        lines += [""]
    return lines


def build(results_dir: Path) -> tuple[str, dict[str, bytes]]:
    """The leaderboard's markdown and its figures ({file name under figures/: PNG bytes})."""
    runs = load_runs(results_dir)
    bench = load_efficiency(results_dir)
    lines = ["# LRA leaderboard", "",
             "Generated by `python -m lra.leaderboard` from the result files in `runs/` and "
             "`efficiency/`; do not edit.",
             "Accuracies are test accuracy in percent. Measured rows and published rows are kept in "
             "separate tables: they come from different code, hardware and budgets.", "",
             "## Measured", ""]
    lines += accuracy_section(runs) if runs else ["No result files yet.", ""]
    curve_lines, curve_figs = curves.leaderboard_section(runs)  # learning curves per (task, preset)
    lines += curve_lines
    lines += ["## Measured efficiency", ""]
    eff_lines, figs = efficiency_section(bench, runs)
    figs.update(curve_figs)
    lines += eff_lines
    lines += peers_section(results_dir)
    lines += ["## Published reference rows (not measured here)", ""]
    lines += published_section()
    lines += published_efficiency_section()
    return "\n".join(lines).rstrip() + "\n", figs


def render(results_dir: Path) -> str:
    return build(results_dir)[0]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m lra.leaderboard", description=__doc__.split("\n")[0])
    p.add_argument("--results-dir", type=Path, default=Path("results"))
    args = p.parse_args(argv)
    try:
        text, figs = build(args.results_dir)
    except ResultFileError as err:
        print(f"error: {err}", file=sys.stderr)
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
