"""The leaderboard's figures for a paper (lra/leaderboard/figures.py): TrueType fonts in the PDFs,
both widths, distinct series, labels and titles that do not collide, on the committed results."""

import itertools

import matplotlib
import pytest
from helpers import REPO
from matplotlib.text import Text

from lra.leaderboard import curves, efficiency, figures, names
from lra.leaderboard.load import (
    bench_device_label,
    load_efficiency,
    load_runs,
    newest_per_seed,
    protocol,
)

RESULTS = REPO / "results"


def _committed_runs():
    runs, _ = newest_per_seed(load_runs(RESULTS, []))
    return [r for r in runs if protocol(r) == "lra" and not r.get("_diff")]


def _committed_bubbles():
    """(key, at, preset, tasks, points) of the latest bench file of each setting in results/."""
    runs = _committed_runs()
    latest = {}
    for rec in sorted(load_efficiency(RESULTS, []), key=lambda r: (r["date"], r["_file"])):
        latest[(bench_device_label(rec), rec["task"], rec["batch"], rec["dtype"])] = rec
    out = []
    for key, rec in sorted(latest.items()):
        lengths = sorted({r["length"] for r in rec["results"]})
        ok = {(r["attention"], r["length"]): r for r in rec["results"] if r["status"] == "ok"}
        bubble = efficiency.bubble_points(
            ok, runs, efficiency.family_order({r["attention"] for r in rec["results"]}), lengths)
        if bubble is not None and bubble[3]:
            out.append((key, *bubble))
    return out


def _drawn(draw, width):
    """``draw(width)`` under the figures' rc settings, with its renderer (a draw lays it out)."""
    with matplotlib.rc_context({**figures.RC, "font.size": figures.font_size(width)}):
        fig = draw(width)
        fig.canvas.draw()
        return fig, fig.canvas.get_renderer()


def _boxes_overlap(a, b):
    return a.x0 < b.x1 and b.x0 < a.x1 and a.y0 < b.y1 and b.y0 < a.y1


def test_every_pdf_embeds_truetype_fonts_and_both_widths_are_written():
    """Fails on a05bdf0 (Type 3 fonts, one 8.5 in figure)."""
    points = [{"name": "softmax", "x": 1.0, "y": 36.0, "memory": 2**30},
              {"name": "cosformer", "x": 3.0, "y": 35.0, "memory": 2**28}]
    drawn = figures.bubble_chart(points, title="t", xlabel="x", ylabel="y")
    assert sorted(drawn) == ["-onecolumn.pdf", "-onecolumn.svg", ".pdf", ".png", ".svg"]
    for suffix in (".pdf", "-onecolumn.pdf"):
        pdf = drawn[suffix]
        assert pdf.startswith(b"%PDF") and b"/Type3" not in pdf and b"/FontType 3" not in pdf
        assert b"/FontFile2" in pdf  # an embedded TrueType program
    # the page is the width asked for (points), at both sizes
    for suffix, width in ((".pdf", figures.FULL_WIDTH), ("-onecolumn.pdf", figures.COLUMN_WIDTH)):
        box = drawn[suffix].split(b"/MediaBox [", 1)[1].split(b"]", 1)[0].split()
        assert float(box[2]) == pytest.approx(72 * width)
    assert drawn == figures.bubble_chart(points, title="t", xlabel="x", ylabel="y")


def test_a_pdf_writes_six_decimals_so_the_host_s_last_bit_never_reaches_the_bytes():
    """The same result files drew a y-label at 282.3143107812 pt on one host and 282.3143107813 pt
    on another (matplotlib prints ten decimals), and a committed PDF changed. Every real number in a
    PDF's streams has at most figures.PDF_DECIMALS decimals; matplotlib's writer is restored after.
    Fails on 1ef2ba0 (ten decimals)."""
    import re
    import zlib

    from matplotlib.backends import backend_pdf

    writer = backend_pdf.pdfRepr
    points = [{"name": "softmax", "x": 1.0 / 3.0, "y": 36.123456789, "memory": 2**30},
              {"name": "cosformer", "x": 3.0, "y": 35.0, "memory": 2**28}]
    pdf = figures.bubble_chart(points, title="t", xlabel="x", ylabel="y")[".pdf"]
    assert backend_pdf.pdfRepr is writer
    streams = [zlib.decompress(m) for m in re.findall(rb"stream\r?\n(.*?)\r?\nendstream", pdf, re.S)]
    decimals = [len(d) for text in [pdf, *streams] for d in re.findall(rb"(?<![\w.])-?\d+\.(\d+)", text)]
    assert decimals and max(decimals) <= figures.PDF_DECIMALS


