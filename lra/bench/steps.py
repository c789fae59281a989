"""Speed, memory and FLOPs of one training step per attention family and length (LRA Table 2).

    python -m lra.bench --attn all --lengths 1024,2048,3072,4096            # LRA's protocol, batch 32
    python -m lra.bench --attn all --lengths 512,1024,2048 --batch 4        # what fits a 24 GiB CPU
    python -m lra.bench --attn softmax,performer --dtype bfloat16 --steps 20 --out my.json
    python -m lra.bench --attn linear --lengths 64,128 --batch 2 --preset tiny   # smoke run

For each (family, length) the bench resolves the family's run config as ``python -m lra.run`` does
(``lra.config.load(task, family, preset=--preset, overrides=--set)``, with ``model.dtype`` and
``train.batch_size`` from ``--dtype`` and ``--batch``), builds the trainer's own model, state and step
(``lra.train.create_train_state``: forward, backward, optimizer update, dropout on) with the model's
longest input set to that length, then measures (``lra/bench/measure.py``):

* **steps/s**: the median of ``--steps`` timed steps after compilation and ``--warmup`` steps. Every
  round times one step of every (family, length), so drift (thermal, other processes) hits all alike;
  speed relative to ``softmax`` (always measured) comes from the same run. The step timed is the
  program the trainer would run: on CPU compiled with or without XLA's YNN fusions, whichever is
  faster for that config (``--xla-cpu-fusions auto``, chosen as ``lra.train`` chooses it:
  ``lra/xla_cpu.py``); the choice and both times are in each record.
* **peak memory**: on CPU, XLA's compiled memory analysis (arguments + outputs - donated aliases +
  temporaries) of the step compiled without the YNN fusions (their scratch is not counted otherwise),
  cross-checked against the process's RSS growth during that program's first step. On GPU/TPU, the device's
  ``peak_bytes_in_use``, which is a process-wide high-water mark: each config is therefore measured
  in a fresh subprocess (``--isolate``, on by default there).
* **FLOPs/step**: ``compiled.cost_analysis()``. XLA counts a while loop's body once whatever its trip
  count, so steps with loops (chunked scans) also get a count of matmul/convolution FLOPs from the
  jaxpr that multiplies by scan lengths; the larger of the two (both are lower bounds then) gives the
  achieved FLOP/s, as a fraction of this device's matmul peak, measured in the same run.

A config whose compiled memory would not fit (``--memory-budget-gb``, else the free device or host
memory) is recorded as skipped with the reason before anything runs; a family that fails to import,
build or compile, or runs out of memory anyway (XLA ``RESOURCE_EXHAUSTED``), is recorded as skipped with
the error. The result file goes to ``results/efficiency/`` (never overwritten); ``python -m
lra.leaderboard`` turns it into tables and figures. "Length" is the number of input tokens; with CLS
pooling the encoder sees one more.

``--device-lock PATH`` lets several bench processes share one accelerator: each compiles its cases
(XLA compiles on the host's cores), then waits for an exclusive lock on PATH before it touches the
device for sizing, the matmul peak, the warm-up and the timing, and holds it until it exits, so
that no two processes time steps at once (``lra.bench.device_check`` runs its efficiency phase so).

A bench file holds a whole measurement or nothing: it is written once, at the end, under a temporary
name linked to its own (``lra.results.write_new``: no empty or cut-short file after a kill or a full
disk). SIGTERM, SIGINT or
SIGUSR2 stop the bench at the next safe point (between two compilations or two steps: the handler
only sets a flag, ``lra.stop_signals``), before the file is written: what was measured so far is
dropped (a part of the grid, or fewer steps than asked, is not a measurement to tabulate), one line
says so and the exit status is 75; the same command measures again. A signal while the file is
written lets it finish (exit 0).
"""

from __future__ import annotations

import os

# Before jax initialises its backends: an accelerator must not preallocate most of its memory, or a
# measuring subprocess could not get any and peak_bytes_in_use would mean nothing.
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

import argparse
import dataclasses
import fcntl
import importlib
import json
import pkgutil
import re
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import Any

import jax
import numpy as np
from tqdm.auto import tqdm

from lra import attention, results, sharding, stop_signals, tasks, xla_cpu
from lra import config as config_lib
from lra import workdir as workdir_lib
from lra.bench import measure
from lra.bench.efficiency import SCHEMA, fit_slopes
from lra.results import RESULTS_DIR_HELP, default_results_dir
from lra.train import create_train_state

