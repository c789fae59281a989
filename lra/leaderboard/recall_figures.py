"""The recall track's two figures per (preset, device, form), drawn when their bytes are read
(``figures.Drawing``):

* ``recall-<preset>-<device>-<form>-width``: as Zoology's Figure 2 (Arora et al., arXiv
  2312.04927): accuracy against model width, one panel per sequence length, a line per family;
* ``recall-<preset>-<device>-<form>-frontier``: as the Based paper's Figure 2 (Arora et al., arXiv
  2402.18668): accuracy against the recurrent state in bytes (log2 axis), one panel per length, a
  point per (family, width).

Each point is the mean over seeds of a shown cell (``recall.points``), its bar the 95% interval.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable

import matplotlib.ticker
from matplotlib.figure import Figure

from lra.leaderboard import figures, names
from lra.leaderboard.cells import cell_stats
from lra.leaderboard.recall import FIGURE_PREFIX, Point


def _figure(panels: int) -> Callable[[float], tuple[Figure, list]]:
    def make(width: float) -> tuple[Figure, list]:
        fig = Figure(figsize=(width, max(2.4, width * 0.42)), layout="constrained")
        axes = fig.subplots(1, panels, sharey=True, squeeze=False)[0]
        return fig, list(axes)
    return make


def _series(group: list[Point], x: Callable[[Point], float | None]) -> dict[int, dict[str, list]]:
    """{length: {row: [(x, mean, low, high), ...] sorted by x}}; points without x or value left out."""
    out: dict[int, dict[str, list]] = defaultdict(lambda: defaultdict(list))
    for p in group:
        s = cell_stats(p.values())
        if s is None or x(p) is None:
            continue
        low = s.mean if s.low is None else s.low
        high = s.mean if s.high is None else s.high
        out[p.length][p.row].append((x(p), s.mean, low, high))
    return {n: {row: sorted(v) for row, v in rows.items()} for n, rows in out.items()}


def _draw(group: list[Point], x: Callable[[Point], float | None], xlabel: str, title: str,
          *, line: bool) -> Callable[[float], Figure]:
    series = _series(group, x)
    lengths = sorted(series)
    rows = sorted({row for by_row in series.values() for row in by_row})
    style = figures.style([row.split(" ", 1)[0] for row in rows])

    def draw(width: float) -> Figure:
        fig, axes = _figure(max(len(lengths), 1))(width)
        for ax, length in zip(axes, lengths):
            for row in rows:
                pts = series[length].get(row)
                if not pts:
                    continue
                xs = [q[0] for q in pts]
                means = [q[1] for q in pts]
                err = [[q[1] - q[2] for q in pts], [q[3] - q[1] for q in pts]]
                look = style.get(row.split(" ", 1)[0], {})
                ax.errorbar(xs, means, yerr=err, label=names.family_name(row.split(" ", 1)[0])
                            + (" " + row.partition(" ")[2] if " " in row else ""),
                            color=look.get("color"), marker=look.get("marker", "o"),
                            linestyle="-" if line else "none", capsize=2, markersize=4)
            ax.set_xscale("log", base=2)
            # plain labels: the figures draw text without mathtext (figures.RC), so the log
            # formatter's "$2^{14}$" would print its TeX source
            ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(_power_of_two))
            ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
            ax.set_title(f"length {length}")
            ax.set_xlabel(xlabel)
            ax.set_ylim(-2, 102)
        axes[0].set_ylabel("test accuracy (%)")
        if rows:
            fig.legend(*axes[0].get_legend_handles_labels(), loc="outside lower center",
                       ncol=min(len(rows), 5), fontsize="small")
        fig.suptitle(title)
        return fig
    return draw


def draw_all(pts_by_section: dict[tuple[str, str, str], list[Point]]
                   ) -> tuple[figures.Figures, dict[tuple[str, str, str], tuple[str, str]]]:
    """({file name: bytes}, {(preset, device, form): (width figure, frontier figure) PNG names})."""
    figs = figures.Figures()
    files = {}
    for (preset, device, form), group in pts_by_section.items():
        stem = f"{FIGURE_PREFIX}{figures.slug(preset)}-{figures.slug(device)}-{figures.slug(form)}"
        where = f"MQAR, {form} form, preset {preset}"
        figs.add(f"{stem}-width", figures.Drawing(_draw(
            group, lambda p: p.width, "model width", f"Recall against width ({where})", line=True)))
        figs.add(f"{stem}-frontier", figures.Drawing(_draw(
            group, lambda p: p.state_bytes, "recurrent state (bytes, log2)",
            f"Recall against state size ({where})", line=False)))
        files[(preset, device, form)] = (f"figures/{stem}-width.png", f"figures/{stem}-frontier.png")
    return figs, files


def _power_of_two(value: float, _pos=None) -> str:
    """A log2 axis tick as text: 64, 2K, 16K, 4M for widths and bytes (K = 2**10, M = 2**20)."""
    if value <= 0:
        return ""
    for unit, size in (("G", 2**30), ("M", 2**20), ("K", 2**10)):
        if value >= size:
            return f"{value / size:g}{unit}"
    return f"{value:g}"
