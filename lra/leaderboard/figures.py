"""The leaderboard's figures, as PNG, SVG and PDF bytes ({format: bytes}): LRA's bubble chart,
log-log scaling curves, learning curves (one line per run, or per family with a band over seeds).

The bytes are a function of the inputs (and the matplotlib/FreeType versions) alone: an Agg canvas on
a fresh ``Figure`` (no pyplot state), fixed size and dpi, no software, version or date metadata
(``FORMATS``), and a fixed ``svg.hashsalt`` for the ids matplotlib would otherwise randomise.
"""

from __future__ import annotations

import io
import math
from collections.abc import Mapping, Sequence

import matplotlib
import matplotlib.ticker
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from lra.bench.efficiency import loglog_slope

DPI = 100
RC = {"svg.hashsalt": "lra", "font.family": "DejaVu Sans", "font.size": 9, "axes.grid": True,
      "grid.alpha": 0.3, "path.simplify": False}
MARKERS = "osD^v<>phX*"


def style(names: Sequence[str]) -> dict[str, dict]:
    """A fixed colour and marker per family (softmax: black), the same in every figure."""
    cmap = matplotlib.colormaps["tab20"]
    out = {}
    others = [n for n in sorted(names) if n != "softmax"]
    for i, name in enumerate(others):
        out[name] = {"color": cmap(i % 20), "marker": MARKERS[i % len(MARKERS)]}
    out["softmax"] = {"color": "black", "marker": "o"}
    return out


# Per format, the metadata that would carry a date or a version: left out, so the bytes are stable.
FORMATS = {"png": {"Software": None},
           "svg": {"Date": None, "Creator": None, "Format": None, "Type": None},
           "pdf": {"CreationDate": None, "ModDate": None, "Creator": None, "Producer": None}}


def _render(fig: Figure) -> dict[str, bytes]:
    """{format: bytes} of ``fig`` as PNG, SVG and PDF (vector figures for a paper)."""
    FigureCanvasAgg(fig)
    out = {}
    for fmt, metadata in FORMATS.items():
        buf = io.BytesIO()
        fig.savefig(buf, format=fmt, dpi=DPI, metadata=metadata)
        out[fmt] = buf.getvalue()
    return out


def bubble_chart(points: Sequence[Mapping], *, title: str, xlabel: str, ylabel: str) -> dict[str, bytes]:
    """LRA's Figure 3: x speed vs softmax, y accuracy, bubble area proportional to memory.

    points: [{"name", "x", "y", "memory"}] (memory in bytes). Each bubble is labelled beside it; a
    legend gives the area of a few reference memory sizes.
    """
    with matplotlib.rc_context(RC):
        fig = Figure(figsize=(8.5, 5.5))
        ax = fig.add_subplot()
        colours = style([p["name"] for p in points])
        biggest = max(p["memory"] for p in points)
        scale = 2000.0 / biggest  # points^2 per byte
        for p in sorted(points, key=lambda p: (-p["memory"], p["name"])):  # small ones on top
            area = scale * p["memory"]
            ax.scatter([p["x"]], [p["y"]], s=area, color=colours[p["name"]]["color"], alpha=0.4,
                       edgecolors="black", linewidths=0.6, zorder=2)
            ax.annotate(p["name"], (p["x"], p["y"]), xytext=(math.sqrt(area) / 2 + 2, 0),
                        textcoords="offset points", ha="left", va="center", fontsize=7, zorder=3)
        for gib in _reference_sizes(biggest):
            ax.scatter([], [], s=scale * gib * 2**30, color="grey", alpha=0.3, edgecolors="black",
                       linewidths=0.6, label=f"{gib:g} GiB")
        ax.legend(title="peak memory", fontsize=7, title_fontsize=7, loc="center left",
                  bbox_to_anchor=(1.01, 0.5), labelspacing=4.5, borderpad=1.5, frameon=False)
        ax.axvline(1.0, color="grey", lw=0.8, ls="--", zorder=1)
        xs, ys = [p["x"] for p in points], [p["y"] for p in points]
        pad_x = max(0.12 * (max(xs) - min(xs)), 0.2)
        pad_y = max(0.12 * (max(ys) - min(ys)), 1.0)
        ax.set_xlim(min(xs) - pad_x, max(xs) + 2 * pad_x)
        ax.set_ylim(min(ys) - 2 * pad_y, max(ys) + pad_y)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.set_title(title, fontsize=9)
        fig.tight_layout()
        return _render(fig)


def _reference_sizes(biggest: float) -> list[float]:
    """Two or three round GiB sizes at or below ``biggest`` bytes for the bubble legend."""
    top = biggest / 2**30
    exp = math.floor(math.log10(top))
    sizes = [m * 10.0**e for e in (exp - 1, exp) for m in (1, 2, 5) if m * 10.0**e <= top]
    return sizes[-3:]


