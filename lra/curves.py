"""Learning curves: one metric against training step for several runs on one figure.

    python -m lra.curves WORKDIR [WORKDIR ...] [--metric val_accuracy] [--out FILE.png|.svg|.pdf]
                         [--width full|column]

Each work directory's ``metrics.jsonl`` is all it reads: its first record names the run (task,
attention, preset, seed; the legend says task/family/seed) and the others give the metric, one
point per step. The task's chance level comes from the task registry (the task's number of
classes C): 1/C for accuracies and ln C, the cross-entropy of a uniform guess, for losses;
accuracies are drawn in percent. ``--out`` names the format by its suffix: ``.png``, ``.svg`` or
``.pdf`` (vector, TrueType fonts embedded); ``--width`` is a paper's full text width (6.9 in, the
default) or one column (3.3 in). The output is byte-deterministic (see ``lra.leaderboard.figures``):
the same files give the same bytes.

The leaderboard's own learning curves (from result files alone) are ``lra.leaderboard.curves``.
Exit status: 0 written, 1 a work directory without usable metrics (missing, unreadable or malformed
``metrics.jsonl``) or an ``--out`` that cannot be written (a folder, a missing folder, no
permission), each one line; 2 a bad command line.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from pathlib import Path
from typing import Any

import lra._guard  # noqa: F401  (first: one line where lra was found only in part)
from lra.leaderboard import figures, names
from lra.leaderboard.curves import CurvesError, chance_lines
from lra.metrics_log import METRICS_FILE, RUN_SPLIT, read_jsonl

# --metric NAME -> (split, value) in metrics.jsonl.
METRICS = {
    "val_accuracy": ("val", "accuracy"), "val_loss": ("val", "loss"),
    "train_loss": ("train", "loss"), "train_accuracy": ("train", "accuracy"),
    "train_lr": ("train", "lr"), "train_grad_norm": ("train", "grad_norm"),
    "train_steps_per_s": ("train", "steps_per_s"),
}


def load_workdir(workdir: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(the run record, every record) of ``workdir/metrics.jsonl``."""
    path = Path(workdir) / METRICS_FILE
    if not path.is_file():
        raise CurvesError(f"{path}: not found; {workdir} is not the --workdir of a "
                          f"`python -m lra.run` that has logged metrics")
    try:
        records = read_jsonl(path)
    except ValueError as err:
        raise CurvesError(str(err)) from None
    except (OSError, UnicodeDecodeError) as err:
        raise CurvesError(f"{path}: unreadable ({type(err).__name__}: {err})") from None
    for r in records:
        if not isinstance(r, dict):
            raise CurvesError(f"{path}: a record is {type(r).__name__}, not a JSON object")
        if not isinstance(r["split"], str) or not isinstance(r["step"], int) or \
                isinstance(r["step"], bool) or r["step"] < 0:
            raise CurvesError(f"{path}: a record has step {r['step']!r} and split {r['split']!r}; "
                              f"expected a step >= 0 and a split name")
    runs = [r for r in records if r["split"] == RUN_SPLIT]
    if not runs:
        raise CurvesError(f"{path}: no run record (split {RUN_SPLIT!r}, naming task, attention and "
                          f"seed); it was written before lra logged one: re-run the training")
    for key in ("task", "attention", "seed"):
        if key not in runs[0]:
            raise CurvesError(f"{path}: the run record has no {key!r}")
    if not isinstance(runs[0]["task"], str):
        raise CurvesError(f"{path}: the run record's task is {runs[0]['task']!r}, not a task name")
    return runs[0], records


def points(records: list[dict[str, Any]], metric: str) -> tuple[list[int], list[float]]:
    """Steps and values of ``metric``, sorted by step (the last record of a step wins)."""
    split, key = METRICS[metric]
    by_step = {r["step"]: r[key] for r in records if r["split"] == split and r.get(key) is not None}
    for step, value in by_step.items():
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            raise CurvesError(f"the {split!r} record of step {step} holds {key} = {value!r}, not a "
                              f"finite number")
    steps = sorted(by_step)
    return steps, [float(by_step[s]) for s in steps]


FORMATS = ("png", "svg", "pdf")
WIDTHS = {"full": figures.FULL_WIDTH, "column": figures.COLUMN_WIDTH}


def output_format(out: Path) -> str:
    """The format ``--out``'s suffix names ("png", "svg" or "pdf"); any other suffix is an error."""
    fmt = out.suffix.lower().lstrip(".")
    if fmt not in FORMATS:
        raise CurvesError(f"--out {out}: the suffix {out.suffix or '(none)'!r} names no format this "
                          f"writes; end the name in .png, .svg or .pdf")
    return fmt


