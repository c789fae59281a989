"""One command for an accelerator window: ``python -m lra.bench.device_check``.

Four phases, in order of value, each in its own process and its own time box (``--box-<phase>``,
seconds), so that a slow phase cannot eat the next one; the time a phase leaves unused passes on to
the next, so the whole stays within the sum of the boxes (540 s by default: the device tool's 10
minutes per command, less a minute for set-up and slack). A process still running ``--grace`` (15)
seconds before its box ends is sent SIGTERM (the trainer then checkpoints and stops), and SIGKILL
when the box ends; the phase is recorded as ``cut`` and the next one starts.

1. ``data`` (60 s): ListOps at the paper configuration (96,000 + 2,000 + 2,000 trees, lengths
   500-2000), generated with every usable core (about 10 s on 16), or checked if present; the
   data's provenance goes to ``data__listops.json``.
2. ``listops`` (330 s): LRA's protocol, paper preset, 5000 steps, ``model.dtype=bfloat16`` (every
   family takes bfloat16; statistics stay float32 as the trainer keeps them), through ``lra.run``
   into ``runs/``. The headline is the last step's test accuracy, which the validation interval
   does not change, so validation runs every ``--eval-every`` (500) steps instead of LRA's 50: ten
   passes over the validation split instead of a hundred, about a third of a run's time saved. The
   override is in the result file's resolved config (``train.eval_every``) and in the summary.
   Order (``TRAIN_ORDER``): softmax (LRA Table 1: 36.37), cosformer (37.90, the cosFormer paper's
   row), then the families whose published ListOps cell this suite is most likely to contradict:
   Linear Transformer (16.13) and Performer (18.01), the two lowest cells, both among the
   implementations whose original code lets padding leak into real positions (fixed here), then
   Linformer and Reformer (the other two leaking ones), then the rest of Table 1's rows, then the
   families with no Table 1 cell to compare with. A family starts only if the time left is at
   least ``RUN_MARGIN`` times the longest run so far and no run was cut (a run cut before its end
   writes no result file, only its checkpoint).
3. ``bench`` (120 s): ``lra.bench`` for every family, text task, batch 32, bfloat16 (LRA Table 2's
   protocol), one process per length (1K, 2K, 3K, 4K, each its own file in ``efficiency/``, so a cut
   keeps the lengths already done). Attention dropout is off (``model.attention_dropout=0``, for
   every family alike) because that is when softmax's ``impl="auto"`` takes cuDNN's fused kernel,
   ``jax.nn.dot_product_attention(implementation="cudnn")``, on a GPU (attention/softmax.py).
4. ``kernels`` (30 s): the Pallas causal scans against the XLA scan at ``--scan-length``, values and
   gradients (``kernels__causal_scan.json``).

After each phase the summary ``efficiency/device-check__<device>__<date>.jsonl`` (one JSON line:
each phase's box, seconds, status and files) is rewritten, and so is ``--bundle`` (a ``.tar.gz`` of
the whole results folder) when given: a window that ends early still returns what was done, and
the bundle is one file where the device tool returns at most eight. Exit status 0 only if every
phase passed. The sizes are options so that a CPU test runs the same code at toy sizes
(tests/test_device_check.py); ``scripts/device_window.sh`` is the command to hand the device tool.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tarfile
import time
from pathlib import Path

from lra import results

PHASES = ("data", "listops", "bench", "kernels")
BOXES = {"data": 60.0, "listops": 330.0, "bench": 120.0, "kernels": 30.0}
TRAIN_ORDER = ("softmax", "cosformer", "linear", "performer", "linformer", "reformer", "bigbird",
               "longformer", "sinkhorn", "synthesizer", "local", "sparse", "nystromformer", "luna",
               "fnet", "s4d", "s5", "lru", "mega")
RUN_MARGIN = 1.15
SCAN_TOLERANCE = 1e-3


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m lra.bench.device_check",
                                description=__doc__.split("\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--results-dir", type=Path, default=Path("results"))
    p.add_argument("--bundle", type=Path, default=None,
                   help="also rewrite this .tar.gz of the results folder after every phase")
    p.add_argument("--phases", default=",".join(PHASES),
                   help="comma-separated subset, run in the fixed order (default: all)")
    for phase in PHASES:
        p.add_argument(f"--box-{phase}", type=float, default=BOXES[phase], metavar="S",
                       help=f"seconds for the {phase} phase (default: %(default)s)")
    p.add_argument("--grace", type=float, default=15.0,
                   help="the last seconds of a box, between SIGTERM and SIGKILL, for a process "
                        "still running to stop (a training run saves its checkpoint)")
    p.add_argument("--data-dir", type=Path, default=None)
    p.add_argument("--workdir", type=Path, default=Path("workdirs") / "device-check",
                   help="parent of the training runs' workdirs (a fresh one per run)")
    p.add_argument("--train-attn", default=",".join(TRAIN_ORDER),
                   help="the families to train, in this order (default: %(default)s)")
    p.add_argument("--train-preset", default="paper")
    p.add_argument("--train-dtype", default="bfloat16", choices=("float32", "bfloat16"))
    p.add_argument("--eval-every", type=int, default=500,
                   help="validation interval of the ListOps runs (LRA: 50; the headline, the last "
                        "step's test accuracy, does not depend on it)")
    p.add_argument("--train-set", action="append", default=[], metavar="KEY=VALUE",
                   help="further config overrides of the ListOps runs and their data "
                        "(tests shrink them with it)")
    p.add_argument("--bench-attn", default="all")
    p.add_argument("--bench-task", default="text")
    p.add_argument("--lengths", default="1024,2048,3072,4096")
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--dtype", default="bfloat16", choices=("float32", "bfloat16"))
    p.add_argument("--steps", type=int, default=5, help="timed bench steps per config")
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--bench-set", action="append", default=[], metavar="KEY=VALUE",
                   help="config override for the bench (lra.bench --set; tests shrink the model)")
    p.add_argument("--scan-length", type=int, default=2048)
    p.add_argument("--_child", choices=("data", "kernels"), default=None, help=argparse.SUPPRESS)
    return p


# ---------------------------------------------------------------- phase children (own processes)

def _data_child(args: argparse.Namespace) -> int:
    """Generate (or check) the ListOps data the ``listops`` runs will read; write its provenance."""
    import tasks
    from lra import config as config_lib
    from lra.data import default_data_dir

    cfg = config_lib.load("listops", "softmax", preset=args.train_preset,
                          overrides=_train_overrides(args))
    data_dir = args.data_dir or default_data_dir()
    task = tasks.build("listops", data_dir, **cfg.data)
    start = time.perf_counter()
    task.prepare()
    prepared_s = time.perf_counter() - start
    counts = {split: len(task.source(split)) for split in ("train", "val", "test")}
    prov = task.provenance()
    record = {"kind": "device-check-data", "task": "listops", "data": cfg.data,
              "cpus": len(os.sched_getaffinity(0)), "prepare_seconds": round(prepared_s, 1),
              "examples": counts, "provenance": _jsonable(prov), "date": results.now()}
    results.write_json_atomic(Path(args.results_dir) / "data__listops.json", record)
    print(f"device-check data: {counts} in {prepared_s:.0f} s")
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


def check_causal_scan(length: int, interpret: bool) -> dict:
    """Largest |Pallas - XLA| / (1 + |XLA|) over the causal scan's outputs and input gradients
    (B=2, H=4, F=d=64), unscaled and with a running log-scale (cosFormer's decay)."""
    import jax
    import jax.numpy as jnp

    from attention.linear import causal_linear_sums

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


# ---------------------------------------------------------------- the parent: boxes and records

def run_boxed(cmd: list[str], seconds: float, log: Path, grace: float) -> dict:
    """Run ``cmd`` in its own process group, ending within ``seconds``; output appended to ``log``.

    The last ``grace`` seconds of the box are for stopping: SIGTERM to the group at ``seconds -
    grace`` (the trainer checkpoints on it, data workers stop), SIGKILL at ``seconds``. Returns the
    exit status, the seconds taken and whether it was cut."""
    start = time.perf_counter()
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "a") as out:
        out.write(f"$ {' '.join(cmd)}\n")
        out.flush()
        # Its own process group (to signal its workers too) but this session: whoever ends this
        # session's processes (the device tool, at its time limit) ends the child's too.
        child = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, process_group=0,
                                 env={**os.environ, "PYTHONUNBUFFERED": "1"})
        cut = False
        try:
            code = child.wait(timeout=max(0.0, seconds - grace))
        except subprocess.TimeoutExpired:
            cut = True
            _signal_group(child.pid, signal.SIGTERM)
            try:
                code = child.wait(timeout=max(0.0, seconds - (time.perf_counter() - start)))
            except subprocess.TimeoutExpired:
                _signal_group(child.pid, signal.SIGKILL)
                code = child.wait()
        _signal_group(child.pid, signal.SIGKILL)  # workers the child left behind, if any
    return {"exit_status": code, "seconds": round(time.perf_counter() - start, 1), "cut": cut}


