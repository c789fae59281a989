"""Evaluate a work directory's checkpoint on one split: ``python -m lra.evaluate --workdir W``.

    python -m lra.evaluate --workdir workdirs/listops-softmax-small-seed0                 # last, test
    python -m lra.evaluate --workdir W --checkpoint best --split val
    python -m lra.evaluate --workdir W --write-result --results-dir results               # keep it

The checkpoint is verified as a resumed run verifies it (``lra.checkpoint``: the SHA-256 recorded
when it was written) and only then restored; the model is rebuilt from the config stored with it
(not from today's configs/), and the split is evaluated with the trainer's own evaluation step,
batching and summation order (``lra.train.evaluate_split``, the loop validation and test run), so
at the training run's batch size (the default) the accuracy equals the one the run recorded, bit
for bit on the same device (long-range-arena#60: a reloaded checkpoint that scores like a random
model is the failure this guards against; tests/commands/test_evaluate.py checks it).

Nothing is written unless ``--write-result``: then one result file under ``<results-dir>/runs/``
with a top-level ``evaluation_of`` = {workdir, checkpoint, step, run_file} (the training run's result
file name, or null). Such a file is an evaluation of a seed, never a seed of its own: the leaderboard
and ``lra.sweep``'s skip check leave it out.

Exit status: 0 done, 1 the checkpoint cannot be used (none, damaged, written by another code version
or for data that cannot be rebuilt, trained on other data than the data present: its data
fingerprint, unless ``--allow-other-data``), the work directory in use by a live training run (its
lock, ``lra.workdir.holder``: that run saves and deletes checkpoints while they would be read), or
a path of the wrong kind (a file, a name that is not UTF-8), 2 bad command line, 75
stopped by SIGTERM, SIGINT or SIGUSR2 (``lra.stop_signals``: the handler sets a flag, looked at
after the data is read, after the checkpoint is restored and between batches; nothing is written,
the same command starts again). Every failure is one line on stderr.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, NamedTuple

import lra._guard  # noqa: F401  (first: one line where lra was found only in part)
from lra.results import RESULTS_DIR_HELP, default_results_dir

SPLITS = ("test", "val", "train")
CHECKPOINTS = ("last", "best")


class EvaluateError(RuntimeError):
    """The checkpoint cannot be evaluated; the message says why in one line (exit status 1)."""


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m lra.evaluate",
        description="Evaluate a work directory's verified checkpoint on one split, with the model "
                    "rebuilt from the config stored in the checkpoint.")
    p.add_argument("--workdir", type=Path, required=True, help="the training run's work directory")
    p.add_argument("--checkpoint", default="last", choices=CHECKPOINTS,
                   help="last (the newest saved state; LRA's protocol) or best (the "
                        "best-validation state; the modern protocol's selection)")
    p.add_argument("--split", default="test", choices=SPLITS,
                   help="test (default), val or train, always the whole split (training's "
                        "validation stops at train.eval_batches batches where that is > 0)")
    p.add_argument("--batch-size", type=int, default=None,
                   help="evaluation batch (default: the run's train.batch_size, as training "
                        "evaluated; another size gives the same accuracy up to float summation)")
    p.add_argument("--data-dir", type=Path, default=None,
                   help="data directory (default: $LRA_DATA_DIR, else ~/.cache/lra)")
    p.add_argument("--write-result", action="store_true",
                   help="write a result file marked evaluation_of under <results-dir>/runs/")
    p.add_argument("--results-dir", type=Path, default=default_results_dir(), help=RESULTS_DIR_HELP)
    p.add_argument("--allow-other-data", action="store_true",
                   help="evaluate although the data now present differs from the data the "
                        "checkpoint was trained on (its data fingerprint; the result file then "
                        "records both)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    return p


def _pick_step(ckpt, which: str) -> int:
    """The newest step of ``which``; it must verify (an older one is not silently evaluated)."""
    steps = ckpt.steps(which)
    if not steps:
        raise EvaluateError(f"no {which!r} checkpoint in {ckpt.root / which}")
    step = steps[-1]
    problem = ckpt.verify(which, step)
    if problem is not None:
        older = [s for s in steps[:-1] if ckpt.verify(which, s) is None]
        hint = f" (step {older[-1]} verifies; resuming the run would fall back to it)" if older else ""
        raise EvaluateError(f"{ckpt.root / which / str(step)}: {problem}; not evaluated{hint}")
    return step


def _config(saved: Any, where: Path):
    """The stored config as a ``Config``, checked as ``lra.config.load`` checks a fresh one."""
    from lra import config as config_lib
    from lra.registry import UnknownNameError

    try:
        cfg = config_lib.Config.from_dict(config_lib.with_protocol(saved))
        config_lib.validate(cfg)
    except (TypeError, KeyError, AttributeError, ValueError, UnknownNameError) as err:
        raise EvaluateError(f"{where}: its stored config cannot be rebuilt by this version of the "
                            f"code ({type(err).__name__}: {' '.join(str(err).split())}); evaluate "
                            f"it with the commit that trained it (its result file's git.commit)"
                            ) from None
    return cfg


def _check_request(workdir: Path, checkpoint: str, split: str, data_dir: Path | None) -> Path:
    """``workdir`` as a Path once the request is one that can be evaluated (names, paths, no live
    training run holding the work directory); else ``EvaluateError``."""
    if checkpoint not in CHECKPOINTS:
        raise EvaluateError(f"unknown checkpoint {checkpoint!r}; choose from {', '.join(CHECKPOINTS)}")
    if split not in SPLITS:
        raise EvaluateError(f"unknown split {split!r}; choose from {', '.join(SPLITS)}")
    workdir = Path(workdir)
    from lra import workdir as workdir_lib

    try:
        workdir_lib.check_path_encodable(workdir, "--workdir")
    except workdir_lib.PathEncodingError as err:
        raise EvaluateError(str(err)) from None
    if (pid := workdir_lib.holder(workdir)) is not None:
        raise EvaluateError(f"{workdir} is in use by a training run (pid {pid}), which saves and "
                            f"deletes checkpoints as it goes; evaluate it once that run has "
                            f"finished or stopped")
    if workdir.exists() and not workdir.is_dir():
        raise EvaluateError(f"--workdir {workdir}: is a file, not a work directory")
    if data_dir is not None and Path(data_dir).exists() and not Path(data_dir).is_dir():
        raise EvaluateError(f"--data-dir {data_dir}: is a file, not a folder")
    if not (workdir / "checkpoints" / checkpoint).is_dir():
        raise EvaluateError(f"no {checkpoint!r} checkpoint in {workdir} "
                            f"({workdir / 'checkpoints' / checkpoint} does not exist)")
    return workdir


class _Restored(NamedTuple):
    """A checkpoint restored into the model its stored config builds, and the split to evaluate."""

    step: int
    meta: dict[str, Any]
    cfg: Any  # lra.config.Config
    fingerprint: dict[str, Any]
    differ: str | None
    source: Any
    mesh: Any
    batch: int
    setup: Any  # lra.train's create_train_state result
    state: Any


def _task_data(cfg, data_dir: Path, meta: dict[str, Any], where: Path, split: str,
               allow_other_data: bool):
    """(task, fingerprint, difference, source of the split), refused when the data present is not the
    data the checkpoint was trained on (unless ``allow_other_data``)."""
    from lra import data_fingerprint, tasks

    task = tasks.build(cfg.task, data_dir, **cfg.data)
    try:
        task.prepare()
    except tasks.DataError as err:
        raise EvaluateError(f"data of {cfg.task}: {' '.join(str(err).split())}") from None
    fingerprint = data_fingerprint.fingerprint(task.provenance(), data_dir)
    differ = data_fingerprint.difference(meta.get("data_fingerprint"), fingerprint)
    if differ and not allow_other_data:
        raise EvaluateError(f"{where} was trained on other data than the data in {data_dir} "
                            f"({differ}); --allow-other-data evaluates it anyway")
    return task, fingerprint, differ, task.source(split)


def _restore(workdir: Path, checkpoint: str, split: str, batch_size: int | None,
             data_dir: Path | None, allow_other_data: bool, safe_point) -> _Restored:
    """Verify and restore the newest ``checkpoint``, its data checked and its split read."""
    from lra import sharding
    from lra.checkpoint import CheckpointError, Checkpoints
    from lra.data import default_data_dir
    from lra.train import create_train_state

    ckpt = Checkpoints(workdir)
    try:
        step = _pick_step(ckpt, checkpoint)
        where = ckpt.root / checkpoint / str(step)
        meta = ckpt.restore_meta(checkpoint, step)
        cfg = _config(meta.get("config"), where)
        data_dir = Path(data_dir or default_data_dir())
        task, fingerprint, differ, source = _task_data(cfg, data_dir, meta, where, split,
                                                       allow_other_data)
        safe_point("setup")
        if len(source) == 0:
            raise EvaluateError(f"the {split} split of {cfg.task} is empty")
        mesh = sharding.make_mesh()
        batch = batch_size or cfg.train.batch_size
        try:
            sharding.check_batch_size(batch, mesh)
        except ValueError as err:
            raise EvaluateError(str(err)) from None
        setup = create_train_state(cfg, task, mesh)
        try:
            state, _ = ckpt.restore(checkpoint, step, setup.state)
        except CheckpointError:
            # verified files and a config that resolves: the code builds another model from it
            raise EvaluateError(f"{where}: its state does not fit the model this version of the "
                                f"code builds from its config; evaluate it with the commit that "
                                f"trained it (its result file's git.commit)") from None
    except CheckpointError as err:
        raise EvaluateError(" ".join(str(err).split())) from None
    finally:
        ckpt.close()
    return _Restored(step, meta, cfg, fingerprint, differ, source, mesh, batch, setup, state)


def evaluate(workdir: Path, *, checkpoint: str = "last", split: str = "test",
             batch_size: int | None = None, data_dir: Path | None = None,
             progress: bool = True, allow_other_data: bool = False,
             stops=None) -> dict[str, Any]:
    """Restore ``workdir``'s newest verified ``checkpoint`` and evaluate ``split``.

    The data evaluated must be the data the checkpoint was trained on (its stored fingerprint,
    ``lra.data_fingerprint``; a checkpoint written before fingerprints existed is not checked),
    unless ``allow_other_data``. ``stops``: a ``lra.stop_signals.StopSignals`` whose signal
    raises ``Stopped`` at the next safe point (after the data, after restoring, between batches).

    Returns {accuracy, loss, examples, step, checkpoint, split, batch_size, config (a dict)}.
    Raises ``EvaluateError`` with a one-line message for anything that makes the checkpoint unusable.
    """
    workdir = _check_request(workdir, checkpoint, split, data_dir)

    import jax
    from tqdm.auto import tqdm

    from lra import results, stop_signals
    from lra.train import evaluate_split, jit_eval_step

    def safe_point(stage: str) -> None:
        if stops is not None:
            stop_signals.check(stops, stage)

    safe_point("start")
    r = _restore(workdir, checkpoint, split, batch_size, data_dir, allow_other_data, safe_point)
    safe_point("restore")

    bar = tqdm(total=-(-len(r.source) // r.batch), desc=f"{r.cfg.task}/{r.cfg.attention} {split}",
               disable=not progress or jax.process_index() != 0, dynamic_ncols=True,
               mininterval=1.0, file=sys.stderr, leave=False)

    def before_batch() -> None:
        safe_point("eval")
        bar.update(1)

    # The trainer's own evaluation loop: the same batches, the same float sums in order.
    out = evaluate_split(jit_eval_step(r.setup.graphdef, r.mesh), r.state, r.setup.rest, r.source,
                         r.batch, r.mesh, before_batch=before_batch)
    bar.close()
    return {**out, "step": r.step, "checkpoint": checkpoint, "split": split,
            "batch_size": r.batch, "config": r.cfg.to_dict(),
            "data_fingerprint": r.fingerprint, "trained_on": r.meta.get("data_fingerprint"),
            "other_data": bool(r.differ),
            # the code that trained the checkpoint (lra.train.History.code; older ones lack it)
            "trained_under": results.code_sessions(r.meta.get("history", {}).get("code", []))}


def training_run_file(workdir: Path) -> str | None:
    """The name of the result file of ``workdir``'s completed run, or None (not finished)."""
    from lra import workdir as workdir_lib

    try:
        record = workdir_lib.finished(workdir)
    except OSError:
        return None
    path = (record or {}).get("result_file")
    return Path(path).name if path else None


