"""Rebuild ``<results-dir>/LEADERBOARD.md``, ``leaderboard.csv``, ``leaderboard.tex``, the figures
and the web page (``site/index.html``, ``site.py``) from the result files alone.

    python -m lra.leaderboard [--results-dir results] [--strict] [--html DIR | --no-html]
                              [--screenshot PATH [--screenshot-size WxH] [--screenshot-anchor A]]

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
import os
import re
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lra import atomic, stop_signals
from lra.config import PRESETS
from lra.leaderboard import browser, curves, figures, names, reader, recall, tuned
from lra.leaderboard.accuracy import MODERN_HEADLINE_AND_SECOND, accuracy_section
from lra.leaderboard.bib import to_bib
from lra.leaderboard.cells import md_code
from lra.leaderboard.efficiency import FIGURE_PREFIX, FIGURES_DIR, efficiency_section
from lra.leaderboard.export import (
    TABLES_DIR,
    cited,
    per_table,
    tex_escape,
    to_csv,
    to_tex,
    to_tex_with_published,
)
from lra.leaderboard.load import (
    PEERS_PATTERN,
    ResultFileError,
    load_efficiency,
    load_peers,
    printable,
    protocol,
)
from lra.leaderboard.peers import peers_section
from lra.leaderboard.reference import (
    published_efficiency_section,
    published_modern_section,
    published_section,
)
from lra.leaderboard.site import INDEX, site_files
from lra.results import RESULTS_DIR_HELP, default_results_dir

SITE_DIR = "site"  # the web page's folder, beside the Markdown
CSV_FILE = "leaderboard.csv"
TEX_FILE = "leaderboard.tex"
TEX_PUBLISHED_FILE = "leaderboard-published.tex"  # measured next to published, per protocol
BIB_FILE = "leaderboard.bib"  # the works the LaTeX tables \cite


@dataclass(frozen=True)
class Only:
    """``--tasks``, ``--families``, ``--presets``: what every output keeps (None: everything)."""

    tasks: frozenset[str] | None = None
    families: frozenset[str] | None = None
    presets: frozenset[str] | None = None

    def keeps(self, task: str | None = None, family: str | None = None,
              preset: str | None = None) -> bool:
        return all(chosen is None or value is None or value in chosen
                   for chosen, value in ((self.tasks, task), (self.families, family),
                                         (self.presets, preset)))

    def run(self, r: dict[str, Any]) -> bool:
        return self.keeps(r["task"], r["attention"], r["preset"])

    def bench(self, rec: dict[str, Any]) -> dict[str, Any] | None:
        """A bench file with only the chosen families' results; None for another task."""
        if not self.keeps(task=rec["task"]):
            return None
        if self.families is None:
            return rec
        kept = [r for r in rec["results"] if r["attention"] in self.families]
        return {**rec, "results": kept} if kept else None


EVERYTHING = Only()


def _peers_lines(results_dir: Path, valid: list[Path]) -> list[str]:
    """The "vs best peer" section of the peers files ``valid`` only (``peers_section`` reads a
    folder: it is given one that holds links to those)."""
    every = sorted((Path(results_dir) / "efficiency").glob(PEERS_PATTERN))
    if valid == every:
        return peers_section(results_dir)
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "efficiency").mkdir()
        for path in valid:
            (Path(tmp) / "efficiency" / path.name).symlink_to(path.resolve())
        return peers_section(Path(tmp))


