"""Names of any characters and numbers of any size (issue 52): a result file made elsewhere may name
its family, override or file with a Markdown or LaTeX special, a non-Latin letter or a byte that is
not UTF-8, and may hold an integer no float can hold. Every output keeps its columns, every link
resolves, the LaTeX compiles, and what cannot be read is skipped with the one line."""

import json
import os
import re
import shutil
import subprocess
import urllib.parse

import pytest
from helpers import bench_record, run_record

from lra import leaderboard
from lra.leaderboard import cells
from lra.leaderboard.build import build_all


def _write(results, name, record):
    (results / "runs").mkdir(parents=True, exist_ok=True)
    (results / "runs" / f"{name}.json").write_text(json.dumps(record))


def _v2(record, overrides):
    return {**record, "format_version": 2, "overrides": overrides,
            "data": {"evaluated": {"val": 1000, "test_at_last": 1000, "test_at_best_val": 1000},
                     "fingerprint": {"sha256": "a" * 64, "generator": {"name": "g", "version": 1},
                                     "files": {}}}}


def _gfm_cells(line):
    """A table row's cells as GitHub reads them: a "|" right after a backslash is no delimiter."""
    return re.split(r"(?<!\\)\|", line.strip()[1:-1])


# ----------------------------------------------------------------------------------------------
# Markdown: a name never moves a number into the next column.

ODD_FAMILY = "my|fam\\|ily\nnext"


def test_a_pipe_newline_or_backslash_in_a_name_keeps_every_number_in_its_column(tmp_path):
    """Fails on main 69b79f7: `| my|fam | **40.00 (1)** |` gave the row one column too many, the
    accuracy under the text column; the line break ended the table."""
    results = tmp_path / "results"
    _write(results, "plain", run_record("listops", "softmax", "small", 0, 0.30, 0.30))
    _write(results, "odd|name`", run_record("listops", ODD_FAMILY, "small", 0, 0.40, 0.40))
    over = run_record("listops", "softmax", "small", 1, 0.20, 0.20)
    over["config"]["model"]["pooling"] = "me|an\\|x"
    _write(results, "over", _v2(over, {"model.pooling": "me|an\\|x"}))
    skipped = []
    text = build_all(results, skipped)["markdown"]
    assert skipped == []
    rows = 0
    for block in re.findall(r"(?:^\|.*\n)+", text, flags=re.M):
        lines = block.splitlines()
        width = len(_gfm_cells(lines[0]))
        for line in lines:
            assert len(_gfm_cells(line)) == width, line
            rows += 1
    assert rows > 20
    # each odd row's accuracy is in the listops column, right after its name
    headline = [ln for ln in text.splitlines() if ln.startswith("| my")]
    assert _gfm_cells(headline[0])[1].strip() == "**40.00 (1)**"
    [over_row] = [ln for ln in text.splitlines() if ln.startswith("| softmax [model.pooling")][:1]
    assert _gfm_cells(over_row)[1].strip() == "20.00 (1)"
    assert "`odd\\|name``" not in text  # the file's code span is fenced past its backtick
    # and as a GFM renderer reads it: the name whole in the first cell, the accuracy in the next
    markdown_it = pytest.importorskip("markdown_it")
    rendered = _rendered_rows(markdown_it.MarkdownIt("commonmark").enable("table"), text)
    mine = [row for row in rendered if row[0].startswith("my|fam")]
    assert mine and mine[0][:2] == ["my|fam\\\\|ily next", "**40.00 (1)**"], mine


def _rendered_rows(parser, text):
    """Every table row's cells as the parser splits them (their inline Markdown, unescaped pipes)."""
    rows, row = [], None
    for token in parser.parse(text):
        if token.type == "tr_open":
            row = []
        elif token.type == "inline" and row is not None:
            row.append(token.content)
        elif token.type == "tr_close":
            rows.append(row)
            row = None
    return rows

def test_md_text_and_md_code_escape_what_would_start_markup():
    assert cells.md_text("a*b*`c`<d>\\e\nf") == "a\\*b\\*\\`c\\`\\<d>\\\\e f"
    assert cells.md_code("x`y") == "``x`y``" and cells.md_code("`x") == "`` `x ``"
    assert cells.md_table(["h"], [["a|b"]])[2] == "| a\\|b |"


# ----------------------------------------------------------------------------------------------
# Numbers: the reader accepts only what every output can print.

HUGE = 10**400  # JSON holds it; no float does


def _set_path(record, field, value):
    node = record
    *parents, last = field.split(".")
    for part in parents:
        node = node[int(part)] if isinstance(node, list) else node[part]
    node[int(last) if isinstance(node, list) else last] = value