def test_thirty_series_get_thirty_colour_and_marker_pairs_and_keep_them():
    fams = sorted(names.declared("attention")) + [f"extra{i}" for i in range(5)]
    assert len(fams) >= 30
    st = figures.style(fams)
    pairs = {(tuple(s["color"]) if not isinstance(s["color"], str) else s["color"], s["marker"])
             for s in st.values()}
    assert len(pairs) == len(fams)
    assert figures.style(["softmax", "linear"])["linear"] == st["linear"]  # the same in every figure


@pytest.mark.slow
def test_bubble_labels_do_not_overlap_on_the_committed_results():
    """Fails on a05bdf0 (labels beside each bubble overlapped: softmax, sparse, longformer, ...)."""
    bubbles = _committed_bubbles()
    assert bubbles, "results/ has no bubble chart"
    for key, at, preset, tasks, points in bubbles:
        for width in (figures.FULL_WIDTH, figures.COLUMN_WIDTH):
            labels_of = efficiency.bubble_labels(key, at, preset, tasks)
            fig, renderer = _drawn(
                lambda w, pts=points, lab=labels_of: figures.bubble_figure(pts, width=w, **lab),
                width)
            (ax,) = fig.axes
            labels = [t for t in ax.texts if t.get_gid() == figures.LABEL_GID]
            assert sorted(t.get_text() for t in labels) == sorted(
                names.family_name(p["name"]) for p in points)
            # the text's own box (an annotation's box would include its leader line)
            boxes = [Text.get_window_extent(t, renderer) for t in labels]
            frame = ax.get_window_extent(renderer)
            for (a, ta), (b, tb) in itertools.combinations(zip(boxes, labels), 2):
                assert not _boxes_overlap(a, b), (key, width, ta.get_text(), tb.get_text())
            for box, t in zip(boxes, labels):
                assert frame.x0 <= box.x0 and box.x1 <= frame.x1 + 1, (key, width, t.get_text())
                assert frame.y0 <= box.y0 and box.y1 <= frame.y1 + 1, (key, width, t.get_text())


def _committed_panels(task="listops"):
    runs = [r for r in _committed_runs() if r["task"] == task and r.get("eval_history")]
    by_family = {}
    for r in runs:
        by_family.setdefault(r["attention"], []).append(r["eval_history"])
    return [{**curves.family_band(name, hist), "title": names.family_name(name)}
            for name, hist in sorted(by_family.items())]


@pytest.mark.slow
def test_titles_do_not_overlap_in_the_learning_curves_on_the_committed_results():
    """Fails on a05bdf0 (the suptitle ran over two panel titles)."""
    panels = _committed_panels()
    assert len(panels) >= 20
    chance = curves.chance_lines(["listops"], "val_accuracy")
    for width in (figures.FULL_WIDTH, figures.COLUMN_WIDTH):
        fig, renderer = _drawn(lambda w: figures.family_figure(
            panels, chance=chance, width=w, ylabel="validation accuracy (%)",
            title="Validation accuracy during training: ListOps, preset small"), width)
        titled = [ax for ax in fig.axes if ax.get_visible()]
        titles = [ax.title.get_window_extent(renderer) for ax in titled]
        # one column draws no title (issue 54: the paper's caption says it) and fits a page
        assert (fig._suptitle is None) == (width == figures.COLUMN_WIDTH)
        assert fig.get_figheight() <= figures.MAX_HEIGHT
        if fig._suptitle is not None:
            sup = fig._suptitle.get_window_extent(renderer)
            assert fig.bbox.x0 <= sup.x0 and sup.x1 <= fig.bbox.x1 and sup.y1 <= fig.bbox.y1
            for box in titles:
                assert not _boxes_overlap(sup, box), width
        for a, b in itertools.combinations(titles, 2):
            assert not _boxes_overlap(a, b), width
        for ax, box in zip(titled, titles):  # a title clears every other panel
            for other in titled:
                if other is not ax:
                    assert not _boxes_overlap(box, other.get_window_extent(renderer)), width
        # accuracy in percent, like the tables
        _, high = titled[0].get_ylim()
        assert high > 5


