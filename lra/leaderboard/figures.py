"""The leaderboard's figures, ready for a paper: LRA's bubble chart, log-log scaling curves, learning
curves (one line per run, or per family with a band over seeds).

Each figure is drawn twice, at a paper's two widths (``SIZES``): full width (6.9 in, ``<stem>.png``,
``.svg`` and ``.pdf``; the PNG is the one LEADERBOARD.md shows) and one column (3.3 in,
``<stem>-onecolumn.svg`` and ``.pdf``). PDFs embed their fonts as TrueType (``pdf.fonttype`` 42; no
Type 3 fonts, which some publishers refuse). Families and tasks carry the names their papers use
(``lra.leaderboard.names``), accuracy axes are in percent like the tables, every family has its own
colour and marker combination (``style``), bubble labels are placed where they overlap no other
label (with a leader line when moved away from their bubble) and titles are wrapped to the figure.

The bytes are a function of the inputs and of the drawing libraries' versions alone: an Agg canvas
on a fresh ``Figure`` (no pyplot state), fixed sizes and dpi, no software, version or date metadata
(``FORMATS``), and a fixed ``svg.hashsalt`` for the ids matplotlib would otherwise randomise. The
versions do matter: fontTools subsets the fonts a PDF embeds, and 4.69.1 writes other bytes than
4.68.0 for the same figure. Every folder of figures therefore holds ``drawn-with.txt``
(``DRAWN_WITH``), the versions of ``DRAWING_LIBRARIES`` that drew it, in pip's constraint format;
the repository's ``constraints.txt`` pins the ones the reference set was drawn with.
"""

from __future__ import annotations

import contextlib
import io
import math
import textwrap
from collections.abc import Callable, Mapping, Sequence
from importlib import metadata

import matplotlib
import matplotlib.ticker
import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from lra.bench.efficiency import loglog_slope
from lra.leaderboard import names

DPI = 100
RC = {"svg.hashsalt": "lra", "font.family": "DejaVu Sans", "axes.grid": True, "grid.alpha": 0.3,
      "path.simplify": False, "pdf.fonttype": 42, "ps.fonttype": 42, "axes.titlesize": "medium",
      "legend.frameon": False,
      # every text is plain: a name from a result file like "a$\foo$" is no formula (its
      # mathtext error stopped the whole build)
      "text.parse_math": False}
FULL_WIDTH, COLUMN_WIDTH = 6.9, 3.3  # inches: a two-column paper's text width, and one column
# The tallest figure (inches): with a caption it fits a page of IEEEtran's two-column conference
# layout (text height 9.5 in) and article's.
MAX_HEIGHT = 6.5
# (file-name suffix, width in inches, formats): the full-width PNG is LEADERBOARD.md's.
SIZES = (("", FULL_WIDTH, ("png", "svg", "pdf")), ("-onecolumn", COLUMN_WIDTH, ("svg", "pdf")))
# Ten colours and eleven markers: (i mod 10, i mod 11) differ for any two of the first 110 series.
COLOURS = tuple(matplotlib.colormaps["tab10"].colors)
MARKERS = "osD^v<>phX*"
LABEL_GID = "bubble-label"  # the bubble chart's family labels (tests read their boxes)


def font_size(width: float) -> float:
    """The base font size (points) at a figure width (inches): 8 at full width, 7 in one column."""
    return 8.0 if width >= 5 else 7.0


def style(families: Sequence[str]) -> dict[str, dict]:
    """A fixed colour and marker per family (softmax: black circles), the same in every figure: the
    families of this tree in one fixed order, then any other name, alphabetically; colour i mod 10
    and marker i mod 11, so no two of the first 110 share both."""
    known = sorted(set(names.declared("attention")) - {"softmax"})
    order = known + sorted(set(families) - set(known) - {"softmax"})
    out = {name: {"color": COLOURS[i % len(COLOURS)], "marker": MARKERS[i % len(MARKERS)]}
           for i, name in enumerate(order) if name in families}
    if "softmax" in families:
        out["softmax"] = {"color": "black", "marker": "o"}
    return out


