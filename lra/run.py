"""Train and evaluate one (task, attention) pair: ``python -m lra.run --task listops --attn cosformer``.

Parse flags -> resolve the config -> ``lra.train.train_and_evaluate``. Exit status:

* 0: the run finished and its result file exists (or the work directory's run had completed).
* 1: the run failed: non-finite loss, data error, unusable checkpoint, a checkpoint of other data
  (``--force`` starts over), disk full, permission denied, a path that is a file or not UTF-8, ...
* 2: bad command line or configuration, a checkpoint of another configuration, or the work
  directory is in use by another run.
* 75 (EX_TEMPFAIL): stopped early by SIGTERM, SIGINT or SIGUSR2 with the work directory resumable
  (a checkpoint saved, or nothing trained yet: also while the data is generated, and during the
  last validation or test, before the result is written); the same command goes on. A signal
  that comes while the result is being written lets the writes complete and is said (exit 0).
* 130: interrupted by a repeated Ctrl-C (the checkpoints already written are kept).

Every failure is one line on stderr.
"""

from __future__ import annotations

import argparse
import errno
import sys
from pathlib import Path

import lra._guard  # noqa: F401  (first: one line where lra was found only in part)
from lra import stop_signals
from lra.results import RESULTS_DIR_HELP, default_results_dir

# Everything else is imported inside the functions: ``main`` installs the stop-signal handler
# first, so that a signal while JAX and the families load sets a flag instead of killing the
# process (``main`` then exits 75).


def parser() -> argparse.ArgumentParser:
    from lra import attention, tasks
    from lra import config as config_lib

    task_names, attn_names = tasks.available(), attention.available()
    p = argparse.ArgumentParser(
        prog="python -m lra.run",
        description="Train and evaluate one attention family on one LRA task.",
        epilog=f"tasks: {', '.join(task_names)}\nattentions: {', '.join(attn_names)}\n"
               f"presets: tiny (smoke run, < 1 min on a CPU), small (real learning on a laptop, "
               f"minutes), paper (LRA's published setup; the default)",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--task", choices=task_names, metavar="TASK",
                   help=f"one of: {', '.join(task_names)} (required unless --config names it)")
    p.add_argument("--attn", type=attention_arg, metavar="ATTN",
                   help=f"one of: {', '.join(attn_names)}; or path/to/file.py:ClassName, a family "
                        "in one file, registered as <name>@<its hash> (see "
                        "attention/README.md 'A family in one file'); required unless --config "
                        "names it")
    p.add_argument("--config", type=Path, default=None, metavar="FILE",
                   help="a config file, JSON or TOML in the form --print-config prints: its "
                        "values come after the preset, before --set; see "
                        "docs/running.md 'Running'")
    p.add_argument("--preset", default=None, choices=config_lib.PRESETS,
                   help="the scale of the run: tiny, small, paper (the protocol's full budget; "
                        "the default, unless --config names another)")
    p.add_argument("--protocol", default=None, choices=config_lib.PROTOCOLS,
                   help="lra: LRA's published setup per task (the default); modern: each family's "
                        "published modern recipe (S5, S4D, LRU, Mega; attention families with mean "
                        "pooling, pre-norm, best-validation selection). Never ranked together; "
                        "see docs/families-and-protocols.md 'Two protocols'")
    p.add_argument("--seed", type=int, default=None, help="default: 0, unless --config names one")
    p.add_argument("--workdir", type=Path, default=None,
                   help="checkpoints, metrics.jsonl and tensorboard/; re-running with the same "
                        "workdir resumes (default: workdirs/<task>-<attn>-<preset>-seed<seed>)")
    p.add_argument("--data-dir", type=Path, default=None,
                   help="data directory (default: $LRA_DATA_DIR, else ~/.cache/lra)")
    p.add_argument("--results-dir", type=Path, default=default_results_dir(),
                   help="where the result file goes, under runs/; " + RESULTS_DIR_HELP)
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a config field, e.g. --set train.lr=1e-3 --set attn.eps=1e-4")
    p.add_argument("--force", action="store_true",
                   help="train again from step 0 although the work directory's run has completed "
                        "(its files are moved to <workdir>/previous-<date>/); without it a "
                        "completed run is reported, not repeated")
    p.add_argument("--no-progress", action="store_true",
                   help="no training progress bar (generating data still shows one)")
    p.add_argument("--print-config", action="store_true",
                   help="print the resolved config, every family and task option with its value "
                        "(defaults included), and exit")
    p.add_argument("--sources", action="store_true",
                   help="with --print-config and --protocol modern: instead of the JSON, each "
                        "value the recipe sets beside where it comes from (file and line, paper "
                        "and table, or the stated departure); see "
                        "docs/families-and-protocols.md 'Where each recipe value comes from'")
    p.add_argument("--wandb", default=None, metavar="PROJECT",
                   help="also log to Weights & Biases project PROJECT (needs `pip install wandb`; "
                        "WANDB_MODE=offline works without a network); see "
                        "docs/running.md 'Watching a run learn'")
    p.add_argument("--wandb-entity", default=None, metavar="ENTITY",
                   help="with --wandb: the team or user that owns the project (default: wandb's "
                        "default entity of the logged-in user)")
    p.add_argument("--wandb-group", default=None, metavar="GROUP",
                   help="with --wandb: the wandb group of this run (e.g. one per sweep)")
    p.add_argument("--wandb-tags", default=None, metavar="TAG,TAG",
                   help="with --wandb: comma-separated wandb tags")
    p.add_argument("--xla-cpu-fusions", default="auto", choices=("auto", "on", "off"),
                   help="on CPU, compile the training step with XLA's YNN library fusions (on), "
                        "without (off), or time both and keep the faster (auto, the default; a "
                        "resumed run keeps its first choice); see docs/running.md 'Running'")
    dist = p.add_argument_group("multi-host (see docs/running.md 'Devices, scale and faults')")
    dist.add_argument("--coordinator", default=None, help="host:port of process 0")
    dist.add_argument("--num-processes", type=int, default=None)
    dist.add_argument("--process-id", type=int, default=None)
    return p


