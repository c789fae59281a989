"""The published reference rows as tables (never ranked with measured rows): LRA's Table 1 and the
other papers' rows, the modern protocol's published rows, and LRA's Table 2."""

from __future__ import annotations

import statistics

from lra.leaderboard import published
from lra.leaderboard.cells import md_table
from lra.leaderboard.efficiency import family_order
from lra.leaderboard.published import TASKS


def published_efficiency_section() -> list[str]:
    lengths = published.TABLE2_LENGTHS
    rows = []
    table = published.LRA_TABLE2
    base_speed = table["softmax"][0]
    for attn in family_order(table):
        speed, mem = table[attn]
        cells = [f"{s}" + ("" if attn == "softmax" else f" ({s / b:.1f}x)")
                 for s, b in zip(speed, base_speed)]
        rows.append([attn, *cells, *(f"{m:.2f}" for m in mem), "published"])
    header = (["attention"] + [f"steps/s {n}" for n in lengths] + [f"memory GB {n}" for n in lengths]
              + ["source"])
    return (["### Published: LRA Table 2 (efficiency; byte-level Text, batch 32, 4x4 TPU v3, memory "
             "per device)", "", "Speed-ups vs softmax in brackets are computed from the printed speeds "
             "(the paper's own brackets round some differently).", ""] + md_table(header, rows) + [""])


def published_section() -> list[str]:
    lines = []
    for title, table in published.SOURCES:
        lines += [f"### Published: {title}", "",
                  "Cells and the average exactly as printed; the last column recomputes the 5-task "
                  "average from the printed cells (it differs where the source's own arithmetic "
                  "does).", ""]
        rows = []
        for attn in sorted(table):
            *vals, printed_avg = table[attn]
            cells = ["—" if v is None else (v if isinstance(v, str) else f"{v:.2f}") for v in vals]
            nums = [v for v in vals[:5] if isinstance(v, float)]
            recomputed = f"{statistics.fmean(nums):.2f}" if len(nums) == 5 else "—"
            rows.append([attn, *cells, f"{printed_avg:.2f}", "published", recomputed])
        lines += md_table(["attention", *TASKS, "avg (as printed)", "source",
                         "avg recomputed here (not published)"], rows) + [""]
    return lines


def published_modern_section() -> list[str]:
    lines = ["### Published, modern protocol", "",
             "Each model under its own published recipe (bidirectional mixers, BatchNorm, mean "
             "pooling, best-validation selection, budgets 10-100x LRA's); cells and the 6-task "
             "average as printed, the last column recomputes avg6 from the printed cells.", ""]
    rows = []
    for name, (vals, printed, source) in published.MODERN_PUBLISHED.items():
        rows.append([name, *(f"{v:.2f}" for v in vals),
                     "—" if printed is None else f"{printed:.2f}", f"published: {source}",
                     f"{statistics.fmean(vals):.2f}"])
    lines += md_table(["model", *TASKS, "avg6 (as printed)", "source",
                     "avg6 recomputed here (not published)"], rows) + [""]
    return lines