def build_all(results_dir: Path, skipped: list[str] | None = None, *,
              results_href: str = "..", only: Only = EVERYTHING) -> dict[str, Any]:
    """Every output: {"markdown": str, "figures": {file under figures/: bytes}, "csv": str,
    "tex": str, "site": {file under the site folder: bytes}}; the figures are drawn when their
    bytes are first read (``figures.Figures``), so the tables alone cost no drawing. Invalid
    files are listed in ``skipped`` (an error if it is None). ``results_href``: ``results_dir``
    relative to the site folder (the page links the run files). ``only``: the tasks, families
    and presets every output keeps (runs, tuned rows, bench results, published rows);
    "tables" holds one LaTeX file per table ({file name: text})."""
    result_set = reader.read(results_dir, strict=skipped is None)
    if skipped is not None:
        skipped.extend(result_set.skipped)
    superseded = result_set.superseded
    # A task of another track (MQAR's "recall") is its own section, never an LRA column (recall.py).
    all_runs, recall_runs = recall.split([r for r in result_set.runs if only.run(r)])
    evaluations = result_set.evaluations
    # The two protocols are never ranked together: one table set each (docs/families-and-protocols.md
    # "Two protocols").
    runs = [r for r in all_runs if protocol(r) == "lra"]
    modern = [r for r in all_runs if protocol(r) == "modern"]
    bench = [kept for kept in map(only.bench, load_efficiency(results_dir, skipped)) if kept]
    cells: list[dict[str, Any]] = []
    lines = ["# LRA leaderboard", "",
             "Generated by `python -m lra.leaderboard` from the result files in `runs/` and "
             "`efficiency/`; do not edit.",
             "Accuracies are test accuracy in percent. Measured rows and published rows are kept in "
             "separate tables: they come from different code, hardware and budgets.", "",
             "## Measured, LRA protocol", ""]
    lines += accuracy_section(runs, collect=cells, tasks=only.tasks) if runs else ["No result files yet.", ""]
    if superseded:
        lines += ["Superseded (a newer file measures the same task, family, preset, protocol, device, "
                  "seed and config; only the newest counts): " + ", ".join(map(md_code, superseded)), ""]
    if evaluations:
        lines += ["Evaluations of checkpoints (`python -m lra.evaluate --write-result`; not seeds, "
                  "not in any cell): " + ", ".join(map(md_code, evaluations)), ""]
    lines += ["## Measured, modern protocol", "",
              "The families' published modern recipes (`--protocol modern`); not comparable with the "
              "LRA-protocol tables above, and never ranked with them.", ""]
    lines += (accuracy_section(modern, MODERN_HEADLINE_AND_SECOND, protocol="modern", collect=cells,
                               tasks=only.tasks)
              if modern
              else ["No result files of the modern protocol yet.", ""])
    tuned_cells: list[dict[str, Any]] = []
    selections = tuned.load(results_dir, result_set, skipped)
    chosen = [sel for sel in selections
              if not recall.is_recall_selection(sel)
              and only.keeps(family=sel["attention"], preset=sel["preset"])
              and all(only.run(r) for r in sel["_runs"])]
    lines += tuned.section(chosen, reader.HEADLINE, collect=tuned_cells)
    track = recall.outputs(recall_runs, selections, tex_escape)
    lines += track["markdown"]
    curve_lines, curve_figs = curves.leaderboard_section(runs)  # learning curves per (task, preset)
    lines += curve_lines
    lines += ["## Measured efficiency", ""]
    eff_lines, figs = efficiency_section(bench, runs)
    figs.update(curve_figs)
    figs.update(track["figures"])
    lines += eff_lines
    peers_files = load_peers(results_dir, skipped)
    lines += _peers_lines(results_dir, peers_files)
    lines += ["## Published reference rows (not measured here)", ""]
    lines += published_section()
    lines += ["## Published reference rows, modern protocol (not measured here)", ""]
    lines += published_modern_section()
    lines += published_efficiency_section()
    lines += ["## Tables and figures for a paper", "",
              f"The accuracy cells above, also as `{CSV_FILE}` (one row per cell) and `{TEX_FILE}` "
              "(booktabs tables); every figure also as SVG and PDF under `figures/` "
              "(docs/results.md \"Tables and figures for a paper\").", ""]
    newest_peers = ((peers_files[-1].name, _peers_lines(results_dir, peers_files[-1:]))
                    if peers_files else None)
    page = site_files(cells, all_runs, bench, newest_peers, [p.name for p in peers_files[:-1]],
                      results_href=results_href)
    page = {**page, INDEX: recall.site_tab(page[INDEX], track["points"], track["files"], results_href)}
    tex = to_tex(cells, tuned_cells, only=only.keeps)
    beside = to_tex_with_published(cells, only=only.keeps)
    return {"markdown": "\n".join(lines).rstrip() + "\n", "figures": figs,
            "csv": to_csv(cells, only=only.keeps), "tex": tex + "\n".join(track["tex"]),
            "tex_published": beside, "tables": {**per_table(tex), **per_table(beside)},
            "bib": to_bib(cited(tex, beside)), "site": page, "csv_recall": track["csv"]}