def _full_run():
    rec = run_record("listops", "softmax", "small", 0, 0.4, 0.4)
    rec["metrics"].update(best_val_step=100, num_params=1000, final_train_loss=0.5)
    rec["data"] = {"evaluated": {"val": 1000, "test_at_last": 1000, "test_at_best_val": 1000},
                   "examples": {"test": 1000}}
    rec["eval_history"] = {"step": [50, 100], "val_accuracy": [0.3, 0.4], "val_loss": [1.0, 0.9]}
    return rec


RUN_NUMBERS = ["seed", "config.train.num_steps", "metrics.steps", "metrics.best_val_step",
               "metrics.wall_time_s", "metrics.steps_per_s", "metrics.peak_memory.bytes",
               "metrics.final_train_loss", "metrics.num_params", "metrics.test_accuracy_at_last",
               "metrics.best_val_accuracy", "data.evaluated.test_at_last", "data.examples.test",
               "eval_history.step.0", "eval_history.val_loss.1", "device.count"]
BENCH_NUMBERS = ["batch", "steps", "warmup", "matmul_peak.flops_per_s", "results.0.length",
                 "results.0.steps_per_s", "results.0.memory.bytes", "results.0.flops.per_step",
                 "results.0.step_time_s.median", "results.0.speed_vs_softmax"]


@pytest.mark.parametrize("field", RUN_NUMBERS + [f"bench:{f}" for f in BENCH_NUMBERS])
def test_an_integer_no_float_holds_is_skipped_with_one_line(tmp_path, field):
    """Fails on main 69b79f7: peak_memory.bytes = 10**400 (and wall time, steps/s, FLOPs, memory,
    accuracies, example counts) crashed the leaderboard with OverflowError; the others were
    published as read."""
    results = tmp_path / "results"
    run, bench = _full_run(), bench_record()
    target, name = (bench, field[6:]) if field.startswith("bench:") else (run, field)
    _set_path(target, name, HUGE)
    _write(results, "run", run)
    (results / "efficiency").mkdir()
    (results / "efficiency" / "bench.json").write_text(json.dumps(bench))
    skipped = []
    out = build_all(results, skipped)
    out["site"], out["tex"], out["csv"]  # every output is made
    [line] = skipped
    printed = re.sub(r"\.(\d+)", r"[\1]", name)  # results.0.length -> results[0].length
    assert f": {printed}: " in line, line
    assert "within ±(2**63 - 1)" in line or "not a loss" in line or "increasing integers" in line


def test_a_negative_zero_accuracy_prints_as_zero():
    """Fails on main 69b79f7: -0.0 (accepted: it is >= 0) printed "-0.00 (1)"."""
    assert cells.Cell(cells.cell_stats([-0.0])).text() == "0.00 (1)"


def test_a_number_json_cannot_even_parse_is_skipped_with_one_line(tmp_path, capsys):
    """Fails on main 69b79f7: an integer of 5000 digits (ValueError) and arrays nested 100000 deep
    (RecursionError) were tracebacks."""
    results = tmp_path / "results"
    _write(results, "good", run_record("listops", "softmax", "small", 0, 0.4, 0.4))
    (results / "runs" / "digits.json").write_text('{"seed": ' + "9" * 5000 + "}")
    (results / "runs" / "deep.json").write_text("[" * 100000 + "]" * 100000)
    assert leaderboard.main(["--results-dir", str(results), "--no-figures", "--no-html"]) == 0
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2 and all(ln.startswith("warning: skipped ") for ln in err), err
    assert any("digits.json: unreadable (ValueError" in ln for ln in err)
    assert any("deep.json: unreadable (RecursionError" in ln for ln in err)


# ----------------------------------------------------------------------------------------------
# Paths: a name that is not UTF-8 is skipped; a link is a URL.

NOT_UTF8 = os.fsdecode(b"r\xffs")  # a byte no UTF-8 text holds (Python keeps it as a surrogate)