# The distributions whose versions change a figure's bytes (the module docstring), and the file under
# figures/ that names the versions which drew them.
DRAWING_LIBRARIES = ("matplotlib", "fonttools", "pillow", "numpy")
DRAWN_WITH = "drawn-with.txt"


def drawn_with() -> str:
    """The installed versions of ``DRAWING_LIBRARIES``, one ``name==version`` line each (a file pip
    accepts as constraints: ``pip install -c figures/drawn-with.txt ...``)."""
    return "".join(f"{name}=={metadata.version(name)}\n" for name in DRAWING_LIBRARIES)


def pins(text: str) -> dict[str, str]:
    """{distribution: version} of the ``name==version`` lines of a constraints text (comments and
    blank lines ignored; names compared lower-case)."""
    out = {}
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if "==" in line:
            name, version = line.split("==", 1)
            out[name.strip().lower()] = version.strip()
    return out


# Per format, the metadata that would carry a date or a version: left out, so the bytes are stable.
FORMATS = {"png": {"Software": None},
           "svg": {"Date": None, "Creator": None, "Format": None, "Type": None},
           "pdf": {"CreationDate": None, "ModDate": None, "Creator": None, "Producer": None}}


# Every file a figure makes: its file-name suffix with the format (".png", "-onecolumn.pdf", ...).
SUFFIXES = tuple(f"{suffix}.{fmt}" for suffix, _, formats in SIZES for fmt in formats)


class Drawing(Mapping[str, bytes]):
    """{file-name suffix with format (``SUFFIXES``): bytes} of ``draw(width)`` at each of ``SIZES``,
    drawn the first time one of its files is read (every size and format at once) and kept. Most of
    the leaderboard's build time is matplotlib's: a caller that wants only the tables, the CSV or
    the page (a test, the LaTeX for a paper) never draws a figure."""

    def __init__(self, draw: Callable[[float], Figure]):
        self._draw = draw
        self._files: dict[str, bytes] | None = None

    def __getitem__(self, suffix: str) -> bytes:
        if suffix not in SUFFIXES:
            raise KeyError(suffix)
        if self._files is None:
            self._files = _draw_all(self._draw)
        return self._files[suffix]

    def __iter__(self):
        return iter(SUFFIXES)

    def __len__(self) -> int:
        return len(SUFFIXES)


class Figures(Mapping[str, bytes]):
    """{file name under ``figures/``: bytes} of several ``Drawing``s, each still drawn only when
    one of its files is read."""

    def __init__(self) -> None:
        self._files: dict[str, tuple[Drawing, str]] = {}

    def add(self, stem: str, drawing: Drawing) -> None:
        """The files of ``drawing`` as ``<stem><suffix>``."""
        self._files.update({f"{stem}{suffix}": (drawing, suffix) for suffix in drawing})

    def update(self, other: Figures) -> None:
        self._files.update(other._files)

    def __getitem__(self, name: str) -> bytes:
        drawing, suffix = self._files[name]
        return drawing[suffix]

    def __iter__(self):
        return iter(self._files)

    def __len__(self) -> int:
        return len(self._files)


def _draw_all(draw: Callable[[float], Figure]) -> dict[str, bytes]:
    """{file-name suffix with format (".png", "-onecolumn.pdf", ...): bytes} of ``draw(width)`` at
    each of ``SIZES``, drawn now: each size once, saved in each of its formats."""
    out = {}
    for suffix, width, formats in SIZES:
        with matplotlib.rc_context({**RC, "font.size": font_size(width)}):
            fig = draw(width)
            out.update({f"{suffix}.{fmt}": _bytes(fig, fmt) for fmt in formats})
    return out


SERIF = "DejaVu Serif"  # ``serif=True``: to match a paper's body text (matplotlib ships it)


def save(draw: Callable[[float], Figure], fmt: str, width: float = FULL_WIDTH, *,
         serif: bool = False) -> bytes:
    """The bytes of ``draw(width)`` in format ``fmt`` ("png", "svg" or "pdf"); ``serif``: in
    ``SERIF`` instead of DejaVu Sans."""
    with matplotlib.rc_context({**RC, "font.size": font_size(width),
                                **({"font.family": SERIF} if serif else {})}):
        return _bytes(draw(width), fmt)


