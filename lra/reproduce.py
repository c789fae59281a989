"""Reproduce a published row: ``python -m lra.reproduce lra/softmax/listops --seeds 0,1,2``.

    python -m lra.reproduce --list                                     # every row it knows
    python -m lra.reproduce lra/softmax/listops --preset small         # minutes on a laptop CPU
    python -m lra.reproduce modern/s5/pathfinder --seeds 0-4           # S5's recipe, its budget
    python -m lra.reproduce lra/softmax/text --shard 0/2 --no-table    # half the seeds, here

A row is ``<protocol>/<family>/<task>``: one printed cell of a published table
(``lra.leaderboard.published``) and the config of this suite that runs its recipe (``ROWS``:
protocol, family, task, the ``paper`` preset as the row's budget, and any config delta). The seeds
run through ``lra.sweep`` (one ``lra.run`` per seed: resumable, a finished seed is skipped, and
``--shard`` is passed on), then one table compares what was printed with what was measured: the
measured mean ± std over seeds, its 95% Student-t interval (``lra.leaderboard.cells``), the
difference and how many seeds stayed at chance. The measured value is the protocol's headline:
test accuracy at the last step under ``lra`` (LRA's Table 1), at the best-validation step under
``modern``.

At chance: a seed whose test accuracy lies within one standard error of 1/classes, the standard
error of a model at chance on that seed's n test examples, sqrt(p (1 - p) / n) (the rule of the
trainer's at-chance notice, ``lra.metrics_log``). A mean hides such seeds; the table counts them.

Exit status: 0 table printed with every seed measured, 1 a seed failed or has no result yet (the
table shows those that have one), 2 bad command line or an unknown row, 75 stopped by SIGTERM, SIGINT
or SIGUSR2 (``lra.sweep`` passes the signal on to the running seed, which saves a checkpoint; no
table is printed; the same command goes on). This command writes no file itself.
"""

from __future__ import annotations

import argparse
import difflib
import functools
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import lra._guard  # noqa: F401  (first: one line where lra was found only in part)
from lra import stop_signals
from lra.results import RESULTS_DIR_HELP, default_results_dir

# lra.leaderboard (published numbers) loads matplotlib: imported inside the functions, after ``main``
# installed the stop-signal handler.

# Where every LRA-protocol row departs from LRA's own run (docs/families-and-protocols.md
# "Comparability with LRA's Table 1": the fixes there apply to every family and move results toward
# what the model can do).
LRA_COMMON = {  # per task (the fixes that apply to every family there)
    "listops": "the ListOps vocabulary fixed (16 ids; LRA's had an unused OOV id)",
    "text": "",
    "retrieval": "a CLS token is prepended (LRA pooled the first byte) and the head reads "
                 "[u, v, u*v, u-v] (LRA's code passed [u, v])",
    "image": "masks from true lengths (LRA masked black pixels as padding)",
    "pathfinder": "masks from true lengths (LRA masked black pixels as padding); the Transformer "
                  "of LRA's pathfinder32 config at HEAD (4 layers, d 32)",
    "pathx": "masks from true lengths (LRA masked black pixels as padding)",
}


def _declared(attr: str) -> dict[str, Any]:
    """{family: its ``attr``} for every family of this tree whose file declares it, read as text
    (lra/declared.py), so that ``--list`` imports no JAX.

    The family's facts for this command: ``lra_departure``, where its LRA-protocol rows depart from
    LRA's own run beyond ``LRA_COMMON``; ``modern_row``, the published modern row
    (lra.leaderboard.published) that its recipe reproduces (S4, Mega-chunk and Megalodon have no
    family here); ``modern_departure``, where that recipe runs differently here
    (configs/_recipes.py's docstring), with ``modern_task_departures`` before it on those tasks."""
    from lra.declared import declared

    return {family: facts[attr] for family, facts in declared("attention").items() if attr in facts}


@dataclass(frozen=True)
class Row:
    """One published cell and the config of this suite that corresponds to it."""

    name: str  # "<protocol>/<family>/<task>"
    protocol: str
    family: str  # the suite's attention family
    task: str
    printed: float | str  # percent as printed, or published.FAIL
    source: str
    overrides: tuple[str, ...] = ()  # config deltas beyond configs/<task>.py (none needed so far)
    departs: str = ""  # where this suite's config departs from the row's run
    preset: str = "paper"  # the row's own budget

    def command(self) -> str:
        sets = "".join(f" --set {o}" for o in self.overrides)
        return (f"python -m lra.run --task {self.task} --attn {self.family} --protocol "
                f"{self.protocol} --preset {self.preset}{sets}")


