"""One command for an accelerator window: ``python -m lra.bench.device_check``.

Five phases, in order, each ending by a fixed mark: the window's start plus the boxes of the
phases up to it (``--box-<phase>``, seconds; ``listops`` gets what ``--total`` leaves after the
others), so a phase that ends early passes its time on and a slow one cannot eat the next one's.
Every child process runs in its own process group; one still running ``--grace`` seconds before
its phase's mark gets SIGTERM (the trainer checkpoints), then SIGKILL at the mark, and is ``cut``.
Children run with ``XLA_PYTHON_CLIENT_PREALLOCATE=false`` so that several can share one GPU.

1. ``data`` (100 s): ListOps at the paper configuration (96,000 + 2,000 + 2,000 trees, lengths
   500-2000), generated with every usable core and written once without a per-file fsync (the
   window's disk is thrown away), then its token cache built once; both are skipped when present.
   The first window took 8 s to sample on 16 cores; the fsync of 661 MB and the cache ran past a
   60 s box. Provenance and timings go to ``data__listops.json``.
2. ``probe`` (45 s): one process per ListOps family (``--probe-parallel`` at once: XLA compiles on
   the host's cores), each building the trainer's own train and evaluation steps at the paper shape
   on the real data and compiling them, then, holding the device lock (one process on the device
   at a time), timing ``--probe-steps`` steps the way the trainer runs them (a host batch, the step,
   its metrics read back: ``sync_s``), the same steps queued without reading back (``device_s``,
   the device's own time per step), and evaluation batches. ``probe/<family>.json`` holds the
   times, the device's peak memory and the predicted seconds of a full run (``predicted_run_s``:
   start-up and compilation as measured, ``num_steps`` x ``sync_s``, and the evaluation batches
   of a validation every ``eval_every`` steps with a test pass after each one, the worst case).
   The compilations also fill the persistent compilation cache when one is set
   (``scripts/device_window.sh`` sets one), which the runs then read.
3. ``listops`` (the rest, 265 s by default): LRA's protocol, paper preset, 5000 steps,
   ``model.dtype=bfloat16``, through ``lra.run`` into ``runs/``. The headline is the last step's test
   accuracy, which the validation interval does not change, so validation runs every
   ``--eval-every`` (500) steps instead of LRA's 50 (the override is in the result file's config).
   Order (``TRAIN_ORDER``): softmax (LRA Table 1: 36.37), cosformer (37.90, the cosFormer paper's
   row), then the families whose published ListOps cell this suite is most likely to contradict:
   Linear Transformer (16.13) and Performer (18.01), the two lowest cells, both among the
   implementations whose original code lets padding leak into real positions (fixed here), then
   Linformer and Reformer (the other two leaking ones), then the rest of Table 1's rows, then the
   families with no Table 1 cell. The schedule (``schedule``): a family starts only if
   ``RUN_MARGIN`` x its predicted seconds fit in the time left (else it is skipped, and a later,
   shorter one may still fit); several run at once while the sum of their device shares
   (``device_s / sync_s``: how busy one run keeps the device) stays within ``--share-cap`` and
   their peak memory within the device's, up to ``--max-at-once``; order is kept (a family that
   fits in time waits for room before any later one starts). Without probe results (the probe
   phase not run, or failed for every family) runs go one at a time, each started only if the
   time left is ``RUN_MARGIN`` x the longest run so far.
4. ``bench`` (120 s): ``lra.bench`` for every family, text task, batch 32, bfloat16 (LRA Table 2's
   protocol) at 1K-4K: one process per group of ``--bench-group-size`` families (softmax, the
   baseline, is timed in each), ``--bench-parallel`` at once compiling on the host, the device lock
   giving each its own turn for sizing and timing. Each process writes its file into
   ``bench-parts/`` as soon as its families are timed; after each one the parts so far are merged
   into one bench file in ``efficiency/`` (``merge_bench_parts``), so a cut loses the groups in
   flight, not the others. Attention dropout is off for every family alike.
5. ``kernels`` (30 s): the Pallas causal scans against the XLA scan at ``--scan-length``, values and
   gradients (``kernels__causal_scan.json``).

After every finished cell (the data, each probe, each run, each bench group, the kernels) the
summary ``efficiency/device-check__<device>__<date>.jsonl`` (one JSON line: each phase's box,
seconds, status, cells) is rewritten, and so is ``--bundle`` (a ``.tar.gz`` of the whole results
folder, replaced atomically): a window killed at any moment returns everything but the cells in
flight. Each child's output goes to ``logs/<cell>.log`` in the results folder. Exit status 0 only if
every phase passed. All sizes and times are options (``--time-scale`` multiplies every box) so that
a CPU test runs the same code at toy sizes (tests/bench/test_device_check.py); ``scripts/device_window.sh``
is the command to hand the device tool.
"""

from __future__ import annotations

import os

import lra._guard  # noqa: F401  (first: one line where lra was found only in part)

# Before jax is imported here or in a child: the parent, the probes and concurrent runs each hold
# a context on the one GPU, and none may take most of its memory up front.
os.environ["XLA_PYTHON_CLIENT_PREALLOCATE"] = "false"

import argparse
import json
import re
import signal
import subprocess
import sys
import tarfile
import time
from pathlib import Path
from typing import Any