def _bytes(fig: Figure, fmt: str) -> bytes:
    buf = io.BytesIO()
    with _pdf_numbers_at(PDF_DECIMALS) if fmt == "pdf" else contextlib.nullcontext():
        fig.savefig(buf, format=fmt, dpi=DPI, metadata=FORMATS[fmt])
    return buf.getvalue()


# Decimals of every real number a PDF writes. matplotlib's PDF backend prints ten, so the last digit
# of a layout coordinate carries the host's floating-point arithmetic: the same result files and
# library versions drew a y-label at 282.3143107812 pt on an Intel Xeon and 282.3143107813 pt on an
# AMD EPYC (2026-12-07), and the committed PDF changed. Six decimals (a millionth of a point, as the
# SVG backend writes) is far below anything a reader or printer resolves.
PDF_DECIMALS = 6


@contextlib.contextmanager
def _pdf_numbers_at(decimals: int):
    """matplotlib's PDF writer (``backend_pdf.pdfRepr``, the one place it turns a real number into
    PDF syntax) printing ``decimals`` decimals while the block runs; restored after it."""
    from matplotlib.backends import backend_pdf

    original = backend_pdf.pdfRepr

    def rounded(obj):
        if isinstance(obj, (float, np.floating)) and math.isfinite(obj):
            text = b"%.*f" % (decimals, obj)
            text = text.rstrip(b"0").rstrip(b".")
            return b"0" if text == b"-0" else text
        return original(obj)

    backend_pdf.pdfRepr = rounded
    try:
        yield
    finally:
        backend_pdf.pdfRepr = original


def new_figure(width: float, height: float, *, constrained: bool = False) -> Figure:
    fig = Figure(figsize=(width, height), dpi=DPI, layout="constrained" if constrained else None)
    FigureCanvasAgg(fig)
    return fig


def wrap(text: str, width_in: float, size: float) -> str:
    """``text`` broken into lines that fit ``width_in`` inches at ``size`` points (DejaVu Sans's
    average character is about 0.58 em)."""
    return textwrap.fill(text, max(12, int(width_in * 72 / (0.58 * size))), break_on_hyphens=False)


def percent_axis(ax) -> None:
    ax.yaxis.set_major_formatter(matplotlib.ticker.FormatStrFormatter("%g"))


# ----------------------------------------------------------------------------------------------
# The bubble chart.


def bubble_chart(points: Sequence[Mapping], *, title: str, xlabel: str, ylabel: str) -> Drawing:
    """LRA's Figure 3 at both widths ({suffix: bytes}; see ``bubble_figure``)."""
    return Drawing(lambda width: bubble_figure(points, title=title, xlabel=xlabel, ylabel=ylabel,
                                               width=width))