def test_scaling_chart_has_one_legend_in_paper_names():
    series = {"softmax": [(512, 0.1, 2**28), (1024, 0.4, 2**30)],
              "cosformer": [(512, 0.05, 2**27), (1024, 0.1, 2**28)]}
    fig, renderer = _drawn(lambda w: figures.scaling_figure(series, title="t", width=w),
                           figures.COLUMN_WIDTH)
    (legend,) = fig.legends
    assert [t.get_text() for t in legend.get_texts()] == ["Transformer (2.00, 2.00)",
                                                          "cosFormer (1.00, 1.00)"]
    sup = fig._suptitle.get_window_extent(renderer)
    for ax in fig.axes:
        assert not _boxes_overlap(sup, ax.get_tightbbox(renderer))


# --- The reference figures are a function of the result files and the pinned versions ---------


def test_constraints_pin_the_versions_that_drew_the_reference_figures():
    """constraints.txt (README's install uses it) pins every drawing library, at the versions
    results/figures/drawn-with.txt says drew the committed figures (and ml_dtypes, for the speed
    of every process's ``import jax``: nothing else)."""
    pinned = figures.pins((REPO / "constraints.txt").read_text())
    drew = figures.pins((RESULTS / "figures" / figures.DRAWN_WITH).read_text())
    assert set(pinned) == {*figures.DRAWING_LIBRARIES, "ml_dtypes"}
    assert {k: v for k, v in pinned.items() if k in figures.DRAWING_LIBRARIES} == drew


def test_the_reference_figures_regenerate_byte_for_byte_with_the_pinned_versions():
    """With the pinned versions installed, every committed figure file is rewritten with the same
    bytes (a few drawings of each kind here: all 40 take half a minute). Other versions may write
    other bytes: then this skips, saying which."""
    from lra.leaderboard.build import build_all

    installed = figures.pins(figures.drawn_with())
    pinned = {k: v for k, v in figures.pins((REPO / "constraints.txt").read_text()).items()
              if k in figures.DRAWING_LIBRARIES}
    if installed != pinned:
        pytest.skip(f"drawing libraries {installed} are not the pinned {pinned} (constraints.txt)")
    figs = build_all(RESULTS)["figures"]
    committed = {p.name for p in (RESULTS / "figures").iterdir()} - {figures.DRAWN_WITH}
    assert set(figs) == committed
    stems = sorted({name.split(".")[0].removesuffix("-onecolumn") for name in figs})
    chosen = [s for s in stems if s.startswith("curves-")][:1] + [
        s for s in stems if s.endswith("-bubble")][:1]
    assert len(chosen) == 2
    for name in sorted(figs):
        if name.split(".")[0].removesuffix("-onecolumn") in chosen:
            assert figs[name] == (RESULTS / "figures" / name).read_bytes(), name


def test_the_leaderboard_records_the_versions_and_says_when_they_changed(tmp_path):
    """figures/drawn-with.txt is written with the figures; a build with other versions than the
    figures there before says so (their bytes may differ for that alone)."""
    from lra.leaderboard.build import _record_versions

    assert _record_versions(tmp_path) == ""  # nothing before: nothing to compare
    assert (tmp_path / figures.DRAWN_WITH).read_text() == figures.drawn_with()
    assert _record_versions(tmp_path) == ""  # same versions
    (tmp_path / figures.DRAWN_WITH).write_text("matplotlib==0.1\nfonttools==0.2\n")
    said = _record_versions(tmp_path)
    assert "matplotlib 0.1 -> " in said and "fonttools 0.2 -> " in said and "constraints.txt" in said
    assert figures.pins((tmp_path / figures.DRAWN_WITH).read_text()) == figures.pins(
        figures.drawn_with())