from lra import atomic, results
from lra.results import RESULTS_DIR_HELP, default_results_dir

PHASES = ("data", "probe", "listops", "bench", "kernels")
TOTAL = 560.0  # the device tool's 600 s per command, less set-up (about 15 s) and slack
BOXES = {"data": 100.0, "probe": 45.0, "bench": 120.0, "kernels": 30.0}  # listops: the rest
TRAIN_ORDER = ("softmax", "cosformer", "linear", "performer", "linformer", "reformer", "bigbird",
               "longformer", "sinkhorn", "synthesizer", "local", "sparse", "nystromformer", "luna",
               "fnet", "s4d", "s5", "lru", "mega")
BASELINE = "softmax"
RUN_MARGIN = 1.15
SCAN_TOLERANCE = 1e-3
POLL_S = 0.1


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m lra.bench.device_check",
                                description=__doc__.split("\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--results-dir", type=Path, default=default_results_dir(), help=RESULTS_DIR_HELP)
    p.add_argument("--bundle", type=Path, default=None,
                   help="also rewrite this .tar.gz of the results folder after every cell")
    p.add_argument("--phases", default=",".join(PHASES),
                   help="comma-separated subset, run in the fixed order (default: all)")
    p.add_argument("--total", type=float, default=TOTAL, metavar="S",
                   help="seconds for all phases together (default: %(default)s)")
    for phase in PHASES:
        default = BOXES.get(phase)
        p.add_argument(f"--box-{phase}", type=float, default=default, metavar="S",
                       help=f"seconds for the {phase} phase (default: "
                            f"{default if default is not None else 'what --total leaves'})")
    p.add_argument("--grace", type=float, default=15.0,
                   help="the last seconds before a phase's mark, between SIGTERM and SIGKILL, for "
                        "a process still running to stop (a training run saves its checkpoint)")
    p.add_argument("--time-scale", type=float, default=1.0,
                   help="multiply --total, every box and --grace (a CPU rehearsal at toy sizes)")
    p.add_argument("--data-dir", type=Path, default=None)
    p.add_argument("--workdir", type=Path, default=Path("workdirs") / "device-check",
                   help="parent of the training runs' workdirs (a fresh one per run) and of the "
                        "device lock")
    p.add_argument("--train-attn", default=",".join(TRAIN_ORDER),
                   help="the families to probe and train, in this order (default: %(default)s)")
    p.add_argument("--train-preset", default="paper")
    p.add_argument("--train-dtype", default="bfloat16", choices=("float32", "bfloat16"))
    p.add_argument("--eval-every", type=int, default=500,
                   help="validation interval of the ListOps runs (LRA: 50; the headline, the last "
                        "step's test accuracy, does not depend on it)")
    p.add_argument("--train-set", action="append", default=[], metavar="KEY=VALUE",
                   help="further config overrides of the ListOps runs and their data "
                        "(tests shrink them with it)")
    p.add_argument("--probe-parallel", type=int, default=None,
                   help="probe processes at once (default: the usable CPUs)")
    p.add_argument("--probe-steps", type=int, default=4,
                   help="timed training steps per probe and way of timing (default: %(default)s)")
    p.add_argument("--max-at-once", type=int, default=3,
                   help="ListOps runs at once, at most (default: %(default)s)")
    p.add_argument("--share-cap", type=float, default=0.9,
                   help="runs start beside others only while the sum of their device shares "
                        "(device_s / sync_s from the probe) stays within this (default: "
                        "%(default)s; 1 run alone always may)")
    p.add_argument("--bench-attn", default="all")
    p.add_argument("--bench-task", default="text")
    p.add_argument("--bench-group-size", type=int, default=2,
                   help="families per lra.bench process, softmax added to each (default: "
                        "%(default)s)")
    p.add_argument("--bench-parallel", type=int, default=4,
                   help="lra.bench processes compiling at once (default: %(default)s; each "
                        "compiles on up to 4 threads)")
    p.add_argument("--lengths", default="1024,2048,3072,4096")
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--dtype", default="bfloat16", choices=("float32", "bfloat16"))
    p.add_argument("--steps", type=int, default=5, help="timed bench steps per config")
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--peak-size", type=int, default=None,
                   help="matrix size of the bench's matmul-peak measurement (lra.bench "
                        "--peak-size; default: the bench's)")
    p.add_argument("--bench-set", action="append", default=[], metavar="KEY=VALUE",
                   help="config override for the bench (lra.bench --set; tests shrink the model)")
    p.add_argument("--scan-length", type=int, default=2048)
    p.add_argument("--_child", choices=("data", "probe", "kernels"), default=None,
                   help=argparse.SUPPRESS)
    p.add_argument("--_attn", default=None, help=argparse.SUPPRESS)
    p.add_argument("--_lock", type=Path, default=None, help=argparse.SUPPRESS)
    return p


# ---------------------------------------------------------------- phase children (own processes)

