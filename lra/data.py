"""The data command line: generate synthetic datasets, or prepare a task's data where the trainer
looks for it.

    python -m lra.data generate listops --out DIR [--train N --val N --test N] [--seed S]
                                        [--workers K] [--min-length A --max-length B] [--no-fsync]
    python -m lra.data generate pathfinder --out DIR [--resolution {32,64,128,256}]
                        [--difficulty {easy,intermediate,hard}] [--num-images N] [--seed S]
                        [--workers K]
    python -m lra.data prepare --task listops [--data-dir DIR] [--set KEY=VALUE ...]
    python -m lra.data fetch-release [--out DIR] [--url URL] [--sha256 HEX]   # the official archive
    python -m lra.data refingerprint [--results-dir DIR] [--data-dir DIR] [--dry-run]

The data directory is ``--data-dir``, else ``$LRA_DATA_DIR``, else ``~/.cache/lra``
(``default_data_dir()``). Exit status: 0 done; 1 a path that cannot be written (disk full,
permission denied, a file where a folder goes); 2 errors a user can fix (bad data, unknown task,
bad option, bad command line); 75 stopped by SIGTERM, SIGINT or SIGUSR2: what was complete is
kept, nothing half-written is left to be trusted (every file is written under a temporary name and
renamed once complete; ListOps renames its three files together at the end and keeps its
finished shards until then, Pathfinder a batch's metadata after its images), and the same command
goes on from them. Every failure is one line on stderr.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

import lra._guard  # noqa: F401  (first: one line where lra was found only in part)
from lra import config as config_lib
from lra import tasks
from lra import workdir as workdir_lib
from lra.tasks import default_data_dir

__all__ = ["default_data_dir", "main"]


class UsageError(ValueError):
    """A bad command line value found after parsing (reported like DataError)."""


def _count(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a count >= 0, got {text}")
    return value


# ----------------------------------------------------------------------------------------------
# generate <dataset>: one entry per generator (pathfinder goes here next to listops).


def _listops_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", type=Path, required=True, help="output folder")
    parser.add_argument("--train", type=_count, default=96_000)
    parser.add_argument("--val", type=_count, default=2_000)
    parser.add_argument("--test", type=_count, default=2_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workers", type=int, default=None,
                        help="sampling processes (default: all usable CPUs); the output does not "
                             "depend on it")
    parser.add_argument("--min-length", type=_count, default=500)
    parser.add_argument("--max-length", type=_count, default=2000)
    parser.add_argument("--max-depth", type=_count, default=10)
    parser.add_argument("--max-args", type=_count, default=10)
    parser.add_argument("--no-fsync", dest="sync", action="store_false",
                        help="do not flush the files to the disk before renaming them into place "
                             "(faster on a throw-away disk; a power cut may leave empty files)")


def _listops_generate(args: argparse.Namespace) -> None:
    from lra.tasks import listops

    try:
        paths = listops.generate(args.out, train=args.train, val=args.val, test=args.test,
                                 seed=args.seed, workers=args.workers,
                                 min_length=args.min_length, max_length=args.max_length,
                                 max_depth=args.max_depth, max_args=args.max_args,
                                 sync=args.sync)
    except ValueError as err:  # option checks
        raise UsageError(str(err)) from None
    for path in paths.values():
        print(path)


def _pathfinder_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", type=Path, required=True,
                        help="output folder (like the archive's pathfinder32/): the images go to "
                             "OUT/<difficulty folder>/imgs/, the labels to OUT/<difficulty "
                             "folder>/metadata/")
    parser.add_argument("--resolution", type=int, choices=(32, 64, 128, 256), default=32)
    parser.add_argument("--difficulty", choices=("easy", "intermediate", "hard"), default="hard")
    parser.add_argument("--num-images", type=_count, default=200_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workers", type=int, default=None,
                        help="rendering processes (default: all usable CPUs); the output does "
                             "not depend on it")


def _pathfinder_generate(args: argparse.Namespace) -> None:
    from lra.tasks import pathfinder

    try:
        folder = pathfinder.generate(args.out, resolution=args.resolution,
                                     difficulty=args.difficulty, num_images=args.num_images,
                                     seed=args.seed, workers=args.workers)
    except ValueError as err:  # option checks
        raise UsageError(str(err)) from None
    print(folder)


GENERATORS: dict[str, tuple[str, Callable[[argparse.ArgumentParser], None],
                            Callable[[argparse.Namespace], None]]] = {
    "listops": ("ListOps TSV files (basic_{train,val,test}.tsv)", _listops_arguments,
                _listops_generate),
    "pathfinder": ("Pathfinder / Path-X images in the archive's layout "
                   "(<difficulty folder>/imgs/<batch>/sample_<i>.png, metadata/<batch>.npy)",
                   _pathfinder_arguments, _pathfinder_generate),
}


# ----------------------------------------------------------------------------------------------
# prepare


def _prepare(args: argparse.Namespace) -> None:
    data_dir = args.data_dir if args.data_dir is not None else default_data_dir()
    tasks.family(args.task)  # unknown task -> its error before anything else
    workdir_lib.not_a_file(data_dir, "--data-dir")  # before minutes of generating, not after
    options = config_lib.parse_options(args.set, tasks.data_options(args.task),
                                       f"task {args.task!r} data")
    try:
        task = tasks.build(args.task, data_dir, **options)
    except ValueError as err:  # the task's option checks
        raise UsageError(str(err)) from None
    task.prepare()


# ----------------------------------------------------------------------------------------------
# refingerprint: result files whose fingerprint hashed a reader's cache (before 2026-12-06)


def _refingerprint(args: argparse.Namespace) -> None:
    """Give every run file of ``--results-dir`` whose data fingerprint was recorded before
    2026-12-06 (Pathfinder's ``decoded/`` cache hashed with the images) today's fingerprint of the
    same files, where the data directory still holds them and that cache; a run on other data is
    left as it is, named. Resumes, evaluations and the sweep recognise the old fingerprints without
    this; the leaderboard, which reads no data, needs it to count old and new seeds in one row."""
    import json

    from lra import data_fingerprint, results
    from lra.leaderboard import reader

    data_dir = args.data_dir if args.data_dir is not None else default_data_dir()
    workdir_lib.not_a_file(data_dir, "--data-dir")
    workdir_lib.not_a_file(args.results_dir, "--results-dir")
    result_set = reader.read(args.results_dir)
    result_set.warn(sys.stderr)
    counts = {"current": 0, "older": 0, "other": 0}
    for record in result_set.valid:
        saved = (record.get("data") or {}).get("fingerprint")
        if not isinstance(saved, dict):
            continue  # format 1: no fingerprint
        try:
            task = tasks.build(record["task"], data_dir, **(record["config"].get("data") or {}))
            verdict, now = data_fingerprint.refreshed(saved, task.provenance(), data_dir)
        except (tasks.UnknownTaskError, TypeError, ValueError, tasks.DataError) as err:
            print(f"left as is: {record['_file']}: its data cannot be told here "
                  f"({' '.join(str(err).split())})", file=sys.stderr)
            counts["other"] += 1
            continue
        counts[verdict] += 1
        if verdict == "other":
            print(f"left as is: {record['_file']} was made on other data than the data in "
                  f"{data_dir}", file=sys.stderr)
        elif verdict == "older" and not args.dry_run:
            path = Path(args.results_dir) / "runs" / record["_file"]
            raw = json.loads(path.read_text())
            raw["data"]["fingerprint"] = now
            results.write_json_atomic(path, raw)
    done = "would be updated" if args.dry_run else "updated"
    print(f"refingerprint: {counts['older']} {done}, {counts['current']} already current, "
          f"{counts['other']} left as is")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m lra.data",
        description="Generate synthetic LRA datasets, or prepare a task's data.")
    commands = parser.add_subparsers(dest="command", required=True)

    generate = commands.add_parser("generate", help="generate a synthetic dataset into a folder")
    datasets = generate.add_subparsers(dest="dataset", required=True)
    for name, (help_text, add_arguments, run) in GENERATORS.items():
        sub = datasets.add_parser(name, help=help_text)
        add_arguments(sub)
        sub.set_defaults(run=run)

    prepare = commands.add_parser("prepare", help="make a task's data available (generate it if "
                                                  "it can be generated)")
    prepare.add_argument("--task", required=True, help="a registered task, e.g. listops")
    prepare.add_argument("--data-dir", type=Path, default=None,
                         help="data directory (default: $LRA_DATA_DIR, else ~/.cache/lra)")
    prepare.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                         help="a data option of the task (repeatable), e.g. train_size=1000")
    prepare.set_defaults(run=_prepare)

    from lra import release  # fetch-release: download, verify and safely unpack lra_release.gz

    fetch = commands.add_parser("fetch-release", help="download, verify and unpack the official "
                                                      "LRA release archive (about 8.2 GB)")
    release.add_arguments(fetch)
    fetch.set_defaults(run=release.run)

    from lra.results import RESULTS_DIR_HELP, default_results_dir

    refingerprint = commands.add_parser(
        "refingerprint", help="give run files whose data fingerprint hashed a reader's cache "
                              "(recorded before 2026-12-06) today's fingerprint of the same data")
    refingerprint.add_argument("--results-dir", type=Path, default=default_results_dir(),
                               help=RESULTS_DIR_HELP)
    refingerprint.add_argument("--data-dir", type=Path, default=None,
                               help="the data directory the runs read (default: $LRA_DATA_DIR, "
                                    "else ~/.cache/lra)")
    refingerprint.add_argument("--dry-run", action="store_true",
                               help="say what would change, write nothing")
    refingerprint.set_defaults(run=_refingerprint)
    return parser


def main(argv: list[str] | None = None) -> int:
    from lra import stop_signals

    args = build_parser().parse_args(argv)
    # Nothing here holds state a raise could corrupt: the first stop signal raises where the
    # command is (the generators' worker processes ignore it and end with their pool).
    with stop_signals.raising() as stops:
        try:
            stop_signals.test_hook("generate")
            return _run(args)
        except BaseException as err:
            if stops.requested is None or isinstance(err, SystemExit):
                raise
            # a worker ended by the same signal (a BrokenProcessPool) is that stop too
            # On a line of its own: the signal may have ended a progress bar mid-line (raised
            # inside tqdm's own write, before the newline it writes when it closes).
            print(f"\n{stops.requested}: stopped; the files already complete are kept, nothing "
                  f"half-written is; re-run the same command to go on", file=sys.stderr)
            return stop_signals.EXIT_RESUMABLE


def _run(args: argparse.Namespace) -> int:
    try:
        args.run(args)
    except (tasks.DataError, tasks.UnknownTaskError, UsageError, config_lib.ConfigError) as err:
        message = " ".join(str(err).split())  # one line
        print(f"error: {message}", file=sys.stderr)
        return 2
    except OSError as err:  # disk full, permission denied, a file where a folder should be
        where = f" ({err.filename})" if err.filename else ""
        print(f"error: {err.strerror or err}{where}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