def write_result(out: dict[str, Any], workdir: Path, results_dir: Path) -> Path:
    """One result file for the evaluation ``out``, marked ``evaluation_of`` (never a seed)."""
    from lra import results
    from lra import workdir as workdir_lib

    cfg = out["config"]
    record = {
        "task": cfg["task"], "attention": cfg["attention"], "preset": cfg["preset"],
        "protocol": cfg.get("protocol", "lra"), "seed": cfg["seed"], "config": cfg,
        "evaluation_of": {"workdir": str(workdir), "checkpoint": out["checkpoint"],
                          "step": out["step"], "run_file": training_run_file(workdir),
                          "trained_under": out["trained_under"]},
        "split": out["split"],
        "data": {"fingerprint": out.get("data_fingerprint"),
                 "trained_on_fingerprint": out.get("trained_on"),
                 "other_data": out.get("other_data", False)},
        "metrics": {"accuracy": out["accuracy"], "loss": out["loss"], "examples": out["examples"],
                    "batch_size": out["batch_size"]},
        "device": results.device_info(), "versions": results.versions(),
        "git": results.git_commit(), "date": results.now(), "status": "evaluated",
    }
    suffix = f"__eval-{out['checkpoint']}{out['step']}-{out['split']}"
    for _ in range(100):
        path = results.run_path(results_dir, record)
        path = path.with_name(path.stem + suffix + path.suffix)
        try:
            with workdir_lib.naming(path):  # a full disk's error names the file
                results.write_new(path, record)
        except FileExistsError:
            continue
        return path
    raise RuntimeError(f"could not find a free result file name in {Path(results_dir) / 'runs'}")