def build(results_dir: Path, skipped: list[str] | None = None) -> tuple[str, Mapping[str, bytes]]:
    """The leaderboard's markdown and its figures ({file name under figures/: bytes})."""
    out = build_all(results_dir, skipped)
    return out["markdown"], out["figures"]


def render(results_dir: Path) -> str:
    return build(results_dir)[0]


def replace_file(path: Path, data: bytes) -> None:
    """Write ``path`` whole or not at all (``lra.atomic.replace``): a signal or a full disk never
    leaves a cut-short table or figure."""
    atomic.replace(path, data)


def main(argv: list[str] | None = None) -> int:
    """Exit status: 0 written, 1 a bad --results-dir, an output it cannot write or (--strict) a
    skipped file, 2 a bad command line, 75 stopped by SIGTERM, SIGINT or SIGUSR2 (every file
    it had written is whole; the others keep their earlier version)."""
    with stop_signals.raising():
        try:
            return _main(argv)
        except stop_signals.Stopped as stop:
            print(f"{stop.args[0]}: stopped; every file is whole (written or as before); re-run "
                  f"the same command", file=sys.stderr)
            return stop_signals.EXIT_RESUMABLE


# A browser window's sides in pixels: below, no table is readable; above, chromium works for
# minutes on one PNG and the command would look hung.
SCREEN_SIDE = (100, 8192)


def window_size(text: str) -> tuple[int, int]:
    """``--screenshot-size``: ``WIDTHxHEIGHT`` in pixels, each side within ``SCREEN_SIDE``
    (argparse prints the message and exits 2: a bad size is refused before anything runs)."""
    size = re.fullmatch(r"\s*(\d{1,9})\s*[xX]\s*(\d{1,9})\s*", text)
    if not size:
        raise argparse.ArgumentTypeError(f"expected WIDTHxHEIGHT in pixels like 1280x800, got {text!r}")
    width, height = int(size[1]), int(size[2])
    low, high = SCREEN_SIDE
    if not (low <= width <= high and low <= height <= high):
        raise argparse.ArgumentTypeError(f"{width}x{height}: each side must be {low} to {high} pixels")
    return width, height