def attention_arg(text: str) -> str:
    """``--attn``'s value: a registered family's name, or ``path/to/file.py:ClassName``, whose class
    is registered here (``attention.load_file``) and whose registered name is returned."""
    from lra import attention

    if attention.is_file_spec(text):
        try:
            return attention.load_file(text)
        except ValueError as err:
            raise argparse.ArgumentTypeError(str(err)) from None
    if text not in attention.available():
        raise argparse.ArgumentTypeError(f"invalid choice: {text!r} (choose from "
                                         f"{', '.join(attention.available())}, or give "
                                         "path/to/file.py:ClassName)")
    return text


def resolve_config(args: argparse.Namespace):
    """The run's resolved config (``lra.config.Config``) from its parsed flags (``lra.sweep``
    resolves each cell here too, so a flag that changes the config is compared by the sweep's skip
    check without more code). Raises ``ConfigError`` or ``ValueError`` with a one-line message."""
    from lra import attention
    from lra import config as config_lib

    config_file = with_config_file(args)
    cfg = config_lib.load(args.task, args.attn, preset=args.preset, seed=args.seed,
                          overrides=args.overrides, protocol=args.protocol,
                          config_file=config_file)
    attention.check_options(cfg.attention, cfg.attn)
    return cfg


DEFAULTS = {"preset": "paper", "protocol": "lra", "seed": 0}


def _check_named(named: dict, read) -> None:
    """The task, family, preset and protocol a config file names must exist (one line listing
    the choices, naming the file and line)."""
    from lra import attention, tasks
    from lra import config as config_lib

    for key, known in (("task", tasks.available()), ("attention", attention.available()),
                       ("preset", config_lib.PRESETS), ("protocol", config_lib.PROTOCOLS)):
        if key in named and named[key] not in known:
            raise config_lib.ConfigError(f"--config {read.where(key)}: unknown {key} "
                                         f"{named[key]!r}; choose from {', '.join(known)}")


