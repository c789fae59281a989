"""Run a sweep's cells through submitit: ``python -m lra.sweep ... --executor local|slurm|debug``.

    python -m lra.sweep --task all --attn all --seeds 0-2 --executor slurm --partition gpu \\
        --time 240 --gpus-per-task 1 --cpus-per-task 8 --mem-gb 64 --array-parallelism 32

``lra.sweep`` plans the grid (skip, resume, conflict) and hands the cells it would run to ``submit``:
``slurm`` submits them as one job array, one ``lra.run`` per task, and the leaderboard rebuild as a
job that depends on the array (``afterany``); ``local`` runs them as local processes through
submitit's local executor (offline; what the tests use); ``debug`` runs them one after the other in
this process. submitit is an optional extra (``pip install -e ".[slurm]"``), imported only here.

Each task runs ``RunCell``: ``python -m lra.run <flags>`` as a child process in its own process group,
its output appended to ``<workdir>/sweep.log`` as with the subprocess executor. The signal SLURM sends
before the time limit (``--signal-delay-s`` seconds before; submitit asks for USR2) reaches every
process of the job step: the child lra.run, which saves a checkpoint on SIGUSR2 (the test against a
real SLURM 22.05 sees ``SIGUSR2: checkpoint saved``), and submitit's handler in the task, which calls
``RunCell.checkpoint``: it sends SIGTERM to the child as well (lra.run saves a checkpoint on SIGTERM
too, before and after the change that makes it exit 75; the first signal wins), waits for it and returns
itself as a ``DelayedSubmission``, which submitit requeues; the requeued task runs the same lra.run,
which resumes from that checkpoint.

Under ``local``, submitit's controller process outlives the sweep by design: a sweep that ends, even
by ``kill -9``, would leave its runs going. Each task therefore checks every 0.2 s that the sweep's
process is still there (``CellSpec.owner``); once it is gone, the task sends its lra.run SIGTERM (a
checkpoint), ends, and the controller with it. Under ``slurm`` the jobs outlive the sweep, as queued
jobs do.

Finished is decided from the result files, never from an exit status: a cell is done iff a result
file of its resolved config exists under ``<results-dir>/runs`` (the sweep's skip check). Without one,
an exit 75 (lra.run stopped early with a resumable checkpoint), 0, 130 or death by a signal means
interrupted: it is run again, up to ``--max-requeues`` times in all (a checkpoint-and-requeue or a
restart in the same task); any other status means failed, reported with the last error line of its
log, and the other cells go on.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import json
import math
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from lra import stop_signals

EXIT_INTERRUPTED = 75  # EX_TEMPFAIL: lra.run stopped early and saved a resumable checkpoint
# Exit statuses that mean "stopped early" when no result file was written: 75, and those of lra.run
# before 75 existed (0 after a SIGTERM checkpoint, 130 after a SIGINT one) or of a shell (128 + n).
RESUMABLE_EXITS = frozenset({0, EXIT_INTERRUPTED, 128 + signal.SIGINT, 128 + signal.SIGTERM,
                             128 + signal.SIGUSR2})
EXECUTORS = ("subprocess", "local", "slurm", "debug")
MISSING_SUBMITIT = ('--executor {executor} needs submitit, which is not installed: '
                    'pip install -e ".[slurm]"')


@dataclass(frozen=True)
class CellSpec:
    """What a task needs to run one cell and to tell whether it finished."""

    label: str  # "listops/softmax seed 0"
    argv: tuple[str, ...]  # lra.run's flags
    workdir: Path
    results_dir: Path
    config: str  # the resolved config as canonical JSON, as the sweep's skip check compares it
    # --executor local: the sweep's process, (pid, start time): the task stops its run once it is
    # gone (submitit's local controller outlives the sweep by design, and a killed sweep runs no
    # code); None under SLURM, whose jobs outlive the sweep that submitted them
    owner: tuple[int, str | None] | None = None


@dataclass
class Outcome:
    """What one cell came to: ``status`` done | failed | interrupted (requeue limit reached)."""

    status: str
    detail: str = ""
    result_file: str = ""
    log: str = ""
    exit_status: int | None = None
    requeues: int = 0
    job_logs: tuple[str, ...] = field(default_factory=tuple)  # submitit's stdout / stderr files


def find_result(results_dir: Path, config: str) -> Path | None:
    """The newest valid result file under ``<results_dir>/runs`` whose resolved config is
    ``config`` (read by the one reader, ``lra.leaderboard.reader``, as the sweep's skip check
    reads it), or None. A result made on other data was planned as a conflict and never
    submitted, so any such file is this cell's run."""
    from lra.leaderboard import reader

    runs = reader.read(Path(results_dir)).by_config().get(config)
    return Path(results_dir) / "runs" / runs[-1]["_file"] if runs else None