@pytest.mark.parametrize("html", ["site", "elsewhere", "none"])
def test_a_file_or_folder_name_that_is_not_utf8_is_skipped_or_quoted(tmp_path, capsys, html):
    """Fails on main 69b79f7: UnicodeEncodeError in the page writer (even with --no-html: the
    Markdown) for such a file name, and in the page for such a results folder with --html
    elsewhere."""
    results = tmp_path / NOT_UTF8
    _write(results, "good", run_record("listops", "softmax", "small", 0, 0.4, 0.4))
    _write(results, NOT_UTF8, run_record("listops", "softmax", "small", 1, 0.3, 0.3))
    (results / "efficiency").mkdir()
    (results / "efficiency" / f"{NOT_UTF8}.json").write_text(json.dumps(bench_record()))
    args = {"site": [], "elsewhere": ["--html", str(tmp_path / "web")], "none": ["--no-html"]}[html]
    assert leaderboard.main(["--results-dir", str(results), "--no-figures", *args]) == 0
    out, err = capsys.readouterr()
    assert err.splitlines() == [
        f"warning: skipped {tmp_path}/r\\xffs/{part}/r\\xffs.json: file name: not UTF-8 (no output "
        "can print it); rename the file" for part in ("runs", "efficiency")]
    assert "r\\xffs" in out and "**40.00 (1)**" in (results / "LEADERBOARD.md").read_text()
    if html == "elsewhere":
        page = (tmp_path / "web" / "index.html").read_text()
        assert 'href="../r%FFs/leaderboard.csv"' in page and '"results":"../r%FFs/"' in page


def _page_data(page):
    return json.loads(re.search(r'<script id="data" type="application/json">(.*?)</script>', page,
                                flags=re.S)[1])


def _js_uri_component(text):
    """JavaScript's encodeURIComponent (site.js ``enc``)."""
    return urllib.parse.quote(text, safe="-_.!~*'()")


def test_every_link_of_the_page_resolves_in_a_folder_named_with_url_specials(tmp_path):
    """Fails on main 69b79f7: a results folder "r#1?a=%41" gave `../r#1?a=%41/runs/...` links, the
    rest of the path read as a fragment or a query: every run-file and CSV link was dead."""
    results = tmp_path / "r#1?a=%41 b"
    _write(results, "odd #?%", run_record("listops", "softmax", "small", 0, 0.4, 0.4))
    (results / "efficiency").mkdir()
    (results / "efficiency" / "bench%20#1.json").write_text(json.dumps(bench_record()))
    web = tmp_path / "web"
    assert leaderboard.main(["--results-dir", str(results), "--no-figures", "--html", str(web)]) == 0
    page = (web / "index.html").read_text()
    hrefs = re.findall(r'href="([^"#][^"]*)"', page)
    data = _page_data(page)
    [run] = [s for v in data["views"] for t in v["seeds"].values() for r in t.values() for s in r]
    hrefs += [data["results"] + "runs/" + _js_uri_component(run["file"]),  # as site.js builds them
              data["results"] + "efficiency/" + _js_uri_component(data["efficiency"][0]["file"])]
    assert len(hrefs) == 4
    for href in hrefs:
        url = urllib.parse.urlsplit(href)
        assert not url.query and not url.fragment, href
        assert (web / urllib.parse.unquote(url.path)).is_file(), href


def test_a_lone_surrogate_in_a_files_text_is_skipped_with_one_line(tmp_path, capsys):
    """Fails on main 69b79f7: "\\udcff" (a JSON escape that is no character) in a family name
    crashed every writer with UnicodeEncodeError."""
    results = tmp_path / "results"
    _write(results, "good", run_record("listops", "softmax", "small", 0, 0.4, 0.4))
    _write(results, "odd", run_record("listops", "fam\udcff", "small", 0, 0.3, 0.3))
    assert leaderboard.main(["--results-dir", str(results), "--no-figures", "--no-html"]) == 0
    assert capsys.readouterr().err.splitlines() == [
        f"warning: skipped {results}/runs/odd.json: attention: \"fam\\udcff\" holds a lone "
        "surrogate (a \\u escape that is no character)"]


# ----------------------------------------------------------------------------------------------
# --screenshot-size: refused at once, before any browser waits.


@pytest.mark.parametrize("size", ["0x0", "1280x0", "-1280x800", "99999x800", "1280x99999",
                                  "1280", "1280x800x2", "axb", ""])
def test_a_bad_screenshot_size_is_refused_at_once(tmp_path, capsys, size):
    """Fails on main 69b79f7 for 0x0 and the absurd sizes: accepted, then the command waited 120 s
    for chromium and blamed the browser."""
    results = tmp_path / "results"
    _write(results, "good", run_record("listops", "softmax", "small", 0, 0.4, 0.4))
    with pytest.raises(SystemExit) as stop:
        leaderboard.main(["--results-dir", str(results), "--screenshot", str(tmp_path / "x.png"),
                          f"--screenshot-size={size}"])
    assert stop.value.code == 2
    [*_, last] = capsys.readouterr().err.splitlines()
    assert last.startswith("python -m lra.leaderboard: error: argument --screenshot-size: "), last
    assert not (results / "LEADERBOARD.md").exists()  # refused before anything ran