def _signal_group(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)  # the group of the one child this module started
    except (ProcessLookupError, PermissionError):
        pass


def _status(outcome: dict) -> str:
    return "cut" if outcome["cut"] else ("ok" if outcome["exit_status"] == 0 else "failed")


def _train_overrides(args: argparse.Namespace) -> list[str]:
    return [f"model.dtype={args.train_dtype}", f"train.eval_every={args.eval_every}",
            *args.train_set]


def _self(args: argparse.Namespace, child: str) -> list[str]:
    cmd = [sys.executable, "-m", "lra.bench.device_check", "--_child", child,
           "--results-dir", str(args.results_dir), "--train-preset", args.train_preset,
           "--train-dtype", args.train_dtype, "--eval-every", str(args.eval_every),
           "--scan-length", str(args.scan_length)]
    for item in args.train_set:
        cmd += ["--train-set", item]
    return cmd + (["--data-dir", str(args.data_dir)] if args.data_dir is not None else [])


def _new_files(root: Path, before: set[Path]) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()
                  and p not in before)


def phase_data(args, deadline: float, log: Path) -> dict:
    out = run_boxed(_self(args, "data"), deadline - time.perf_counter(), log, args.grace)
    return {**out, "status": _status(out)}


def phase_listops(args, deadline: float, log: Path) -> dict:
    stamp = results.now().replace(":", "").replace("-", "")
    runs, longest = [], 0.0
    for family in [a.strip() for a in args.train_attn.split(",") if a.strip()]:
        left = deadline - time.perf_counter()
        if (left <= args.grace or any(r["status"] == "cut" for r in runs)
                or (runs and left < RUN_MARGIN * longest)):
            runs.append({"attention": family, "status": "not started",
                         "reason": f"{max(left, 0):.0f} s left, the longest run took {longest:.0f} s"})
            continue
        cmd = [sys.executable, "-m", "lra.run", "--task", "listops", "--attn", family,
               "--preset", args.train_preset, "--no-progress",
               "--workdir", str(args.workdir / f"listops-{family}-{stamp}"),
               "--results-dir", str(args.results_dir)]
        for item in _train_overrides(args):
            cmd += ["--set", item]
        if args.data_dir is not None:
            cmd += ["--data-dir", str(args.data_dir)]
        before = set((args.results_dir / "runs").glob("*.json"))
        out = run_boxed(cmd, left, log, args.grace)
        longest = max(longest, out["seconds"])
        runs.append({"attention": family, **out, "status": _status(out), "command": cmd[1:],
                     **_run_outcome(set((args.results_dir / "runs").glob("*.json")) - before)})
    started = [r for r in runs if r["status"] != "not started"]
    status = ("cut" if any(r["status"] == "cut" for r in started) else
              "ok" if started and all(r["status"] == "ok" for r in started) else "failed")
    return {"status": status, "eval_every": args.eval_every,
            "eval_every_note": f"validation every {args.eval_every} steps (LRA: 50) to fit the "
                               f"window; the headline, test accuracy at the last step, is unchanged",
            "runs": runs}


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