def bubble_figure(points: Sequence[Mapping], *, title: str, xlabel: str, ylabel: str,
                  width: float = FULL_WIDTH) -> Figure:
    """LRA's Figure 3: x speed vs softmax, y accuracy (%), bubble area proportional to memory.

    points: [{"name", "x", "y", "memory"}] (name: a family id; memory in bytes). Each bubble is
    labelled with its family's paper name where the label overlaps no other label and, where it
    can, no bubble (``place_labels``); a legend under the axes gives the area of a few memory sizes.
    """
    size = font_size(width)
    fig = new_figure(width, width * (0.62 if width >= 5 else 0.95))
    ax = fig.add_subplot()
    colours = style([p["name"] for p in points])
    biggest = max(p["memory"] for p in points)
    # points^2 per byte; a file may record zero bytes (or a fraction of one): no area then
    scale = 1100.0 * (width / FULL_WIDTH) ** 2 / biggest if biggest >= 1 else 0.0
    for p in sorted(points, key=lambda p: (-p["memory"], p["name"])):  # small ones on top
        ax.scatter([p["x"]], [p["y"]], s=scale * p["memory"], color=colours[p["name"]]["color"],
                   alpha=0.45, edgecolors="black", linewidths=0.5, zorder=2)
    for gib in _reference_sizes(biggest):
        ax.scatter([], [], s=scale * gib * 2**30, color="grey", alpha=0.3, edgecolors="black",
                   linewidths=0.5, label=f"{gib:g} GiB")
    ax.legend(title="peak memory", fontsize=size - 1, title_fontsize=size - 1, loc="upper center",
              bbox_to_anchor=(0.5, -0.13 if width >= 5 else -0.22), ncol=3, columnspacing=2.5,
              borderpad=0.8)
    ax.axvline(1.0, color="grey", lw=0.8, ls="--", zorder=1)
    xs, ys = [p["x"] for p in points], [p["y"] for p in points]
    pad_x = max(0.12 * (max(xs) - min(xs)), 0.2)
    pad_y = max(0.12 * (max(ys) - min(ys)), 1.0)
    ax.set_xlim(min(xs) - pad_x, max(xs) + 2 * pad_x)
    ax.set_ylim(min(ys) - 2 * pad_y, max(ys) + 2 * pad_y)
    percent_axis(ax)
    ax.set_xlabel(wrap(xlabel, width * 0.8, size))
    ax.set_ylabel(wrap(ylabel, width * (0.5 if width >= 5 else 0.75), size))
    ax.set_title(wrap(title, width * 0.9, size), fontsize=size)
    fig.tight_layout(pad=0.3)  # once, before the labels: their offsets are fixed in points
    place_labels(fig, ax, [(names.family_name(p["name"]), p["x"], p["y"],
                            math.sqrt(scale * p["memory"]) / 2) for p in points],
                 fontsize=size - 1)
    return fig


def _reference_sizes(biggest: float) -> list[float]:
    """Two or three round GiB sizes at or below ``biggest`` bytes for the bubble legend."""
    top = biggest / 2**30
    if biggest < 1:  # zero bytes recorded (or a fraction of one): no bubble has an area
        return []
    exp = math.floor(math.log10(top))
    sizes = [m * 10.0**e for e in (exp - 1, exp) for m in (1, 2, 5) if m * 10.0**e <= top]
    return sizes[-3:]


# A label over a bubble costs as much as moving it this many rings (5 points each) further out.
_BUBBLE_COST = 3
# Directions tried around a bubble, in order of preference (degrees, counter-clockwise from right).
_ANGLES = (0, 180, 90, 270, 30, 150, 330, 210, 60, 120, 300, 240)


def _overlaps(a: tuple, b: tuple, pad: float = 0.0) -> bool:
    return a[0] < b[2] + pad and b[0] < a[2] + pad and a[1] < b[3] + pad and b[1] < a[3] + pad


def _hits_circle(box: tuple, cx: float, cy: float, r: float) -> bool:
    nx, ny = min(max(cx, box[0]), box[2]), min(max(cy, box[1]), box[3])
    return (nx - cx) ** 2 + (ny - cy) ** 2 < r * r


