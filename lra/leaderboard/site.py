"""The leaderboard as a static web page: ``site/index.html``, one file that holds its own CSS,
JavaScript and data (no CDN, no network, no build step), opens from ``file://`` and from any static
host, and is the same bytes for the same results.

``site_files`` is fed from ``build.build_all`` with the very objects the other outputs are made
from: the accuracy cells (``accuracy.accuracy_section``'s ``collect``, the list behind
``leaderboard.csv``), the kept runs, the bench records and the peers section of the newest peers
file. It reads no file. The page draws itself from the data it embeds (``site.js``): one view per
(protocol, preset, device), a cell opens its seeds and their validation curves, an efficiency view
and a peers view; every view and cell has an anchor (``#modern/small/listops/mamba``).
"""

from __future__ import annotations

import html
import json
import re
import urllib.parse
from collections import defaultdict
from pathlib import Path
from typing import Any

from lra.leaderboard import budget, names, published
from lra.leaderboard.accuracy import BEST_VAL, HEADLINE, _column
from lra.leaderboard.cells import CELL_LEGEND
from lra.leaderboard.curves import CurvesError, chance_level
from lra.leaderboard.efficiency import _accuracy_by_family, _common_length, family_order
from lra.leaderboard.load import bench_setting, device_label, protocol, task_columns
from lra.leaderboard.published import TASKS
from lra.leaderboard.recall import LRA_TRACK, track

INDEX = "index.html"
ASSETS = Path(__file__).with_name("site_assets")

METRIC_LABELS = {HEADLINE: "test accuracy at the last step",
                 BEST_VAL: "test accuracy at the best-validation step"}
# Per protocol, the headline metric first (docs/families-and-protocols.md "Two protocols").
METRIC_ORDER = {"lra": (HEADLINE, BEST_VAL), "modern": (BEST_VAL, HEADLINE)}
PRESET_ORDER = {"paper": 0, "small": 1, "tiny": 2}

# The published modern rows name models, not this suite's families: the family whose kind each
# shares, for the kind filter.
PUBLISHED_AS = {"S4": "s4d", "S4D-LegS": "s4d", "S4D-Inv": "s4d", "S5": "s5", "LRU": "lru",
                "Mega": "mega", "Mega-chunk": "mega", "Megalodon": "mega"}

MARKS = {
    "best": "the task's best mean in this table",
    "tied": "≈ tied with the best: this cell's 95% interval overlaps the best's, so the data show "
            "no real difference",
    "few": "† fewer seeds than this table's usual number",
    "chance": "k of the n seeds within one standard error of chance (1/classes on the test "
              "examples the run evaluated) or no better than predicting the test split's "
              "majority class every time",
}


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def _pct(x: float | None) -> float | None:
    return None if x is None else round(100.0 * x, 2)


def _f2(x: float | None) -> str | None:
    return None if x is None else f"{x:.2f}"


def _cell_json(cell) -> dict[str, Any]:
    """A ``cells.Cell`` as the page shows it: the same numbers, rounded as the Markdown prints them."""
    s = cell.stats
    out: dict[str, Any] = {"m": round(s.mean, 4), "t": f"{s.mean:.2f}", "n": s.n, "text": cell.text()}
    if s.std is not None:
        out.update(s=f"{s.std:.2f}", lo=f"{s.low:.2f}", hi=f"{s.high:.2f}")
    for key, flag in (("b", cell.best), ("ti", cell.tied), ("f", cell.few)):
        if flag:
            out[key] = 1
    if cell.at_chance:
        out["c"] = cell.at_chance
    return out


def _seed_json(r: dict[str, Any]) -> dict[str, Any]:
    """One run of a cell: what the cell's panel lists, and its validation curve."""
    m = r["metrics"]
    mem = (m.get("peak_memory") or {}).get("bytes")
    fp = ((r.get("data") or {}).get("fingerprint") or {}).get("sha256")
    hist = r.get("eval_history") or {}
    out = {"seed": r["seed"], "last": _pct(m.get(HEADLINE)), "bv": _pct(m.get(BEST_VAL)),
           "bstep": m.get("best_val_step"), "steps": m["steps"],
           "sps": None if not m.get("steps_per_s") else round(m["steps_per_s"], 2),
           "mem": None if mem is None else f"{mem / 2**30:.2f}",
           "commit": r["git"]["commit"], "dirty": bool(r["git"].get("dirty")), "fp": fp,
           "date": r.get("date"), "file": r["_file"]}
    if hist.get("step"):
        out["curve"] = [[s, round(100.0 * a, 2)] for s, a in zip(hist["step"], hist["val_accuracy"])]
    return out


