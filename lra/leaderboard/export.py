"""The accuracy tables for a paper, built from the same ``cells.Cell`` objects as the Markdown
tables (``accuracy.accuracy_section``'s ``collect``), so that every output agrees:

* ``leaderboard.csv``: tidy, one row per measured cell, then one per published cell (``source``
  says which paper; ``preset`` is ``published``).
* ``leaderboard.tex``: booktabs tables that compile into a one-column and a two-column ``article``
  without an overfull box. Each table is a ``table*`` (the full text width in two columns, an
  ordinary float in one), in ``\\footnotesize`` with the mean on one line and the standard deviation
  under it, names as the papers print them (``lra.leaderboard.names``), a ``\\label`` and a caption
  that says the protocol, the budget, the seeds and what every mark means. Rows of another config or
  other data get their own, unranked table.
* ``leaderboard-published.tex``: per protocol and measured table, the measured rows and, under a
  rule, the published rows of that protocol (marked, as printed): "your model next to theirs".

    \\usepackage{booktabs}   % in the preamble
    \\input{leaderboard.tex} % where the tables go
"""

from __future__ import annotations

import csv
import io
import re
import statistics
import unicodedata
from collections import Counter
from collections.abc import Callable
from typing import Any

from lra.leaderboard import bib, budget, names, published
from lra.leaderboard.accuracy import AVG_TASKS, HEADLINE, MODERN_HEADLINE_AND_SECOND
from lra.leaderboard.load import task_columns
from lra.leaderboard.published import TASKS

CSV_COLUMNS = ("protocol", "preset", "device", "metric", "task", "family", "overrides", "row", "n",
               "mean", "std", "ci_low", "ci_high", "at_chance", "best", "tied", "few_seeds",
               "ci_clipped", "family_name", "task_name", "source", "budget", "hardware")
PUBLISHED_PRESET = "published"
TABLES_DIR = "tables"  # one .tex per table (``per_table``), beside leaderboard.tex
# Published modern rows of the families this suite has (the rest keep their label as the family).
MODERN_AS_FAMILY = {"S5": "s5", "S4D-Inv": "s4d", "LRU": "lru", "Mega": "mega"}


def published_budget(protocol: str) -> str:
    return budget.LRA_PUBLISHED_BUDGET if protocol == "lra" else budget.MODERN_PUBLISHED_BUDGET


# ``lra.leaderboard --tasks/--families/--presets``: whether a (task, family, preset) is kept.
Keep = Callable[..., bool]


def _everything(**_: Any) -> bool:
    return True


def _num(x: float | None) -> str:
    return "" if x is None else f"{x:.4f}"


def _headline(protocol: str) -> str:
    return MODERN_HEADLINE_AND_SECOND[0][0] if protocol == "modern" else HEADLINE


def _published_rows(only: Keep = _everything) -> list[dict[str, Any]]:
    """Every published cell ``only`` keeps: {protocol, family, row, task, value (float or
    "FAIL"), source}."""
    out = []
    for source, table in published.SOURCES:
        for family, values in sorted(table.items()):
            out += [{"protocol": "lra", "family": family, "row": family, "task": t, "value": v,
                     "source": source} for t, v in zip(TASKS, values[:len(TASKS)]) if v is not None]
    for label, (values, _, source) in published.MODERN_PUBLISHED.items():
        family = MODERN_AS_FAMILY.get(label, label)
        out += [{"protocol": "modern", "family": family, "row": label, "task": t, "value": v,
                 "source": source} for t, v in zip(TASKS, values) if v is not None]
    return [p for p in out if only(task=p["task"], family=p["family"])]


