"""The tuned table: the grid points ``lra.sweep --select`` chose on validation, one row per (task,
family), from the selection files (``<results-dir>/selections/*.json``, ``lra.selection.write``)
and the result files they name, read through the one reader.

A selection names its chosen runs by file; each must be a valid run of the results folder (the
reader's), else the selection is skipped with one line, like any file the leaderboard cannot use.
The table is its own: rows are ``family [key=value, ...]``, ranked among the tuned rows only, never
mixed with the preset's cells (a tuned row is a run with overrides, which the preset's tables keep
in their own unranked rows too).
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

from lra.leaderboard import reader
from lra.leaderboard.accuracy import at_chance
from lra.leaderboard.cells import CELL_LEGEND, cell_objects, md_table
from lra.leaderboard.load import ResultFileError, device_label, protocol, skip_line, task_columns
from lra.selection import FORMAT, SELECTIONS_DIR


def _check(record: Any, valid: dict[str, dict[str, Any]]) -> None:
    if not isinstance(record, dict):
        raise ResultFileError(f"expected a JSON object, got {type(record).__name__}")
    if record.get("format") != FORMAT:
        raise ResultFileError(f"format: {record.get('format')!r}, expected {FORMAT!r}")
    for key in ("task", "attention", "preset", "protocol"):
        if not isinstance(record.get(key), str) or not record[key]:
            raise ResultFileError(f"{key}: expected a non-empty string")
    chosen = record.get("chosen")
    if not isinstance(chosen, dict) or not isinstance(chosen.get("values"), dict):
        raise ResultFileError("chosen.values: expected an object")
    files = chosen.get("files")
    if not isinstance(files, list) or not files:
        raise ResultFileError("chosen.files: expected a non-empty list of result file names")
    for i, name in enumerate(files):
        run = valid.get(name) if isinstance(name, str) else None
        if run is None:
            raise ResultFileError(f"chosen.files[{i}]: {name!r} is not a valid result file of "
                                  f"runs/ here")
        if (run["task"], run["attention"], run["preset"], protocol(run)) != (
                record["task"], record["attention"], record["preset"], record["protocol"]):
            raise ResultFileError(f"chosen.files[{i}]: {name} is a run of another task, family, "
                                  f"preset or protocol")


def load(results_dir: Path, result_set: reader.ResultSet,
         skipped: list[str] | None = None) -> list[dict[str, Any]]:
    """The valid selections of ``results_dir``, each with ``_runs`` (its chosen runs) and
    ``_file``; a bad one is described in ``skipped`` (an error if it is None)."""
    valid = {r["_file"]: r for r in result_set.valid}
    out = []
    folder = Path(results_dir) / SELECTIONS_DIR
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            try:
                record = json.loads(path.read_bytes().decode("utf-8"))
            except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
                raise ResultFileError(f"unreadable ({type(err).__name__}: {err})") from None
            _check(record, valid)
        except ResultFileError as err:
            if skipped is None:
                raise ResultFileError(f"{path}: not a valid selection file ({err})") from None
            skipped.append(skip_line(path, err))
            continue
        out.append({**record, "_file": path.name,
                    "_runs": [valid[name] for name in record["chosen"]["files"]]})
    return out


def _row(selection: dict[str, Any]) -> str:
    values = ", ".join(f"{k}={v}" for k, v in selection["chosen"]["values"].items())
    return f"{selection['attention']} [{values}]"


def section(selections: list[dict[str, Any]], headline: dict[str, str],
            collect: list[dict[str, Any]] | None = None) -> list[str]:
    """The Markdown section (empty without selections): one table per (protocol, preset, device)
    of the chosen runs' headline test accuracy. Each cell also goes to ``collect`` (for LaTeX)."""
    if not selections:
        return []
    groups: dict[tuple[str, str, str], list[tuple[str, dict[str, Any]]]] = defaultdict(list)
    for s in selections:
        for run in s["_runs"]:
            groups[(s["protocol"], s["preset"], device_label(run))].append((_row(s), run))
    lines = ["## Tuned on validation", "",
             "Each row: the grid point `lra.sweep --grid ... --select` chose for its task and family "
             "on validation (the best mean validation accuracy over seeds; test read only for the "
             "chosen point), from `selections/`. Ranked among the tuned rows only; never mixed with "
             "the preset's cells above.", ""]
    for (proto, preset, device), rows in sorted(groups.items()):
        metric = headline[proto]
        values: dict[tuple[str, str], list[float]] = defaultdict(list)
        chance: dict[tuple[str, str], int] = defaultdict(int)
        for row, run in rows:
            if run["metrics"].get(metric) is not None:
                values[(row, run["task"])].append(run["metrics"][metric])
                chance[(row, run["task"])] += bool(at_chance(run, metric))
        names = sorted({row for row, _ in rows})
        columns = [t for t in task_columns([run for _, run in rows])
                   if any((n, t) in values for n in names)]
        cells = cell_objects(values, names, columns, at_chance=chance)
        family = {row: run["attention"] for row, run in rows}
        if collect is not None:
            collect += [{"protocol": proto, "preset": preset, "device": device, "metric": metric,
                         "task": t, "row": n, "family": family[n], "overrides": "tuned",
                         "cell": cells[(n, t)]}
                        for n in names for t in columns if cells[(n, t)].stats is not None]
        lines += [f"### Tuned: {proto} protocol, preset `{preset}` on {device}", "",
                  f"Test accuracy ({metric.replace('_', ' ')}, %). {CELL_LEGEND}", ""]
        lines += md_table(["attention [chosen values]", *columns],
                          [[n, *(cells[(n, t)].text() for t in columns)] for n in names]) + [""]
    return lines