def _main(argv: list[str] | None) -> int:
    p = argparse.ArgumentParser(prog="python -m lra.leaderboard", description=__doc__.split("\n")[0])
    p.add_argument("--results-dir", type=Path, default=default_results_dir(),
                   help="the folder of runs/ and efficiency/ it reads and where the tables go; "
                        + RESULTS_DIR_HELP)
    p.add_argument("--strict", action="store_true",
                   help="fail (exit 1, nothing written) if any result file is invalid, instead of "
                        "skipping it with a warning")
    p.add_argument("--html", type=Path, default=None, metavar="DIR",
                   help=f"write the web page into DIR (default: {SITE_DIR}/ beside the Markdown)")
    p.add_argument("--no-html", action="store_true", help="write no web page")
    p.add_argument("--no-figures", action="store_true",
                   help="draw no figure and leave figures/ as it is (the tables, CSV, LaTeX and page "
                        "in seconds; drawing the figures takes most of a full build's time)")
    p.add_argument("--screenshot", type=Path, default=None, metavar="PATH",
                   help="then take a PNG of the page with a headless chromium")
    p.add_argument("--screenshot-size", default=(1280, 800), type=window_size, metavar="WxH",
                   help=f"the window of --screenshot in pixels, each side {SCREEN_SIDE[0]} to "
                        f"{SCREEN_SIDE[1]} (default 1280x800; a phone: 390x844)")
    p.add_argument("--screenshot-anchor", default="", metavar="ANCHOR",
                   help="the view or cell --screenshot shows, e.g. lra/small/listops/softmax")
    p.add_argument("--tasks", type=_names("task", sorted(names.declared("tasks"))), default=None,
                   metavar="T,T", help="keep only these tasks in every output (default: all)")
    p.add_argument("--families", type=_names("family", sorted(names.declared("attention"))),
                   default=None, metavar="F,F",
                   help="keep only these families in every output (default: all)")
    p.add_argument("--presets", type=_names("preset", list(PRESETS)), default=None, metavar="P,P",
                   help="keep only these presets in every output (default: all)")
    args = p.parse_args(argv)
    if args.no_html and (args.html or args.screenshot):
        p.error("--no-html writes no page: --html and --screenshot need one")
    if not args.results_dir.is_dir():
        missing = not args.results_dir.exists()
        print(f"error: --results-dir {printable(args.results_dir)} is not a folder"
              + ("; no run has written there yet (lra.run and lra.sweep write to the same default"
                 "); the project's reference table: python -m lra.leaderboard --results-dir "
                 "results" if missing else ""), file=sys.stderr)
        return 1
    html_dir = None if args.no_html else (args.html or args.results_dir / SITE_DIR)
    href = ".." if html_dir is None else Path(os.path.relpath(args.results_dir.resolve(),
                                                             html_dir.resolve())).as_posix()
    skipped: list[str] = []
    try:
        out = build_all(args.results_dir, skipped, results_href=href,
                        only=Only(args.tasks, args.families, args.presets))
    except ResultFileError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    for line in skipped:
        print(f"{'error' if args.strict else 'warning'}: skipped {line}", file=sys.stderr)
    if skipped and args.strict:
        print(f"error: {len(skipped)} invalid result file(s); nothing written (--strict)",
              file=sys.stderr)
        return 1
    try:
        stop_signals.test_hook("write")
        written = write(args.results_dir, out, html_dir, figures=not args.no_figures)
    except OSError as err:
        print(printable(f"error: cannot write the leaderboard under {args.results_dir}: "
                        f"{err.strerror or err} ({err.filename or args.results_dir})"), file=sys.stderr)
        return 1
    print(printable(f"wrote {written}"))
    if args.screenshot:
        try:
            browser.screenshot(html_dir / INDEX, args.screenshot, args.screenshot_size,
                               anchor=args.screenshot_anchor)
        except browser.BrowserError as err:
            print(printable(f"error: --screenshot: {err}"), file=sys.stderr)
            return 1
        print(printable(f"wrote {args.screenshot}"))
    return 0