def _view_ids(keys: list[tuple[str, str, str]]) -> dict[tuple[str, str, str], str]:
    """``protocol/preset``, with ``/device`` added only where the preset ran on several devices."""
    devices: dict[tuple[str, str], set[str]] = defaultdict(set)
    for p, preset, device in keys:
        devices[(p, preset)].add(device)
    return {(p, preset, device): f"{p}/{preset}" + (f"/{slug(device)}" if len(devices[(p, preset)]) > 1
                                                    else "")
            for p, preset, device in keys}


def _published_rows(proto: str) -> list[dict[str, Any]]:
    """The published rows of a protocol, cells as printed; ``avg`` the 5-task mean recomputed
    from the printed cells (the measured rows' avg column), the printed average beside it."""
    rows = []
    if proto == "lra":
        for source, table in published.SOURCES:
            for fam in sorted(table):
                *vals, printed = table[fam]
                rows.append(_published_row(fam, fam, vals, printed, "avg over 5 tasks", source,
                                           five_printed=True))
    elif proto == "modern":
        for name, (vals, printed, source) in published.MODERN_PUBLISHED.items():
            as_family = PUBLISHED_AS.get(name) or name.split(" ")[0].lower()
            rows.append(_published_row(name, as_family, list(vals), printed, "avg over 6 tasks",
                                       source))
    # In the order of the names printed, not of the registry ids behind them.
    return sorted(rows, key=lambda r: (r["name"].lower(), r["source"]))


def _published_row(name: str, family: str, vals: list, printed: float | None, printed_what: str,
                   source: str, *, five_printed: bool = False) -> dict[str, Any]:
    """One published row. Its average column shows what was printed where the source printed the
    same five-task average (LRA's), with the recomputation from the printed cells beside it where
    they differ (``avgText``); else the recomputation, the printed one (other tasks) in the tip."""
    cells = {}
    for task, v in zip(TASKS, vals):
        if v is not None:
            cells[task] = {"t": v, "m": None} if isinstance(v, str) else {"t": f"{v:.2f}", "m": v}
    five = [v for v in vals[:5] if isinstance(v, float)]
    avg = round(sum(five) / 5, 4) if len(five) == 5 else None
    if five_printed and printed is not None:
        text = f"{printed:.2f}" + ("" if avg is None or f"{avg:.2f}" == f"{printed:.2f}"
                                   else f" (recomputed {avg:.2f})")
    else:
        text = "—" if avg is None else f"{avg:.2f} (recomputed)"
    return {"name": names.family_name(name), "kind": names.family_kind(family) or "", "cells": cells,
            "avg": avg, "avgText": text,
            "printed": None if printed is None else f"{printed:.2f} ({printed_what})",
            "source": source}


