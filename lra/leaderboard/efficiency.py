"""The efficiency tables and figures (bench files of ``python -m lra.bench``): LRA's Table 2 per
device, task, batch and dtype, the bubble chart and the scaling curves."""

from __future__ import annotations

import statistics
from collections import defaultdict
from typing import Any

from lra.leaderboard import figures, names
from lra.leaderboard.accuracy import HEADLINE
from lra.leaderboard.cells import md_code, md_table, md_text
from lra.leaderboard.load import bench_setting
from lra.leaderboard.recall import LRA_TRACK, track

FIGURES_DIR = "figures"


FIGURE_PREFIX = "efficiency-"


PRESET_ORDER = {"paper": 0, "small": 1, "tiny": 2}


def _ratio(x: float | None) -> str:
    return "" if x is None else f" ({x:.2f}x)"


def _num(x: float) -> str:
    return f"{x:.3g}" if x < 1000 else f"{x:.0f}"


def family_order(names) -> list[str]:
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
    """Markdown lines and {figure file: bytes} (PNG, SVG, PDF) for the latest bench file of each
    setting; the bubble chart's accuracy from the preset runs (``_diff`` empty) only."""
    runs = [r for r in runs if not r.get("_diff")]
    if not records:
        return ["No efficiency files yet: run `python -m lra.bench` (see docs/efficiency.md).", ""], {}
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for rec in records:
        groups[bench_setting(rec)].append(rec)
    lines: list[str] = [
        "Training steps per second (the median of the timed steps; how each file timed its "
        "families is said under its heading) and peak memory per device, at each input length; in "
        "brackets the ratio to `softmax` measured in the same process, as in LRA's Table 2. Slopes "
        "are least-squares fits of log(time per step) and log(memory) against log(length): 2 is "
        "quadratic, 1 linear; memory "
        "includes the parameters and optimizer state, which do not grow with length.", ""]
    figs = figures.Figures()
    for key in sorted(groups):
        history = sorted(groups[key], key=lambda r: (r["date"], r["_file"]))
        rec = history[-1]
        more, figs_more = _efficiency_table(rec, runs, key)
        lines += more
        figs.update(figs_more)
        if len(history) > 1:
            lines += ["Earlier files for this setting (not shown): "
                      + ", ".join(md_code(r["_file"]) for r in history[:-1]), ""]
    return lines, figs


def _fusions_line(ok: dict[tuple[str, int], dict[str, Any]], families: list[str],
                  lengths: list[int]) -> list[str]:
    """Which step program each config timed (``lra.xla_cpu``), for bench files that record it."""
    chosen = {k: r["xla_cpu_fusions"] for k, r in ok.items() if r.get("xla_cpu_fusions")}
    if not chosen:
        return []
    sources = sorted({c["source"] for c in chosen.values()})
    how = ("the faster of the two, as `lra.run --xla-cpu-fusions auto` picks it"
           if sources == ["auto"] else "source: " + ", ".join(map(md_text, sources)))
    off = []
    for a in families:
        have = [n for n in lengths if (a, n) in chosen]
        without = [n for n in have if chosen[(a, n)]["choice"] == "off"]
        if without:
            where = "every length" if without == have else ", ".join(map(str, without))
            off.append(f"{md_text(a)} ({where})")
    what = ("without XLA:CPU's YNN fusions for " + ", ".join(off) + "; with them for the rest"
            if off else "with XLA:CPU's YNN fusions for every config")
    return [f"Step program timed ({how}): {what}.", ""]


# How lra.bench times a file's families; a file merged from several processes (the accelerator
# window's, lra.bench.device_check.merge_bench_parts) says how in its own "timing".
ONE_PROCESS = "every family round-robin in one process (a step of each per round)"


