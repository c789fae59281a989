"""Names of any characters and numbers of any size (issue 52): a result file made elsewhere may name
its family, override or file with a Markdown or LaTeX special, a non-Latin letter or a byte that is
not UTF-8, and may hold an integer no float can hold. Every output keeps its columns, every link
resolves, the LaTeX compiles, and what cannot be read is skipped with the one line."""

import json
import re

import pytest
from helpers import run_record

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
