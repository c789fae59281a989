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


def test_a_bench_file_per_mqar_form_is_shown_and_no_lra_accuracy_makes_its_bubble(tmp_path):
    """The efficiency section shows the newest bench file per (device, task, batch, dtype): MQAR's
    two forms are two models, so the causal form's file and the bidirectional form's (written a
    minute later) are both shown, each named by its form. Their bubble chart would plot LRA
    accuracy against the MQAR model's speed: it is not drawn, and the page says why. Failed before
    the setting named the form: the newer file hid the other, and the bubble took ListOps' runs."""
    from tests.helpers import bench_record

    (tmp_path / "runs").mkdir()
    (tmp_path / "efficiency").mkdir()
    for seed in range(2):
        for family in ("softmax", "linear"):
            record = run_record("listops", family, "small", seed, 0.37, 0.36)
            (tmp_path / "runs" / f"{family}{seed}.json").write_text(json.dumps(record))
    for minute, form in ((1, "causal"), (2, "bidirectional")):
        rec = {**bench_record(f"2026-01-02T00:0{minute}:00Z"), "task": "mqar",
               "config": {"data": {"form": form}}}
        if form == "causal":  # one length: a scaling curve of one point is not drawn
            rec.update(lengths=[512], results=[r for r in rec["results"] if r["length"] == 512])
        (tmp_path / "efficiency" / f"mqar-{form}.json").write_text(json.dumps(rec))
    text = {**bench_record(), "config": {"data": {}}}
    (tmp_path / "efficiency" / "text.json").write_text(json.dumps(text))
    out = build_all(tmp_path, [])
    md = out["markdown"]
    for form in ("causal", "bidirectional"):
        section = _section(md, f"### `mqar ({form})` model, batch 4")
        assert f"`mqar-{form}.json`" in section and "Earlier files" not in section
        assert "Bubble chart: not drawn for the recall track's model" in section
        assert ("no curve to draw" in section) == (form == "causal")
        assert ("-scaling.png" in section) == (form != "causal")
    assert "Bubble chart: x = speed" in _section(md, "### `text` model, batch 4")
    # the web page's efficiency views, from the same records
    from lra.leaderboard import site

    records = [{**json.loads(f.read_text()), "_file": f.name} for f in (tmp_path / "efficiency").iterdir()]
    runs = [json.loads(f.read_text()) for f in (tmp_path / "runs").iterdir()]
    views = {e["title"].split(" model")[0]: e["bubble"] for e in site._efficiency(records, runs)}
    assert views.keys() == {"mqar (causal)", "mqar (bidirectional)", "text"}
    assert views["mqar (causal)"] is None and views["mqar (bidirectional)"] is None
    assert views["text"] is not None