def main(argv: list[str] | None = None) -> int:
    from lra import stop_signals

    # Before JAX is imported: from here a stop signal sets a flag, looked at at safe points.
    with stop_signals.handling() as stops:
        try:
            return _main(argv, stops)
        except stop_signals.Stopped as stop:
            print(f"{stop.args[0]}: stopped before the evaluation finished; nothing was written; "
                  f"re-run the same command", file=sys.stderr)
            return stop_signals.EXIT_RESUMABLE


def _main(argv: list[str] | None, stops) -> int:
    from lra import stop_signals

    args = parser().parse_args(argv)
    if args.batch_size is not None and args.batch_size < 1:
        print(f"error: --batch-size must be >= 1, got {args.batch_size}", file=sys.stderr)
        return 2
    try:
        if args.write_result:  # before the evaluation, not after
            from lra import workdir as workdir_lib

            workdir_lib.check_writable(args.results_dir)
        out = evaluate(args.workdir, checkpoint=args.checkpoint, split=args.split,
                       batch_size=args.batch_size, data_dir=args.data_dir,
                       progress=not args.no_progress, allow_other_data=args.allow_other_data,
                       stops=stops)
        stop_signals.check(stops, "write")
        path = write_result(out, args.workdir, args.results_dir) if args.write_result else None
    except EvaluateError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    except OSError as err:  # permission denied, disk full, a file where a folder goes
        where = f" ({err.filename})" if err.filename else ""
        print(f"error: {' '.join(str(err.strerror or err).split())}{where}", file=sys.stderr)
        return 1
    cfg = out["config"]
    print(f"{cfg['task']}/{cfg['attention']} ({cfg['preset']}, {cfg.get('protocol', 'lra')} "
          f"protocol, seed {cfg['seed']}), {out['checkpoint']} checkpoint at step {out['step']}: "
          f"{out['split']} accuracy {out['accuracy']:.4f}, loss {out['loss']:.4f} on "
          f"{out['examples']} examples (batch {out['batch_size']})")
    if path is not None:
        print(f"result: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