def _rows() -> dict[str, Row]:
    from lra.leaderboard import published

    rows: dict[str, Row] = {}
    lra_departures = _declared("lra_departure")
    for source, table in published.SOURCES:
        for family, values in table.items():
            for task, value in zip(published.TASKS, values):
                if value is None:
                    continue
                name = f"lra/{family}/{task}"
                departs = "; ".join(x for x in (lra_departures.get(family), LRA_COMMON[task]) if x)
                rows[name] = Row(name, "lra", family, task, value, source, departs=departs)
    modern_families = {label: family for family, label in _declared("modern_row").items()}
    for label, (values, _, source) in published.MODERN_PUBLISHED.items():
        family = modern_families.get(label)
        if family is None:
            continue
        for task, value in zip(published.TASKS, values):
            departs = "; ".join(x for x in (_declared("modern_task_departures").get(family, {}).get(task),
                                            _declared("modern_departure")[family]) if x)
            name = f"modern/{family}/{task}"
            rows[name] = Row(name, "modern", family, task, value, f"{label}: {source}",
                             departs=departs)
    return rows


@functools.cache
def rows() -> dict[str, Row]:
    """Every row by name (``ROWS``), built on first use."""
    return _rows()


def __getattr__(name: str) -> Any:  # ``reproduce.ROWS``: the rows, built on first use
    if name == "ROWS":
        return rows()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class UnknownRowError(ValueError):
    """A row name that is not in ``ROWS``; the message lists close matches."""


def find(name: str) -> Row:
    if name in rows():
        return rows()[name]
    close = difflib.get_close_matches(name, list(rows()), n=5, cutoff=0.6)
    hint = f"; close matches: {', '.join(close)}" if close else ""
    raise UnknownRowError(f"unknown row {name!r}{hint} (python -m lra.reproduce --list prints "
                          f"all {len(rows())})")


# ----------------------------------------------------------------------------------------------
# Measured values: the result files of the row's seeds.


def metric_keys(protocol: str) -> tuple[str, str]:
    """(metrics key, data.evaluated key) of the protocol's headline test accuracy."""
    return (("test_accuracy_at_last", "test_at_last") if protocol == "lra"
            else ("test_accuracy_at_best_val", "test_at_best_val"))


def measured_cells(configs: dict[int, dict[str, Any]], results_dir: Path):
    """The cells of the leaderboard that hold the row's seeds: {``reader.CellKey``: {seed: run}}
    for the runs (``lra.leaderboard.reader``: validated, one per seed and cell) whose config is
    ``configs[seed]`` up to what the leaderboard ignores (``identity.NON_SEMANTIC``), and the
    ``ResultSet`` (for its skipped files). Seeds run on other data or on another device land in
    their own cells, as in the leaderboard, never in one mean."""
    from lra.leaderboard import reader

    result_set = reader.read(results_dir)
    cells: dict[Any, dict[int, dict]] = {}
    for seed, config in configs.items():
        diff = reader.expected_variant(config)
        for run in result_set.runs:
            if (run["seed"] == seed and (run["task"], run["attention"], run["preset"])
                    == (config["task"], config["attention"], config["preset"])
                    and run["_cell"].protocol == config.get("protocol", "lra")
                    and diff is not None and reader.same_variant(run, diff)):
                cells.setdefault(run["_cell"], {})[seed] = run
    return dict(sorted(cells.items())), result_set


def at_chance(accuracy: float, num_classes: int, examples: int) -> bool:
    """Within one standard error of chance (1/classes) on ``examples`` test examples."""
    from lra.metrics_log import standard_error

    chance = 1.0 / num_classes
    return abs(accuracy - chance) <= standard_error(chance, examples)


def _cell_text(values: list[float]) -> str:
    from lra.leaderboard.cells import cell_stats

    s = cell_stats(values)
    return (f"{s.mean:.2f} (1)" if s.std is None
            else f"{s.mean:.2f} ± {s.std:.2f} [{s.low:.2f}, {s.high:.2f}] ({s.n})")