def _efficiency_table(rec: dict[str, Any], runs: list[dict[str, Any]], key: tuple):
    """One bench file's section: its header line, the table, the notes under it, the figures."""
    device, task, batch, dtype = key
    lengths = sorted({r["length"] for r in rec["results"]})
    ok = {(r["attention"], r["length"]): r for r in rec["results"] if r["status"] == "ok"}
    families = family_order({r["attention"] for r in rec["results"]})
    peak = rec.get("matmul_peak", {}).get("flops_per_s")
    longest = max(lengths)
    lines = [f"### {md_code(task)} model, batch {batch}, {md_text(dtype)}, on {md_text(device)}", "",
             f"File {md_code(rec['_file'])} (commit {md_text(rec['git']['commit'][:10])}, "
             f"{rec['date']}, median of {rec['steps']} timed steps after {rec['warmup']} untimed "
             f"warm-up step(s)). Timing: {md_text(rec.get('timing', ONE_PROCESS))}. Memory: "
             f"{md_text(rec['memory_method'])}."
             + (f" Measured matmul peak of this device: {peak / 1e9:.1f} GFLOP/s." if peak else ""),
             ""]
    header = (["attention"] + [f"steps/s {n}" for n in lengths] + [f"memory GiB {n}" for n in lengths]
              + ["time slope", "memory slope", f"GFLOP/step {longest}",
                 f"softmax's FLOPs / these {longest}", f"% of peak {longest}"])
    lines += md_table(header, _table_rows(ok, families, lengths)) + [""]
    lines += _notes(rec, ok, families, lengths)
    more, figs = _figures(ok, runs, families, lengths, key, track(rec["task"]))
    return lines + more, figs


def _table_rows(ok: dict[tuple[str, int], dict[str, Any]], families: list[str],
                lengths: list[int]) -> list[list[str]]:
    """Per family: steps/s and memory at each length (ratios to softmax), slopes, FLOPs, % of peak."""
    longest = max(lengths)
    rows = []
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
        kt, km = figures.positive_slope(xs, ts), figures.positive_slope(xs, ms)
        last = ok.get((a, longest))
        flops = _num(last["flops"]["per_step"] / 1e9) if last else "—"
        bound = (f"{softmax_last['flops']['per_step'] / last['flops']['per_step']:.2f}x"
                 if last and softmax_last and a != "softmax" and last["flops"]["per_step"] > 0
                 else "—")
        frac = f"{100 * last['fraction_of_peak']:.1f}" if last and last.get("fraction_of_peak") else "—"
        rows.append([md_text(a), *speed, *mem, "—" if kt is None else f"{kt:.2f}",
                     "—" if km is None else f"{km:.2f}", flops, bound, frac])
    return rows


def _notes(rec: dict[str, Any], ok: dict[tuple[str, int], dict[str, Any]], families: list[str],
           lengths: list[int]) -> list[str]:
    """The lines under the table: the memory cross-check, the step program, FLOPs, skipped configs."""
    lines: list[str] = []
    skipped = []
    for r in sorted(rec["results"], key=lambda r: (r["attention"], r["length"])):
        if r["status"] != "ok":
            skipped.append(f"- {md_code(r['attention'])} at {r['length']}: {md_text(r['reason'])}")
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
    longest = max(lengths)
    over = [a for a in families if (ok.get((a, longest)) or {}).get("fraction_of_peak", 0) > 1.0]
    if over:
        lines += [f"% of peak above 100 for {', '.join(map(md_text, over))}: the step ran faster "
                  "than the matmul peak measured for this file, so that measurement came out low "
                  "(another process shared the device while it ran); read the column as a "
                  "comparison between the families of this file, not as a share of the device.", ""]
    if skipped:
        lines += ["Skipped configurations:", "", *skipped, ""]
    return lines