# Each metric's axis label in words.
WORDS = {"val_accuracy": "validation accuracy", "val_loss": "validation loss",
         "train_loss": "training loss", "train_accuracy": "training accuracy",
         "train_lr": "learning rate", "train_grad_norm": "gradient norm",
         "train_steps_per_s": "training steps per second"}


def draw(workdirs: list[Path], metric: str, fmt: str = "png", width: str = "full", *,
         title: bool = True, serif: bool = False) -> bytes:
    """The ``fmt`` bytes of ``metric`` against step for every work directory, at ``width``
    ("full" or "column"); ``title`` False draws none (a paper's caption says it), ``serif`` sets
    the text in a serif face."""
    series, task_names = [], []
    loaded = [(wd, *load_workdir(wd)) for wd in workdirs]
    several_presets = len({run.get("preset") for _, run, _ in loaded}) > 1
    for wd, run, records in loaded:
        try:
            steps, values = points(records, metric)
        except CurvesError as err:
            raise CurvesError(f"{Path(wd) / METRICS_FILE}: {err}") from None
        if not steps:
            split, _ = METRICS[metric]
            raise CurvesError(f"{Path(wd) / METRICS_FILE}: no {metric} yet (no {split!r} record "
                              f"holds it); choose another --metric or wait for the run to log one")
        label = (f"{names.task_name(run['task'])}, {names.family_name(run['attention'])}, "
                 f"seed {run['seed']}")
        series.append({"label": label + (f" ({run['preset']})" if several_presets else ""),
                       "family": run["attention"], "steps": steps, "values": values})
        task_names.append(run["task"])
    percent = metric.endswith("_accuracy")
    return figures.save(
        lambda w: figures.learning_curves(
            series, chance=chance_lines(task_names, metric), percent=percent, width=w,
            title=f"{WORDS[metric].capitalize()} against training step" if title else None,
            ylabel=WORDS[metric] + (" (%)" if percent else "")),
        fmt, WIDTHS[width], serif=serif)


def main(argv: list[str] | None = None) -> int:
    """Exit status: 0 written, 1 a bad work directory or metrics file or an --out it cannot
    write, 2 a bad command line, 75 stopped by SIGTERM, SIGINT or SIGUSR2 (--out is written whole
    or not at all)."""
    from lra import stop_signals

    with stop_signals.raising():
        try:
            return _main(argv)
        except stop_signals.Stopped as stop:
            print(f"{stop.args[0]}: stopped; nothing written; re-run the same command",
                  file=sys.stderr)
            return stop_signals.EXIT_RESUMABLE


def _main(argv: list[str] | None) -> int:
    from lra.leaderboard.build import replace_file

    p = argparse.ArgumentParser(prog="python -m lra.curves", description=__doc__.split("\n")[0])
    p.add_argument("workdirs", nargs="+", type=Path, metavar="WORKDIR",
                   help="work directories of `python -m lra.run` (each holds metrics.jsonl)")
    p.add_argument("--metric", default="val_accuracy", choices=sorted(METRICS))
    p.add_argument("--out", type=Path, default=None,
                   help="file to write, its format named by its suffix: .png, .svg or .pdf "
                        "(default: curves-<metric>.png here)")
    p.add_argument("--width", default="full", choices=sorted(WIDTHS),
                   help="full: a paper's text width, 6.9 in (the default); column: one column, "
                        "3.3 in")
    p.add_argument("--no-title", action="store_true",
                   help="draw no title (a paper's caption says what the figure shows)")
    p.add_argument("--serif", action="store_true",
                   help=f"set the text in {figures.SERIF}, to match a paper's serif body text")
    args = p.parse_args(argv)
    out = args.out or Path(f"curves-{args.metric}.png")
    try:
        check_output(out)
        fmt = output_format(out)
        data = draw(args.workdirs, args.metric, fmt, args.width, title=not args.no_title,
                    serif=args.serif)
        replace_file(out, data)
    except CurvesError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    except OSError as err:
        print(f"error: --out {out}: cannot write it ({err.strerror or err})", file=sys.stderr)
        return 1
    print(f"wrote {out}")
    return 0


def check_output(out: Path) -> None:
    """Fail before drawing if ``out`` cannot be written: a folder, or in a folder that is missing,
    not a folder, or not writable."""
    parent = out.parent if str(out.parent) else Path(".")
    if out.is_dir():
        raise CurvesError(f"--out {out}: is a folder; give a file name ending in .png, .svg or "
                          f".pdf")
    if not parent.exists():
        raise CurvesError(f"--out {out}: the folder {parent} does not exist")
    if not parent.is_dir():
        raise CurvesError(f"--out {out}: {parent} is not a folder")
    if not os.access(parent, os.W_OK) or (out.exists() and not os.access(out, os.W_OK)):
        raise CurvesError(f"--out {out}: no permission to write there")


if __name__ == "__main__":
    sys.exit(main())