def _data_child(args: argparse.Namespace) -> int:
    """Generate (once, every core, no fsync) or find the ListOps data the runs will read, build its
    token caches, write its provenance."""
    from lra import config as config_lib
    from lra import tasks
    from lra.data import default_data_dir
    from lra.tasks._listops_gen import generate, split_files

    cfg = config_lib.load("listops", "softmax", preset=args.train_preset,
                          overrides=_train_overrides(args))
    data_dir = args.data_dir or default_data_dir()
    task = tasks.build("listops", data_dir, **cfg.data)
    start = time.perf_counter()
    generated = not all(p.is_file() for p in split_files(task.directory).values())
    if generated:
        o = task.options
        print(f"device-check data: generating {task.directory} on every core, no fsync",
              flush=True)
        generate(task.directory, train=o["train_size"], val=o["val_size"], test=o["test_size"],
                 seed=o["seed"], progress=False, sync=False,
                 **{k: o[k] for k in ("min_length", "max_length", "max_depth", "max_args")})
    task.prepare()  # present now: checks only
    prepared_s = time.perf_counter() - start
    counts = {split: len(task.source(split)) for split in ("train", "val", "test")}  # token caches
    cached_s = time.perf_counter() - start - prepared_s
    record = {"kind": "device-check-data", "task": "listops", "data": cfg.data,
              "cpus": len(os.sched_getaffinity(0)), "generated": generated, "fsync": False,
              "prepare_seconds": round(prepared_s, 1), "token_cache_seconds": round(cached_s, 1),
              "examples": counts, "provenance": _jsonable(task.provenance()), "date": results.now()}
    results.write_json_atomic(Path(args.results_dir) / "data__listops.json", record)
    print(f"device-check data: {counts}; files {prepared_s:.0f} s, token cache {cached_s:.0f} s")
    wanted = {s: cfg.data.get(f"{s}_size") for s in counts}
    return 0 if all(wanted[s] in (None, counts[s]) for s in counts) else 1


def _jsonable(value):
    if hasattr(value, "__dataclass_fields__"):
        import dataclasses

        return _jsonable(dataclasses.asdict(value))
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return value if isinstance(value, (str, int, float, bool, type(None))) else str(value)


def _probe_child(args: argparse.Namespace) -> int:
    """Time one family's training and evaluation steps at the runs' shape, as the trainer runs
    them; write ``probe/<family>.json``."""
    import statistics

    import jax
    import psutil

    from lra import config as config_lib
    from lra import sharding, tasks
    from lra.bench import measure
    from lra.bench.steps import wait_for_device_lock
    from lra.data import default_data_dir
    from lra.data_pipeline import TrainBatches, eval_batches
    from lra.train import create_train_state, jit_eval_step

    family, k = args._attn, args.probe_steps
    cfg = config_lib.load("listops", family, preset=args.train_preset,
                          overrides=_train_overrides(args))
    t = cfg.train
    task = tasks.build("listops", args.data_dir or default_data_dir(), **cfg.data)
    splits = {s: task.source(s) for s in ("train", "val", "test")}
    mesh = sharding.make_mesh()
    data = sharding.batch_sharding(mesh)
    setup = create_train_state(cfg, task, mesh)  # as the trainer builds it: the same programs
    eval_fn = jit_eval_step(setup.graphdef, mesh)
    batches = TrainBatches(splits["train"], t.batch_size, seed=cfg.seed)
    key = jax.random.key(cfg.seed)
    first = sharding.to_global(batches[0], data)
    eval_batch = sharding.to_global(next(eval_batches(splits["val"], t.batch_size)), data)
    t0 = time.perf_counter()
    step = setup.train_step.lower(setup.state, setup.rest, first, key).compile()
    evaluate = eval_fn.lower(setup.state["params"], setup.state["batch_stats"], setup.rest,
                             eval_batch).compile()
    compile_s = time.perf_counter() - t0
    ready_s = time.time() - psutil.Process().create_time()  # start-up as a run would see it
    lock = wait_for_device_lock(args._lock) if args._lock is not None else None
    waited_s = time.time() - psutil.Process().create_time() - ready_s
    state, metrics, sync, device_s = _timed_steps(step, setup.state, setup.rest, first, batches,
                                                  data, key, k)
    evals = []
    for batch in list(eval_batches(splits["val"], t.batch_size, max_batches=k)):
        t0 = time.perf_counter()
        out = evaluate(state["params"], state["batch_stats"], setup.rest,
                       sharding.to_global(batch, data))
        {name: float(v) for name, v in out.items()}
        evals.append(time.perf_counter() - t0)
    peak = measure.device_peak()
    stats = jax.local_devices()[0].memory_stats() or {}
    if lock is not None:
        os.close(lock)
    sync_s, eval_s = statistics.median(sync), statistics.median(evals)
    record = {
        "kind": "device-check-probe", "attention": family, "preset": args.train_preset,
        "batch": t.batch_size, "length": task.max_len, "num_steps": t.num_steps,
        "eval_every": t.eval_every, "ready_s": round(ready_s, 2), "compile_s": round(compile_s, 2),
        "lock_wait_s": round(waited_s, 2), "sync_s": sync_s, "sync_samples": sync,
        "device_s": device_s, "share": min(1.0, device_s / sync_s) if sync_s > 0 else 1.0,
        "eval_s": eval_s, "eval_batches": _run_eval_batches(t, len(splits["val"]), len(splits["test"])),
        "peak_bytes": peak, "bytes_limit": stats.get("bytes_limit"),
        "final_loss": float(metrics["loss"]), "device": results.device_info(),
        "date": results.now()}
    record["predicted_run_s"] = predicted_run_s(record)
    results.write_json_atomic(Path(args.results_dir) / "probe" / f"{family}.json", record)
    print(f"device-check probe {family}: step {sync_s * 1e3:.1f} ms (device {device_s * 1e3:.1f}),"
          f" eval batch {eval_s * 1e3:.1f} ms, ready after {ready_s:.0f} s; a run: about "
          f"{record['predicted_run_s']:.0f} s")
    return 0


