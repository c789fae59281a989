"""One cell of a table: the statistics of its seeds, the markers (best, tied, few seeds), and the
Markdown table every section prints."""

from __future__ import annotations

import math
import re
import statistics
from collections import Counter
from dataclasses import dataclass

# Two-sided 95% Student-t quantiles t(0.975, df) for df = n - 1 = 1..30 (printed tables, 3
# decimals; scipy is not a dependency); beyond 30 the normal 1.96 (at df = 40 the exact value is
# 2.021, so intervals there are up to 3% too narrow).
T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
        2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
        2.052, 2.048, 2.045, 2.042)


CELL_LEGEND = ("Each cell: mean ± sample std over seeds [95% Student-t interval of the mean, clipped "
               "to [0, 100]] (n seeds); **bold**: the task's best mean among cells with no seed at "
               "chance; ≈: its interval overlaps the best's (tied with it: no real difference "
               "shown); †: fewer seeds than the table's usual n; k/n at chance: k of the n seeds "
               "within one standard error of chance or no better than the majority class, never bold "
               "(docs/results.md \"What a cell shows\").")


def t975(df: int) -> float:
    return T975[df - 1] if df <= len(T975) else 1.96


@dataclass(frozen=True)
class CellStats:
    """Seeds of one (family, task) cell, in percent: the interval is mean ± t * std / sqrt(n),
    clipped to the metric's range [0, 100] (``clipped`` says where it was)."""

    n: int
    mean: float
    std: float | None = None  # sample std (n - 1), where n >= 2
    low: float | None = None
    high: float | None = None
    clipped: bool = False


def cell_stats(values: list[float]) -> CellStats | None:
    """Statistics of accuracies in [0, 1], as percentages; None without values. The values are
    sorted first so that the same seeds in another file order give the same bytes."""
    if not values:
        return None
    pct = sorted(100.0 * v + 0.0 for v in values)  # + 0.0: a file's -0.0 prints as 0.00
    mean = statistics.fmean(pct)
    if len(pct) == 1:
        return CellStats(1, mean)
    std = statistics.stdev(pct)
    half = t975(len(pct) - 1) * std / math.sqrt(len(pct))
    # An accuracy lies in [0, 100]: with two seeds t(0.975, 1) = 12.7 stretches the interval far
    # past both ends, and a printed [-68.25, 110.43] is no statement about the model.
    low, high = max(mean - half, 0.0), min(mean + half, 100.0)
    return CellStats(len(pct), mean, std, low, high, clipped=(low, high) != (mean - half, mean + half))


def _cell(s: CellStats | None, *, best: bool = False, tied: bool = False, few: bool = False,
          chance: int = 0) -> str:
    if s is None:
        return "—"
    text = (f"{s.mean:.2f} (1)" if s.std is None else
            f"{s.mean:.2f} ± {s.std:.2f} [{s.low:.2f}, {s.high:.2f}] ({s.n})")
    return ((f"**{text}**" if best else text) + (" ≈" if tied else "") + (" †" if few else "")
            + (f" {chance}/{s.n} at chance" if chance else ""))


@dataclass(frozen=True)
class Cell:
    """One marked cell, as every output (Markdown, CSV, LaTeX) prints it."""

    stats: CellStats | None
    best: bool = False
    tied: bool = False
    few: bool = False
    at_chance: int = 0  # seeds at chance (docs/results.md "What a cell shows")

    def text(self) -> str:
        return _cell(self.stats, best=self.best, tied=self.tied, few=self.few, chance=self.at_chance)


def marked_cells(cells: dict[tuple[str, str], list[float]], attns: list[str],
                 task_names: list[str], *, ranked: bool = True,
                 at_chance: dict[tuple[str, str], int] | None = None) -> dict[tuple[str, str], str]:
    """The text of ``cell_objects``'s cells."""
    return {k: c.text() for k, c in cell_objects(cells, attns, task_names, ranked=ranked,
                                                 at_chance=at_chance).items()}