def _cell_rows(row: Row, cells: dict[Any, dict[int, dict]], seeds: list[int]):
    """(table rows, per-seed notes, seeds measured): one table row per cell holding a measured
    seed of the row, the printed value beside it."""
    from lra.leaderboard.accuracy import at_chance as leaderboard_at_chance
    from lra.leaderboard.cells import cell_stats

    key, _ = metric_keys(row.protocol)
    printed = row.printed if isinstance(row.printed, str) else f"{row.printed:.2f}"
    table_rows, per_seed, measured = [], [], set()
    for cell, by_seed in cells.items():
        values, chance = [], 0
        for seed in seeds:
            r = by_seed.get(seed)
            if r is None or r["metrics"].get(key) is None:
                continue
            acc = float(r["metrics"][key])
            values.append(acc)
            measured.add(seed)
            flag = leaderboard_at_chance(r, key)
            chance += bool(flag)
            per_seed.append(f"seed {seed}{'' if len(cells) == 1 else f' ({cell.row}, {cell.device})'}"
                            f": {100 * acc:.2f}{' (at chance)' if flag else ''}")
        if not values:
            continue
        s = cell_stats(values)
        diff = "—" if isinstance(row.printed, str) else f"{s.mean - row.printed:+.2f}"
        table_rows.append([printed, f"{cell.row} on {cell.device}", _cell_text(values), diff,
                           f"{chance}/{len(values)}"])
    if not table_rows:
        table_rows.append([printed, "—", "—", "—", "0/0"])
    return table_rows, per_seed, measured


def _notes(row: Row, preset: str, overrides: tuple[str, ...]) -> list[str]:
    """The notes under the table that depend on the row and the run's recipe only."""
    from lra.leaderboard import published

    lines = []
    if preset != row.preset:
        lines.append(f"not like for like: preset {preset} is not the row's budget "
                     f"({row.preset}: {row.command()}); the difference says nothing about the "
                     f"recipe")
    if overrides:
        lines.append(f"not the row's recipe: --set {' --set '.join(overrides)} on top of it")
    lines.append("at chance: test accuracy within one standard error of 1/classes, "
                 "sqrt(p (1 - p) / n) on the seed's n test examples")
    if row.departs:
        where = ('docs/families-and-protocols.md "Comparability with LRA\'s Table 1"'
                 if row.protocol == "lra" else 'docs/families-and-protocols.md "Two protocols"')
        lines.append(f"this suite's config departs from the row's: {row.departs} ({where})")
    if row.printed == published.FAIL:
        lines.append("printed FAIL: the source reports the model at chance (no accuracy printed)")
    return lines


def table(row: Row, cells: dict[Any, dict[int, dict]], seeds: list[int], preset: str,
          overrides: tuple[str, ...] = ()) -> list[str]:
    """The comparison, as Markdown lines with the notes under it: one line per leaderboard cell
    that holds the row's seeds (more than one only where seeds ran on other data or devices)."""
    from lra.leaderboard.cells import md_table

    table_rows, per_seed, measured = _cell_rows(row, cells, seeds)
    what = ("test accuracy at the last step" if row.protocol == "lra"
            else "test accuracy at the best-validation step")
    lines = [f"{row.name}: {row.source}; {what}, percent; preset {preset}, seeds "
             f"{','.join(map(str, seeds))}", ""]
    lines += md_table(["printed", "cell (the leaderboard's row, device)",
                       "measured mean ± std [95% interval] (n)", "difference", "seeds at chance"],
                      table_rows)
    lines.append("")
    if per_seed:
        lines.append("; ".join(per_seed))
    if len(table_rows) > 1:
        lines.append("the seeds lie in more than one cell (other data or another device, as the "
                     "leaderboard keeps them): never one mean")
    if len(measured) < len(seeds):
        lines.append(f"{len(seeds) - len(measured)} of {len(seeds)} seeds have no result yet "
                     f"(failed, another shard's, not run, or a file the leaderboard skips)")
    return lines + _notes(row, preset, overrides)


# ----------------------------------------------------------------------------------------------
# Command line.