def scaling_curves(series: Mapping[str, Sequence[tuple[int, float, float]]], *,
                   title: str) -> dict[str, bytes]:
    """Time per step and memory against length, log-log, one line per family, slope in the legend.

    series: {family: [(length, seconds per step, memory bytes), ...]}.
    """
    with matplotlib.rc_context(RC):
        rows = math.ceil(len(series) / 3)
        fig = Figure(figsize=(11.0, 4.6 + 0.16 * rows))
        axes = fig.subplots(1, 2)
        colours = style(list(series))
        for ax, index, label in ((axes[0], 1, "seconds per training step"),
                                 (axes[1], 2, "peak memory (GiB)")):
            for name in sorted(series, key=lambda n: (n != "softmax", n)):
                pts = sorted(series[name])
                xs = [p[0] for p in pts]
                ys = [p[index] / (2**30 if index == 2 else 1) for p in pts]
                k = loglog_slope(xs, ys)
                legend = f"{name} (slope {k:.2f})" if k is not None else name
                st = colours[name]
                ax.plot(xs, ys, marker=st["marker"], color=st["color"], ms=4,
                        lw=2.0 if name == "softmax" else 1.2, label=legend)
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            lengths = sorted({p[0] for pts in series.values() for p in pts})
            ax.set_xticks(lengths, [str(n) for n in lengths])
            ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
            ax.yaxis.set_major_locator(matplotlib.ticker.LogLocator(subs=(1.0, 2.0, 5.0)))
            ax.yaxis.set_major_formatter(matplotlib.ticker.FormatStrFormatter("%g"))
            ax.yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
            ax.set_xlabel("sequence length (log)")
            ax.set_ylabel(f"{label} (log)")
            ax.legend(fontsize=7, ncol=3, loc="upper center", bbox_to_anchor=(0.5, -0.13),
                      frameon=False)
        fig.suptitle(title, fontsize=9)
        fig.tight_layout()
        return _render(fig)


LINESTYLES = ("-", "--", ":", "-.")


def learning_curves(series: Sequence[Mapping], *, chance: Sequence[tuple[float, str]], title: str,
                    ylabel: str) -> dict[str, bytes]:
    """A metric against training step, one line per run; dashed grey lines at chance.

    series: [{"label", "family", "steps", "values"}], drawn in the given order, coloured by family
    (as in the other figures) with a new line style for each further run of the same family.
    chance: [(level, label)] horizontal reference lines (e.g. 1/classes for accuracy).
    """
    with matplotlib.rc_context(RC):
        rows = math.ceil(len(series) / 3)
        fig = Figure(figsize=(8.0, 4.6 + 0.16 * rows))
        ax = fig.add_subplot()
        colours = style([s["family"] for s in series])
        seen: dict[str, int] = {}
        for s in series:
            n = seen[s["family"]] = seen.get(s["family"], -1) + 1
            st = colours[s["family"]]
            ax.plot(s["steps"], s["values"], color=st["color"], marker=st["marker"], ms=3,
                    ls=LINESTYLES[n % len(LINESTYLES)], lw=2.0 if s["family"] == "softmax" else 1.2,
                    label=s["label"])
        for level, label in chance:
            ax.axhline(level, color="grey", lw=1.0, ls="--", zorder=1)
            ax.annotate(label, (1.0, level), xycoords=("axes fraction", "data"), xytext=(-4, 3),
                        textcoords="offset points", ha="right", va="bottom", fontsize=7, color="grey")
        ax.set_xlabel("training step")
        ax.set_ylabel(ylabel)
        ax.set_title(title, fontsize=9)
        ax.legend(fontsize=7, ncol=3, loc="upper center", bbox_to_anchor=(0.5, -0.13), frameon=False)
        fig.tight_layout()
        return _render(fig)


def slug(text: str) -> str:
    """A file-name-safe lower-case form of ``text``."""
    out = "".join(c if c.isalnum() else "-" for c in text.lower())
    while "--" in out:
        out = out.replace("--", "-")
    return out.strip("-")



def family_curves(families: Sequence[Mapping], *, chance: Sequence[tuple[float, str]], title: str,
                  ylabel: str) -> dict[str, bytes]:
    """Small multiples: one panel per family, its mean over seeds as a line and the min-max over
    seeds as a band, every other family's mean in light grey behind it, chance dashed.

    families: [{"family", "n", "steps", "mean", "low", "high"}] (the panels, in the given order).
    """
    with matplotlib.rc_context(RC):
        cols = min(4, len(families))
        rows = math.ceil(len(families) / cols)
        fig = Figure(figsize=(2.6 * cols + 0.6, 2.1 * rows + 0.7))
        axes = fig.subplots(rows, cols, sharex=True, sharey=True, squeeze=False)
        for i, ax in enumerate(axes.flat):
            if i >= len(families):
                ax.set_visible(False)
                continue
            f = families[i]
            for other in families:
                if other is not f:
                    ax.plot(other["steps"], other["mean"], color="0.82", lw=0.8, zorder=1)
            colour = "black" if f["family"].startswith("softmax") else "tab:blue"  # one per panel
            ax.fill_between(f["steps"], f["low"], f["high"], color=colour, alpha=0.25, lw=0, zorder=2)
            ax.plot(f["steps"], f["mean"], color=colour, lw=1.8, marker="o", ms=2.5, zorder=3)
            for level, _ in chance:
                ax.axhline(level, color="grey", lw=0.8, ls="--", zorder=1)
            ax.set_title(f"{f['family']} ({f['n']} seed{'s' if f['n'] != 1 else ''})", fontsize=8)
            ax.tick_params(labelsize=7)
            if i % cols == 0:
                ax.set_ylabel(ylabel, fontsize=7)
            if i >= len(families) - cols:
                ax.set_xlabel("training step", fontsize=7)
        fig.suptitle(title + ("; dashed: " + "; ".join(label for _, label in chance) if chance else ""),
                     fontsize=9)
        fig.tight_layout()
        return _render(fig)
