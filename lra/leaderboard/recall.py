"""The recall track (MQAR, issue 57): its own section, never a column of the LRA tables.

A task declares its track in its file (``track``, ``tasks/__init__.py``; read here through
``lra.declared`` without importing it). Runs of the "recall" track leave the LRA accuracy tables,
curves and tuned table (``split``) and get this section instead: one table per (preset, device,
form), the causal and the bidirectional forms never ranked together (docs/tasks-and-data.md
"MQAR"). A column is a (length, width) setting (``data.length``, ``model.emb_dim``), a row a family
(plus any other key where its config is not the preset's); a cell is the one reader's cell (one
config, its seeds) at the learning rate shown:

* where a selection file (``selections/``, ``lra.sweep --select``) chose it: "chosen on validation";
* where one learning rate ran: that one, "as run";
* where several ran and no selection chose: the one with the best mean validation accuracy,
  "best validation here", said so in the cell.

The value is test accuracy at the best-validation step (the track's protocol: lr and checkpoint
chosen on validation, test reported at that choice), mean over seeds with its 95% interval; a seed is
at chance within one standard error of 1/(vocab_size / 2) (a value is one of V/2 tokens) over the
counted query positions. The state size (bytes, ``lra.state_size``) of each (family, length, width)
is the family's declared recurrent state over its layers plus the short convolution's last
``short_conv - 1`` inputs per channel and layer (``model.short_conv``), in float32.

Nothing here imports JAX.
"""

from __future__ import annotations

import csv
import html
import io
import math
import re
import statistics
import urllib.parse
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from lra import declared, state_size
from lra.leaderboard import identity, names
from lra.leaderboard.cells import Cell, cell_objects, md_code, md_table, md_text
from lra.leaderboard.load import device_label
from lra.metrics_log import standard_error

TRACK = "recall"
FIGURE_PREFIX = "recall-"  # its figures under figures/ (recall_figures.py)
LRA_TRACK = "lra"
METRIC = "test_accuracy_at_best_val"
FORMS = ("causal", "bidirectional")
# The keys a column or the shown learning rate already says; any other key that differs from the
# preset goes into the row's label.
AXES = ("data.length", "data.pairs", "model.emb_dim", "model.qkv_dim", "model.mlp_dim", "train.lr",
        "data.form")
CHOSEN, AS_RUN, BEST_HERE = "chosen on validation", "as run", "best validation here"
LR_MARK = {CHOSEN: "✓", AS_RUN: "", BEST_HERE: "*"}
CSV_FILE = "leaderboard-recall.csv"
CSV_COLUMNS = ("preset", "device", "form", "metric", "task", "length", "pairs", "vocab_size", "width",
               "family", "overrides", "lr", "lr_how", "state_bytes", "n", "mean", "std", "ci_low",
               "ci_high", "at_chance", "best", "tied", "few", "ci_clipped", "family_name")
PUBLISHED_NOTE = ("Published points: Zoology (Arora et al., ICLR 2024, arXiv 2312.04927, Figure 2) "
                  "and Based (Arora et al., ICML 2024, arXiv 2402.18668, Figure 2) print their MQAR "
                  "results only as figures, with no table of numbers, and so do DeltaNet (Yang et "
                  "al., NeurIPS 2024, arXiv 2406.06484: L=512, 64 pairs, widths 64-512), Mamba-2 "
                  "(Dao and Gu, ICML 2024, arXiv 2405.21060, Figure 8: L=256-1024, vocabulary 8,192) "
                  "and xLSTM (Beck et al., NeurIPS 2024, arXiv 2405.04517, Figures 5 and 14-16); "
                  "Gated DeltaNet (arXiv 2412.06464) reports no MQAR, and the GLA paper's text "
                  "(arXiv 2312.06635) was not checked. None is copied here: read from a plot, a "
                  "number would be ours, not theirs.")


def track(task: str) -> str:
    """The track ``task`` declares in its file (``"lra"`` where it declares none or is unknown)."""
    value = declared.declared("tasks").get(task, {}).get("track", LRA_TRACK)
    return value if isinstance(value, str) else LRA_TRACK