def _accuracy_views(cells: list[dict[str, Any]], runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    by_view: dict[tuple[str, str, str], list[dict[str, Any]]] = defaultdict(list)
    for c in cells:
        by_view[(c["protocol"], c["preset"], c["device"])].append(c)
    order = sorted(by_view, key=lambda k: (k[0] != "lra", PRESET_ORDER.get(k[1], 9), k))
    ids = _view_ids(order)
    seeds: dict[tuple, list[dict[str, Any]]] = defaultdict(list)
    for r in runs:
        seeds[(protocol(r), r["preset"], device_label(r), r["task"], r["_row"])].append(r)
    views = []
    for key in order:
        proto, preset, device = key
        group = by_view[key]
        columns = task_columns([{"task": c["task"]} for c in group])
        rows = _view_rows(group)
        in_view = [r for r in runs if (protocol(r), r["preset"], device_label(r)) == key]
        view_seeds: dict[str, dict[str, list]] = defaultdict(dict)
        for row in rows:
            for task in columns:
                found = sorted(seeds.get((proto, preset, device, task, row), []),
                               key=lambda r: (r["seed"], r["_file"]))
                if found:
                    view_seeds[task][row] = [_seed_json(r) for r in found]
        views.append({
            "id": ids[key], "protocol": proto, "preset": preset, "device": device,
            "metrics": [{"key": m, "label": METRIC_LABELS[m]} for m in METRIC_ORDER.get(
                proto, (HEADLINE, BEST_VAL))],
            "tasks": [{"id": t, "name": names.task_name(t), "valtest": _column(t, BEST_VAL) != t}
                      for t in columns],
            "rows": [rows[r] for r in sorted(rows)], "seeds": view_seeds,
            "chance": _chance_levels(columns), "published": _published_rows(proto),
            "budget": budget.budget(in_view), "hardware": budget.hardware(in_view),
            "publishedBudget": (budget.LRA_PUBLISHED_BUDGET if proto == "lra"
                                else budget.MODERN_PUBLISHED_BUDGET)})
    return views


def _view_rows(group: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """{row id: the row of a view}: its family's names, overrides, cells by metric and task, and
    the average column of each metric."""
    rows: dict[str, dict[str, Any]] = {}
    for c in sorted(group, key=lambda c: (c["row"], c["metric"], c["task"])):
        row = rows.setdefault(c["row"], {
            "row": c["row"], "family": c["family"], "name": names.family_name(c["family"]),
            "kind": names.family_kind(c["family"]) or "", "overrides": c["overrides"],
            "cells": {}})
        row["cells"].setdefault(c["metric"], {})[c["task"]] = _cell_json(c["cell"])
    for row in rows.values():
        for metric, per_task in row["cells"].items():
            # the Markdown's avg column: all five of LRA's averaged tasks, or none
            five = [per_task[t]["m"] for t in TASKS[:5] if t in per_task]
            row.setdefault("avg", {})[metric] = (round(sum(five) / 5, 4) if len(five) == 5
                                                 else None)
    return rows


def _chance_levels(columns) -> dict[str, list]:
    """{task: [chance accuracy in percent, its source]} of the columns whose level is known."""
    chance = {}
    for task in columns:
        try:
            level = chance_level(task, "val_accuracy")
        except CurvesError:
            level = None
        if level is not None:
            chance[task] = [round(100.0 * level[0], 4), level[1]]
    return chance


def _efficiency(bench: list[dict[str, Any]], runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The newest bench file of each (device, task, batch, dtype), as ``efficiency_section`` picks
    it, with the bubble chart's points computed as there (LRA-protocol preset runs only)."""
    runs = [r for r in runs if protocol(r) == "lra" and not r.get("_diff")]
    groups: dict[tuple, list[dict[str, Any]]] = defaultdict(list)
    for rec in bench:
        groups[bench_setting(rec)].append(rec)
    out = []
    for key in sorted(groups):
        device, task, batch, dtype = key
        history = sorted(groups[key], key=lambda r: (r["date"], r["_file"]))
        rec = history[-1]
        lengths = sorted({r["length"] for r in rec["results"]})
        ok = {(r["attention"], r["length"]): r for r in rec["results"] if r["status"] == "ok"}
        families = family_order({r["attention"] for r in rec["results"]})
        series = []
        for a in families:
            pts = [[n, round(ok[(a, n)]["steps_per_s"], 4),
                    round(1000 * ok[(a, n)]["step_time_s"]["median"], 3),
                    round(ok[(a, n)]["memory"]["bytes"] / 2**30, 4)] for n in lengths if (a, n) in ok]
            skipped = [[r["length"], r.get("reason") or r["status"]] for r in rec["results"]
                       if r["attention"] == a and r["status"] != "ok"]
            series.append({"id": a, "name": names.family_name(a), "kind": names.family_kind(a) or "",
                           "pts": pts, "skipped": sorted(skipped)})
        bubble = None
        at = _common_length(ok, families, lengths)
        acc = _accuracy_by_family(runs, families)
        if at is not None and acc is not None and track(rec["task"]) == LRA_TRACK:
            preset, over, accuracy = acc
            points = [{"id": a, "name": names.family_name(a), "x": round(ok[(a, at)]["speed_vs_softmax"], 4),
                       "y": round(accuracy[a], 2),
                       "mem": round(ok[(a, at)]["memory"]["bytes"] / 2**30, 4)}
                      for a in families if a in accuracy and (a, at) in ok
                      and ok[(a, at)].get("speed_vs_softmax")]
            if points:
                bubble = {"at": at, "preset": preset,
                          "over": ", ".join(over) if over else "each family's own tasks",
                          "points": points}
        out.append({"id": slug(f"{device}-{task}-b{batch}-{dtype}"),
                    "title": f"{task} model, batch {batch}, {dtype}, on {device}",
                    "file": rec["_file"], "commit": rec["git"]["commit"][:10], "date": rec["date"],
                    "steps": rec["steps"], "memory_method": rec["memory_method"],
                    "lengths": lengths, "series": series, "bubble": bubble,
                    "older": [r["_file"] for r in history[:-1]]})
    return out


def _inline(text: str) -> str:
    """Markdown's inline code and bold as HTML (the only inline markup the peers section uses)."""
    text = html.escape(text, quote=False)
    text = re.sub(r"`([^`]*)`", r"<code>\1</code>", text)
    return re.sub(r"\*\*([^*]+)\*\*", r"<strong>\1</strong>", text)


def _peers(newest: tuple[str, list[str]] | None, older: list[str]) -> dict[str, Any] | None:
    """The peers section of the newest peers file (its Markdown lines, from ``peers_section``) as
    paragraphs and one table; the older files by name."""
    if newest is None:
        return None
    name, lines = newest
    paras, header, rows = [], None, []
    for line in lines:
        if line.startswith("|"):
            # a cell's own "|" is escaped (cells.md_cell): split at the others only
            cells = [c.strip().replace("\\|", "|")
                     for c in re.split(r"(?<!\\)\|", line.strip()[1:-1])]
            if all(set(c) <= {"-", ":"} for c in cells):
                continue
            if header is None:
                header = cells
            else:
                rows.append([_inline(c) for c in cells])
        elif line.strip() and not line.startswith("#"):
            paras.append(_inline(line))
    return {"file": name, "paras": paras, "header": [_inline(h) for h in header or []], "rows": rows,
            "older": older}


def site_data(cells: list[dict[str, Any]], runs: list[dict[str, Any]], bench: list[dict[str, Any]],
              peers: tuple[str, list[str]] | None = None, older_peers: list[str] | None = None, *,
              results_href: str = "..") -> dict[str, Any]:
    """Everything the page shows, as JSON-able data (see ``site_files``)."""
    kinds = sorted({names.family_kind(c["family"]) or "" for c in cells} - {""})
    return {"legend": CELL_LEGEND, "marks": MARKS, "kinds": kinds,
            # a link is a URL: a folder named "a#b" or "100%" is quoted, a byte that is not
            # UTF-8 written as its %XX
            "results": urllib.parse.quote(results_href.rstrip("/") + "/", errors="surrogateescape"),
            "views": _accuracy_views(cells, runs), "efficiency": _efficiency(bench, runs),
            "peers": _peers(peers, older_peers or [])}


def _json_for_html(data: Any) -> str:
    """JSON that cannot end its ``<script>`` element early (``<`` written as ``\\u003c``)."""
    text = json.dumps(data, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return text.replace("<", "\\u003c").replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")


def site_files(cells: list[dict[str, Any]], runs: list[dict[str, Any]], bench: list[dict[str, Any]],
               peers: tuple[str, list[str]] | None = None, older_peers: list[str] | None = None, *,
               results_href: str = "..") -> dict[str, bytes]:
    """{path relative to the site folder: bytes}: the page.

    ``cells``: ``accuracy_section``'s collected cells ({protocol, preset, device, metric, task, row,
    family, overrides, cell}); ``runs``: the kept runs of both protocols (``reader.read(...).runs``:
    one per seed and cell),
    each cell's seeds being those of its (protocol, preset, device, task, row); ``bench``: the valid
    bench records; ``peers``: (file name, ``peers_section`` lines) of the newest peers file, and
    ``older_peers`` the older files' names. ``results_href``: the results folder relative to the
    site folder, for the links to run, bench and peers files.
    """
    data = site_data(cells, runs, bench, peers, older_peers, results_href=results_href)
    css = (ASSETS / "site.css").read_text(encoding="utf-8")
    js = (ASSETS / "site.js").read_text(encoding="utf-8")
    href = html.escape(data["results"])
    page = (TEMPLATE.replace("@RESULTS@", href).replace("@CSS@", css).replace("@JS@", js)
            .replace("@DATA@", _json_for_html(data)))
    return {INDEX: page.encode("utf-8")}


TEMPLATE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="generator" content="python -m lra.leaderboard">
<title>LRA leaderboard</title>
<style>
@CSS@</style>
</head>
<body>
<a class="skip" href="#main">Skip to the table</a>
<header>
<h1>LRA leaderboard</h1>
<p class="sub">Measured test accuracy (%) of every attention family on the Long-Range Arena tasks, from
the result files alone. Generated by <code>python -m lra.leaderboard</code>; the same cells are in
<a href="@RESULTS@leaderboard.csv">leaderboard.csv</a> and
<a href="@RESULTS@LEADERBOARD.md">LEADERBOARD.md</a>.</p>
<nav id="nav" aria-label="Views"></nav>
</header>
<main id="main" tabindex="-1">
<noscript><p>This page draws its tables with JavaScript, which is off. The same numbers are in
LEADERBOARD.md and leaderboard.csv beside this folder.</p></noscript>
<section id="page-accuracy" hidden></section>
<section id="page-efficiency" hidden></section>
<section id="page-peers" hidden></section>
</main>
<div id="tip" role="tooltip" hidden></div>
<script id="data" type="application/json">@DATA@</script>
<script>
@JS@</script>
</body>
</html>
"""