# ----------------------------------------------------------------------------------------------
# LaTeX: any name compiles with pdflatex.

UNICODE_NAMES = ["αβ-attn", "Δελτα", "模型", "Łódź ș ğ|<x>", "naïve ﬁ µ", "emoji😀", "ϝ"]


def test_a_name_in_any_script_compiles_with_pdflatex(tmp_path):
    """Fails on main 69b79f7: "αβ-attn" went into leaderboard.tex as it was, and pdflatex stopped
    at it ("Unicode character α (U+03B1) not set up for use with LaTeX")."""
    results = tmp_path / "results"
    for i, family in enumerate(UNICODE_NAMES):
        _write(results, f"f{i}", run_record("listops", family, "small", 0, 0.3 + i / 100, 0.3))
    over = run_record("listops", "softmax", "small", 0, 0.2, 0.2)
    over["config"]["model"]["pooling"] = "均值"
    _write(results, "over", _v2(over, {"model.pooling": "均值"}))
    out = build_all(results, [])
    for key in ("tex", "tex_published"):  # a character only where \lraunicode may print it
        bare = re.sub(r"\\lraunicode\{[0-9A-F]+\}\{.\}", "", out[key])
        assert bare.isascii(), [ln for ln in bare.splitlines() if not ln.isascii()]
    tex = out["tex"]
    assert r"\ensuremath{\alpha}\ensuremath{\beta}-attn" in tex and r"\L{}" not in tex
    assert r"\lraunicode{6A21}" in tex and tex.count(r"\providecommand\lraunicode") == 1
    assert r"{\L}\'{o}d\'{z} \c{s} \u{g}\textbar{}\textless{}x\textgreater{}" in tex
    assert out["tex_published"].count(r"\providecommand\lraunicode") == 1
    if shutil.which("pdflatex") is None:
        pytest.skip("pdflatex is not installed (Debian: texlive-latex-recommended)")
    (results / "leaderboard.tex").write_text(tex)
    (results / "paper.tex").write_text("\\documentclass{article}\\usepackage{booktabs}"
                                       "\\begin{document}\\input{leaderboard.tex}\\end{document}\n")
    run = subprocess.run(["pdflatex", "-interaction=nonstopmode", "-halt-on-error", "paper.tex"],
                         cwd=results, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout[-3000:]
    assert "Missing character" not in (results / "paper.log").read_text(errors="replace")


def test_a_dollar_in_a_name_draws_as_text_in_the_figures(tmp_path):
    """Fails on main 69b79f7: matplotlib read the family "a$\\foo$" as a formula and the whole
    build stopped (ParseFatalException: Unknown symbol: \\foo)."""
    results = tmp_path / "results"
    rec = run_record("listops", "a$\\foo$", "small", 0, 0.4, 0.4)
    rec["eval_history"] = {"step": [50, 100], "val_accuracy": [0.3, 0.4], "val_loss": [1.0, 0.9]}
    _write(results, "run", rec)
    figures = build_all(results, [])["figures"]
    assert figures["curves-listops-small.png"].startswith(b"\x89PNG")


@pytest.mark.parametrize("memory", [0, 5e-324])
def test_a_zero_memory_or_time_in_a_bench_file_draws(tmp_path, memory):
    """Fails on main 69b79f7: a bench file's memory.bytes 0 (accepted: >= 0) divided the bubble
    chart by zero, 5e-324 took log10(0) (ZeroDivisionError, ValueError: the whole build stopped);
    a zero step time fitted a slope through log(0)."""
    results = tmp_path / "results"
    for family in ("softmax", "linear"):
        _write(results, family, run_record("text", family, "small", 0, 0.6, 0.6))
    bench = bench_record()
    for r in bench["results"]:
        if r["status"] == "ok":
            r["memory"]["bytes"] = memory
            if r["attention"] == "linear" and r["length"] == 512:
                r["step_time_s"]["median"] = 0
    (results / "efficiency").mkdir()
    (results / "efficiency" / "bench.json").write_text(json.dumps(bench))
    skipped = []
    out = build_all(results, skipped)
    assert skipped == []
    drawn = {name: out["figures"][name] for name in out["figures"] if name.endswith(".png")}
    assert any("bubble" in name for name in drawn) and all(b.startswith(b"\x89PNG")
                                                           for b in drawn.values())
    assert " nan " not in out["markdown"]  # the time slope over the positive points