def _start_time(pid: int) -> str | None:
    """Process ``pid``'s start time (Linux: /proc/<pid>/stat), which tells it from a later process
    given the same pid; None where it cannot be read."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def _alive(pid: int, started: str | None) -> bool:
    """Whether process ``pid``, started at ``started`` (``_start_time``), still runs: not ended,
    not a zombie (a killed sweep stays one until its parent reaps it), its pid not reused."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except FileNotFoundError:
        return False
    except OSError:  # no /proc (macOS): whether the pid exists
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            pass
        return True
    return fields[0] != "Z" and (started is None or fields[19] == started)


def _die_with_parent() -> None:
    """In the child before exec: its own process group; SIGUSR2 ignored (SLURM signals every process
    of the step, and an lra.run that does not handle USR2 would die of it without a checkpoint: the
    task's SIGTERM stops it; an lra.run that handles USR2 replaces the SIG_IGN); SIGTERM (checkpoint)
    if the task dies."""
    os.setpgid(0, 0)
    signal.signal(signal.SIGUSR2, signal.SIG_IGN)
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG (Linux)
    except (OSError, AttributeError):
        pass


_EXCEPTION_LINE = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Interrupt|Exit)\b(:|$)")


def last_error_line(log_text: str) -> str:
    """The reason a cell failed, for the sweep and the cluster: the last line starting with
    ``error:`` (lra.run's one-line errors), else the last exception
    line of a traceback (JAX prints a note after it), else the last line."""
    lines = [ln.strip() for ln in log_text.splitlines() if ln.strip()]
    errors = ([ln for ln in lines if ln.startswith("error:")]
              or [ln for ln in lines if _EXCEPTION_LINE.match(ln)] or lines or ["(no output)"])
    line = errors[-1]
    return line if len(line) <= 300 else line[:297] + "..."