def with_config_file(args: argparse.Namespace):
    """Read ``args.config`` (once: kept as ``args.config_file``) and fill the flags the command
    line left out from it (``--task``, ``--attn``, ``--preset``, ``--protocol``, ``--seed``), else
    from their defaults. Returns the ``lra.config_file.ConfigFile`` or None; ``ConfigError`` for a
    bad file or a task or family named nowhere."""
    from lra import config as config_lib
    from lra import config_file

    read = getattr(args, "config_file", None)
    if read is None and getattr(args, "config", None) is not None:
        read = args.config_file = config_file.read(args.config)
    named = read.identity if read is not None else {}
    _check_named(named, read)
    for flag, key in (("task", "task"), ("attn", "attention"), ("preset", "preset"),
                      ("protocol", "protocol"), ("seed", "seed")):
        if getattr(args, flag, None) is None:
            setattr(args, flag, named.get(key, DEFAULTS.get(key)))
    for flag in ("task", "attn"):
        if getattr(args, flag) is None:
            raise config_lib.ConfigError(f"--{flag} is required (or a --config file that names "
                                         f"its {'task' if flag == 'task' else 'attention'})")
    return read


def wandb_options(args: argparse.Namespace):
    """``lra.tracker.WandbOptions`` from ``--wandb`` and its companions, or None without
    ``--wandb``; a companion without ``--wandb`` is an error (it would be silently unused)."""
    from lra.tracker import WandbOptions, parse_tags

    if not args.wandb:
        given = [f"--wandb-{k}" for k in ("entity", "group", "tags")
                 if getattr(args, f"wandb_{k}") is not None]
        if given:
            raise ValueError(f"{', '.join(given)} without --wandb PROJECT: nothing would be logged")
        return None
    return WandbOptions(args.wandb, entity=args.wandb_entity or None,
                        group=args.wandb_group or None, tags=parse_tags(args.wandb_tags))


def full_config(cfg) -> dict:
    """``cfg.to_dict()`` with every option of the family (``attn``) and the task (``data``), those
    left at their defaults included (the resolved config holds only the ones a preset or ``--set``
    gave); what ``--print-config`` shows."""
    from lra import attention, tasks

    out = cfg.to_dict()
    out["attn"] = {**attention.options(cfg.attention), **out["attn"]}
    out["data"] = {**tasks.data_options(cfg.task), **out["data"]}
    return out


def workdir_name(cfg) -> str:
    """The default work directory's name under ``workdirs/`` (``lra.sweep`` uses the same); runs of
    the modern protocol get their own (``...-<preset>-modern-seed<N>``)."""
    protocol = "" if cfg.protocol == "lra" else f"-{cfg.protocol}"
    return f"{cfg.task}-{cfg.attention}-{cfg.preset}{protocol}-seed{cfg.seed}"


def main(argv: list[str] | None = None) -> int:
    # Before the heavy imports: from here a stop signal only sets a flag (``lra.stop_signals``).
    with stop_signals.handling() as stops:
        stop_signals.test_hook("import")
        return _main(argv, stops)


def _main(argv: list[str] | None, stops: stop_signals.StopSignals) -> int:
    p = parser()  # imports JAX and every family
    if stops.requested:
        print(f"{stops.requested}: stopped while starting, before anything was read or trained; "
              f"re-run the same command", file=sys.stderr)
        return stop_signals.EXIT_RESUMABLE
    from lra.data import default_data_dir
    from lra.workdir import PathEncodingError, check_path_encodable

    args = p.parse_args(argv)
    prepared = _prepare(args)
    if isinstance(prepared, int):
        return prepared
    cfg, wandb = prepared
    workdir = args.workdir or Path("workdirs") / workdir_name(cfg)
    data_dir = args.data_dir or default_data_dir()
    try:
        check_path_encodable(workdir, "--workdir")  # orbax would refuse it after training
    except PathEncodingError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    record = _train(args, cfg, wandb, workdir, data_dir)
    if isinstance(record, int):
        return record
    if record.get("status") == "preempted":
        return stop_signals.EXIT_RESUMABLE
    _report(record, cfg)
    return 0


