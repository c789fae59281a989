"""The recall track (MQAR) on the leaderboard: its own section per form, never an LRA column; its
CSV, LaTeX, figures and web-page tab (lra/leaderboard/recall.py)."""

from __future__ import annotations

import csv
import io
import json

import pytest

from lra.leaderboard import identity, recall
from lra.leaderboard.build import build_all, write
from tests.helpers import result_record, run_record


def _mqar(family, seed, acc, *, length=128, pairs=8, width=64, lr=1e-3, form="causal"):
    cfg = identity.nested(identity.preset_config("mqar", family, "small", "lra"), seed)
    cfg["data"].update(length=length, pairs=pairs, form=form)
    cfg["model"].update(emb_dim=width, qkv_dim=width, mlp_dim=width)
    cfg["train"]["lr"] = lr
    return result_record(cfg, val=acc, test=acc)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    results = tmp_path_factory.mktemp("recall")
    runs = results / "runs"
    runs.mkdir()
    records = []
    for seed in range(3):
        for width, soft, lin in ((32, 0.90, 0.10), (64, 0.99, 0.20)):
            records += [_mqar("softmax", seed, soft + 0.001 * seed, width=width),
                        _mqar("linear", seed, lin + 0.001 * seed, width=width),
                        _mqar("softmax", seed, soft - 0.1, width=width, length=64, pairs=4)]
        records += [_mqar("fnet", seed, 0.30 + 0.01 * seed, form="bidirectional"),
                    _mqar("softmax", seed, 0.95 - 0.01 * seed, form="bidirectional"),
                    # two lrs, no selection file: the better on validation is shown, said so
                    _mqar("linear", seed, 0.40, form="bidirectional", lr=1e-2),
                    _mqar("linear", seed, 0.35, form="bidirectional", lr=1e-3)]
        records.append(run_record("listops", "softmax", "small", seed, 0.37, 0.36))
    for i, r in enumerate(records):
        (runs / f"r{i:03d}.json").write_text(json.dumps(r))
    return results, build_all(results, [])


def _section(markdown: str, title: str) -> str:
    return markdown.split(title, 1)[1].split("\n### ", 1)[0].split("\n## ", 1)[0]


def test_mqar_is_its_own_section_never_an_lra_column(built):
    _, out = built
    md = out["markdown"]
    lra_part = md.split("## The recall track (MQAR)", 1)[0]
    assert "mqar" not in lra_part and "listops" in lra_part
    assert "mqar" not in out["csv"]  # the LRA CSV holds LRA's cells only
    causal = _section(md, "### Recall, causal form")
    bidir = _section(md, "### Recall, bidirectional form")
    assert "L=64 W=32" in causal and "L=128 W=64" in causal and "fnet" not in causal
    assert "fnet" in bidir and "L=64" not in bidir
    assert "**99.10 ±" in causal  # softmax best at (128, 64), ranked within the causal form only
    assert "lr 0.01*" in bidir and "lr 0.001*" not in bidir  # the better lr on validation
    assert "only as figures" in md


def test_csv_has_the_setting_and_state_columns(built):
    results, out = built
    rows = list(csv.DictReader(io.StringIO(out["csv_recall"])))
    assert {"length", "width", "form", "state_bytes", "lr", "lr_how"} <= set(rows[0])
    assert {r["form"] for r in rows} == {"causal", "bidirectional"}
    soft = {(r["length"], r["width"]): int(r["state_bytes"]) for r in rows
            if r["family"] == "softmax" and r["form"] == "causal"}
    # the KV cache grows with length; the short convolution adds (3 - 1) * width * 2 layers floats
    assert soft[("128", "64")] > soft[("64", "64")]
    cfg = _mqar("softmax", 0, 0.5)["config"]
    assert soft[("128", "64")] == recall.state_size.state_bytes("softmax", cfg, 128) + 2 * 64 * 2 * 4
    write(results, out, None, figures=False)
    assert (results / recall.CSV_FILE).read_text() == out["csv_recall"]


def test_latex_has_a_table_per_form(built):
    tex = built[1]["tex"]
    assert tex.count(r"\label{tab:recall-") == 2
    assert "causal form" in tex and "bidirectional form" in tex
    assert tex.count(r"\begin{table*}") == tex.count(r"\end{table*}")
    assert "mqar" not in tex.split("MQAR recall", 1)[0].lower()


def test_site_has_the_recall_tab(built):
    page = built[1]["site"]["index.html"].decode()
    assert 'id="page-recall"' in page and "#recall" in page
    assert "causal-width.png" in page and "causal-frontier.png" in page
    tab = page[page.index('id="page-recall"'):]
    tab = tab[:tab.index("</section>")]
    assert "<strong>Bold</strong>" in tab and "**" not in tab  # Markdown's marks rendered, not shown


def test_figures_drawn_with_labelled_axes(built):
    figs = built[1]["figures"]
    width = [n for n in figs if n.startswith("recall-") and n.endswith("causal-width.svg")]
    frontier = [n for n in figs if n.startswith("recall-") and n.endswith("causal-frontier.svg")]
    assert width and frontier
    svg = figs[frontier[0]].decode()
    assert "recurrent state (bytes, log2)" in svg and "test accuracy (%)" in svg
    assert "model width" in figs[width[0]].decode()


def test_no_recall_runs_leave_the_outputs_as_they_were(tmp_path):
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "a.json").write_text(json.dumps(run_record("listops", "softmax", "small",
                                                                    0, 0.37, 0.36)))
    out = build_all(tmp_path, [])
    assert "recall" not in out["markdown"].lower() and out["csv_recall"] == ""
    assert "page-recall" not in out["site"]["index.html"].decode()


def test_the_log2_axes_print_plain_numbers():
    """The figures draw text without mathtext, so matplotlib's log formatter printed its TeX
    source ("$\\mathdefault{2^{14}}$") under the frontier's ticks."""
    from lra.leaderboard.recall_figures import _power_of_two

    assert [_power_of_two(v) for v in (32, 64, 2**14, 3 * 2**20, 2**31)] == [
        "32", "64", "16K", "3M", "2G"]