def to_csv(cells: list[dict[str, Any]], *, only: Keep = _everything) -> str:
    """One row per measured (protocol, preset, device, metric, task, row) cell in percent, then one
    per published cell (``preset`` published, the printed value as ``mean``, ``source`` the paper).
    ``overrides`` holds the keys where the row's config is not the preset's (empty for the preset's
    row); ``ci_clipped`` is 1 where the 95% interval was clipped to [0, 100]."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(CSV_COLUMNS)
    for c in sorted(cells, key=lambda c: tuple(c[k] for k in ("protocol", "preset", "device",
                                                               "metric", "task", "row"))):
        cell = c["cell"]
        s = cell.stats
        w.writerow([c["protocol"], c["preset"], c["device"], c["metric"], c["task"], c["family"],
                    c["overrides"], c["row"], s.n, _num(s.mean), _num(s.std), _num(s.low),
                    _num(s.high), cell.at_chance, int(cell.best), int(cell.tied), int(cell.few),
                    int(s.clipped), names.family_name(c["family"]), names.task_name(c["task"]), "",
                    c.get("task_budget", ""), c.get("hardware", "")])
    for p in _published_rows(only):
        value = p["value"]
        w.writerow([p["protocol"], PUBLISHED_PRESET, "", _headline(p["protocol"]), p["task"],
                    p["family"], "", p["row"], "", "" if isinstance(value, str) else _num(value),
                    "", "", "", "", "", "", "", "", names.family_name(p["family"]),
                    names.task_name(p["task"]), p["source"] + ("" if not isinstance(value, str)
                                                                else f" (printed {value})"),
                    published_budget(p["protocol"]), ""])
    return buf.getvalue()


# ----------------------------------------------------------------------------------------------
# LaTeX.

# LaTeX's escapes (docs/results.md "Names in the tables"). The output compiles with pdflatex and
# LaTeX's default fonts, with nothing in the preamble but booktabs, whatever the names hold.
_TEX_ESCAPES = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#",
                "_": r"\_", "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}",
                "^": r"\textasciicircum{}", "[": "{[}", "]": "{]}", "|": r"\textbar{}",
                "<": r"\textless{}", ">": r"\textgreater{}",
                "±": r"$\pm$", "≈": r"$\approx$", "·": r"$\cdot$", "–": "--", "—": "---",
                "×": r"$\times$", "−": "$-$", "…": r"\ldots{}", "‘": "`", "’": "'", "“": "``",
                "”": "''", "\u00a0": "~", "°": r"$^{\circ}$", "≤": r"$\leq$", "≥": r"$\geq$",
                "→": r"$\rightarrow$", "∞": r"$\infty$", "§": r"\S{}", "¶": r"\P{}",
                "©": r"\copyright{}", "£": r"\pounds{}", "†": r"$\dagger$",
                "ß": r"{\ss}", "æ": r"{\ae}", "Æ": r"{\AE}", "œ": r"{\oe}", "Œ": r"{\OE}",
                "ø": r"{\o}", "Ø": r"{\O}", "ł": r"{\l}", "Ł": r"{\L}", "ı": r"{\i}"}
# Accents the default (OT1) fonts set over a letter, by Unicode's combining mark.
_TEX_ACCENTS = {"\u0300": "`", "\u0301": "'", "\u0302": "^", "\u0303": "~", "\u0304": "=",
                "\u0306": "u", "\u0307": ".", "\u0308": '"', "\u030a": "r", "\u030b": "H",
                "\u030c": "v", "\u0323": "d", "\u0326": "c", "\u0327": "c",
                "\u0331": "b"}  # a comma below (Romanian) set as a cedilla
# Greek letters, as mathematics: their LaTeX names (Unicode spells lambda LAMDA); a capital with a
# Latin twin is that letter.
_GREEK = {"lamda": "lambda", "epsilon": "varepsilon", "phi": "varphi", "final sigma": "varsigma",
          "omicron": "o"}
_GREEK_LETTERS = set("alpha beta gamma delta epsilon zeta eta theta iota kappa lamda mu nu xi omicron "
                     "pi rho sigma tau upsilon phi chi psi omega".split()) | {"final sigma"}
_GREEK_CAPITALS = set("Gamma Delta Theta Lambda Xi Pi Sigma Upsilon Phi Psi Omega".split())
# A character none of these cover (CJK, Cyrillic, emoji, ...) is written ``\lraunicode{4E2D}{中}``;
# the tables define it (only where one is used) to print the code point, U+4E2D; a XeLaTeX or
# LuaLaTeX document prints the character itself with \newcommand\lraunicode[2]{#2} before \input.
UNICODE_COMMAND = r"\providecommand\lraunicode[2]{\texttt{U+#1}}"


def _greek(ch: str) -> str | None:
    name = unicodedata.name(ch, "")
    for case, prefix in (("small", "GREEK SMALL LETTER "), ("capital", "GREEK CAPITAL LETTER ")):
        if name.startswith(prefix) and " WITH " not in name:
            letter = name[len(prefix):].lower()
            if letter not in _GREEK_LETTERS:  # archaic letters (digamma, ...): no LaTeX name
                return None
            letter = _GREEK.get(letter, letter)
            if len(letter) == 1:  # omicron
                return letter.upper() if case == "capital" else letter
            if case == "small":
                return rf"\ensuremath{{\{letter}}}"
            cap = letter.capitalize().removeprefix("Var").lower().capitalize()
            if cap in _GREEK_CAPITALS:
                return rf"\ensuremath{{\{cap}}}"
            return ch.translate(_LATIN_TWINS)
    return None


# Capital Greek letters drawn as Latin ones (Alpha, Beta, Epsilon, ...).
_LATIN_TWINS = str.maketrans("ΑΒΕΖΗΙΚΜΝΟΡΤΥΧ", "ABEZHIKMNOPTYX")


def _tex_char(ch: str) -> str:
    """One character as LaTeX (``tex_escape``)."""
    if ch in _TEX_ESCAPES:
        return _TEX_ESCAPES[ch]
    if ch < " " or ch == "\x7f":  # a control character; a line break would end the cell
        return " "
    if ch.isascii():
        return ch
    base, *marks = unicodedata.normalize("NFD", ch)
    greek = _greek(base)  # a Greek letter's accents (tonos) left out
    if greek is not None:
        return greek
    if marks and base.isascii() and base.isalpha() and all(m in _TEX_ACCENTS for m in marks):
        out = {"i": r"\i", "j": r"\j"}.get(base, base)  # dotless under an accent
        for mark in marks:
            out = f"\\{_TEX_ACCENTS[mark]}{{{out}}}"
        return out
    compatible = unicodedata.normalize("NFKC", ch)  # a ligature, a full-width letter, micro
    if compatible != ch:
        return tex_escape(compatible)
    return rf"\lraunicode{{{ord(ch):04X}}}{{{ch}}}"


def tex_escape(text: str) -> str:
    """``text`` (a name, label or value) as LaTeX that prints it with the default fonts: its
    specials escaped, accented Latin letters as accents, Greek letters as mathematics, anything
    else as its code point (``UNICODE_COMMAND``)."""
    return "".join(map(_tex_char, str(text)))


MARKS = {"tied": r"$^{\approx}$", "few": r"$^{\dagger}$", "chance": r"$^{\circ}$"}


def _tex_cell(cell) -> tuple[str, str]:
    """(the mean with its marks, the std line under it) of one measured cell."""
    s = cell.stats
    mean = f"{s.mean:.2f}"
    mean = (rf"\textbf{{{mean}}}" if cell.best else mean) + (MARKS["tied"] if cell.tied else "") \
        + (MARKS["few"] if cell.few else "") + (MARKS["chance"] if cell.at_chance else "")
    return mean, ("" if s.std is None else rf"{{\scriptsize $\pm${s.std:.2f}}}")


def _label(*parts: str) -> str:
    return "tab:lra-" + "-".join(re.sub(r"[^a-z0-9]+", "", p.lower()) for p in parts if p)


def _float(caption: str, label: str, columns: list[str], body: list[str], *,
           size: str = r"\footnotesize", legend: str = "") -> list[str]:
    """One float: a ``table`` where the tabular fits a column of a two-column paper
    (``fits_column``), else a ``table*`` (the full text width there; an ordinary float in one
    column). ``legend``: the line under the tabular that explains its marks."""
    header = " & ".join(columns)
    env = "table" if fits_column([header, *body]) else "table*"
    note = [rf"\par\smallskip{{\scriptsize {legend}\par}}"] if legend else []
    return [rf"\begin{{{env}}}[tbp]", r"\centering", size, r"\setlength{\tabcolsep}{3.5pt}",
            rf"\caption{{{caption}}}", rf"\label{{{label}}}",
            r"\begin{tabular}{@{}l" + "r" * (len(columns) - 1) + "@{}}", r"\toprule",
            header + r" \\", r"\midrule", *body, r"\bottomrule", r"\end{tabular}", *note,
            rf"\end{{{env}}}", ""]


# The narrowest column a float goes into: IEEEtran's two-column conference page is 252 pt wide,
# article's two-column 10pt page 229 pt. A \footnotesize character is about 4.4 pt on average
# (digits 4 pt, capitals wider), a column gap 7 pt (\tabcolsep 3.5 pt twice).
COLUMN_PT = 225.0
CHAR_PT = 4.4
GAP_PT = 7.0


def _visible(cell: str) -> int:
    """The number of characters a LaTeX cell prints, roughly (a mark counts one)."""
    text = re.sub(r"\$[^$]*\$", "x", cell)
    text = re.sub(r"\\[a-zA-Z]+\s?", "", text)
    return len(re.sub(r"[{}\\]", "", text).strip())


def fits_column(lines: list[str]) -> bool:
    """Whether a tabular of ``lines`` (its header and body rows, LaTeX) fits one column of a
    two-column paper (``COLUMN_PT``): the widest cell of each column in characters."""
    widths: list[int] = []
    for line in lines:
        if line.startswith("\\") and "&" not in line:  # a rule, a spanning note
            continue
        cells = re.sub(r"\\\\(\[[^]]*\])?\s*$", "", line).split(" & ")
        widths += [0] * (len(cells) - len(widths))
        for i, cell in enumerate(cells):
            if "multicolumn" not in cell:
                widths[i] = max(widths[i], _visible(cell))
    return sum(widths) * CHAR_PT + GAP_PT * max(len(widths) - 1, 0) <= COLUMN_PT


# A cell's std goes on the mean's line while the table is narrow enough for a one-column page; on
# a line of its own beyond that. A long table of two-line rows is set a size smaller, so that it
# fits a page (a float taller than the page prints over the footer).
ONE_LINE_COLUMNS = 4
LONG_TABLE_ROWS = 14


def _avg(values: dict[str, float]) -> str:
    means = [values[t] for t in AVG_TASKS if t in values]
    return f"{statistics.fmean(means):.2f}" if len(means) == len(AVG_TASKS) else "--"


def _row_name(row: str, family: str) -> tuple[str, str]:
    """(the family's printed name, the variant's label on the line under it, small)."""
    variant = row[len(family):].strip()
    return (tex_escape(names.family_name(family)),
            rf"{{\scriptsize {tex_escape(variant)}}}" if variant else "")


def _measured_body(table: dict[tuple[str, str], dict[str, Any]], columns: list[str],
                   avg: bool, *, std: bool = True) -> list[str]:
    body = []
    one_line = len(columns) <= ONE_LINE_COLUMNS or not std
    rows = sorted({(c["row"], c["family"]) for c in table.values()},
                  key=lambda rf: (names.family_name(rf[1]).lower(), rf[0]))
    for row, family in rows:
        first, second = _row_name(row, family)
        means, stds, values = [], [], {}
        for t in columns:
            c = table.get((row, t))
            if c is None:
                means.append("--")
                stds.append("")
                continue
            mean, spread = _tex_cell(c["cell"])
            spread = spread if std else ""
            means.append(f"{mean} {spread}".strip() if one_line else mean)
            stds.append("" if one_line else spread)
            values[t] = c["cell"].stats.mean
        tail = [_avg(values)] if avg else []
        if one_line and second:
            first = f"{first} {second}"
            second = ""
        body.append(" & ".join([first, *means, *tail]) + r" \\")
        if second or any(stds):
            body.append(" & ".join([second, *stds, *([""] if avg else [])]) + r" \\[2pt]")
    return body


def _columns(table: dict[tuple[str, str], dict[str, Any]]) -> tuple[list[str], bool]:
    """The task columns that hold a cell of ``table`` (LRA's order) and whether an Avg column is
    worth printing (some row has all five tasks LRA averages)."""
    present = {t for _, t in table}
    columns = [t for t in task_columns([{"task": t} for t in present]) if t in present]
    rows = {r for r, _ in table}
    avg = any(all((r, t) in table for t in AVG_TASKS) for r in rows)
    return columns, avg


def _where(protocol: str, preset: str, spent: str, kit: str) -> str:
    """The protocol, the preset, its budget and hardware (``lra.leaderboard.budget``)."""
    proto = (f"LRA's protocol~\\cite{{{bib.LRA_KEY}}}" if protocol == "lra"
             else "the families' published (modern) recipes")
    return (rf"{proto}, preset \texttt{{{tex_escape(preset)}}} ({tex_escape(spent)}; "
            f"{tex_escape(kit)})")


def _caption(protocol: str, preset: str, where: tuple[str, str], usual: int, variant: bool, *,
             spread: str = "under", tuned: bool = False) -> str:
    """One or two sentences: what the table measured (metric, protocol, preset, budget, hardware)
    and what a cell is; the marks are explained in the legend line under the table."""
    metric = "the best-validation step" if protocol == "modern" else "the last step"
    kind = ("tuned rows" if tuned else "rows of another config or data (not ranked)" if variant
            else "")
    return (f"Test accuracy (\\%) at {metric}, {_where(protocol, preset, *where)}"
            + (f"; {kind}" if kind else "") + f". Mean over {usual} seed{'' if usual == 1 else 's'}"
            + {"under": r", $\pm$ std under it.", "after": r" $\pm$ std.",
               "": "."}[spread if usual > 1 else ""])


MARK_WORDS = {
    "best": r"\textbf{bold}: the task's best mean among cells with no seed at chance",
    "tied": r"$^{\approx}$: 95\% interval overlaps the best's",
    "few": r"$^{\dagger}$: fewer seeds",
    "chance": r"$^{\circ}$: a seed at chance (within one standard error of 1/classes, or no "
              r"better than the majority class)",
    "avg": "Avg: the five tasks LRA averages",
}


def _legend(table: dict[tuple[str, str], dict[str, Any]], avg: bool) -> str:
    """The marks this table uses, each explained once, under it."""
    cells = [c["cell"] for c in table.values()]
    used = [key for key, present in (("best", any(c.best for c in cells)),
                                     ("tied", any(c.tied for c in cells)),
                                     ("few", any(c.few for c in cells)),
                                     ("chance", any(c.at_chance for c in cells)), ("avg", avg))
            if present]
    return "; ".join(MARK_WORDS[k] for k in used) + ("." if used else "")


def _groups(cells: list[dict[str, Any]]) -> dict[tuple, dict[tuple[str, str], dict[str, Any]]]:
    """{(protocol, preset, device, variant): {(row, task): collected cell}} of the headline."""
    groups: dict[tuple, dict[tuple[str, str], dict[str, Any]]] = {}
    for c in cells:
        if c["metric"] == _headline(c["protocol"]):
            # The preset's rows are ranked among themselves; rows of another config or other data
            # (``overrides`` set) get a table of their own, never ranked with them.
            key = (c["protocol"], c["preset"], c["device"], bool(c["overrides"]))
            groups.setdefault(key, {})[(c["row"], c["task"])] = c
    return groups


def _usual_n(table: dict[tuple[str, str], dict[str, Any]]) -> int:
    counts = Counter(c["cell"].stats.n for c in table.values())
    return max(counts, key=lambda n: (counts[n], n))


def _preamble(name: str) -> list[str]:
    return ["% Generated by `python -m lra.leaderboard` from the result files; do not edit.",
            f"% Needs \\usepackage{{booktabs}}; \\input{{{name}}} where the tables go; the "
            f"\\cite keys are in leaderboard.bib (\\bibliography{{leaderboard}}).", ""]


def _document(lines: list[str]) -> str:
    """The file's text; ``UNICODE_COMMAND`` defined after the preamble where a name needs it."""
    text = "\n".join(lines).rstrip() + "\n"
    if "\\lraunicode{" not in text:
        return text
    head, _, body = text.partition("\n\n")
    return (f"{head}\n% A character the default fonts lack: its code point (redefine \\lraunicode "
            f"as #2 for XeLaTeX or LuaLaTeX).\n{UNICODE_COMMAND}\n\n{body}")


TUNED_CAPTION = (" Each row: the grid point \\texttt{lra.sweep --select} chose on validation (values "
                 "in brackets); ranked among the tuned rows only.")


def _measured_table(key: tuple, table: dict[tuple[str, str], dict[str, Any]],
                    extra_body: list[str] = (), extra_caption: str = "",
                    all_tasks: tuple[list[str], bool] | None = None,
                    tuned: bool = False) -> list[str]:
    protocol, preset, device, variant = key
    columns, avg = _columns(table)
    if all_tasks:  # beside the published rows: their columns, and their Avg
        columns, avg = all_tasks
    # Next to the published rows (means only, as printed) a measured row is its means too.
    std = not extra_body
    body = _measured_body(table, columns, avg, std=std) + list(extra_body)
    header = ["Model", *(tex_escape(names.task_name(t)) for t in columns)] + (["Avg"] if avg else [])
    rows = len({r for r, _ in table})
    two_line = len(columns) > ONE_LINE_COLUMNS and std
    first = next(iter(table.values()))
    caption = _caption(protocol, preset, (first.get("budget", ""), first.get("hardware", device)),
                       _usual_n(table), variant, tuned=tuned,
                       spread="under" if two_line else "after" if std else "")
    return _float(caption + (TUNED_CAPTION if tuned else "") + extra_caption,
                  _label("tuned" if tuned else "beside" if extra_body else "", protocol, preset,
                         device, "variants" if variant else ""), header, body,
                  size=(r"\scriptsize" if rows > LONG_TABLE_ROWS and (two_line or extra_body)
                        else r"\footnotesize"),
                  legend=_legend(table, avg))


def to_tex(cells: list[dict[str, Any]], tuned: list[dict[str, Any]] = (), *,
           only: Keep = _everything) -> str:
    """A table per (protocol, preset, device) of the headline metric, the rows of other configs or
    data in a table of their own after it, the tuned rows (``tuned``: ``lra.leaderboard.tuned``'s
    cells) in theirs, then the published rows of each protocol."""
    lines = _preamble("leaderboard.tex")
    for key, table in sorted(_groups(cells).items()):
        lines += _measured_table(key, table)
    for (protocol, preset, device, _), table in sorted(_groups(list(tuned)).items()):
        lines += _measured_table((protocol, preset, device, False), table, tuned=True)
    for protocol in ("lra", "modern"):
        lines += _published_table(protocol, only)
    return _document(lines)


def _sources(protocol: str, only: Keep = _everything) -> dict[str, str]:
    """{source: its letter a, b, ...} of the published rows of ``protocol``, in table order."""
    rows = [p["source"] for p in _published_rows(only) if p["protocol"] == protocol]
    return {source: chr(ord("a") + i) for i, source in enumerate(dict.fromkeys(rows))}


def _sources_note(protocol: str, only: Keep = _everything) -> str:
    return "Sources: " + "; ".join(f"$^{{{letter}}}$ {tex_escape(source)}{bib.cite(source)}"
                                   for source, letter in _sources(protocol, only).items()) + "."


def _published_body(protocol: str, columns: list[str], only: Keep = _everything,
                    avg: bool = True) -> list[str]:
    """The published rows of ``protocol``, values as printed, each marked with its source's
    letter (``_sources``; the caption lists them)."""
    body: list[str] = []
    rows = [p for p in _published_rows(only) if p["protocol"] == protocol]
    letters = _sources(protocol, only)
    averages = {label: avg for label, (_, avg, _) in published.MODERN_PUBLISHED.items()}
    for _, table in published.SOURCES:
        averages.update({family: values[-1] for family, values in table.items()})
    def printed(row: str) -> str:
        return names.family_name(row) if row in names.declared("attention") else row.split(" (")[0]

    # In the order of the names printed, not of the registry ids behind them.
    for row in sorted(dict.fromkeys(p["row"] for p in rows), key=lambda r: (printed(r).lower(), r)):
        mine = [p for p in rows if p["row"] == row]
        values = {p["task"]: p["value"] for p in mine}
        name = printed(row)
        cells = ["--" if t not in values else
                 (values[t] if isinstance(values[t], str) else f"{values[t]:.2f}") for t in columns]
        average = averages.get(row)
        printed_avg = [("--" if average is None else f"{average:.2f}")] if avg else []
        body.append(" & ".join([tex_escape(name) + f"$^{{{letters[mine[0]['source']]}}}$", *cells,
                                *printed_avg]) + r" \\")
    return body


def _kept_tasks(only: Keep) -> tuple[list[str], bool]:
    """The task columns ``only`` keeps (LRA's order) and whether the printed averages stay (all
    five averaged tasks kept: an average over tasks not shown is not the row's)."""
    columns = [t for t in TASKS if only(task=t)]
    return columns, all(t in columns for t in AVG_TASKS)


def _published_table(protocol: str, only: Keep = _everything) -> list[str]:
    columns, avg = _kept_tasks(only)
    body = _published_body(protocol, columns, only, avg)
    if not body or not columns:
        return []
    caption = ("Published test accuracy (\\%), as printed (not measured here), "
               + ("LRA's protocol: the last step; FAIL: the source reports chance."
                  + (" Avg: as printed (five tasks)." if avg else "") if protocol == "lra" else
                  "the families' own recipes: most select on validation."
                  + (" Avg: as printed (six tasks)." if avg else "")
                  + " HGRN1 and HGRN2 scan the pixel grid in 2-D on Image, Pathfinder and "
                  "Path-X; the Mamba row is HGRN2's authors' re-run; LRU's Image is colour "
                  "sCIFAR.")) + " " + _sources_note(protocol, only)
    header = ["Model", *(tex_escape(names.task_name(t)) for t in columns)] + (["Avg"] if avg else [])
    return _float(caption, _label("published", protocol), header, body)


def to_tex_with_published(cells: list[dict[str, Any]], *, only: Keep = _everything) -> str:
    """Per measured table of the preset's rows: the measured rows, then under a rule the published
    rows of the same protocol, marked and as printed: a paper's "ours next to theirs" table."""
    lines = _preamble("leaderboard-published.tex")
    columns, avg = _kept_tasks(only)
    for key, table in sorted(_groups(cells).items()):
        if key[3]:  # rows of other configs or data: never next to a published row
            continue
        protocol = key[0]
        published_rows = _published_body(protocol, columns, only, avg)
        if not published_rows:
            continue
        extra = [r"\midrule",
                 rf"\multicolumn{{{len(columns) + 1 + avg}}}{{@{{}}l}}{{\textit{{Published, as "
                 r"printed (not measured here; other code, hardware and budget)}} \\",
                 r"\addlinespace", *published_rows]
        lines += _measured_table(
            key, table, extra, " Under the rule: published rows of the same protocol, as printed, "
            f"never ranked with the measured rows above, at another budget ("
            f"{tex_escape(published_budget(protocol))}). " + _sources_note(protocol, only),
            all_tasks=(columns, avg))
    return _document(lines)


def cited(*documents: str) -> list[str]:
    """The BibTeX keys the ``documents`` cite (``leaderboard.bib`` holds their entries)."""
    return sorted({key for text in documents for group in re.findall(r"\\cite\{([^}]*)\}", text)
                   for key in group.split(",")})


def per_table(document: str) -> dict[str, str]:
    """{file name: text} of each float of a generated ``.tex`` file (``to_tex``,
    ``to_tex_with_published``), one file per table, named by its ``\\label`` without ``tab:``
    (``lra-lra-small-cpux1.tex``), each with the file's header and, where it uses it, the
    ``\\lraunicode`` definition: a paper ``\\input``s the one it cites."""
    out = {}
    for block in re.findall(r"\\begin\{table\*?\}.*?\\end\{table\*?\}\n", document, re.S):
        label = re.search(r"\\label\{tab:([^}]*)\}", block)[1]
        name = f"{label}.tex"
        out[name] = _document(_preamble(f"{TABLES_DIR}/{name}") + [block])
    return out