def _timed_steps(step, state, rest, first, batches, data, key, k: int):
    """(state, metrics, seconds of each of ``k`` steps as the trainer runs them, seconds per step
    of ``k`` more queued on the device): a first untimed step (allocations), then ``k`` steps each
    with its host batch and its metrics read back, then ``k`` steps on batches already on the
    device, timed together."""
    import jax

    from lra import sharding

    state, metrics = step(state, rest, first, jax.random.fold_in(key, 0))  # first run: allocations
    float(metrics["loss"])
    sync = []
    for i in range(1, k + 1):  # the trainer's loop: host batch, step, metrics read back
        t0 = time.perf_counter()
        state, metrics = step(state, rest, sharding.to_global(batches[i], data),
                              jax.random.fold_in(key, i))
        {name: float(v) for name, v in metrics.items()}
        sync.append(time.perf_counter() - t0)
    queued = [sharding.to_global(batches[i], data) for i in range(k + 1, 2 * k + 1)]
    jax.block_until_ready(queued)
    t0 = time.perf_counter()
    for i, batch in enumerate(queued):  # the same steps queued: the device's own time
        state, metrics = step(state, rest, batch, jax.random.fold_in(key, k + 1 + i))
    jax.block_until_ready((state, metrics))
    return state, metrics, sync, (time.perf_counter() - t0) / k