def _figures(ok: dict[tuple[str, int], dict[str, Any]], runs: list[dict[str, Any]],
             families: list[str], lengths: list[int], key: tuple, task_track: str = LRA_TRACK):
    """The scaling curves and the bubble chart of one bench file: (Markdown lines, {file: bytes}).
    The bubble's accuracy is the LRA runs': a model of another track (MQAR's) gets no bubble."""
    device, task, batch, dtype = key
    lines: list[str] = []
    figs = figures.Figures()
    stem = f"{FIGURE_PREFIX}{figures.slug(device)}-{figures.slug(task)}-b{batch}-{dtype}"
    series = {a: [(n, ok[(a, n)]["step_time_s"]["median"], ok[(a, n)]["memory"]["bytes"])
                  for n in lengths if (a, n) in ok] for a in families}
    series = {a: pts for a, pts in series.items() if pts}
    # the images' alt text: a bracket there would end it
    setting = md_text(f"{task} model, batch {batch}, {dtype}, {device}").replace("[", "\\[").replace(
        "]", "\\]")
    shown = f"{names.task_name(task)} model, batch {batch}, {dtype}, {device}"  # in the figures
    if series and len(lengths) == 1:
        lines += [f"Scaling curves: one length measured ({lengths[0]}), no curve to draw.", ""]
    elif series:
        name = f"{stem}-scaling.png"
        drawn = figures.scaling_curves(series, title=f"Scaling with length: {shown}")
        figs.add(f"{stem}-scaling", drawn)
        lines += [f"![time and memory against length, {setting}]({FIGURES_DIR}/{name})", ""]
    if task_track != LRA_TRACK:
        lines += [f"Bubble chart: not drawn for the {md_text(task_track)} track's model "
                  "(its accuracy is that track's own section, at its own lengths and widths; the LRA "
                  "tasks' accuracy would not be this model's).", ""]
        return lines, figs
    bubble = bubble_points(ok, runs, families, lengths)
    if bubble is None:
        lines += ["Bubble chart: needs softmax measured here and accuracy result files in `runs/`.", ""]
        return lines, figs
    at, preset, tasks, points = bubble
    if not points:
        lines += ["Bubble chart: no family has both accuracy runs and a measurement here.", ""]
        return lines, figs
    over = ", ".join(tasks) if tasks else "each family's own tasks"
    left_out = [a for a in families if a not in {p["name"] for p in points}]
    name = f"{stem}-bubble.png"
    drawn = figures.bubble_chart(points, **bubble_labels(key, at, preset, tasks))
    figs.add(f"{stem}-bubble", drawn)
    lines += [f"![speed vs accuracy, bubble area = memory, {setting}]({FIGURES_DIR}/{name})", "",
              f"Bubble chart: x = speed relative to softmax at length {at}, y = mean test accuracy at "
              f"the last step over seeds (preset {md_code(preset)}, over {over}), bubble area = "
              f"peak memory at length {at}."
              + (f" Not shown (no accuracy runs or no measurement at {at}): "
                 f"{', '.join(map(md_text, left_out))}."
                 if left_out else ""), ""]
    return lines, figs



def bubble_points(ok: dict[tuple[str, int], dict[str, Any]], runs: list[dict[str, Any]],
                  families: list[str], lengths: list[int]):
    """The bubble chart's data of one bench file: (length, preset, tasks or None, [{"name", "x",
    "y", "memory"}]), or None without softmax measured or without accuracy runs."""
    at = _common_length(ok, families, lengths)
    acc = _accuracy_by_family(runs, families)
    if at is None or acc is None:
        return None
    preset, tasks, accuracy = acc
    points = [{"name": a, "x": ok[(a, at)]["speed_vs_softmax"], "y": accuracy[a],
               "memory": ok[(a, at)]["memory"]["bytes"]}
              for a in families if a in accuracy and (a, at) in ok and ok[(a, at)].get("speed_vs_softmax")]
    return at, preset, tasks, points


def bubble_labels(key: tuple, at: int, preset: str, tasks: list[str] | None) -> dict[str, str]:
    """The bubble chart's title and axis labels, in the names of the papers."""
    device, task, batch, dtype = key
    over = ", ".join(names.task_name(t) for t in tasks) if tasks else "each family's own tasks"
    return {"title": f"Speed, accuracy and memory at length {at}: {names.task_name(task)} model, "
                     f"batch {batch}, {dtype}, {device}",
            "xlabel": f"steps/s relative to the {names.family_name('softmax')} at length {at}",
            "ylabel": f"mean test accuracy at the last step (%), preset {preset}, over {over}"}