def _prepare(args: argparse.Namespace):
    """(config, W&B options) of the command line, with the distributed set-up done and the batch
    checked against the devices; or the exit status (``--print-config`` printed, or an error)."""
    from lra import config as config_lib
    from lra import sharding

    try:
        cfg = resolve_config(args)
    except (config_lib.ConfigError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if getattr(args, "config_file", None) and (note := args.config_file.left_out(cfg.task,
                                                                             cfg.attention)):
        print(f"note: --config {args.config}: {note}", file=sys.stderr)
    try:
        wandb = wandb_options(args)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if args.sources and not (args.print_config and cfg.protocol == "modern"):
        print("error: --sources goes with --print-config --protocol modern (the sources of the "
              "modern recipes; the lra protocol's are named in configs/<task>.py)", file=sys.stderr)
        return 2
    if args.print_config:
        import json

        from lra import recipe_sources

        text = ("\n".join(recipe_sources.annotated(cfg, args.overrides)) if args.sources
                else json.dumps(full_config(cfg), indent=2, sort_keys=True))
        print(text)
        return 0
    sharding.initialize_distributed(args.coordinator, args.num_processes, args.process_id)
    try:
        mesh = sharding.make_mesh()
        sharding.check_batch_size(cfg.train.batch_size, mesh)
        sharding.check_batch_size(cfg.train.batch_size // cfg.train.grad_accum, mesh,
                                  "train.batch_size / train.grad_accum")
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return cfg, wandb


def _train(args: argparse.Namespace, cfg, wandb, workdir: Path, data_dir: Path):
    """``train_and_evaluate``'s record, or the exit status of a failure it raised (its message
    printed in one line: the exit statuses of the module docstring)."""
    from lra import tasks
    from lra.checkpoint import (  # heavy imports after parsing
        CheckpointError,
        ConfigMismatchError,
        disk_full,
        quiet_background_errors,
    )
    from lra.data_fingerprint import DataMismatchError
    from lra.tracker import TrackerError
    from lra.train import NonFiniteError, train_and_evaluate
    from lra.workdir import WorkdirLockedError

    try:
        return train_and_evaluate(cfg, workdir, data_dir=data_dir, results_dir=args.results_dir,
                                  progress=not args.no_progress, force=args.force,
                                  xla_cpu_fusions=args.xla_cpu_fusions,
                                  overrides=args.overrides, wandb=wandb,
                                  config_file=(args.config_file.record()
                                               if getattr(args, "config_file", None) else None))
    except (tasks.DataError, NonFiniteError, CheckpointError, DataMismatchError,
            TrackerError) as err:
        print(f"error: {one_line(err)}", file=sys.stderr)
        return 1
    except (ConfigMismatchError, WorkdirLockedError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"interrupted (SIGINT); the checkpoints already written in {workdir / 'checkpoints'} "
              f"are kept", file=sys.stderr)
        return 130
    except OSError as err:
        if disk_full(err):
            quiet_background_errors()
        print(f"error: {os_error_message(err, workdir)}", file=sys.stderr)
        return 1
    except Exception as err:  # jax.errors.JaxRuntimeError is a RuntimeError; orbax wraps OSErrors
        # Disk full first: tensorstore reports it as RESOURCE_EXHAUSTED, which is not memory.
        if disk_full(err):
            quiet_background_errors()
            print(f"error: disk full while saving checkpoint to {workdir / 'checkpoints'} "
                  f"({disk_full(err)}); the last verified checkpoint is kept, re-run the same "
                  f"command to resume once there is space", file=sys.stderr)
            return 1
        if "RESOURCE_EXHAUSTED" in str(err):
            print(out_of_memory_message(err, cfg, workdir), file=sys.stderr)
            return 1
        raise


def _report(record: dict, cfg) -> None:
    """The lines a finished (or already finished) run prints: its headline and its result file."""
    m = record["metrics"]
    if record.get("status") == "existing" and record.get("written"):
        print(f"existing run, its result file written now (nothing trained): "
              f"{record['result_file']}")
    elif record.get("status") == "existing":
        print(f"existing result (nothing trained or written): {record.get('result_file', '-')}")
    last = f"{m['test_accuracy_at_last']:.4f} at the last step"
    best = (f"{m['test_accuracy_at_best_val']:.4f} at the best validation step {m['best_val_step']} "
            f"(val {m['best_val_accuracy']:.4f})")
    from lra import declared

    if declared.attribute("tasks", cfg.task, "track", "lra") != "lra":  # MQAR: checkpoint on val
        headline = f"{best} (the {cfg.task} track's selection); {last}"
    elif cfg.protocol == "lra":
        headline = f"{last} (LRA's protocol); {best}"
    else:
        headline = f"{best} (the modern protocol's selection); {last}"
    print(f"{cfg.task}/{cfg.attention} ({cfg.preset}, {cfg.protocol} protocol, seed {cfg.seed}): "
          f"test accuracy {headline}; {m['steps_per_s']} steps/s")
    if "result_file" in record:
        print(f"result: {record['result_file']}")


def one_line(err: BaseException) -> str:
    return " ".join(str(err).split())


def os_error_message(err: OSError, workdir: Path) -> str:
    """Disk full, permission denied, a file where a folder should be: what and where, in one line."""
    what = {errno.ENOSPC: "disk full", errno.EDQUOT: "disk quota exceeded",
            errno.EACCES: "permission denied", errno.EPERM: "permission denied",
            errno.EROFS: "read-only file system", errno.ENOTDIR: "not a folder",
            errno.EEXIST: "a file is in the way", errno.EISDIR: "a folder is in the way"}.get(
        err.errno, "cannot read or write")
    where = f" ({err.filename})" if err.filename else ""
    kept = (f"; the checkpoints already written in {workdir / 'checkpoints'} are kept, re-run the "
            f"same command to resume once it is fixed"
            if err.errno in (errno.ENOSPC, errno.EDQUOT, errno.EIO) else "")
    return f"{what}{where}: {one_line(err.strerror or err)}{kept}"


def _family_memory_levers(name: str, options: dict) -> list[str]:
    """The levers family ``name`` declares first (its ``memory_levers(options)``; softmax's blocked
    path), or none."""
    from lra import attention

    try:
        levers = getattr(attention.family(name), "memory_levers", None)
    except attention.UnknownAttentionError:
        return []
    return list(levers(options)) if levers is not None else []


def out_of_memory_message(err: Exception, cfg, workdir: Path) -> str:
    """What to say when XLA cannot allocate: the cause, what is kept, the levers that cut memory."""
    first = str(err).strip().splitlines()[0]
    levers = [f"--set train.grad_accum=K (the batch of {cfg.train.batch_size} in K pieces, same "
              f"training)", "--set model.remat=true", "--set model.dtype=bfloat16",
              "a smaller --set train.batch_size", "a sub-quadratic --attn (see README 'Attention families')"]
    levers[:0] = _family_memory_levers(cfg.attention, dict(cfg.attn))
    return (f"error: out of memory during {cfg.task}/{cfg.attention} ({first})\n"
            f"Checkpoints already written in {workdir / 'checkpoints'} are kept; a changed config "
            f"needs a new --workdir.\nTo use less memory, try:\n" +
            "\n".join(f"  {lever}" for lever in levers))


if __name__ == "__main__":
    sys.exit(main())