def phase_bench(args, deadline: float, log: Path) -> dict:
    lengths = [int(x) for x in args.lengths.split(",") if x.strip()]
    parts = []
    for length in lengths:
        left = deadline - time.perf_counter()
        if left <= 0:
            parts.append({"length": length, "status": "not started", "reason": "no time left"})
            continue
        cmd = [sys.executable, "-m", "lra.bench", "--task", args.bench_task, "--attn",
               args.bench_attn, "--lengths", str(length), "--batch", str(args.batch), "--dtype",
               args.dtype, "--steps", str(args.steps), "--warmup", str(args.warmup), "--isolate",
               "no", "--no-progress", "--results-dir", str(args.results_dir),
               "--set", "model.attention_dropout=0.0"]
        for item in args.bench_set:
            cmd += ["--set", item]
        out = run_boxed(cmd, left, log, args.grace)
        parts.append({"length": length, **out, "status": _status(out), "command": cmd[1:]})
    started = [p for p in parts if p["status"] != "not started"]
    status = ("ok" if len(started) == len(parts) and all(p["status"] == "ok" for p in parts)
              else "cut" if any(p["status"] in ("cut", "not started") for p in parts) else "failed")
    return {"status": status, "lengths": parts}


def phase_kernels(args, deadline: float, log: Path) -> dict:
    out = run_boxed(_self(args, "kernels"), deadline - time.perf_counter(), log, args.grace)
    return {**out, "status": _status(out)}