def parser() -> argparse.ArgumentParser:
    from lra import config as config_lib

    p = argparse.ArgumentParser(
        prog="python -m lra.reproduce",
        description="Run a published row's recipe over seeds (through lra.sweep) and print "
                    "measured against printed.")
    p.add_argument("row", nargs="?", help="<protocol>/<family>/<task>, e.g. lra/softmax/listops "
                                          "or modern/s5/pathfinder (--list prints them all)")
    p.add_argument("--list", action="store_true", help="print every row and its config, then exit")
    p.add_argument("--seeds", default="0,1,2", help="e.g. 0,1,2 or 0-4 (default: 0,1,2)")
    p.add_argument("--preset", default="paper", choices=config_lib.PRESETS,
                   help="paper: the row's own budget (the default); small and tiny are not like "
                        "for like, and the table says so")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="passed on to every run after the row's own deltas (the table is then "
                        "not the row's recipe)")
    p.add_argument("--results-dir", type=Path, default=default_results_dir(), help=RESULTS_DIR_HELP)
    p.add_argument("--workdirs", type=Path, default=Path("workdirs"))
    p.add_argument("--data-dir", type=Path, default=None)
    p.add_argument("--shard", default=None, metavar="I/N",
                   help="run only the I-th of N slices of the seeds (lra.sweep --shard)")
    p.add_argument("--no-run", action="store_true",
                   help="run nothing: the table from the result files already there")
    return p


def main(argv: list[str] | None = None) -> int:
    # The signal raises at once: this command writes nothing, and while a seed runs lra.sweep has
    # its own handler (passing the signal on to the run, which checkpoints).
    with stop_signals.raising():
        try:
            stop_signals.test_hook("import")
            return _main(argv)
        except stop_signals.Stopped as stop:
            print(f"{stop.args[0]}: stopped; no seed was running, the seeds' checkpoints and "
                  f"results are kept; re-run the same command", file=sys.stderr)
            return stop_signals.EXIT_RESUMABLE


def _main(argv: list[str] | None) -> int:
    args = parser().parse_args(argv)
    if args.list:
        width = max(map(len, rows()))
        for row in rows().values():
            printed = row.printed if isinstance(row.printed, str) else f"{row.printed:.2f}"
            print(f"{row.name:{width}}  {printed:>6}  {row.command()}  ({row.source})")
        return 0
    from lra import config as config_lib
    from lra import sweep

    try:
        sweep.check_paths(args)  # a file given as --results-dir: one line, not "no result yet"
    except sweep.SweepPathError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    try:
        if args.row is None:
            raise UnknownRowError("name a row (e.g. lra/softmax/listops), or --list")
        row = find(args.row)
        seeds = sweep.parse_seeds(args.seeds, sweep.MAX_CELLS)
        overrides = [*row.overrides, *args.overrides]
        configs = {s: json.loads(json.dumps(config_lib.load(
            row.task, row.family, preset=args.preset, seed=s, overrides=overrides,
            protocol=row.protocol).to_dict())) for s in seeds}
    except (UnknownRowError, sweep.SweepError, config_lib.ConfigError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    stop_signals.poll()  # a signal during the imports whose raise Python dropped: stop here
    code = 0
    if not args.no_run:
        sweep_argv = ["--task", row.task, "--attn", row.family, "--seeds", args.seeds,
                      "--preset", args.preset, "--protocol", row.protocol,
                      "--results-dir", str(args.results_dir), "--workdirs", str(args.workdirs),
                      "--no-leaderboard"]
        sweep_argv += [f"--set={o}" for o in overrides]
        if args.data_dir is not None:
            sweep_argv += ["--data-dir", str(args.data_dir)]
        if args.shard is not None:
            sweep_argv += ["--shard", args.shard]
        code = sweep.main(sweep_argv)
        if code == 2:
            return 2
        if code in (stop_signals.EXIT_RESUMABLE, stop_signals.EXIT_INTERRUPTED):
            return stop_signals.EXIT_RESUMABLE  # the sweep said so in one line; no table of a part
    cells, result_set = measured_cells(configs, args.results_dir)
    result_set.warn()
    print("\n".join(table(row, cells, seeds, args.preset, tuple(args.overrides))))
    if args.shard is not None:  # the other shards' seeds are theirs to run
        return 1 if code else 0
    found = {seed for by_seed in cells.values() for seed in by_seed}
    return 1 if code or any(s not in found for s in seeds) else 0


if __name__ == "__main__":
    sys.exit(main())