BASELINE = "softmax"
DEFAULT_LENGTHS = (1024, 2048, 3072, 4096)
FIT_MARGIN = 0.85  # share of the free memory a run may plan to use (allocator slack, compiler, RSS)
_RESULT_MARK = "LRA_BENCH_RESULT "  # how a measuring subprocess hands back its JSON


# ----------------------------------------------------------------------------------------------
# The models: each family's run config, as lra.run resolves it.


def discover_families() -> tuple[list[str], dict[str, str]]:
    """Registered family names, and {file: error} for family files that fail to import."""
    try:
        return attention.available(), {}
    except ImportError:
        pass
    broken = {}
    for info in pkgutil.iter_modules(attention.__path__):
        if not info.name.startswith("_"):
            try:
                importlib.import_module(f"lra.attention.{info.name}")
            except Exception as err:  # record it; the other families still run
                broken[info.name] = f"attention/{info.name}.py failed to import: {err!r}"
    return attention.available(), broken


def run_config(task: str, family: str, preset: str, overrides: list[str], batch: int, dtype: str,
               seed: int) -> config_lib.Config:
    """``family``'s run config on ``task``: ``--preset`` and ``--set`` as lra.run applies them, then
    the bench's ``--dtype`` and ``--batch`` (raises ``ConfigError``)."""
    return config_lib.load(task, family, preset=preset, seed=seed,
                           overrides=[*overrides, f"model.dtype={dtype}", f"train.batch_size={batch}"])