def cell_objects(cells: dict[tuple[str, str], list[float]], attns: list[str],
                 task_names: list[str], *, ranked: bool = True,
                 at_chance: dict[tuple[str, str], int] | None = None) -> dict[tuple[str, str], Cell]:
    """Every (attention, task) cell's text with its markers: per task the best mean in bold (every
    family with that mean: equal means are tied for best; a cell with a seed at chance is never
    best), the families whose 95% interval overlaps
    a best's marked tied (only where both have n >= 2), and
    cells with fewer seeds than the table's most common n (the larger on a tie) flagged. Unranked
    (rows of different configs): no best and no ties. ``at_chance``: seeds at chance per cell."""
    stats = {(a, t): cell_stats(cells.get((a, t), [])) for a in attns for t in task_names}
    counts = Counter(s.n for s in stats.values() if s is not None)
    usual = max(counts, key=lambda n: (counts[n], n)) if counts else 0
    out = {}
    for t in task_names:
        column = {a: stats[(a, t)] for a in attns if stats[(a, t)] is not None}
        # A cell with a seed at chance is never best: its mean says nothing it has learned.
        eligible = {a: s for a, s in column.items() if not (at_chance or {}).get((a, t), 0)}
        top_mean = max((s.mean for s in eligible.values()), default=None)
        # Equal means are equally best: every one of them is bold, none is "tied" with another.
        bests = [a for a, s in eligible.items() if s.mean == top_mean]
        for a in attns:
            s = stats[(a, t)]
            tied = (s is not None and a not in bests
                    and any(column[b].low is not None and s.low is not None
                            and s.low <= column[b].high and column[b].low <= s.high for b in bests))
            out[(a, t)] = Cell(s, best=ranked and a in bests, tied=ranked and tied,
                               few=s is not None and s.n < usual,
                               at_chance=(at_chance or {}).get((a, t), 0) if s is not None else 0)
    return out


# Markdown's escapes (docs/results.md "Names in the tables"). A name comes from a result file
# written anywhere, so it may hold anything; in a table a raw ``|`` ends its cell and moves every
# number after it one column on, and a line break ends the table.
_LINE_BREAKS = re.compile(r"\r\n|[\r\n\v\f\x1c-\x1e\x85\u2028\u2029]")
_INLINE_SPECIALS = re.compile(r"([\\`*<])")


def _one_line(text: object) -> str:
    return _LINE_BREAKS.sub(" ", str(text))


def md_text(text: object) -> str:
    """``text`` (a name, label or value read from a file) as Markdown that prints it as written:
    on one line (a line break becomes a space), a backslash, backtick, ``*`` or ``<`` escaped so
    that it starts no code, emphasis or HTML. In a table ``md_table`` escapes the ``|``."""
    return _INLINE_SPECIALS.sub(r"\\\1", _one_line(text))


def md_code(text: object) -> str:
    """``text`` (a file name, a commit) as one Markdown code span on one line: the fence is longer
    than any run of backticks inside (code spans take no backslash escapes)."""
    text = _one_line(text)
    fence = "`" * (1 + max((len(run) for run in re.findall(r"`+", text)), default=0))
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def md_cell(text: object) -> str:
    """One table cell's Markdown that stays in its column (GitHub's tables, GFM): every ``|``
    escaped as ``\\|`` (also inside a code span, as GFM reads it) and any line break left a space.
    ``md_table`` passes every cell through here; its pieces read from files went through
    ``md_text`` or ``md_code`` first."""
    return _one_line(text).replace("|", "\\|")


def md_table(header: list[str], rows: list[list[str]]) -> list[str]:
    """A Markdown table; every cell through ``md_cell``."""
    out = ["| " + " | ".join(map(md_cell, header)) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(map(md_cell, r)) + " |" for r in rows]
    return out