class RunCell:
    """One cell as a checkpointable submitit callable (``checkpoint`` is submitit's hook)."""

    def __init__(self, spec: CellSpec, max_requeues: int = 3, requeues: int = 0,
                 grace_s: float = 120.0):
        self.spec, self.max_requeues, self.requeues, self.grace_s = spec, max_requeues, requeues, grace_s
        self._child: subprocess.Popen | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_child": None}

    def _log(self, text: str) -> None:
        print(f"lra.cluster: {self.spec.label}: {text}", flush=True)

    def __call__(self) -> Outcome:
        spec = self.spec
        log_path = spec.workdir / "sweep.log"
        self._log("devices: " + " ".join(f"{k}={v}" for k, v in device_environment().items()
                                          if v is not None))
        while True:
            done = find_result(spec.results_dir, spec.config)
            if done is not None:
                return Outcome("done", f"result {done.name}", str(done), str(log_path), 0, self.requeues)
            command = [sys.executable, "-m", "lra.run", *spec.argv, "--no-progress"]
            spec.workdir.mkdir(parents=True, exist_ok=True)
            with open(log_path, "a") as log:
                log.write(f"== lra.cluster {time.strftime('%Y-%m-%dT%H:%M:%S%z')} (requeue "
                          f"{self.requeues}): {shlex.join(command)}\n")
                log.flush()
                offset = log.tell()
                self._log(f"running {shlex.join(command)} (log {log_path})")
                self._child = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT,
                                               preexec_fn=_die_with_parent)
                # Poll, not wait(): submitit's signal handler runs in this thread and waits for the
                # child itself (RunCell.checkpoint).
                while self._child.returncode is None and self._child.poll() is None:
                    if spec.owner is not None and not _alive(*spec.owner):
                        code = self._stop_child()
                        self._log(f"the sweep (pid {spec.owner[0]}) is gone; the run stopped with "
                                  f"status {code}")
                        return Outcome("interrupted", "the sweep that started it ended", "",
                                       str(log_path), code, self.requeues)
                    time.sleep(0.2)
            code = self._child.returncode
            with open(log_path) as log:
                log.seek(offset)
                text = log.read()
            done = find_result(spec.results_dir, spec.config)
            if done is not None:
                self._log(f"done: {done}")
                return Outcome("done", f"result {done.name}", str(done), str(log_path), code, self.requeues)
            if code not in RESUMABLE_EXITS and code > 0:
                reason = f"exit status {code}: {last_error_line(text)}"
                self._log(f"failed ({reason})")
                return Outcome("failed", reason, "", str(log_path), code, self.requeues)
            how = f"killed by signal {-code}" if code < 0 else f"exit status {code}, no result file"
            if self.requeues >= self.max_requeues:
                self._log(f"interrupted ({how}); requeue limit {self.max_requeues} reached")
                return Outcome("interrupted", f"{how}; requeued {self.requeues} times, the limit",
                               "", str(log_path), code, self.requeues)
            # Stopped without this task being signalled (e.g. SLURM's SIGTERM reached only the
            # run, or it was killed): run it again here; lra.run resumes from its checkpoint.
            self.requeues += 1
            self._log(f"interrupted ({how}); restarting ({self.requeues} of {self.max_requeues})")

    def _stop_child(self) -> int | None:
        """SIGTERM to the child's group (lra.run checkpoints and exits); its status, waited for
        with waitpid so that this works inside a signal handler that interrupted ``__call__``."""
        child = self._child
        if child is None or child.returncode is not None:
            return None if child is None else child.returncode
        try:
            os.killpg(child.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        deadline = time.monotonic() + self.grace_s
        while child.returncode is None:
            try:
                pid, status = os.waitpid(child.pid, os.WNOHANG)
            except ChildProcessError:  # reaped by the interrupted poll()
                break
            if pid:
                child.returncode = os.waitstatus_to_exitcode(status)
                break
            if time.monotonic() > deadline:
                self._log(f"no exit {self.grace_s:.0f} s after SIGTERM; killing it")
                os.killpg(child.pid, signal.SIGKILL)
                deadline = float("inf")
            time.sleep(0.1)
        return child.returncode

    def checkpoint(self, *args: Any, **kwargs: Any):
        """submitit calls this on the pre-time-limit (or preemption) signal: stop the run, which
        saves a checkpoint, and return the same cell to be requeued (None past the limit: submitit
        then ends the job as not requeued)."""
        from submitit.helpers import DelayedSubmission

        code = self._stop_child()
        self._log(f"signalled; the run stopped with status {code}")
        if find_result(self.spec.results_dir, self.spec.config) is not None:
            self._log("its result file exists: requeued to report it")
        elif self.requeues >= self.max_requeues:
            self._log(f"requeue limit {self.max_requeues} reached; not requeued")
            return None
        self._log(f"requeued ({self.requeues + 1} of {self.max_requeues})")
        return DelayedSubmission(RunCell(self.spec, self.max_requeues, self.requeues + 1, self.grace_s))


def rebuild_leaderboard(results_dir: str) -> int:
    """The dependent job after the array: ``python -m lra.leaderboard --results-dir ...``."""
    from lra import leaderboard

    return leaderboard.main(["--results-dir", str(results_dir)])


# ----------------------------------------------------------------------------------------------
# The sweep's side: flags, submission, waiting, the summary.


def add_flags(p: argparse.ArgumentParser) -> None:
    """``--executor`` and the cluster flags, added to lra.sweep's parser."""
    p.add_argument("--executor", default="subprocess", choices=EXECUTORS,
                   help="subprocess: one lra.run after another here (default); local: submitit's "
                        "local executor; slurm: one SLURM job array; debug: submitit in this "
                        "process (docs/sweeps-and-clusters.md 'Running on a cluster')")
    g = p.add_argument_group("--executor local|slurm|debug (submitit)")
    g.add_argument("--max-requeues", type=int, default=3,
                   help="how often an interrupted cell is run again (default: 3)")
    g.add_argument("--partition", default=None, help="SLURM partition (default: the cluster's)")
    g.add_argument("--time", type=float, default=60, metavar="MINUTES",
                   help="time limit of each task in minutes (default: 60); a cell that needs more "
                        "is checkpointed and requeued")
    g.add_argument("--gpus-per-task", type=int, default=None, metavar="N",
                   help="GPUs each task gets. slurm: SLURM's --gpus-per-task; local: each task its "
                        "own N GPUs of this machine, as many tasks at once as the GPUs allow "
                        "(without it, --executor local runs every cell on the CPU)")
    g.add_argument("--gpus", default=None, metavar="IDS",
                   help="--executor local: the GPUs to use, e.g. 0,1,2,3 (default: those "
                        "CUDA_VISIBLE_DEVICES names, else every GPU nvidia-smi -L lists)")
    g.add_argument("--tasks-per-gpu", type=int, default=1, metavar="K",
                   help="--executor local with --gpus-per-task: K tasks share each GPU, each "
                        "limited to a 1/K share of its memory (XLA_PYTHON_CLIENT_MEM_FRACTION); "
                        "default: 1")
    g.add_argument("--cpus-per-task", type=int, default=None)
    g.add_argument("--mem-gb", type=float, default=None)
    g.add_argument("--array-parallelism", type=int, default=256,
                   help="at most this many tasks of the array at once (default: 256)")
    g.add_argument("--signal-delay-s", type=int, default=120,
                   help="SLURM signals a task this many seconds before its time limit (default: 120)")
    g.add_argument("--slurm-extra", action="append", default=[], metavar="KEY=VALUE",
                   help="an extra sbatch parameter, e.g. --slurm-extra account=abc (repeatable)")


# ----------------------------------------------------------------------------------------------
# One host's GPUs under --executor local: which GPUs there are, and one slot per task that may run.

# What a task's devices are: submitit sets the first; the others where tasks share a GPU.
DEVICE_ENV = ("CUDA_VISIBLE_DEVICES", "XLA_PYTHON_CLIENT_MEM_FRACTION",
              "XLA_PYTHON_CLIENT_PREALLOCATE")
MEMORY_SHARED = 0.9  # of a GPU's memory, split among the tasks that share it (--tasks-per-gpu)
_NVIDIA_SMI_GPU = re.compile(r"^GPU (\d+): (.*?)(?: \(UUID: [^)]*\))?$")


@dataclass(frozen=True)
class Gpus:
    """The GPUs a local sweep may use: their indices, their names (``nvidia-smi -L``; the device
    kind a result file records) and where the list came from (for messages)."""

    ids: tuple[int, ...]
    names: dict[int, str]
    source: str

    def kind(self) -> str | None:
        """The name of the first GPU (None where nvidia-smi did not say)."""
        return self.names.get(self.ids[0]) if self.ids else None


@dataclass(frozen=True)
class Slot:
    """Where one task runs: its GPUs (``CUDA_VISIBLE_DEVICES``, set by submitit's
    ``visible_gpus``) and the memory settings it gets where tasks share a GPU."""

    devices: tuple[int, ...]
    env: tuple[tuple[str, str], ...] = ()


def _nvidia_smi() -> tuple[dict[int, str], str]:
    """{index: name} of the GPUs ``nvidia-smi -L`` lists, and what was asked (for messages)."""
    if shutil.which("nvidia-smi") is None:
        return {}, "nvidia-smi is not on PATH"
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as err:
        return {}, f"nvidia-smi -L failed ({err})"
    if out.returncode != 0:
        lines = (out.stderr or out.stdout).strip().splitlines()
        return {}, f"nvidia-smi -L failed ({lines[-1] if lines else f'exit status {out.returncode}'})"
    found = {int(m[1]): m[2] for m in map(_NVIDIA_SMI_GPU.match, out.stdout.splitlines()) if m}
    return found, "nvidia-smi -L"


def _indices(text: str, what: str) -> tuple[int, ...]:
    ids = []
    for part in (p.strip() for p in text.split(",")):
        if not part.isdigit():
            raise ValueError(f"{what}: expected GPU indices like 0,1,2 (as nvidia-smi -L numbers "
                             f"them), got {part!r} in {text!r}")
        ids.append(int(part))
    if len(set(ids)) != len(ids):
        raise ValueError(f"{what}: a GPU is listed twice in {text!r}")
    return tuple(ids)


def find_gpus(override: str | None = None) -> Gpus:
    """This machine's GPUs: ``--gpus`` where given, else the indices ``CUDA_VISIBLE_DEVICES``
    names (set but empty: none), else every GPU ``nvidia-smi -L`` lists. ValueError for a list
    that is not indices (a UUID in CUDA_VISIBLE_DEVICES: give ``--gpus``)."""
    if override is not None:
        names, _ = _nvidia_smi()
        return Gpus(_indices(override, "--gpus"), names, f"--gpus {override}")
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        if not visible.strip() or visible.strip() == "-1":
            return Gpus((), {}, f"CUDA_VISIBLE_DEVICES={visible!r} hides every GPU")
        names, _ = _nvidia_smi()
        return Gpus(_indices(visible, "CUDA_VISIBLE_DEVICES (give --gpus 0,1,... instead)"),
                    names, f"CUDA_VISIBLE_DEVICES={visible}")
    names, source = _nvidia_smi()
    return Gpus(tuple(sorted(names)), names, source)


def _shared_memory_env(tasks_per_gpu: int) -> tuple[tuple[str, str], ...]:
    """The memory setting of each of ``tasks_per_gpu`` tasks on one GPU: an explicit share (JAX
    takes 75% of a GPU by default, so a second task would fail to start). A setting already in
    the environment is the user's and is kept."""
    if tasks_per_gpu <= 1 or "XLA_PYTHON_CLIENT_MEM_FRACTION" in os.environ:
        return ()
    share = math.floor(100 * MEMORY_SHARED / tasks_per_gpu) / 100
    return (("XLA_PYTHON_CLIENT_MEM_FRACTION", f"{share:.2f}"),)


def check_device_flags(args: argparse.Namespace) -> None:
    """The GPU flags against the executor; ValueError with the one-line reason."""
    local_only = [f for f, given in (("--gpus", args.gpus is not None),
                                     ("--tasks-per-gpu", args.tasks_per_gpu != 1)) if given]
    if local_only and args.executor != "local":
        raise ValueError(f"{', '.join(local_only)} go with --executor local (under SLURM each "
                         f"task gets its own GPUs: --gpus-per-task)")
    if args.gpus_per_task is not None and args.executor not in ("local", "slurm"):
        raise ValueError(f"--gpus-per-task goes with --executor local or slurm; --executor "
                         f"{args.executor} runs each cell with every device this machine shows it")
    if args.gpus_per_task is not None and args.gpus_per_task < 0:
        raise ValueError(f"--gpus-per-task must be >= 0, got {args.gpus_per_task}")
    if args.tasks_per_gpu < 1:
        raise ValueError(f"--tasks-per-gpu must be >= 1, got {args.tasks_per_gpu}")
    if args.tasks_per_gpu > 1 and not args.gpus_per_task:
        raise ValueError("--tasks-per-gpu shares GPUs among tasks: give --gpus-per-task 1 too")


def local_slots(args: argparse.Namespace, gpus: Gpus | None = None) -> list[Slot]:
    """``--executor local --gpus-per-task N``: one slot per task that may run at once, each with
    its own N GPUs (``--tasks-per-gpu K``: K slots per group of GPUs, each with a 1/K share of
    memory), the first wave spread over every GPU. [] without ``--gpus-per-task`` (the CPU).
    ValueError where no GPU, or too few, are found."""
    check_device_flags(args)
    per_task = args.gpus_per_task or 0
    if args.executor != "local" or per_task == 0:
        return []
    gpus = gpus or find_gpus(args.gpus)
    if not gpus.ids:
        raise ValueError(f"--gpus-per-task {per_task}: no GPU found ({gpus.source}); give "
                         f"--gpus 0,1,... or leave --gpus-per-task out to run on the CPU")
    if per_task > len(gpus.ids):
        raise ValueError(f"--gpus-per-task {per_task}: only {len(gpus.ids)} GPU"
                         f"{'s' * (len(gpus.ids) != 1)} found ({gpus.source})")
    groups = [gpus.ids[i:i + per_task] for i in range(0, len(gpus.ids) - per_task + 1, per_task)]
    env = _shared_memory_env(args.tasks_per_gpu)
    return [Slot(group, env) for _ in range(args.tasks_per_gpu) for group in groups]


def placement_note(args: argparse.Namespace, slots: list[Slot], cells: int,
                   gpus: Gpus | None = None) -> str:
    """The one line that says where ``--executor local`` runs its cells."""
    if slots:
        gpus = gpus or find_gpus(args.gpus)
        used = sorted({d for s in slots for d in s.devices})
        idle = [g for g in gpus.ids if g not in used]
        shared = dict(slots[0].env).get("XLA_PYTHON_CLIENT_MEM_FRACTION")
        return (f"lra.sweep: {cells} cells on GPUs {','.join(map(str, used))} ({gpus.source}): "
                f"{len(slots)} at a time, {args.gpus_per_task} GPU{'s' * (args.gpus_per_task > 1)}"
                f" each" + (f", {args.tasks_per_gpu} tasks per GPU" if args.tasks_per_gpu > 1 else "")
                + (f" with XLA_PYTHON_CLIENT_MEM_FRACTION={shared}" if shared else "")
                + (f"; GPU{'s' * (len(idle) > 1)} {','.join(map(str, idle))} left idle "
                   f"({len(gpus.ids)} is not a multiple of {args.gpus_per_task})" if idle else ""))
    gpus = gpus or find_gpus(args.gpus)
    found = (f"{len(gpus.ids)} GPUs found here ({gpus.source}): --gpus-per-task 1 gives each "
             f"cell one of them" if gpus.ids else f"no GPU found here ({gpus.source})")
    return (f"lra.sweep: --executor local without --gpus-per-task runs every cell on the CPU, all "
            f"{cells} at once (submitit hides the GPUs from its tasks: CUDA_VISIBLE_DEVICES=''); "
            f"{found}")


def device_environment() -> dict[str, str | None]:
    """The device settings this process runs with (``DEVICE_ENV``): what a task received."""
    return {key: os.environ.get(key) for key in DEVICE_ENV}


@contextlib.contextmanager
def _environment(extra: dict[str, str]):
    """``extra`` in this process's environment while a job is submitted: submitit's local
    controller copies the environment it starts with, and its task and lra.run inherit it."""
    before = {key: os.environ.get(key) for key in extra}
    os.environ.update(extra)
    try:
        yield
    finally:
        for key, value in before.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def submit_on(executor, fn, slot: Slot):
    """Submit ``fn`` to submitit's local executor to run on ``slot``'s GPUs and settings."""
    executor.update_parameters(gpus_per_node=len(slot.devices), visible_gpus=slot.devices)
    with _environment(dict(slot.env)):
        return executor.submit(fn)


def submit_on_slots(executor, fns, slots: list[Slot], poll_s: float = 0.5,
                    started=None) -> list:
    """Submit each of ``fns`` once a slot is free (a job done frees its slot): as many run at once
    as there are slots. Returns the jobs in the order of ``fns``; ``started(index, job, slot)``
    is called as each starts. Returns after the last submission, not the last job's end."""
    free, running, jobs = list(slots), [], []
    for n, fn in enumerate(fns):
        while not free:
            stop_signals.poll()
            time.sleep(poll_s)
            for job, slot in list(running):
                if job.done():
                    running.remove((job, slot))
                    free.append(slot)
        slot = free.pop(0)
        job = submit_on(executor, fn, slot)
        jobs.append(job)
        running.append((job, slot))
        if started is not None:
            started(n, job, slot)
    return jobs


def _extra(pairs: list[str]) -> dict[str, Any]:
    extra = {}
    for pair in pairs:
        key, eq, value = pair.partition("=")
        if not eq or not key:
            raise ValueError(f"--slurm-extra: expected KEY=VALUE, got {pair!r}")
        extra[key.strip().replace("-", "_")] = value
    return extra


def make_executor(args: argparse.Namespace, folder: Path):
    """The submitit executor of ``args.executor`` with the cluster flags."""
    import submitit

    if args.executor == "debug":
        return submitit.DebugExecutor(folder=folder)
    if args.executor == "local":
        ex = submitit.LocalExecutor(folder=folder, max_num_timeout=args.max_requeues)
        ex.update_parameters(timeout_min=args.time, signal_delay_s=args.signal_delay_s)
        return ex
    if shutil.which("srun") is None:  # submitit's own check raises a RuntimeError with a traceback
        raise ValueError("--executor slurm needs SLURM's commands (srun, sbatch) on PATH; none found "
                         "on this machine (use --executor local to run the cells here)")
    ex = submitit.SlurmExecutor(folder=folder, max_num_timeout=args.max_requeues)
    params: dict[str, Any] = {"time": max(1, round(args.time)), "signal_delay_s": args.signal_delay_s,
                              "array_parallelism": args.array_parallelism, "job_name": "lra",
                              "additional_parameters": _extra(args.slurm_extra)}
    for key, value in (("partition", args.partition), ("gpus_per_task", args.gpus_per_task),
                       ("cpus_per_task", args.cpus_per_task),
                       ("mem", f"{args.mem_gb:g}GB" if args.mem_gb else None)):
        if value is not None:
            params[key] = value
    ex.update_parameters(**params)
    return ex


def specs(plans, args: argparse.Namespace) -> list[CellSpec]:
    """A CellSpec per plan (lra.sweep's Plan: cell, argv, workdir), its config resolved again by
    lra.run's parser, as the sweep's skip check does. Under ``--executor local`` each names this
    process as its owner: its task stops the run when the sweep is gone."""
    from lra import run as run_cli

    parser = run_cli.parser()
    owner = (os.getpid(), _start_time(os.getpid())) if args.executor == "local" else None
    out = []
    for p in plans:
        config = run_cli.resolve_config(parser.parse_args(p.argv)).to_dict()
        canonical = json.dumps(json.loads(json.dumps(config)), sort_keys=True)
        out.append(CellSpec(str(p.cell), tuple(p.argv), Path(p.workdir), Path(args.results_dir),
                            canonical, owner))
    return out


def _job_logs(job) -> tuple[str, ...]:
    try:
        files = (job.paths.stdout, job.paths.stderr)
    except Exception:  # (no paths for this kind of job)
        return ()
    return tuple(map(str, files)) if all(f.exists() for f in files) else ()


def _left_queue(job_id: str) -> bool:
    """True when squeue answers and no longer lists ``job_id`` (pending, running or requeued)."""
    try:
        out = subprocess.run(["squeue", "-h", "-o", "%i", "-j", job_id], capture_output=True,
                             text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return (out.returncode == 0 and not out.stdout.strip()) or "Invalid job id" in out.stderr


def _wait(job, poll_s: float) -> Any:
    """The job's result, or an Outcome saying why there is none. Polls the result pickle, since a
    SLURM without accounting gives sacct nothing to say (submitit then warns on every call, so
    the scheduler is asked only once a minute)."""
    asked = 0.0
    while type(job).__name__ != "DebugJob" and not job.paths.result_pickle.exists():
        if time.monotonic() - asked > (60 if poll_s >= 1 else 0):
            asked = time.monotonic()
            try:
                if job.done():
                    break
            except Exception:  # (sacct unavailable: keep polling the file)
                pass
            if type(job).__name__ == "SlurmJob" and _left_queue(str(job.job_id)):
                time.sleep(10)  # the result file may still be on its way (shared filesystem)
                if not job.paths.result_pickle.exists():
                    return Outcome("interrupted", f"job {job.job_id} left the queue without a "
                                                  f"result (see its stderr file)")
                break
        stop_signals.poll()  # a Ctrl-C whose raise Python dropped still ends the wait
        time.sleep(poll_s)
    try:
        return job.result()
    except Exception as err:  # (submitit's UncompletedJobError, FailedJobError, ...)
        lines = [ln for ln in str(err).splitlines() if ln.strip()]
        return Outcome("interrupted" if "not requeued" in str(err) else "failed",
                       lines[-1].strip() if lines else repr(err))


def submit(plans, args: argparse.Namespace, stream: TextIO | None = None) -> int:
    """Run lra.sweep's plans with ``args.executor``: skip and report the cells the plan settled
    (skip, conflict, invalid), submit the others, wait for them and print one line per cell.
    Returns the sweep's exit status."""
    stream = stream or sys.stderr
    try:
        import submitit  # noqa: F401
    except ImportError:
        print(f"error: {MISSING_SUBMITIT.format(executor=args.executor)}", file=stream)
        return 2
    if args.max_requeues < 0:
        print("error: --max-requeues must be >= 0", file=stream)
        return 2
    to_run = [p for p in plans if p.action in ("run", "resume")]
    try:
        folder = Path(args.workdirs) / "submitit" / "%j"
        executor = make_executor(args, folder)
        slots = local_slots(args)
        if args.executor == "local":
            print(placement_note(args, slots, len(to_run)), file=stream, flush=True)
    except ValueError as err:
        print(f"error: {err}", file=stream)
        return 2
    cells = dict(zip(map(id, to_run), specs(to_run, args)))
    calls = [RunCell(cells[id(p)], args.max_requeues, grace_s=max(10, args.signal_delay_s - 10))
             for p in to_run]
    jobs = []
    if calls and not slots:
        with executor.batch():
            jobs = [executor.submit(call) for call in calls]
    ids = sorted({str(j.job_id).split("_")[0] for j in jobs})
    print(f"lra.sweep: {len(to_run)} of {len(plans)} cells "
          + (f"to run, {len(slots)} at a time as GPUs free up" if slots else "submitted")
          + f" ({args.executor}" + (f", job {', '.join(ids)}" if ids else "") + f"); submitit logs "
          f"under {Path(args.workdirs) / 'submitit'}", file=stream, flush=True)
    board_job = None
    if args.executor == "slurm" and not args.no_leaderboard:
        board = make_executor(args, folder)
        board.update_parameters(array_parallelism=1, job_name="lra-leaderboard", time=30,
                                additional_parameters={**_extra(args.slurm_extra),
                                                       **({"dependency": f"afterany:{ids[0]}"}
                                                          if ids else {})})
        for key in ("gpus_per_task", "cpus_per_task", "mem"):
            board.parameters.pop(key, None)
        board_job = board.submit(rebuild_leaderboard, str(args.results_dir))
        print(f"lra.sweep: leaderboard rebuild is job {board_job.job_id}"
              + (f" (afterany:{ids[0]})" if ids else ""), file=stream, flush=True)

    try:
        with stop_signals.raising():  # only polling here: nothing a raise could leave half-done
            if slots:
                jobs = submit_on_slots(executor, calls, slots, started=lambda n, job, slot: print(
                    f"lra.sweep: {to_run[n].cell} started on GPU "
                    f"{','.join(map(str, slot.devices))} (job {job.job_id})", file=stream,
                    flush=True))
            stop_signals.test_hook("wait")
            outcomes = _collect(to_run, jobs, cells, args)
    except stop_signals.Stopped as stop:
        if args.executor == "slurm":
            what = (f"the submitted jobs ({', '.join(ids)}) stay in SLURM's queue; re-run the same "
                    f"command once they have ended to collect their results")
        else:
            what = ("its local tasks see it gone and stop their runs with a checkpoint; re-run the "
                    "same command to go on")
        print(f"{stop.args[0]}: sweep stopped while waiting for its cells; {what}", file=stream)
        return (stop_signals.EXIT_INTERRUPTED if stop.args[0] == "SIGINT"
                else stop_signals.EXIT_RESUMABLE)
    return _report(plans, outcomes, board_job, args, stream)


def _collect(to_run, jobs, cells, args: argparse.Namespace) -> dict[int, Outcome]:
    """Wait for every submitted cell; its Outcome by ``id`` of its plan."""
    outcomes: dict[int, Outcome] = {}
    for p, job in zip(to_run, jobs):
        got = _wait(job, poll_s=0.5 if args.executor != "slurm" else 5.0)
        outcome = got if isinstance(got, Outcome) else Outcome("failed", f"unexpected result {got!r}")
        outcome.job_logs = _job_logs(job)
        # Finished iff the result file exists, whatever the task said.
        found = find_result(args.results_dir, cells[id(p)].config)
        if found is not None:
            outcome.status, outcome.result_file = "done", str(found)
        elif outcome.status == "done":
            outcome.status, outcome.detail = "interrupted", "no result file"
        outcome.log = outcome.log or str(Path(p.workdir) / "sweep.log")
        outcomes[id(p)] = outcome
    return outcomes


def _report(plans, outcomes: dict[int, Outcome], board_job, args: argparse.Namespace,
            stream: TextIO) -> int:
    """One line per cell, the totals and the leaderboard's rebuild; the sweep's exit status."""
    to_run = [p for p in plans if p.action in ("run", "resume")]
    failed = 0
    print(f"lra.sweep summary ({args.executor}):", file=stream)
    for n, p in enumerate(plans, 1):
        head = f"[{n}/{len(plans)}] {p.cell}:"
        if p.action == "skip":
            print(f"{head} skipped ({p.detail})", file=stream)
            continue
        if p.action in ("conflict", "invalid"):
            failed += 1
            print(f"{head} FAILED: {p.detail}", file=stream)
            continue
        o = outcomes[id(p)]
        failed += o.status != "done"
        what = {"done": "done", "failed": "FAILED", "interrupted": "INTERRUPTED"}.get(o.status, o.status)
        detail = (f"result {Path(o.result_file).name}" if o.status == "done" else o.detail)
        requeued = f", requeued {o.requeues}x" if o.requeues else ""
        print(f"{head} {what} ({detail}{requeued}); log {o.log}"
              + (f"; job stdout {o.job_logs[0]} stderr {o.job_logs[1]}" if o.job_logs else ""),
              file=stream)
    done = sum(outcomes[id(p)].status == "done" for p in to_run)
    print(f"{done} done, {failed} not done, {sum(p.action == 'skip' for p in plans)} skipped "
          f"({len(plans)} cells)", file=stream)
    if board_job is not None:
        code = _wait(board_job, poll_s=5.0)
        print(f"leaderboard job {board_job.job_id}: "
              + ("rebuilt" if code == 0 else f"{getattr(code, 'detail', code)}"), file=stream)
        if code != 0:
            return 1
    elif not args.no_leaderboard:
        if rebuild_leaderboard(str(args.results_dir)) != 0:
            return 1
    return 1 if failed else 0