def _run_eval_batches(t, val_examples: int, test_examples: int) -> int:
    """Evaluation batches a run of train config ``t`` runs at most: every validation (at most
    ``t.eval_batches`` batches each) with a test evaluation after it, and the final test."""
    val_batches = -(-val_examples // t.batch_size)
    if t.eval_batches:
        val_batches = min(val_batches, t.eval_batches)
    test_batches = -(-test_examples // t.batch_size)
    validations = -(-t.num_steps // t.eval_every)
    return validations * (val_batches + test_batches) + test_batches


def predicted_run_s(probe: dict[str, Any]) -> float:
    """Seconds a full run of the probed family should take: start-up and compilation as the probe
    saw them, its steps at the trainer's pace, and its evaluation batches (the worst case)."""
    return (probe["ready_s"] + probe["num_steps"] * probe["sync_s"]
            + probe["eval_batches"] * probe["eval_s"])


def check_causal_scan(length: int, interpret: bool) -> dict:
    """Largest |Pallas - XLA| / (1 + |XLA|) over the causal scan's outputs and input gradients
    (B=2, H=4, F=d=64), unscaled and with a running log-scale (cosFormer's decay)."""
    import jax
    import jax.numpy as jnp

    from lra.attention.linear import causal_linear_sums

    ks = jax.random.split(jax.random.key(0), 4)
    phi_q, phi_k = (jax.nn.relu(jax.random.normal(k, (2, 4, length, 64))) for k in ks[:2])
    v = jax.random.normal(ks[2], (2, 4, length, 64))
    log_scale = jax.lax.cummax(jax.random.normal(ks[3], (2, 4, length)), axis=2)
    platform = "cpu" if interpret else "gpu"  # "cpu" + impl="pallas" runs interpret mode
    worst = {}
    for scaled in (False, True):
        def loss(impl, *a, scaled=scaled):
            num, den = causal_linear_sums(*a, 64, log_scale if scaled else None, impl=impl,
                                          platform=platform)
            return jnp.mean(num) + jnp.mean(den), (num, den)
        outs = [jax.jit(jax.value_and_grad(lambda *a, i=impl: loss(i, *a), argnums=(0, 1, 2),
                                           has_aux=True))(phi_q, phi_k, v)
                for impl in ("xla", "pallas")]
        leaves = zip(*(jax.tree_util.tree_leaves(o) for o in outs))
        worst[f"scaled={scaled}"] = max(float(jnp.max(jnp.abs(a - b) / (1 + jnp.abs(a))))
                                        for a, b in leaves)
    return worst


def _kernels_child(args: argparse.Namespace) -> int:
    device = results.device_info()
    interpret = device["platform"] != "gpu"
    worst = check_causal_scan(args.scan_length, interpret)
    ok = max(worst.values()) < SCAN_TOLERANCE
    results.write_json_atomic(Path(args.results_dir) / "kernels__causal_scan.json", {
        "kind": "device-check-kernels", "check": "Pallas causal scan vs XLA scan, values and "
        "gradients", "length": args.scan_length, "interpret": interpret, "tolerance": SCAN_TOLERANCE,
        "max_relative_difference": worst, "ok": ok, "device": device, "date": results.now()})
    print(f"device-check kernels: max relative difference {worst}")
    return 0 if ok else 1


# ---------------------------------------------------------------- boxed child processes

class Boxed:
    """``cmd`` in its own process group, output appended to ``log``, made to end by ``deadline``
    (``time.perf_counter()`` seconds): SIGTERM to the group at ``deadline - grace`` (the trainer
    checkpoints on it, data workers stop), SIGKILL at ``deadline``."""

    def __init__(self, cmd: list[str], deadline: float, log: Path, grace: float):
        self.start, self.deadline, self.grace, self.cut = time.perf_counter(), deadline, grace, False
        log.parent.mkdir(parents=True, exist_ok=True)
        self.out = open(log, "a")  # closed by poll, when the child has ended
        self.out.write(f"$ {' '.join(cmd)}\n")
        self.out.flush()
        # Its own process group (to signal its workers too) but this session: whoever ends this
        # session's processes (the device tool, at its time limit) ends the child's too.
        self.child = subprocess.Popen(cmd, stdout=self.out, stderr=subprocess.STDOUT,
                                      process_group=0, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        self.outcome: dict[str, Any] | None = None

    def poll(self) -> dict[str, Any] | None:
        """None while the child runs; then its exit status, seconds and whether it was cut."""
        if self.outcome is not None:
            return self.outcome
        code, now = self.child.poll(), time.perf_counter()
        if code is None and now >= self.deadline:
            self.cut = True
            _signal_group(self.child.pid, signal.SIGKILL)
            code = self.child.wait()
        elif code is None:
            if now >= self.deadline - self.grace and not self.cut:
                self.cut = True
                _signal_group(self.child.pid, signal.SIGTERM)
            return None
        _signal_group(self.child.pid, signal.SIGKILL)  # workers the child left behind, if any
        self.out.close()
        self.outcome = {"exit_status": code, "seconds": round(time.perf_counter() - self.start, 1),
                        "cut": self.cut}
        return self.outcome

    def wait(self) -> dict[str, Any]:
        while (out := self.poll()) is None:
            time.sleep(POLL_S)
        return out


def run_boxed(cmd: list[str], seconds: float, log: Path, grace: float) -> dict:
    """Run ``cmd`` (``Boxed``) to its end, within ``seconds``; returns ``Boxed.poll``'s outcome."""
    return Boxed(cmd, time.perf_counter() + seconds, log, grace).wait()


def _signal_group(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)  # the group of one child this module started
    except (ProcessLookupError, PermissionError):
        pass


def _status(outcome: dict) -> str:
    return "cut" if outcome["cut"] else ("ok" if outcome["exit_status"] == 0 else "failed")


def _train_overrides(args: argparse.Namespace) -> list[str]:
    return [f"model.dtype={args.train_dtype}", f"train.eval_every={args.eval_every}",
            *args.train_set]


def _self(args: argparse.Namespace, child: str, *extra: str) -> list[str]:
    cmd = [sys.executable, "-m", "lra.bench.device_check", "--_child", child,
           "--results-dir", str(args.results_dir), "--train-preset", args.train_preset,
           "--train-dtype", args.train_dtype, "--eval-every", str(args.eval_every),
           "--scan-length", str(args.scan_length), "--probe-steps", str(args.probe_steps), *extra]
    for item in args.train_set:
        cmd += ["--train-set", item]
    return cmd + (["--data-dir", str(args.data_dir)] if args.data_dir is not None else [])


def _families(text: str) -> list[str]:
    return [a.strip() for a in text.split(",") if a.strip()]


# ---------------------------------------------------------------- the schedule of the runs

def schedule(queue: list[str], running: list[str], left_s: float,
             probes: dict[str, dict[str, Any]], *, longest_s: float | None, share_cap: float,
             max_at_once: int, margin: float = RUN_MARGIN) -> tuple[list[str], dict[str, str]]:
    """Which of ``queue`` (families not started yet, in order) start now beside ``running``, with
    ``left_s`` seconds left; returns (to start, {family: why it will never start}).

    With probe results (``probes``: family -> probe record): a family starts if ``margin`` x its
    predicted seconds fit in the time left (else it is dropped: time only shrinks), there is room
    (fewer than ``max_at_once`` running, the device shares of all that would run summing to at
    most ``share_cap``, their peak memory within the device's limit) and every family before it
    has started or been dropped. A family without a probe record is dropped. Without any probe
    record: one at a time, each only if ``margin`` x ``longest_s`` (the longest run so far; None
    before the first) fit."""
    start, drop = [], {}
    for family in queue:
        rec = probes.get(family)
        if probes and rec is None:
            drop[family] = "no probe result (the probe failed or was cut)"
            continue
        need = margin * (predicted_run_s(rec) if rec else (longest_s or 0.0))
        if need > left_s or left_s <= 0:
            what = (f"predicted {predicted_run_s(rec):.0f} s" if rec else
                    f"the longest run took {longest_s or 0:.0f} s")
            drop[family] = f"{what}, x {margin} > {max(left_s, 0):.0f} s left"
            continue
        together = [probes.get(f) for f in [*running, *start]]
        if together and not _room(together, rec, share_cap, max_at_once):
            break
        start.append(family)
    return start, drop


def _room(others: list[dict[str, Any] | None], rec: dict[str, Any] | None, share_cap: float,
          max_at_once: int) -> bool:
    """Whether ``rec``'s family may run beside the runs of ``others`` (probe records; None when a
    run has none, which then counts as keeping the device busy)."""
    if len(others) + 1 > max_at_once or rec is None or any(o is None for o in others):
        return False
    if sum(o["share"] for o in others) + rec["share"] > share_cap:
        return False
    limit = rec.get("bytes_limit")
    peaks = [o.get("peak_bytes") for o in [*others, rec]]
    return not limit or None in peaks or sum(peaks) <= limit


# ---------------------------------------------------------------- the window: phases and records

class Window:
    """The summary record, rewritten (with the bundle) after every finished cell."""

    def __init__(self, root: Path, bundle: Path | None, summary: Path, record: dict[str, Any]):
        self.root, self.bundle, self.summary, self.record = root, bundle, summary, record
        self.started = time.perf_counter()

    def save(self) -> None:
        self.record["seconds"] = round(time.perf_counter() - self.started, 1)
        _write_line(self.summary, self.record)
        if self.bundle is not None:
            write_bundle(self.root, self.bundle)

    def log(self, name: str) -> Path:
        return self.root / "logs" / f"{name}.log"


def phase_data(args, deadline: float, win: Window, entry: dict) -> None:
    out = run_boxed(_self(args, "data"), deadline - time.perf_counter(), win.log("data"),
                    args.grace)
    entry.update(out, status=_status(out))


def phase_probe(args, deadline: float, win: Window, entry: dict) -> None:
    """One probe process per family, ``--probe-parallel`` at once; each record saved on arrival."""
    families = _families(args.train_attn)
    lock = args.workdir / "device.lock"
    slots = args.probe_parallel or len(os.sched_getaffinity(0))
    entry["families"] = cells = {}
    waiting, running = list(families), {}
    while waiting or running:
        starts = []
        while (waiting and len(running) + len(starts) < slots
               and deadline - time.perf_counter() > args.grace):
            starts.append(family := waiting.pop(0))
            cells[family] = {"status": "running"}
        if starts:
            win.save()  # recorded as running before it starts: a kill loses it, nothing else
        for family in starts:
            running[family] = Boxed(_self(args, "probe", "--_attn", family, "--_lock", str(lock)),
                                    deadline, win.log(f"probe-{family}"), args.grace)
        if not running:
            break
        time.sleep(POLL_S)
        for family, boxed in list(running.items()):
            if (out := boxed.poll()) is None:
                continue
            del running[family]
            cell = {**out, "status": _status(out)}
            path = args.results_dir / "probe" / f"{family}.json"
            if cell["status"] == "ok" and path.is_file():
                rec = json.loads(path.read_text())
                cell.update({k: rec[k] for k in ("predicted_run_s", "sync_s", "device_s", "share",
                                                 "eval_s", "ready_s", "compile_s", "peak_bytes")})
            cells[family] = cell
            win.save()
    for family in waiting:
        cells[family] = {"status": "not started", "reason": "no time left in the box"}
    done = [c["status"] for c in cells.values()]
    entry["status"] = ("ok" if done and all(s == "ok" for s in done) else
                       "cut" if any(s in ("cut", "not started") for s in done) else "failed")


def load_probes(results_dir: Path) -> dict[str, dict[str, Any]]:
    """The probe records present, by family."""
    out = {}
    for path in sorted((Path(results_dir) / "probe").glob("*.json")):
        rec = json.loads(path.read_text())
        out[rec["attention"]] = rec
    return out


def phase_listops(args, deadline: float, win: Window, entry: dict) -> None:
    stamp = results.now().replace(":", "").replace("-", "")
    queue = _families(args.train_attn)
    probes = {f: r for f, r in load_probes(args.results_dir).items() if f in queue}
    entry.update(eval_every=args.eval_every,
                 eval_every_note=f"validation every {args.eval_every} steps (LRA: 50) to fit the "
                                 f"window; the headline, test accuracy at the last step, is "
                                 f"unchanged",
                 schedule="probe" if probes else "one at a time (no probe results)", runs=[])
    runs, running, longest, phase_start = entry["runs"], {}, None, time.perf_counter()
    while queue or running:
        left = deadline - time.perf_counter() - args.grace
        cut = any(r.get("status") == "cut" for r in runs)
        start, drop = ([], {f: "a run was cut: no time left" for f in queue}) if cut else \
            schedule(queue, list(running), left, probes, longest_s=longest,
                     share_cap=args.share_cap, max_at_once=args.max_at_once)
        for family, reason in drop.items():
            queue.remove(family)
            runs.append({"attention": family, "status": "not started", "reason": reason})
        starts = []
        for family in start:
            queue.remove(family)
            cmd = [sys.executable, "-m", "lra.run", "--task", "listops", "--attn", family,
                   "--preset", args.train_preset, "--no-progress",
                   "--workdir", str(args.workdir / f"listops-{family}-{stamp}"),
                   "--results-dir", str(args.results_dir)]
            for item in _train_overrides(args):
                cmd += ["--set", item]
            if args.data_dir is not None:
                cmd += ["--data-dir", str(args.data_dir)]
            cell = {"attention": family, "status": "running",
                    "started_at_s": round(time.perf_counter() - phase_start, 1),
                    "beside": sorted([*running, *(f for f, _, _ in starts)]),
                    "command": cmd[1:]}
            if family in probes:
                cell["predicted_s"] = round(probes[family]["predicted_run_s"], 1)
            runs.append(cell)
            starts.append((family, cmd, cell))
        if drop or start:
            win.save()  # recorded as running before it starts
        for family, cmd, cell in starts:
            running[family] = (Boxed(cmd, deadline, win.log(f"listops-{family}"), args.grace),
                               cell, set((args.results_dir / "runs").glob("*.json")))
        if not running:
            break
        time.sleep(POLL_S)
        for family, (boxed, cell, before) in list(running.items()):
            if (out := boxed.poll()) is None:
                continue
            del running[family]
            longest = max(longest or 0.0, out["seconds"])
            new = set((args.results_dir / "runs").glob("*.json")) - before
            mine = {p for p in new if json.loads(p.read_text()).get("attention") == family}
            cell.update(out, status=_status(out), **_run_outcome(mine))
            win.save()
    started = [r for r in runs if r["status"] != "not started"]
    entry["status"] = ("cut" if any(r["status"] == "cut" for r in started) else
                       "ok" if started and all(r["status"] == "ok" for r in started) else "failed")


def _run_outcome(new_files: set[Path]) -> dict:
    """The headline of the result file a run wrote (none when it was cut or failed)."""
    if len(new_files) != 1:
        return {}
    (path,) = new_files
    record = json.loads(path.read_text())
    metrics = record.get("metrics", {})
    return {"result_file": path.name, "steps": metrics.get("steps"),
            "test_accuracy_at_last": metrics.get("test_accuracy_at_last"),
            "steps_per_s": metrics.get("steps_per_s"),
            "eval_every": record.get("config", {}).get("train", {}).get("eval_every")}


def bench_groups(text: str, size: int) -> list[list[str]]:
    """The bench's families (``all``: ``TRAIN_ORDER`` first, then the other registered ones) in
    groups of ``size``, softmax left out (``lra.bench`` times it in every process)."""
    if text == "all":
        from lra import attention

        names = attention.available()
        wanted = [f for f in TRAIN_ORDER if f in names] + sorted(set(names) - set(TRAIN_ORDER))
    else:
        wanted = _families(text)
    rest = [f for f in wanted if f != BASELINE] or [BASELINE]
    return [rest[i:i + size] for i in range(0, len(rest), size)]


def merge_bench_parts(parts: list[dict[str, Any]], names: list[str]) -> dict[str, Any]:
    """One bench file of the parts (bench files of one setting, each with its own softmax rows):
    the first part's header and softmax rows, every part's other rows, slopes refitted. Each row's
    ratios to softmax stay those of its own process."""
    from lra.bench.efficiency import fit_slopes

    rows = list(parts[0]["results"])
    for part in parts[1:]:
        rows += [r for r in part["results"] if r["attention"] != BASELINE]
    rows.sort(key=lambda r: (r["attention"], r["length"]))
    return {**parts[0], "results": rows, "families": sorted({r["attention"] for r in rows}),
            "slopes": fit_slopes(rows), "date": results.now(),
            "timing": "one lra.bench process per group of families, each taking the device in "
                      "turn (--device-lock); the ratios to softmax are against the softmax timed "
                      "in the same process",
            "parts": [{"file": name, "families": part["families"], "command": part["command"],
                       "date": part["date"]} for name, part in zip(names, parts)]}


def phase_bench(args, deadline: float, win: Window, entry: dict) -> None:
    device = results.device_info()
    kind = re.sub(r"[^a-z0-9]+", "-", device["kind"].lower()).strip("-")
    label = device["platform"] if kind == device["platform"] else f"{device['platform']}-{kind}"
    stamp = results.now().replace(":", "").replace("-", "")
    merged = (args.results_dir / "efficiency" /
              f"{args.bench_task}__{label}-x{device['count']}__b{args.batch}__{args.dtype}__"
              f"{stamp}.json")
    parts_dir = args.results_dir / "bench-parts"
    lock = args.workdir / "device.lock"
    groups = bench_groups(args.bench_attn, args.bench_group_size)
    entry.update(merged_file=None, groups=[])
    waiting, running, done = list(enumerate(groups)), {}, []
    while waiting or running:
        while (waiting and len(running) < args.bench_parallel
               and deadline - time.perf_counter() > 2 * args.grace):
            i, group = waiting.pop(0)
            out = parts_dir / f"{args.bench_task}__part{i:02d}__{stamp}.json"
            cmd = [sys.executable, "-m", "lra.bench", "--task", args.bench_task, "--attn",
                   ",".join(group), "--lengths", args.lengths, "--batch", str(args.batch),
                   "--dtype", args.dtype, "--steps", str(args.steps), "--warmup",
                   str(args.warmup), "--isolate", "no", "--no-progress", "--out", str(out),
                   "--device-lock", str(lock), "--set", "model.attention_dropout=0.0"]
            for item in args.bench_set:
                cmd += ["--set", item]
            if args.peak_size is not None:
                cmd += ["--peak-size", str(args.peak_size)]
            cell = {"families": group, "status": "running", "command": cmd[1:]}
            entry["groups"].append(cell)
            win.save()  # recorded as running before it starts
            running[i] = (Boxed(cmd, deadline, win.log(f"bench-part{i:02d}"), args.grace), cell,
                          out)
        if not running:
            break
        time.sleep(POLL_S)
        for i, (boxed, cell, out) in list(running.items()):
            if (outcome := boxed.poll()) is None:
                continue
            del running[i]
            cell.update(outcome, status=_status(outcome))
            if cell["status"] == "ok" and out.is_file():
                cell["file"] = str(out.relative_to(args.results_dir))
                done.append((i, out))
                done.sort()
                parts = [json.loads(p.read_text()) for _, p in done]
                results.write_json_atomic(merged, merge_bench_parts(parts, [p.name for _, p in
                                                                            done]))
                entry["merged_file"] = str(merged.relative_to(args.results_dir))
            win.save()
    for _, group in waiting:
        entry["groups"].append({"families": group, "status": "not started",
                                "reason": "no time left in the box"})
    states = [g["status"] for g in entry["groups"]]
    entry["status"] = ("ok" if states and all(s == "ok" for s in states) else
                       "cut" if any(s in ("cut", "not started") for s in states) else "failed")


def phase_kernels(args, deadline: float, win: Window, entry: dict) -> None:
    out = run_boxed(_self(args, "kernels"), deadline - time.perf_counter(), win.log("kernels"),
                    args.grace)
    entry.update(out, status=_status(out))


RUNNERS = {"data": phase_data, "probe": phase_probe, "listops": phase_listops,
           "bench": phase_bench, "kernels": phase_kernels}


def _write_line(path: Path, record: dict) -> None:
    """``record`` as one JSON line, replacing ``path`` atomically."""
    atomic.replace(path, (json.dumps(record) + "\n").encode())


def write_bundle(results_dir: Path, bundle: Path) -> None:
    """``bundle``: a .tar.gz of ``results_dir``, replaced atomically (a cut window keeps the last).
    Temporary files (a result being written) are left out. Streamed to a temporary file beside it,
    not built in memory as ``lra.atomic`` would need: the folder grows with the window."""
    bundle.parent.mkdir(parents=True, exist_ok=True)
    tmp = bundle.with_name(bundle.name + ".tmp")
    with tarfile.open(tmp, "w:gz") as tar:
        tar.add(results_dir, arcname=results_dir.name,
                filter=lambda info: None if info.name.endswith(".tmp") else info)
    os.replace(tmp, bundle)


def boxes(args: argparse.Namespace, wanted: list[str]) -> dict[str, float]:
    """Each wanted phase's box in seconds, ``--time-scale`` applied; listops (unless given) gets
    what ``--total`` leaves after the others."""
    out = {p: getattr(args, f"box_{p}") for p in wanted}
    if "listops" in out and out["listops"] is None:
        out["listops"] = args.total - sum(v for p, v in out.items() if p != "listops")
    return {p: v * args.time_scale for p, v in out.items()}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parser().parse_args(argv)
    children = {"data": _data_child, "probe": _probe_child, "kernels": _kernels_child}
    if args._child is not None:
        return children[args._child](args)
    wanted = [p.strip() for p in args.phases.split(",") if p.strip()]
    unknown = sorted(set(wanted) - set(PHASES))
    plan = {} if unknown or args.time_scale <= 0 else boxes(args, wanted)
    problem = (f"unknown phases {unknown} (choose from {', '.join(PHASES)})" if unknown else
               "--time-scale must be > 0" if args.time_scale <= 0 else
               f"--eval-every must be >= 1, got {args.eval_every}" if args.eval_every < 1 else
               f"--total {args.total:.0f} s leaves {plan['listops'] / args.time_scale:.0f} s for "
               f"listops" if plan.get("listops", 1) <= 0 else None)
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    args.grace *= args.time_scale
    root = args.results_dir = Path(args.results_dir)
    root.mkdir(parents=True, exist_ok=True)
    device = results.device_info()
    stamp = results.now().replace(":", "").replace("-", "")
    kind = re.sub(r"[^a-z0-9]+", "-", device["kind"].lower()).strip("-")
    summary_path = root / "efficiency" / f"device-check__{device['platform']}-{kind}__{stamp}.jsonl"
    record = {"kind": "device-check", "ok": False, "phases": [], "device": device,
              "versions": results.versions(), "git": results.git_commit(), "date": results.now(),
              "command": ["python", "-m", "lra.bench.device_check", *argv],
              "boxes_s": {p: round(v, 1) for p, v in plan.items()}}
    win = Window(root, args.bundle, summary_path, record)
    mark = win.started
    for phase in [p for p in PHASES if p in wanted]:
        box = plan[phase]
        begin, mark = time.perf_counter(), mark + box  # every phase ends by its mark
        print(f"device-check: {phase} (box {box:.0f} s, {mark - begin:.0f} s to its mark) ...",
              flush=True)
        entry = {"phase": phase, "box_s": round(box, 1), "status": "running"}
        record["phases"].append(entry)
        win.save()
        before = {p for p in root.rglob("*") if p.is_file()}
        try:
            RUNNERS[phase](args, mark, win, entry)
        except Exception as err:  # keep going: the other phases still tell us something
            entry.update(status="failed", error=f"{type(err).__name__}: {err}")
        entry["seconds"] = round(time.perf_counter() - begin, 1)
        entry["files"] = sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()
                                and p not in before and p != summary_path
                                and not p.name.endswith(".tmp"))
        record["ok"] = all(p["status"] == "ok" for p in record["phases"])
        win.save()
        print(f"device-check: {phase} -> {entry['status']} in {entry['seconds']:.0f} s",
              flush=True)
    print(f"device-check: wrote {summary_path}; "
          f"{'all phases passed' if record['ok'] else 'NOT ALL PHASES PASSED'}")
    return 0 if record["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