def split(runs: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(the runs of LRA's track, the runs of the recall track); runs of any other track in neither."""
    return ([r for r in runs if track(r["task"]) == LRA_TRACK],
            [r for r in runs if track(r["task"]) == TRACK])


def is_recall_selection(selection: dict[str, Any]) -> bool:
    return track(selection.get("task", "")) == TRACK


@dataclass(frozen=True)
class Point:
    """One shown cell: a family row at one (length, width) of one (preset, device, form)."""

    preset: str
    device: str
    form: str
    task: str
    row: str  # the family, plus ``[key=value, ...]`` of keys outside ``AXES`` that differ
    family: str
    length: int
    pairs: int
    vocab_size: int
    width: int
    lr: float
    how: str  # CHOSEN, AS_RUN or BEST_HERE
    runs: tuple[dict[str, Any], ...]
    state_bytes: int | None

    @property
    def column(self) -> str:
        return f"L={self.length} W={self.width}"

    def values(self) -> list[float]:
        return [r["metrics"][METRIC] for r in self.runs if r["metrics"].get(METRIC) is not None]


def model_state_bytes(family: str, config: dict[str, Any], length: int) -> int | None:
    """The family's recurrent state over the model's layers (``lra.state_size``) plus the short
    convolution's state, ``(short_conv - 1) * emb_dim`` numbers per layer, float32; None where the
    family declares no formula here."""
    try:
        mixer = state_size.state_bytes(family, config, length)
    except state_size.StateSizeError:
        return None
    model = config["model"]
    conv = max(int(model.get("short_conv") or 0) - 1, 0) * int(model["emb_dim"])
    return mixer + conv * int(model["num_layers"]) * 4


def _label(run: dict[str, Any]) -> str:
    rest = {k: v for k, v in (run.get("_diff") or {}).items() if k not in AXES}
    label = identity.variant_label(rest)
    return f"{run['attention']} {label}" if label else run["attention"]


def _setting(run: dict[str, Any]) -> tuple:
    data, model = run["config"].get("data") or {}, run["config"]["model"]
    return (run["preset"], device_label(run), data.get("form", FORMS[0]), run["task"], _label(run),
            int(data.get("length", 0)), int(model["emb_dim"]))


def _val_mean(runs: list[dict[str, Any]]) -> float:
    vals = [r["metrics"].get("best_val_accuracy") for r in runs]
    vals = [v for v in vals if v is not None]
    return statistics.fmean(vals) if vals else -math.inf


def _pick(candidates: dict[Any, list[dict[str, Any]]], chosen: set) -> tuple[list[dict], str]:
    """The runs of the cell shown among one setting's learning-rate cells, and how it was picked."""
    picked = [c for c in candidates if c in chosen]
    if picked:
        return candidates[picked[0]], CHOSEN
    if len(candidates) == 1:
        return next(iter(candidates.values())), AS_RUN
    best = max(sorted(candidates), key=lambda c: _val_mean(candidates[c]))
    return candidates[best], BEST_HERE


def points(runs: list[dict[str, Any]], selections: list[dict[str, Any]] = ()) -> list[Point]:
    """The shown cells of the recall runs ``runs`` (the reader's kept runs), learning rates picked
    as the module docstring says; ``selections``: ``tuned.load``'s valid selection files."""
    chosen = {r["_cell"] for s in selections for r in s.get("_runs", ())}
    settings: dict[tuple, dict[Any, list[dict[str, Any]]]] = defaultdict(lambda: defaultdict(list))
    for r in runs:
        settings[_setting(r)][r["_cell"]].append(r)
    out = []
    for setting in sorted(settings):
        preset, device, form, task, row, length, width = setting
        cell_runs, how = _pick(settings[setting], chosen)
        cfg = cell_runs[0]["config"]
        data = cfg.get("data") or {}
        out.append(Point(preset, device, form, task, row, cell_runs[0]["attention"], length,
                         int(data.get("pairs", 0)), int(data.get("vocab_size", 0)), width,
                         float(cfg["train"]["lr"]), how, tuple(cell_runs),
                         model_state_bytes(cell_runs[0]["attention"], cfg, length)))
    return out


def at_chance(run: dict[str, Any]) -> bool | None:
    """Whether ``run``'s value is within one standard error of 1/(vocab_size / 2) over its counted
    query positions (test examples x pairs); None where the file does not say how many."""
    value = run["metrics"].get(METRIC)
    data = run["config"].get("data") or {}
    evaluated = ((run.get("data") or {}).get("evaluated") or {}).get("test_at_best_val")
    if value is None or not evaluated or not data.get("vocab_size") or not data.get("pairs"):
        return None
    level = 2.0 / int(data["vocab_size"])
    return abs(value - level) <= standard_error(level, int(evaluated) * int(data["pairs"]))


def _sections(pts: list[Point]) -> dict[tuple[str, str, str], list[Point]]:
    form_order = {f: i for i, f in enumerate(FORMS)}
    groups: dict[tuple[str, str, str], list[Point]] = defaultdict(list)
    for p in pts:
        groups[(p.preset, p.device, p.form)].append(p)
    return dict(sorted(groups.items(), key=lambda kv: (kv[0][0], kv[0][1],
                                                       form_order.get(kv[0][2], 9), kv[0][2])))


def _columns(group: list[Point]) -> list[str]:
    return [f"L={length} W={width}" for length, width in sorted({(p.length, p.width) for p in group})]


def marked(group: list[Point]) -> dict[tuple[str, str], tuple[Point, Cell]]:
    """{(row, column): (its point, its marked cell)}: per column the best mean bold, the overlapping
    intervals ≈, a seed at chance never best (``cells.cell_objects``), ranked within the group only."""
    values = {(p.row, p.column): p.values() for p in group}
    chance = {(p.row, p.column): sum(bool(at_chance(r)) for r in p.runs) for p in group}
    rows = sorted({p.row for p in group})
    cells = cell_objects(values, rows, _columns(group), at_chance=chance)
    return {(p.row, p.column): (p, cells[(p.row, p.column)]) for p in group}


def _lr_text(p: Point) -> str:
    return f"lr {p.lr:g}{LR_MARK[p.how]}"


LEGEND = ("Each cell: test accuracy over the queries at the best-validation step (%), mean ± sample "
          "std over seeds [95% interval] (n seeds), then the learning rate it ran at: ✓ chosen on "
          "validation by a selection file (`lra.sweep --select`), * the best mean validation "
          "accuracy of the learning rates run here (no selection file chose), none: the only one "
          "run. **Bold**: the column's best; ≈: its interval overlaps the best's; k/n at chance: "
          "within one standard error of 1/(vocab/2). Zoology reports the test accuracy of the "
          "learning rate best on test; ours is chosen on validation.")


def _table(group: list[Point]) -> list[str]:
    cells = marked(group)
    columns = _columns(group)
    rows = sorted({p.row for p in group})
    body = []
    for row in rows:
        line = [md_text(row)]
        for col in columns:
            got = cells.get((row, col))
            line.append("—" if got is None else f"{got[1].text()} · {_lr_text(got[0])}")
        body.append(line)
    return md_table(["family", *columns], body) + [""]


def _state_table(group: list[Point]) -> list[str]:
    lengths = sorted({p.length for p in group})
    by_row: dict[str, dict[int, set]] = defaultdict(lambda: defaultdict(set))
    for p in group:
        if p.state_bytes is not None:
            by_row[p.row][p.length].add((p.width, p.state_bytes))
    body = [[md_text(row)] + [", ".join(f"W{w}: {b:,}" for w, b in sorted(by_row[row][n])) or "—"
                              for n in lengths] for row in sorted(by_row)]
    return (["Recurrent state per sequence (bytes, float32, all layers; the family's declared "
             "formula plus the short convolution's (short_conv - 1) x width per layer):", ""]
            + md_table(["family", *(f"L={n}" for n in lengths)], body) + [""])


def section(pts: list[Point], figure_files: dict[tuple[str, str, str], tuple[str, str]]) -> list[str]:
    """The Markdown section (empty without recall runs). ``figure_files``: per (preset, device,
    form) the (width figure, frontier figure) file names under ``figures/``."""
    if not pts:
        return []
    lines = ["## The recall track (MQAR)", "",
             "Multi-query associative recall (`--task mqar`, docs/tasks-and-data.md \"MQAR\"), its own "
             "track: not a column of the LRA tables, and its two forms (causal: Zoology's next-token "
             "form; bidirectional: the value predicted in place) are never ranked together. A column "
             "is a (length L, width W) setting; a row a family.", "", LEGEND, "", PUBLISHED_NOTE, ""]
    for (preset, device, form), group in _sections(pts).items():
        vocab = sorted({p.vocab_size for p in group})
        lines += [f"### Recall, {md_text(form)} form: preset {md_code(preset)} on {md_text(device)}",
                  "", f"Vocabulary {', '.join(map(str, vocab))}; pairs per length: "
                  + ", ".join(f"L={n}: {k}" for n, k in sorted({(p.length, p.pairs) for p in group}))
                  + ".", ""]
        lines += _table(group) + _state_table(group)
        width_png, frontier_png = figure_files.get((preset, device, form), (None, None))
        if width_png:
            lines += [f"![accuracy against width, one panel per length]({width_png})", "",
                      f"![accuracy against recurrent state size]({frontier_png})", "",
                      "Left as Zoology's Figure 2 (accuracy against model width, one panel per "
                      "length, a line per family); right as the Based paper's Figure 2 (accuracy "
                      "against recurrent state in bytes, log2 axis, a point per family and width).",
                      ""]
    return lines


# ----------------------------------------------------------------------------------------------
# CSV and LaTeX.

def _num(x: float | None) -> str:
    return "" if x is None else f"{x:.4f}"


def to_csv(pts: list[Point]) -> str:
    """One row per shown cell, in percent, with its setting, learning rate and state size; "" where
    there are no recall runs (no file is written then)."""
    if not pts:
        return ""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(CSV_COLUMNS)
    for group in _sections(pts).values():
        for (row, _), (p, cell) in sorted(marked(group).items(),
                                          key=lambda kv: (kv[1][0].length, kv[1][0].width, kv[0][0])):
            s = cell.stats
            w.writerow([p.preset, p.device, p.form, METRIC, p.task, p.length, p.pairs, p.vocab_size,
                        p.width, p.family, row.partition(" ")[2], f"{p.lr:g}", p.how,
                        "" if p.state_bytes is None else p.state_bytes, s.n, _num(s.mean),
                        _num(s.std), _num(s.low), _num(s.high), cell.at_chance, int(cell.best),
                        int(cell.tied), int(cell.few), int(s.clipped), names.family_name(p.family)])
    return buf.getvalue()


def _tex_cell(p: Point, cell: Cell, escape) -> str:
    s = cell.stats
    mean = f"{s.mean:.1f}"
    mean = (rf"\textbf{{{mean}}}" if cell.best else mean) + (r"$^{\approx}$" if cell.tied else "") \
        + (r"$^{\circ}$" if cell.at_chance else "")
    mark = {CHOSEN: r"$^{v}$", AS_RUN: "", BEST_HERE: r"$^{*}$"}[p.how]
    return f"{mean} {{\\scriptsize ({escape(f'{p.lr:g}')}{mark})}}"


def to_tex(pts: list[Point], escape) -> list[str]:
    """A booktabs table per (preset, device, form); ``escape``: the LaTeX escape of the export."""
    out = []
    for (preset, device, form), group in _sections(pts).items():
        cells = marked(group)
        columns = _columns(group)
        body = []
        for row in sorted({p.row for p in group}):
            got = [cells.get((row, c)) for c in columns]
            body.append(" & ".join([escape(names.family_name(row.split(" ", 1)[0])
                                           + (" " + row.partition(" ")[2] if " " in row else ""))]
                                   + ["--" if g is None else _tex_cell(g[0], g[1], escape)
                                      for g in got]) + r" \\")
        caption = (f"MQAR recall, {escape(form)} form, preset \\texttt{{{escape(preset)}}} on "
                   f"{escape(device)}: test accuracy (\\%) at the best-validation step, mean over "
                   "seeds; the learning rate in brackets ($^{v}$ chosen on validation, $^{*}$ best "
                   "validation of those run); bold the column's best, $^{\\approx}$ interval "
                   "overlaps the best's, $^{\\circ}$ a seed at chance. Never ranked with the other "
                   "form or with LRA.")
        label = "tab:recall-" + "-".join("".join(ch for ch in part.lower() if ch.isalnum())
                                         for part in (preset, device, form))
        header = " & ".join(["Model", *(escape(c) for c in columns)]) + r" \\"
        out += [r"\begin{table*}[tbp]", r"\centering", r"\footnotesize", rf"\caption{{{caption}}}",
                rf"\label{{{label}}}", r"\begin{tabular}{@{}l" + "r" * len(columns) + "@{}}",
                r"\toprule", header, r"\midrule", *body, r"\bottomrule", r"\end{tabular}",
                r"\end{table*}", ""]
    return out


# ----------------------------------------------------------------------------------------------
# The one hook of ``build.py``: everything the track adds to the leaderboard.

def outputs(runs: list[dict[str, Any]], selections: list[dict[str, Any]], escape) -> dict[str, Any]:
    """{"markdown": lines, "figures": ``figures.Figures``, "csv": text ("" without recall runs),
    "tex": lines, "points": the shown cells} of the recall runs ``runs``; ``escape``: LaTeX's."""
    from lra.leaderboard import recall_figures  # matplotlib's import only where the track is built

    pts = points(runs, selections)
    figs, files = recall_figures.draw_all(_sections(pts))
    return {"markdown": section(pts, files), "figures": figs, "csv": to_csv(pts),
            "tex": to_tex(pts, escape), "points": pts, "files": files}


# ----------------------------------------------------------------------------------------------
# The web page's tab: static HTML and a small script of its own, added only where the track has
# cells (a page without recall runs keeps its bytes).

TAB_SCRIPT = """<script>
(function () {
  var sec = document.getElementById("page-recall");
  function show() {
    var on = location.hash === "#recall";
    ["accuracy", "efficiency", "peers"].forEach(function (p) {
      var s = document.getElementById("page-" + p);
      if (s && on) s.hidden = true;
    });
    sec.hidden = !on;
    var nav = document.querySelector("#nav ul");
    if (nav && !document.getElementById("nav-recall")) {
      var li = document.createElement("li"), a = document.createElement("a");
      a.id = "nav-recall"; a.href = "#recall"; a.textContent = "Recall (MQAR)";
      li.appendChild(a); nav.appendChild(li);
    }
    var link = document.getElementById("nav-recall");
    if (link && on) link.setAttribute("aria-current", "page");
    if (link && !on) link.removeAttribute("aria-current");
    if (on) document.querySelectorAll("#nav a[aria-current]").forEach(function (x) {
      if (x !== link) x.removeAttribute("aria-current");
    });
  }
  window.addEventListener("hashchange", show);
  show();
})();
</script>
"""


def _html_table(group: list[Point]) -> str:
    cells = marked(group)
    columns = _columns(group)
    head = "".join(f"<th>{html.escape(c)}</th>" for c in ["family", *columns])
    body = []
    for row in sorted({p.row for p in group}):
        tds = [f"<th>{html.escape(names.family_name(row.split(' ', 1)[0]))}"
               f"{html.escape(' ' + row.partition(' ')[2]) if ' ' in row else ''}</th>"]
        for col in columns:
            got = cells.get((row, col))
            text = "—" if got is None else f"{got[1].text()} · {_lr_text(got[0])}"
            text = html.escape(text.replace("**", ""))
            tds.append(f"<td><b>{text}</b></td>" if got and got[1].best else f"<td>{text}</td>")
        body.append("<tr>" + "".join(tds) + "</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def _html_text(text: str) -> str:
    """``text`` (Markdown's ``**bold**`` and ``code`` marks) as HTML: the marks rendered, never shown."""
    out = html.escape(text)
    out = re.sub(r"\*\*(.+?)\*\*", r"<strong>\1</strong>", out)
    return re.sub(r"`(.+?)`", r"<code>\1</code>", out)


def site_tab(page: bytes, pts: list[Point], files: dict[tuple[str, str, str], tuple[str, str]],
             results_href: str) -> bytes:
    """``page`` (the site's index.html) with the recall tab added; ``page`` itself without points."""
    if not pts:
        return page
    href = results_href.rstrip("/") + "/"
    parts = ['<section id="page-recall" hidden>', "<h2>The recall track (MQAR)</h2>",
             f"<p>{_html_text(LEGEND)}</p>", f"<p>{_html_text(PUBLISHED_NOTE)}</p>"]
    for (preset, device, form), group in _sections(pts).items():
        parts += [f"<h3>{html.escape(form)} form · {html.escape(preset)} · {html.escape(device)}</h3>",
                  _html_table(group)]
        for png in files.get((preset, device, form), ()):
            src = html.escape(urllib.parse.quote(href + png, safe="/:.-_"))
            parts.append(f'<p><img src="{src}" alt="{html.escape(png)}" style="max-width:100%"></p>')
    parts.append(f'<p>Also in <a href="{html.escape(href)}{CSV_FILE}">{CSV_FILE}</a>.</p>')
    parts.append("</section>")
    text = page.decode("utf-8")
    text = text.replace("</main>", "\n".join(parts) + "\n</main>", 1)
    text = text.replace("</body>", TAB_SCRIPT + "</body>", 1)
    return text.encode("utf-8")