def make_batch(task: tasks.Task, batch: int, length: int, seed: int = 0) -> dict[str, np.ndarray]:
    """Random tokens for each of the task's inputs with a real padding mask: true lengths in
    [L/2, L], the first example's 3L/4; ``inputs*``: int32[B, L], ``mask*``: bool[B, L]."""
    rng = np.random.default_rng(seed)
    out = {}
    for name in task.inputs:
        lengths = rng.integers(max(1, length // 2), length + 1, size=batch)
        lengths[0] = max(1, (3 * length) // 4)
        mask = np.arange(length)[None, :] < lengths[:, None]
        ids = np.where(mask, rng.integers(1, task.vocab_size, size=(batch, length)), task.pad_id)
        out[name], out["mask" + name[len("inputs"):]] = ids.astype(np.int32), mask
    if task.per_position:  # a target at every position, a quarter of them counted
        out["targets"] = rng.integers(0, task.num_classes, size=(batch, length)).astype(np.int32)
        out["target_mask"] = rng.random((batch, length)) < 0.25
    else:
        out["targets"] = rng.integers(0, task.num_classes, size=batch).astype(np.int32)
    return out


def _is_oom(err: BaseException) -> bool:
    return isinstance(err, MemoryError) or "RESOURCE_EXHAUSTED" in str(err)


def _short(err: BaseException, limit: int = 400) -> str:
    text = f"{type(err).__name__}: {err}".replace("\n", " ")
    return text if len(text) <= limit else text[:limit] + " ..."


def gib(n: float) -> str:
    return f"{n / 2**30:.2f} GiB"


# ----------------------------------------------------------------------------------------------
# One (family, length) configuration.


@dataclasses.dataclass
class Case:
    attention: str
    length: int
    status: str = "pending"  # -> "ok" | "skipped"
    reason: str | None = None
    options: dict[str, Any] = dataclasses.field(default_factory=dict)
    compile_s: float | None = None
    compiled_memory: dict[str, int] = dataclasses.field(default_factory=dict)
    memory: dict[str, Any] = dataclasses.field(default_factory=dict)
    flops: dict[str, Any] = dataclasses.field(default_factory=dict)
    times: list[float] = dataclasses.field(default_factory=list)
    loss: float | None = None
    fusions: dict[str, Any] = dataclasses.field(default_factory=dict)  # lra.xla_cpu's choice
    # runtime objects, not saved
    compiled: Any = None  # the program timed
    variants: dict[str, Any] = dataclasses.field(default_factory=dict)  # "memory", "on", "off"
    lowered: Any = None  # to compile the other step program when it is needed
    make: Any = None
    args: Any = None

    def skip(self, reason: str) -> None:
        self.status, self.reason = "skipped", reason
        self.compiled = self.args = self.make = self.lowered = None
        self.variants = {}

    @property
    def resident(self) -> int:
        """Bytes that stay allocated between steps: state, non-trainable variables, batch."""
        return self.compiled_memory["argument"]

    @property
    def transient(self) -> int:
        """Extra bytes while a step runs: temporaries and the outputs not aliased to donated inputs."""
        c = self.compiled_memory
        return c["temp"] + c["output"] - c["alias"]


class Bench:
    """Compiles, sizes and runs the cases of one invocation (one process, one device mesh)."""

    def __init__(self, task: str, preset: str, overrides: list[str], batch: int, dtype: str,
                 seed: int = 0):
        self.task, self.preset, self.overrides = task, preset, list(overrides)
        self.batch, self.dtype, self.seed = batch, dtype, seed
        self.mesh = sharding.make_mesh()
        sharding.check_batch_size(batch, self.mesh, "--batch")
        self.data = sharding.batch_sharding(self.mesh)
        self._configs: dict[str, config_lib.Config] = {}

    def config(self, family: str) -> config_lib.Config:
        if family not in self._configs:
            self._configs[family] = run_config(self.task, family, self.preset, self.overrides,
                                               self.batch, self.dtype, self.seed)
        return self._configs[family]

    def lower(self, case: Case):
        """Trace and lower the step from abstract shapes (nothing is allocated); count its FLOPs."""
        t0 = time.perf_counter()
        config = self.config(case.attention)
        case.options = dict(config.attn)
        task = tasks.build(config.task, Path("."), **config.data)  # facts only: reads no files
        setup = create_train_state(config, task, self.mesh, init="abstract", max_len=case.length)
        batch = jax.tree.map(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype),
                             make_batch(task, self.batch, case.length))
        traced = setup.train_step.trace(setup.state, setup.rest, batch,
                                        jax.eval_shape(lambda: jax.random.key(0)))
        mm, loops = measure.matmul_flops(traced.jaxpr.jaxpr)
        case.flops = {"matmul": float(mm), "loops": loops}
        case.make = lambda: (create_train_state(config, task, self.mesh, init="eager",
                                                max_len=case.length),
                             make_batch(task, self.batch, case.length))
        case.lowered = traced.lower()
        case.compile_s = time.perf_counter() - t0
        return case.lowered

    def finish(self, case: Case, compiled, compile_s: float) -> None:
        """Keep the executable and read its memory and cost analyses (``memory_options``)."""
        case.compile_s = round(case.compile_s + compile_s, 3)
        case.variants["memory"] = case.compiled = compiled
        case.compiled_memory = measure.compiled_memory(compiled)
        xla = measure.xla_flops(compiled)
        case.flops = {"xla": xla, **case.flops, "per_step": max(xla, case.flops["matmul"])}

    def compile(self, case: Case) -> None:
        lowered = self.lower(case)
        self.finish(case, *_timed_compile(lowered, memory_options()))

    def materialize(self, case: Case) -> None:
        """Allocate the model, optimizer state and batch of an accepted case on the devices
        (eagerly: ``create_train_state``'s ``init="eager"``)."""
        setup, batch = case.make()
        case.args = [setup.state, setup.rest, sharding.to_global(batch, self.data)]

    def step(self, case: Case, key, program=None) -> float:
        """One training step of ``case`` (its timed program, or ``program``); returns its wall
        time in seconds."""
        state, rest, batch = case.args
        (state, metrics), elapsed = measure.timed(program or case.compiled, state, rest, batch, key)
        case.args[0] = state
        case.loss = float(metrics["loss"])
        return elapsed

    def first_step(self, case: Case, key) -> None:
        """The first (warm-up) step of the program the memory analysis describes, measuring the
        host RSS growth and the device's peak."""
        with measure.RssSampler() as rss:
            self.step(case, key, case.variants["memory"])
        case.memory = {"rss_growth": int(rss.growth), "rss_base": int(rss.base)}
        if (peak := measure.device_peak()) is not None:
            case.memory["device_peak"] = peak


    def choose(self, case: Case, choice: str, source: str, key) -> None:
        """Set the program to time as the trainer would (``lra.xla_cpu``): "auto" times both
        variants on copies of the materialized state, as ``lra.train`` does before its first step.

        A variant other than the memory-analysis program is compiled here, one case at a time,
        and only the chosen program is kept: every case holding two executables until the end
        exhausted the process's memory mappings on the full 2-core run (57 cases), and LLVM failed.
        """
        for variant in (xla_cpu.OPTIONS if choice == "auto" else [choice]):
            if xla_cpu.OPTIONS[variant] == memory_options():
                case.variants[variant] = case.variants["memory"]
            elif variant not in case.variants:
                compiled, seconds = _timed_compile(case.lowered, xla_cpu.OPTIONS[variant])
                case.compile_s = round(case.compile_s + seconds, 3)
                case.variants[variant] = compiled
        case.fusions = {"choice": choice, "source": source}
        if choice == "auto":
            choice, medians = xla_cpu.pick_step(case.variants.__getitem__, *case.args, key)
            case.fusions = {"choice": choice, "source": source, "step_s": medians}
        case.compiled = case.variants[choice]
        case.variants, case.lowered = {}, None
        # The program not chosen stays mapped while JAX's caches hold its lowering: drop them
        # (the chosen programs are held by their cases). Without this the full 2-core run passed
        # Linux's default limit of 65,530 memory mappings per process (about 70,000).
        jax.clear_caches()


def memory_options() -> dict[str, str] | None:
    """Compiler options of the program whose memory analysis is recorded: on CPU without the YNN
    fusions, whose scratch memory the analysis does not count."""
    return xla_cpu.OPTIONS["off"] if jax.default_backend() == "cpu" else None


def _timed_compile(lowered, options: dict[str, str] | None = None):
    t0 = time.perf_counter()
    return lowered.compile(compiler_options=options), time.perf_counter() - t0


def plan_fit(cases: list[Case], budget: int, source: str) -> None:
    """Skip cases whose compiled memory would not fit in ``budget`` bytes, before anything runs.

    The timing loop keeps every accepted case's state allocated and runs one step at a time, so the
    accepted set must satisfy sum(resident) + max(transient) <= budget. Smallest cases go first.
    """
    resident, transient = 0, 0
    for case in sorted((c for c in cases if c.status == "pending"),
                       key=lambda c: (c.compiled_memory["total"], c.attention, c.length)):
        c = case.compiled_memory
        need = resident + case.resident + max(transient, case.transient)
        if need <= budget:
            resident, transient = resident + case.resident, max(transient, case.transient)
            continue
        detail = (f"compiled memory analysis: {gib(c['total'])} (arguments {gib(c['argument'])}, "
                  f"temporaries {gib(c['temp'])}, outputs {gib(c['output'] - c['alias'])} not "
                  f"aliased)")
        if c["total"] > budget:
            case.skip(f"would not fit: needs {detail}; budget {gib(budget)} ({source})")
        else:
            case.skip(f"would not fit next to the other configs' state: {gib(need)} in all, "
                      f"{detail}; budget {gib(budget)} ({source})")


# ----------------------------------------------------------------------------------------------
# The run.


def _run_isolated(case: Case, args: argparse.Namespace) -> dict[str, Any]:
    """Measure one case's device peak in a fresh process (peak_bytes_in_use is process-wide)."""
    spec = {"attention": case.attention, "length": case.length, "task": args.task,
            "preset": args.preset, "overrides": args.overrides, "batch": args.batch,
            "dtype": args.dtype, "seed": args.seed, "budget": args.budget_bytes}
    proc = subprocess.run([sys.executable, "-m", "lra.bench", "--_measure", json.dumps(spec)],
                          capture_output=True, text=True, check=False)
    for line in proc.stdout.splitlines():
        if line.startswith(_RESULT_MARK):
            return json.loads(line[len(_RESULT_MARK):])
    return {"status": "skipped",
            "reason": f"measuring subprocess exited {proc.returncode}: {proc.stderr[-400:]}"}


def _measure_one(spec: dict[str, Any]) -> dict[str, Any]:
    """Subprocess side of ``_run_isolated``: compile, check the fit, run one step, report."""
    bench = Bench(spec["task"], spec["preset"], spec["overrides"], spec["batch"], spec["dtype"],
                  spec["seed"])
    case = Case(spec["attention"], spec["length"])
    try:
        bench.compile(case)
        budget, source = (spec["budget"], "--memory-budget-gb") if spec["budget"] else measure.free_memory()
        plan_fit([case], int(budget if spec["budget"] else budget * FIT_MARGIN), source)
        if case.status == "pending":
            bench.materialize(case)
            bench.first_step(case, jax.random.key(0))
    except Exception as err:
        case.skip(("out of memory at run time: " if _is_oom(err) else "failed: ") + _short(err))
    return {"status": "ok" if case.status == "pending" else case.status, "reason": case.reason,
            "memory": case.memory, "compiled_memory": case.compiled_memory}


def summarize(cases: list[Case], isolated: bool) -> list[dict[str, Any]]:
    """One JSON record per case, with ratios against softmax at the same length."""
    records = []
    for case in sorted(cases, key=lambda c: (c.attention, c.length)):
        rec: dict[str, Any] = {"attention": case.attention, "length": case.length,
                               "status": case.status, "reason": case.reason,
                               "attn_options": case.options, "compile_s": case.compile_s,
                               "xla_cpu_fusions": case.fusions,
                               "compiled_memory": case.compiled_memory, "flops": case.flops}
        if case.status == "ok":
            median = statistics.median(case.times)
            mem = dict(case.memory)
            if isolated and "device_peak" in mem:
                mem["bytes"], mem["source"] = mem["device_peak"], "device peak_bytes_in_use (fresh process)"
            else:
                mem["bytes"] = case.compiled_memory["total"]
                mem["source"] = ("XLA compiled memory analysis: arguments + outputs - aliased + "
                                 "temporaries")
            transient = case.compiled_memory["temp"] + case.compiled_memory["output"] - \
                case.compiled_memory["alias"]
            mem["rss_growth_vs_compiled_transient"] = (round(mem["rss_growth"] / transient, 3)
                                                       if transient and "rss_growth" in mem else None)
            rec.update({
                "step_time_s": {"median": median, "min": min(case.times), "max": max(case.times),
                                "samples": list(case.times)},
                "steps_per_s": 1.0 / median, "memory": mem, "final_loss": case.loss,
                "achieved_flops_per_s": case.flops["per_step"] / median,
            })
        records.append(rec)
    base = {r["length"]: r for r in records if r["attention"] == BASELINE and r["status"] == "ok"}
    for r in records:
        b = base.get(r["length"])
        ok = r["status"] == "ok" and b is not None
        r["speed_vs_softmax"] = r["steps_per_s"] / b["steps_per_s"] if ok else None
        r["memory_vs_softmax"] = r["memory"]["bytes"] / b["memory"]["bytes"] if ok else None
    return records


def default_out(results_dir: Path, task: str, batch: int, dtype: str) -> Path:
    d = results.device_info()
    kind = re.sub(r"[^a-z0-9]+", "-", d["kind"].lower()).strip("-")
    device = d["platform"] if kind == d["platform"] else f"{d['platform']}-{kind}"
    stamp = results.now().replace(":", "").replace("-", "")
    return (Path(results_dir) / "efficiency" /
            f"{task}__{device}-x{d['count']}__b{batch}__{dtype}__{stamp}.json")


def write_unique(path: Path, record: dict[str, Any]) -> Path:
    """Write ``record`` under ``path``, or ``path`` with _1, _2, ... before the suffix where that
    name is taken; returns the name written. Never overwrites, and the file appears whole or not at
    all (``results.write_new``: a kill or a full disk leaves no empty or cut-short file)."""
    for n in range(1000):
        candidate = path if n == 0 else path.with_name(f"{path.stem}_{n}{path.suffix}")
        try:
            results.write_new(candidate, record)
            return candidate
        except FileExistsError:
            continue
    raise RuntimeError(f"no free file name next to {path}")


def select_cases(args: argparse.Namespace) -> tuple[list[str], list[Case]]:
    """The families to measure (softmax, the baseline, always among them) and one case per
    (family, length); a family that failed to import is skipped with its error."""
    names, broken = discover_families()
    wanted = ([*names, *broken] if args.attn == "all"
              else [a.strip() for a in args.attn.split(",") if a.strip()])
    for name in wanted:
        if name not in names and name not in broken:
            attention.family(name)  # raises with the valid names
    families = sorted(set(wanted) | {BASELINE})
    cases = [Case(a, length) for a in families for length in args.lengths]
    for case in cases:
        if case.attention in broken:
            case.skip(broken[case.attention])
    return families, cases


def compile_all(bench: Bench, cases: list[Case], bar, stops: stop_signals.StopSignals) -> None:
    """Trace every pending case here and compile on worker threads (XLA releases the GIL):
    compilation dominates start-up. A stop signal cancels the compilations not started yet
    (``Stopped`` once the running ones end)."""
    with ThreadPoolExecutor(max_workers=max(1, min(4, os.cpu_count() or 1))) as pool:
        jobs = {}
        try:
            for case in _pending(cases):
                stop_signals.check(stops, "lower")
                bar.set_postfix_str(f"{case.attention} L={case.length}", refresh=True)
                try:
                    jobs[pool.submit(_timed_compile, bench.lower(case), memory_options())] = case
                except Exception as err:
                    case.skip(f"failed to build or compile: {_short(err)}")
                    bar.update(1)
            for job in as_completed(jobs):
                stop_signals.check(stops, "compiled")
                case = jobs[job]
                try:
                    bench.finish(case, *job.result())
                except Exception as err:
                    case.skip(f"failed to build or compile: {_short(err)}")
                bar.update(1)
        except stop_signals.Stopped:
            for job in jobs:
                job.cancel()
            raise


def memory_budget(args: argparse.Namespace) -> tuple[int, str]:
    """Bytes a config may plan to use and where that number comes from."""
    if args.budget_bytes:
        return args.budget_bytes, "--memory-budget-gb"
    budget, source = measure.free_memory()
    return int(budget * FIT_MARGIN), f"{source} x {FIT_MARGIN}"


def measure_isolated(cases: list[Case], args: argparse.Namespace, bar,
                     stops: stop_signals.StopSignals) -> None:
    """Each pending case's device peak, measured in a fresh process of its own."""
    bar.set_description("memory (fresh process per config)")
    for case in _pending(cases):
        stop_signals.check(stops, "isolate")
        bar.set_postfix_str(f"{case.attention} L={case.length}", refresh=True)
        out = _run_isolated(case, args)
        if out["status"] != "ok":
            case.skip(out["reason"])
        else:
            case.memory = out["memory"]
        bar.update(1)


def _run_time_error(err: BaseException) -> str:
    return (("out of memory at run time: " if _is_oom(err) else "failed at run time: ")
            + _short(err))


def warm_up(bench: Bench, cases: list[Case], args: argparse.Namespace, keys, isolate: bool,
            fusions: tuple[str, str], bar, stops: stop_signals.StopSignals) -> None:
    """Materialize each case, run its first step, pick its step program (with or without XLA:CPU's
    YNN fusions, as lra.run would: ``fusions`` is ``xla_cpu.resolve``'s answer) and run the untimed
    ``--warmup`` steps."""
    choice, fusions_source = fusions
    bar.set_description("warm-up")
    for case in _pending(cases):
        stop_signals.check(stops, "warmup")
        bar.set_postfix_str(f"{case.attention} L={case.length}", refresh=True)
        try:
            bench.materialize(case)
            memory = case.memory
            bench.first_step(case, keys[0])
            if isolate:  # keep the fresh process's device peak; this process's is a high-water mark
                case.memory = {**case.memory, **memory}
            bench.choose(case, choice, fusions_source, keys[0])
            for i in range(args.warmup):
                bench.step(case, keys[1 + i])
        except Exception as err:
            case.skip(_run_time_error(err))
        bar.update(1 + args.warmup)


def time_round_robin(bench: Bench, cases: list[Case], args: argparse.Namespace, keys, bar,
                     stops: stop_signals.StopSignals) -> None:
    """``--steps`` rounds of one timed step per pending case, so that drift hits all alike."""
    bar.set_description("timing (round-robin)")
    for i in range(args.steps):
        for case in _pending(cases):
            stop_signals.check(stops, "time")
            try:
                case.times.append(bench.step(case, keys[1 + args.warmup + i]))
            except Exception as err:
                case.skip(_run_time_error(err))
            bar.update(1)


def wait_for_device_lock(path: Path, stops: stop_signals.StopSignals | None = None) -> int:
    """Block until this process holds an exclusive lock on ``path`` (created if missing); returns
    its descriptor, which holds the lock until it is closed or the process ends. Polls, so that a
    stop signal (``stops``) ends the wait at once with ``Stopped``."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return fd
            except BlockingIOError:
                if stops is not None:
                    stop_signals.check(stops, "lock")
                time.sleep(0.05)
    except BaseException:
        os.close(fd)
        raise


def _pending(cases: list[Case]):
    return (case for case in cases if case.status == "pending")


def run(args: argparse.Namespace, stops: stop_signals.StopSignals) -> dict[str, Any]:
    """The whole benchmark; returns the result record (``main`` writes it to ``args.out``). Raises
    ``Stopped`` at the first safe point after a stop signal."""
    families, cases = select_cases(args)
    bench = Bench(args.task, args.preset, args.overrides, args.batch, args.dtype, args.seed)
    platform = jax.devices()[0].platform
    isolate = args.isolate == "yes" or (args.isolate == "auto" and platform != "cpu")
    fusions = xla_cpu.resolve(args.xla_cpu_fusions)  # a bad choice fails before any compile
    n_pending = sum(1 for _ in _pending(cases))
    bar = tqdm(total=n_pending * (2 + isolate + args.warmup + args.steps), desc="compile",
               disable=not args.progress, dynamic_ncols=True, file=sys.stderr)
    compile_all(bench, cases, bar, stops)
    if args.device_lock is not None:
        bar.set_description("waiting for the device lock")
        args.lock_fd = wait_for_device_lock(args.device_lock, stops)  # held until exit
    budget, source = memory_budget(args)
    plan_fit(cases, budget, source)
    if isolate:
        measure_isolated(cases, args, bar, stops)
    peak = measure.matmul_peak(args.dtype, args.peak_size)
    keys = [jax.random.key(i) for i in range(1 + args.warmup + args.steps)]
    warm_up(bench, cases, args, keys, isolate, fusions, bar, stops)
    time_round_robin(bench, cases, args, keys, bar, stops)
    bar.close()
    for case in cases:
        if case.status == "pending":
            case.status = "ok"
        case.args = case.compiled = case.make = case.lowered = None
        case.variants = {}
    records = summarize(cases, isolate)
    for r in records:
        if r["status"] == "ok":
            r["fraction_of_peak"] = r["achieved_flops_per_s"] / peak["flops_per_s"]
    return {
        "schema": SCHEMA, "kind": "efficiency", "task": args.task, "preset": args.preset,
        "config": args.config.to_dict(), "model": args.model,
        "batch": args.batch, "dtype": args.dtype, "lengths": list(args.lengths), "families": families,
        "steps": args.steps, "warmup": args.warmup, "seed": args.seed,
        "memory_method": ("device peak_bytes_in_use, one fresh process per config" if isolate else
                          "XLA compiled memory analysis (arguments + outputs - aliased + temporaries), "
                          "YNN fusions off; RSS growth of the first step as a cross-check"),
        "memory_budget": {"bytes": budget, "source": source},
        "matmul_peak": peak, "results": records, "slopes": fit_slopes(records),
        "device": results.device_info(), "versions": results.versions(), "git": results.git_commit(),
        "date": results.now(), "xla_flags": os.environ.get("XLA_FLAGS", ""),
        "command": ["python", "-m", "lra.bench", *args.argv],
    }


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m lra.bench", description=__doc__.split("\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="See the module docstring (lra/bench/steps.py) for what is measured.")
    p.add_argument("--attn", default="all",
                   help="'all' or comma-separated family names (softmax, the baseline, is always added)")
    p.add_argument("--lengths", default=",".join(map(str, DEFAULT_LENGTHS)),
                   help="comma-separated input lengths (default: %(default)s)")
    p.add_argument("--batch", type=int, default=32, help="global batch (default: %(default)s, LRA's)")
    p.add_argument("--dtype", default="float32", choices=("float32", "bfloat16"))
    p.add_argument("--task", default="text", choices=tasks.available(),
                   help="whose model to time, from configs/<task>.py (default: text, as in LRA's "
                        "Table 2)")
    p.add_argument("--preset", default="paper", choices=config_lib.PRESETS,
                   help="the configs' preset, as lra.run --preset (default: %(default)s)")
    p.add_argument("--steps", type=int, default=10, help="timed steps per config (default: %(default)s)")
    p.add_argument("--warmup", type=int, default=2, help="untimed steps after compilation (default: 2)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a config key of every family's run config, as lra.run --set "
                        "(e.g. --set model.num_layers=1 --set model.emb_dim=64)")
    p.add_argument("--memory-budget-gb", type=float, default=None,
                   help="plan against this many GiB instead of the free device/host memory")
    p.add_argument("--isolate", default="auto", choices=("auto", "yes", "no"),
                   help="measure each config's device peak in a fresh process (auto: on GPU/TPU)")
    p.add_argument("--peak-size", type=int, default=None,
                   help="matrix size of the matmul-peak measurement (default: 2048 CPU, 8192 else)")
    p.add_argument("--xla-cpu-fusions", default="auto", choices=xla_cpu.CHOICES,
                   help="time the step compiled with XLA:CPU's YNN fusions (on), without (off), or "
                        "the faster of the two as lra.run picks it (auto, the default)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=None,
                   help="result file (default: <results-dir>/efficiency/<task>__<device>__b<batch>__"
                        "<dtype>__<date>.json); an existing file is never overwritten")
    p.add_argument("--results-dir", type=Path, default=default_results_dir(), help=RESULTS_DIR_HELP)
    p.add_argument("--no-progress", dest="progress", action="store_false", help="no progress bar")
    p.add_argument("--device-lock", type=Path, default=None, metavar="PATH",
                   help="after compiling, wait for an exclusive lock on PATH before using the "
                        "device (several bench processes sharing one accelerator)")
    p.add_argument("--_measure", default=None, help=argparse.SUPPRESS)
    return p


def main(argv: list[str] | None = None) -> int:
    """Exit status: 0 measured and written, 1 the bench file cannot be written, 2 bad command line,
    75 stopped by SIGTERM, SIGINT or SIGUSR2 before the file was written (nothing written)."""
    with stop_signals.handling() as stops:  # shares the flag ``__main__`` set before JAX loaded
        try:
            return _main(argv, stops)
        except stop_signals.Stopped as stop:
            print(f"{stop.args[0]}: stopped before the measurement finished; nothing written (a "
                  f"bench file holds a whole measurement or nothing); re-run the same command",
                  file=sys.stderr)
            return stop_signals.EXIT_RESUMABLE


def _main(argv: list[str] | None, stops: stop_signals.StopSignals) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parser().parse_args(argv)
    if args._measure is not None:
        print(_RESULT_MARK + json.dumps(_measure_one(json.loads(args._measure))), flush=True)
        return 0
    try:
        args.lengths = sorted({int(x) for x in args.lengths.split(",") if x.strip()})
        if not args.lengths or min(args.lengths) < 1:
            raise ValueError("--lengths needs positive integers")
        if args.batch < 1 or args.steps < 1 or args.warmup < 0:
            raise ValueError("--batch and --steps must be >= 1, --warmup >= 0")
        # The baseline's config: a --set that no run could take is an error here, not a skip.
        args.config = run_config(args.task, BASELINE, args.preset, args.overrides, args.batch,
                                 args.dtype, args.seed)
        task = tasks.build(args.task, Path("."), **args.config.data)
        args.model = {**dataclasses.asdict(args.config.model), "vocab_size": task.vocab_size,
                      "num_classes": task.num_classes}
        if args.out is not None and args.out.exists():
            raise ValueError(f"{args.out} exists; the bench never overwrites a result file")
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    folder = args.out.parent if args.out is not None else Path(args.results_dir) / "efficiency"
    try:  # before minutes of measuring, not after
        workdir_lib.check_folder_writable(folder, "--out" if args.out is not None
                                          else "--results-dir")
    except OSError as err:
        print(f"error: {err.strerror or err}", file=sys.stderr)
        return 1
    args.budget_bytes = int(args.memory_budget_gb * 2**30) if args.memory_budget_gb else None
    args.argv = argv
    try:
        stop_signals.check(stops, "start")
        record = run(args, stops)
    except (attention.UnknownAttentionError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    stop_signals.check(stops, "write")
    out = args.out or default_out(args.results_dir, args.task, args.batch, args.dtype)
    try:
        out = write_unique(out, record)
    except OSError as err:  # the folder became unwritable, or the disk filled, while measuring
        print(f"error: cannot write the bench file {out}: {err.strerror or err}; nothing written",
              file=sys.stderr)
        return 1
    ok = [r for r in record["results"] if r["status"] == "ok"]
    skipped = [r for r in record["results"] if r["status"] != "ok"]
    print(f"wrote {out}: {len(ok)} configs measured, {len(skipped)} skipped")
    for r in skipped:
        print(f"  skipped {r['attention']} L={r['length']}: {r['reason']}", file=sys.stderr)
    return 0