def place_labels(fig: Figure, ax, items: Sequence[tuple[str, float, float, float]], *,
                 fontsize: float) -> None:
    """Label each (text, x, y, bubble radius in points) where its box overlaps no label placed
    before it and stays inside the axes, as near its bubble as it can while covering few bubbles
    (each covered bubble weighs ``_BUBBLE_COST`` rings): beside the bubble first, then further out
    along the same directions, joined to its bubble by a leader line.
    The most crowded bubbles are labelled first; ties by text, so the result is deterministic."""
    renderer = fig.canvas.get_renderer()
    px = fig.dpi / 72.0  # pixels per point
    frame = ax.get_window_extent(renderer)
    inside = (frame.x0 + 1, frame.y0 + 1, frame.x1 - 1, frame.y1 - 1)
    centres = [tuple(ax.transData.transform((x, y))) for _, x, y, _ in items]
    radii = [r * px for *_, r in items]
    extents = []
    for text, *_ in items:
        probe = ax.text(0, 0, text, fontsize=fontsize)
        box = probe.get_window_extent(renderer)
        probe.remove()
        extents.append((box.width + 2, box.height + 1))
    reach = max(w for w, _ in extents)

    def crowd(i: int) -> int:
        return sum(math.dist(centres[i], c) < reach for c in centres)

    placed: list[tuple] = []
    for i in sorted(range(len(items)), key=lambda i: (-crowd(i), items[i][0])):
        text, x, y, _ = items[i]
        (cx, cy), (w, h) = centres[i], extents[i]
        best = None
        for ring in range(40):
            gap = (2 + 5 * ring) * px
            for k, angle in enumerate(_ANGLES):
                c, s = math.cos(math.radians(angle)), math.sin(math.radians(angle))
                ax_, ay_ = cx + (radii[i] + gap) * c, cy + (radii[i] + gap) * s
                hx = 0.0 if c > 0.3 else 1.0 if c < -0.3 else 0.5  # the anchor's place in the box
                hy = 0.0 if s > 0.3 else 1.0 if s < -0.3 else 0.5
                box = (ax_ - hx * w, ay_ - hy * h, ax_ - hx * w + w, ay_ - hy * h + h)
                if box[0] < inside[0] or box[2] > inside[2] or box[1] < inside[1] \
                        or box[3] > inside[3]:
                    continue
                if any(_overlaps(box, other, 1.5 * px) for other in placed):
                    continue
                hits = sum(_hits_circle(box, *centres[j], radii[j]) for j in range(len(items)))
                score = (_BUBBLE_COST * hits + ring, k)
                if best is None or score < best[0]:
                    best = (score, box, (ax_, ay_), (hx, hy), ring)
            if best is not None and best[0][0] <= ring:
                break  # no ring further out can do better
        if best is None:  # nowhere free inside the axes: beside the bubble, as before
            best = ((0, 0), (cx, cy - h / 2, cx + w, cy + h / 2), (cx + radii[i], cy),
                    (0.0, 0.5), 0)
        _, box, (ax_, ay_), (hx, hy), ring = best
        placed.append(box)
        offset = ((ax_ - cx) / px, (ay_ - cy) / px)
        leader = None if ring == 0 else {
            "arrowstyle": "-", "color": "0.35", "lw": 0.5, "shrinkA": 0.5,
            "shrinkB": items[i][3], "relpos": (hx, hy)}
        ax.annotate(text, (x, y), xytext=offset, textcoords="offset points",
                    ha={0.0: "left", 1.0: "right"}.get(hx, "center"),
                    va={0.0: "bottom", 1.0: "top"}.get(hy, "center"), fontsize=fontsize,
                    zorder=3, arrowprops=leader, gid=LABEL_GID)


# ----------------------------------------------------------------------------------------------
# Scaling curves.


def scaling_curves(series: Mapping[str, Sequence[tuple[int, float, float]]], *,
                   title: str) -> Drawing:
    """Time per step and memory against length at both widths ({suffix: bytes}; see
    ``scaling_figure``)."""
    return Drawing(lambda width: scaling_figure(series, title=title, width=width))