RUNNERS = {"data": phase_data, "listops": phase_listops, "bench": phase_bench,
           "kernels": phase_kernels}


def _write_line(path: Path, record: dict) -> None:
    """``record`` as one JSON line, replacing ``path`` atomically."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(record) + "\n")
    os.replace(tmp, path)


def write_bundle(results_dir: Path, bundle: Path) -> None:
    """``bundle``: a .tar.gz of ``results_dir``, replaced atomically (a cut window keeps the last)."""
    bundle.parent.mkdir(parents=True, exist_ok=True)
    tmp = bundle.with_name(bundle.name + ".tmp")
    with tarfile.open(tmp, "w:gz") as tar:
        tar.add(results_dir, arcname=results_dir.name)
    os.replace(tmp, bundle)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parser().parse_args(argv)
    if args._child == "data":
        return _data_child(args)
    if args._child == "kernels":
        return _kernels_child(args)
    wanted = [p.strip() for p in args.phases.split(",") if p.strip()]
    unknown = sorted(set(wanted) - set(PHASES))
    if unknown or args.eval_every < 1:
        print(f"error: unknown phases {unknown} (choose from {', '.join(PHASES)})" if unknown else
              f"error: --eval-every must be >= 1, got {args.eval_every}", file=sys.stderr)
        return 2
    root = Path(args.results_dir)
    root.mkdir(parents=True, exist_ok=True)
    device = results.device_info()
    stamp = results.now().replace(":", "").replace("-", "")
    kind = re.sub(r"[^a-z0-9]+", "-", device["kind"].lower()).strip("-")
    summary_path = root / "efficiency" / f"device-check__{device['platform']}-{kind}__{stamp}.jsonl"
    log = root / f"device-check__{stamp}.log"
    record = {"kind": "device-check", "ok": False, "phases": [], "device": device,
              "versions": results.versions(), "git": results.git_commit(), "date": results.now(),
              "command": ["python", "-m", "lra.bench.device_check", *argv]}
    started = time.perf_counter()
    spare = 0.0  # what earlier phases left of their boxes
    for phase in (p for p in PHASES if p in wanted):
        box = getattr(args, f"box_{phase}")
        begin = time.perf_counter()
        before = {p for p in root.rglob("*") if p.is_file()}
        print(f"device-check: {phase} (box {box:.0f} s + {spare:.0f} s carried over) ...",
              flush=True)
        try:
            entry = RUNNERS[phase](args, begin + box + spare, log)
        except Exception as err:  # keep going: the other phases still tell us something
            entry = {"status": "failed", "error": f"{type(err).__name__}: {err}"}
        took = time.perf_counter() - begin
        spare = max(0.0, box + spare - took)
        entry = {"phase": phase, "box_s": box, **entry, "seconds": round(took, 1),
                 "files": _new_files(root, before | {summary_path, log})}
        record["phases"].append(entry)
        record["seconds"] = round(time.perf_counter() - started, 1)
        record["ok"] = all(p["status"] == "ok" for p in record["phases"])
        _write_line(summary_path, record)
        if args.bundle is not None:
            write_bundle(root, args.bundle)
        print(f"device-check: {phase} -> {entry['status']} in {took:.0f} s", flush=True)
    print(f"device-check: wrote {summary_path}; "
          f"{'all phases passed' if record['ok'] else 'NOT ALL PHASES PASSED'}")
    return 0 if record["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
