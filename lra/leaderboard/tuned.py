"""The tuned table: the grid points ``lra.sweep --select`` chose on validation, one row per (task,
family), from the selection files (``<results-dir>/selections/*.json``, ``lra.selection.write``)
and the result files they name, read through the one reader.

A selection is trusted no further than it is checked. It names the runs behind every grid point by
file; each must be a valid run of the results folder and the current run of its seed (the one
reader's newest-per-seed rule): a file deleted or superseded since (a re-run, ``--force``) makes the
selection stale, since its choice was made on other numbers. The chosen runs must hold the chosen
values in their configs, each seed once, all one grid point (one row of the reader: one config, one
data). Otherwise the selection is skipped with one line, like any file the leaderboard cannot use.
The table is its own: rows are ``family [key=value, ...]``, ranked among the tuned rows only, never
mixed with the preset's cells (a tuned row is a run with overrides, which the preset's tables keep
in their own unranked rows too).
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

from lra import config as lra_config
from lra.leaderboard import budget, identity, reader
from lra.leaderboard.accuracy import at_chance
from lra.leaderboard.cells import CELL_LEGEND, cell_objects, md_table, md_text
from lra.leaderboard.load import ResultFileError, device_label, protocol, skip_line, task_columns
from lra.selection import FORMAT, SELECTIONS_DIR


class _Runs:
    """The runs a selection may name: the valid files of the folder and, per cell and seed, its
    current run (the one reader's newest-per-seed rule)."""

    def __init__(self, result_set: reader.ResultSet):
        self.valid = {r["_file"]: r for r in result_set.valid}
        self.current = {(r["_cell"], r["seed"]): r["_file"] for r in result_set.runs}

    def current_run(self, where: str, name: Any) -> dict[str, Any]:
        """The valid, current run ``name``; else ResultFileError (``where`` names the field)."""
        run = self.valid.get(name) if isinstance(name, str) else None
        if run is None:
            raise ResultFileError(f"{where}: {name!r} is not a valid result file of runs/ here "
                                  f"(stale: {CHOOSE_AGAIN})")
        newer = self.current[(run["_cell"], run["seed"])]
        if newer != name:
            raise ResultFileError(f"{where}: {name} is superseded by a newer run of its seed, "
                                  f"{newer} (stale: {CHOOSE_AGAIN})")
        return run


CHOOSE_AGAIN = "choose again with lra.sweep --grid ... --select"


def _check_header(record: Any) -> None:
    if not isinstance(record, dict):
        raise ResultFileError(f"expected a JSON object, got {type(record).__name__}")
    if record.get("format") != FORMAT:
        raise ResultFileError(f"format: {record.get('format')!r}, expected {FORMAT!r}")
    for key in ("task", "attention", "preset", "protocol"):
        if not isinstance(record.get(key), str) or not record[key]:
            raise ResultFileError(f"{key}: expected a non-empty string")
    chosen = record.get("chosen")
    if not isinstance(chosen, dict) or not isinstance(chosen.get("values"), dict) \
            or not chosen["values"]:
        raise ResultFileError("chosen.values: expected a non-empty object")
    files = chosen.get("files")
    if not isinstance(files, list) or not files:
        raise ResultFileError("chosen.files: expected a non-empty list of result file names")
    if not isinstance(record.get("overrides", {}), dict):
        raise ResultFileError("overrides: expected an object of config keys and values")
    candidates = record.get("candidates", [])
    if not isinstance(candidates, list) or not all(
            isinstance(c, dict) and isinstance(c.get("files"), list) for c in candidates):
        raise ResultFileError("candidates: expected a list of objects with a list of files")


def _check_chosen_run(where: str, run: dict[str, Any], record: dict[str, Any]) -> None:
    """The run is of the selection's task, family, preset and protocol, at the chosen values and
    the selection's overrides."""
    name = run["_file"]
    if (run["task"], run["attention"], run["preset"], protocol(run)) != (
            record["task"], record["attention"], record["preset"], record["protocol"]):
        raise ResultFileError(f"{where}: {name} is a run of another task, family, preset or "
                              f"protocol")
    cfg = lra_config.flatten(lra_config.with_protocol(run["config"]))
    for whose, values in (("the chosen", record["chosen"]["values"]),
                          ("the selection's", record.get("overrides", {}))):
        for key, value in values.items():
            if key not in cfg or not identity.same(cfg[key], value):
                has = f"{key}={cfg[key]}" if key in cfg else f"no {key}"
                raise ResultFileError(f"{where}: {name} has {has}, not {whose} {key}={value}")


def _check_one_point(runs: list[dict[str, Any]]) -> None:
    """Each seed once, and every run one grid point (one row: the same config, the same data)."""
    seeds: dict[int, str] = {}
    for run in runs:
        if run["seed"] in seeds:
            raise ResultFileError(f"chosen.files: seed {run['seed']} is listed twice "
                                  f"({seeds[run['seed']]}, {run['_file']})")
        seeds[run["seed"]] = run["_file"]
    rows = sorted({run["_row"] for run in runs})
    if len(rows) > 1:
        raise ResultFileError(f"chosen.files: runs of {len(rows)} grid points, never one mean "
                              f"({'; '.join(rows)})")


def _check(record: Any, runs: _Runs) -> list[dict[str, Any]]:
    """The chosen runs of a selection file, once it is checked: every file it names (chosen and
    every candidate) a valid current run of this folder, the chosen ones of its task, family,
    preset and protocol at the chosen values, each seed once, all one grid point. Else
    ResultFileError naming the field."""
    _check_header(record)
    chosen = []
    for i, name in enumerate(record["chosen"]["files"]):
        where = f"chosen.files[{i}]"
        chosen.append(runs.current_run(where, name))
        _check_chosen_run(where, chosen[-1], record)
    _check_one_point(chosen)
    for j, candidate in enumerate(record.get("candidates", [])):
        for k, name in enumerate(candidate["files"]):
            runs.current_run(f"candidates[{j}].files[{k}]", name)
    return chosen


def load(results_dir: Path, result_set: reader.ResultSet,
         skipped: list[str] | None = None) -> list[dict[str, Any]]:
    """The valid selections of ``results_dir``, each with ``_runs`` (its chosen runs) and
    ``_file``; a bad or stale one is described in ``skipped`` (an error if it is None)."""
    runs = _Runs(result_set)
    out = []
    folder = Path(results_dir) / SELECTIONS_DIR
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            try:
                record = json.loads(path.read_bytes().decode("utf-8"))
            # ValueError: not UTF-8, not JSON, or an integer of over 4300 digits; RecursionError:
            # nested too deep (as the reader's _read_json)
            except (OSError, ValueError, RecursionError) as err:
                raise ResultFileError(f"unreadable ({type(err).__name__}: {err})") from None
            chosen = _check(record, runs)
        except ResultFileError as err:
            if skipped is None:
                raise ResultFileError(f"{path}: not a valid selection file ({err})") from None
            skipped.append(skip_line(path, err))
            continue
        out.append({**record, "_file": path.name, "_runs": chosen})
    return out


def _row(selection: dict[str, Any]) -> str:
    """``family [chosen values]``, and ``; overrides`` inside the brackets where it has any."""
    values = ", ".join(f"{k}={v}" for k, v in selection["chosen"]["values"].items())
    fixed = ", ".join(f"{k}={v}" for k, v in sorted(selection.get("overrides", {}).items()))
    return f"{selection['attention']} [{values}{'; ' + fixed if fixed else ''}]"


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
        as_rows = [{**run, "_row": row} for row, run in rows]
        spent, per_task = budget.budget(as_rows), budget.budgets(as_rows)
        kit = budget.hardware([run for _, run in rows])
        if collect is not None:
            collect += [{"protocol": proto, "preset": preset, "device": device, "metric": metric,
                         "budget": spent, "hardware": kit,
                         "task_budget": per_task[t],
                         "task": t, "row": n, "family": family[n], "overrides": "tuned",
                         "cell": cells[(n, t)]}
                        for n in names for t in columns if cells[(n, t)].stats is not None]
        lines += [f"### Tuned: {proto} protocol, preset `{preset}` on {device}", "",
                  f"Test accuracy ({metric.replace('_', ' ')}, %). {CELL_LEGEND}", "",
                  f"Budget: {md_text(spent)}. Hardware: {md_text(kit)}.", ""]
        lines += md_table(["attention [chosen values]", *columns],
                          [[n, *(cells[(n, t)].text() for t in columns)] for n in names]) + [""]
    return lines