def scaling_figure(series: Mapping[str, Sequence[tuple[int, float, float]]], *, title: str,
                   width: float = FULL_WIDTH) -> Figure:
    """Time per step and memory against length, log-log, one line per family (side by side at full
    width, stacked in one column); one legend under both with each family's two fitted slopes.

    series: {family id: [(length, seconds per step, memory bytes), ...]}.
    """
    size = font_size(width)
    full = width >= 5
    ncol = 3 if full else 2
    rows = math.ceil(len(series) / ncol)
    panel = 2.5 if full else 2.0
    fig = new_figure(width, (panel if full else 2 * panel) + 0.45 + 0.15 * rows, constrained=True)
    axes = fig.subplots(1, 2) if full else fig.subplots(2, 1, sharex=True)
    colours = style(list(series))
    order = sorted(series, key=lambda n: (n != "softmax", names.family_name(n).lower()))
    slopes: dict[str, list[float | None]] = {n: [] for n in order}
    for ax, index, label in ((axes[0], 1, "seconds per training step"),
                             (axes[1], 2, "peak memory (GiB)")):
        for name in order:
            pts = sorted(series[name])
            xs = [p[0] for p in pts]
            ys = [p[index] / (2**30 if index == 2 else 1) for p in pts]
            slopes[name].append(positive_slope(xs, ys))
            st = colours[name]
            ax.plot(xs, ys, marker=st["marker"], color=st["color"], ms=3.5 if full else 3,
                    lw=1.8 if name == "softmax" else 1.0, label=names.family_name(name))
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        lengths = sorted({p[0] for pts in series.values() for p in pts})
        ax.set_xticks(lengths, [str(n) for n in lengths])
        ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
        ax.yaxis.set_major_locator(matplotlib.ticker.LogLocator(subs=(1.0, 2.0, 5.0)))
        ax.yaxis.set_major_formatter(matplotlib.ticker.FormatStrFormatter("%g"))
        ax.yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        if full or index == 2:
            ax.set_xlabel("sequence length (log)")
        ax.set_ylabel(f"{label} (log)")
    handles, labels = axes[0].get_legend_handles_labels()
    text = [f"{lab} ({_slope(slopes[n][0])}, {_slope(slopes[n][1])})" for lab, n in zip(labels, order)]
    fig.legend(handles, text, loc="outside lower center", ncol=ncol, fontsize=size - 1.5,
               title="family (slope of time, of memory)", title_fontsize=size - 1,
               handlelength=1.6, columnspacing=1.0)
    fig.suptitle(wrap(title, width * 0.95, size), fontsize=size)
    return fig


def positive_slope(xs: Sequence[float], ys: Sequence[float]) -> float | None:
    """``loglog_slope`` over the points a logarithm takes (a file may record a zero time or
    memory); None below two such points."""
    kept = [(x, y) for x, y in zip(xs, ys) if x > 0 and y > 0]
    return loglog_slope([x for x, _ in kept], [y for _, y in kept])


def _slope(k: float | None) -> str:
    return "—" if k is None else f"{k:.2f}"


# ----------------------------------------------------------------------------------------------
# Learning curves.


LINESTYLES = ("-", "--", ":", "-.")


def learning_curves(series: Sequence[Mapping], *, chance: Sequence[tuple[float, str]],
                    title: str | None, ylabel: str, width: float = FULL_WIDTH,
                    percent: bool = False) -> Figure:
    """A metric against training step, one line per run; dashed grey lines at chance.

    series: [{"label", "family", "steps", "values"}], drawn in the given order, coloured by family
    (as in the other figures) with a new line style for each further run of the same family.
    chance: [(level, label)] horizontal reference lines (e.g. 1/classes for accuracy). ``percent``:
    values and levels are fractions, drawn as percent. ``title`` None: none (a paper's caption
    says it). Markers are hollow and each earlier series' a little larger, so that a curve drawn
    exactly over another (two runs that scored the same) leaves the other's rings visible.
    """
    size = font_size(width)
    full = width >= 5
    ncol = 3 if full else 2
    rows = math.ceil(len(series) / ncol)
    fig = new_figure(width, (3.0 if full else 2.4) + 0.45 + 0.15 * rows, constrained=True)
    ax = fig.add_subplot()
    scale = 100.0 if percent else 1.0
    colours = style([s["family"] for s in series])
    seen: dict[str, int] = {}
    for i, s in enumerate(series):
        n = seen[s["family"]] = seen.get(s["family"], -1) + 1
        st = colours[s["family"]]
        ax.plot(s["steps"], [scale * v for v in s["values"]], color=st["color"],
                marker=st["marker"], mfc="none", mew=0.8,
                ms=min(3.0 + 1.2 * (len(series) - 1 - i), 8.0), ls=LINESTYLES[n % len(LINESTYLES)],
                lw=1.8 if s["family"] == "softmax" else 1.0, label=s["label"])
    for level, label in chance:
        ax.axhline(scale * level, color="grey", lw=0.8, ls="--", zorder=1)
        ax.annotate(label, (1.0, scale * level), xycoords=("axes fraction", "data"), xytext=(-4, 3),
                    textcoords="offset points", ha="right", va="bottom", fontsize=size - 1.5,
                    color="grey")
    if percent:
        percent_axis(ax)
    ax.set_xlabel("training step")
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(wrap(title, width * 0.9, size), fontsize=size)
    fig.legend(loc="outside lower center", ncol=ncol, fontsize=size - 1.5, handlelength=2.2,
               columnspacing=1.0)
    return fig


