"""Learning curves: one metric against training step for several runs on one figure.

    python -m lra.curves WORKDIR [WORKDIR ...] [--metric val_accuracy] [--out FILE.png]

Each work directory's ``metrics.jsonl`` is all it reads: its first record names the run (task,
attention, preset, seed; the legend says task/family/seed) and the others give the metric, one
point per step. The task's chance level comes from the task registry (the task's number of
classes C): 1/C for accuracies and ln C, the cross-entropy of a uniform guess, for losses. The PNG
is byte-deterministic (see ``lra.leaderboard.figures``): the same files give the same bytes.

The leaderboard's own learning curves (from result files alone) are ``lra.leaderboard.curves``.
Exit status: 0 written, 1 a work directory without usable metrics, 2 a bad command line.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from lra.leaderboard import figures
from lra.leaderboard.curves import CurvesError, _chance_lines
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
    runs = [r for r in records if r["split"] == RUN_SPLIT]
    if not runs:
        raise CurvesError(f"{path}: no run record (split {RUN_SPLIT!r}, naming task, attention and "
                          f"seed); it was written before lra logged one: re-run the training")
    return runs[0], records


def points(records: list[dict[str, Any]], metric: str) -> tuple[list[int], list[float]]:
    """Steps and values of ``metric``, sorted by step (the last record of a step wins)."""
    split, key = METRICS[metric]
    by_step = {r["step"]: r[key] for r in records if r["split"] == split and r.get(key) is not None}
    steps = sorted(by_step)
    return steps, [float(by_step[s]) for s in steps]


def draw(workdirs: list[Path], metric: str) -> bytes:
    """The PNG of ``metric`` against step for every work directory."""
    series, task_names = [], []
    loaded = [(wd, *load_workdir(wd)) for wd in workdirs]
    several_presets = len({run.get("preset") for _, run, _ in loaded}) > 1
    for wd, run, records in loaded:
        steps, values = points(records, metric)
        if not steps:
            split, _ = METRICS[metric]
            raise CurvesError(f"{Path(wd) / METRICS_FILE}: no {metric} yet (no {split!r} record "
                              f"holds it); choose another --metric or wait for the run to log one")
        label = f"{run['task']}/{run['attention']}/seed {run['seed']}"
        series.append({"label": label + (f" ({run['preset']})" if several_presets else ""),
                       "family": run["attention"], "steps": steps, "values": values})
        task_names.append(run["task"])
    return figures.learning_curves(series, chance=_chance_lines(task_names, metric),
                                   title=f"{metric} against training step", ylabel=metric)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m lra.curves", description=__doc__.split("\n")[0])
    p.add_argument("workdirs", nargs="+", type=Path, metavar="WORKDIR",
                   help="work directories of `python -m lra.run` (each holds metrics.jsonl)")
    p.add_argument("--metric", default="val_accuracy", choices=sorted(METRICS))
    p.add_argument("--out", type=Path, default=None,
                   help="PNG file to write (default: curves-<metric>.png here)")
    args = p.parse_args(argv)
    out = args.out or Path(f"curves-{args.metric}.png")
    try:
        png = draw(args.workdirs, args.metric)
    except CurvesError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(png)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