def write(results_dir: Path, out: dict[str, Any], html_dir: Path | None = None, *,
          figures: bool = True) -> str:
    """Write every output under ``results_dir`` and the web page into ``html_dir`` (none where it
    is None); remove the figures this tool made before that it no longer makes. ``figures=False``
    draws none and leaves ``figures/`` untouched. Returns what was written, in words."""
    figs = out["figures"] if figures else {}
    redrawn = _write_figures(results_dir, figs) if figures else ""
    replace_file(results_dir / CSV_FILE, out["csv"].encode())
    if out.get("csv_recall"):  # the recall track's cells (recall.py), only where it has some
        replace_file(results_dir / recall.CSV_FILE, out["csv_recall"].encode())
    else:
        (results_dir / recall.CSV_FILE).unlink(missing_ok=True)
    replace_file(results_dir / TEX_FILE, out["tex"].encode())
    replace_file(results_dir / TEX_PUBLISHED_FILE, out["tex_published"].encode())
    _write_tables(results_dir / TABLES_DIR, out.get("tables", {}))
    if "bib" in out:
        replace_file(results_dir / BIB_FILE, out["bib"].encode())
    page = results_dir / "LEADERBOARD.md"
    replace_file(page, out["markdown"].encode())
    site = ""
    if html_dir is not None and out.get("site"):
        for name, data in out["site"].items():
            (html_dir / name).parent.mkdir(parents=True, exist_ok=True)
            replace_file(html_dir / name, data)
        site = f", the web page {html_dir / INDEX}"
    return (f"{page}, {CSV_FILE}, {TEX_FILE}, {TEX_PUBLISHED_FILE}, {BIB_FILE}, "
            f"{len(out.get('tables', {}))} tables in {TABLES_DIR}/{site}"
            + (f" and {len(figs)} figures in {results_dir / FIGURES_DIR}" if figs else "")
            + ("" if figures else " (no figures drawn: --no-figures)") + redrawn)


def _write_tables(folder: Path, tables: Mapping[str, str]) -> None:
    """One ``.tex`` per table under ``folder`` (``export.per_table``); the ones written before
    that no table has now (another filter, a table gone) removed: the folder is this tool's."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in tables.items():
        replace_file(folder / name, text.encode())
    for old in folder.glob("*.tex"):
        if old.name not in tables:
            old.unlink()


def _names(kind: str, choices: list[str]):
    """An argparse type: a comma-separated list of ``kind`` names, each one of ``choices``."""
    def parse(text: str) -> frozenset[str]:
        wanted = [w.strip() for w in text.split(",") if w.strip()]
        unknown = [w for w in wanted if w not in choices]
        if unknown or not wanted:
            raise argparse.ArgumentTypeError(
                f"unknown {kind} {', '.join(map(repr, unknown)) or repr(text)}; choose from "
                f"{', '.join(choices)}")
        return frozenset(wanted)
    return parse


def _write_figures(results_dir: Path, figs: Mapping[str, bytes]) -> str:
    """The figures under ``figures/`` with ``figures.DRAWN_WITH``, and the ones this tool made
    before that it no longer makes removed. Returns a sentence when the figures there before were
    drawn with other library versions (their bytes may differ for that reason alone), else ""."""
    fig_dir = results_dir / FIGURES_DIR
    made_before = [p for prefix in (FIGURE_PREFIX, curves.FIGURE_PREFIX, recall.FIGURE_PREFIX)
                   for ext in ("png", "svg", "pdf") for p in fig_dir.glob(f"{prefix}*.{ext}")]
    for stale in sorted(made_before):  # figures this tool made before
        if stale.name not in figs:
            stale.unlink()
    if figs:
        fig_dir.mkdir(parents=True, exist_ok=True)
    for name, data in figs.items():
        replace_file(fig_dir / name, data)
    if figs:
        return _record_versions(fig_dir)
    (fig_dir / figures.DRAWN_WITH).unlink(missing_ok=True)  # it described figures now removed
    return ""


def _record_versions(fig_dir: Path) -> str:
    """Write ``figures.DRAWN_WITH``; say which versions changed since the figures there before."""
    record = fig_dir / figures.DRAWN_WITH
    before = figures.pins(record.read_text()) if record.is_file() else {}
    now = figures.drawn_with()
    replace_file(record, now.encode())
    changed = [f"{name} {before[name]} -> {version}" for name, version in figures.pins(now).items()
               if before.get(name, version) != version]
    if not changed:
        return ""
    return (f"; the figures there before were drawn with other versions ({', '.join(changed)}): "
            f"their bytes may differ for that alone (constraints.txt pins the reference set's)")