def slug(text: str) -> str:
    """A file-name-safe lower-case form of ``text``."""
    out = "".join(c if c.isalnum() else "-" for c in text.lower())
    while "--" in out:
        out = out.replace("--", "-")
    return out.strip("-")


def family_curves(families: Sequence[Mapping], *, chance: Sequence[tuple[float, str]], title: str,
                  ylabel: str) -> Drawing:
    """Small multiples at both widths ({suffix: bytes}; see ``family_figure``)."""
    return Drawing(lambda width: family_figure(families, chance=chance, title=title, ylabel=ylabel,
                                               width=width))


def family_figure(families: Sequence[Mapping], *, chance: Sequence[tuple[float, str]], title: str,
                  ylabel: str, width: float = FULL_WIDTH) -> Figure:
    """Small multiples: one panel per family, its mean over seeds as a line and the min-max over
    seeds as a band, every other family's mean in light grey behind it, chance dashed; values are
    fractions, drawn as percent.

    families: [{"family", "title", "n", "steps", "mean", "low", "high"}] (the panels, in the given
    order; ``title`` is the panel's title, e.g. the family's paper name).
    """
    size = font_size(width)
    full = width >= 5
    cols = min(5 if full else 3, len(families))
    if not full and math.ceil(len(families) / cols) * 0.85 * width / cols + 0.6 > MAX_HEIGHT:
        cols = min(4, len(families))  # a long column of panels: one more panel a row
    rows = math.ceil(len(families) / cols)
    panel_w = width / cols
    # at most MAX_HEIGHT: the panels flatten rather than the figure outgrow a page
    fig = new_figure(width, min(0.85 * panel_w * rows + 0.6, MAX_HEIGHT), constrained=True)
    axes = fig.subplots(rows, cols, sharex=True, sharey=True, squeeze=False)
    title_size = size - 1

    def pct(values):
        return [100.0 * v for v in values]

    for i, ax in enumerate(axes.flat):
        if i >= len(families):
            ax.set_visible(False)
            continue
        f = families[i]
        for other in families:
            if other is not f:
                ax.plot(other["steps"], pct(other["mean"]), color="0.82", lw=0.6, zorder=1)
        colour = "black" if f["family"].startswith("softmax") else "tab:blue"  # one per panel
        ax.fill_between(f["steps"], pct(f["low"]), pct(f["high"]), color=colour, alpha=0.25, lw=0,
                        zorder=2)
        ax.plot(f["steps"], pct(f["mean"]), color=colour, lw=1.2, marker="o", ms=1.8, zorder=3)
        for level, _ in chance:
            ax.axhline(100.0 * level, color="grey", lw=0.7, ls="--", zorder=1)
        label = f"{f.get('title', f['family'])} ({f['n']} seed{'s' if f['n'] != 1 else ''})"
        ax.set_title(wrap(label, panel_w * 0.95, title_size), fontsize=title_size, pad=2)
        ax.tick_params(labelsize=size - 2, pad=1.5)
        percent_axis(ax)
        if i >= len(families) - cols:
            ax.xaxis.set_tick_params(labelbottom=True)
            for tick in ax.get_xticklabels():
                tick.set_rotation(30 if width < 5 else 0)
    dashed = "dashed: " + "; ".join(label for _, label in chance) if chance else ""
    if full:
        fig.suptitle(wrap(title + (f"; {dashed}" if dashed else ""), width * 0.95, size),
                     fontsize=size)
    # One column is a paper's figure: its caption says the title (no title drawn twice, and the
    # height goes to the panels); what the dashed line is stays on the axis.
    fig.supxlabel("training step" + (f" ({dashed})" if dashed and not full else ""),
                  fontsize=size - 1)
    fig.supylabel(ylabel, fontsize=size - 1)
    return fig
