"""One command for the first accelerator this project is lent: ``python -m lra.bench.device_check``.

On one GPU it should finish in under 8 minutes, compilation included, and leaves under
``--results-dir``:

1. ``efficiency/`` - ``lra.bench`` for every family at 1K-4K tokens, batch 32 (LRA Table 2's
   protocol), bfloat16, a few timed steps each. The configs share one process (``--isolate no``):
   a fresh process per config would spend the budget on start-up and compilation, so memory is
   XLA's compiled analysis rather than the device's high-water mark.
2. ``runs/`` - ListOps at the paper preset, softmax and cosformer, ``--train-steps`` (1000) steps
   each (``train.num_steps`` overridden, everything else LRA's), through ``lra.run``.
3. The Pallas causal scan (attention/_causal_scan_pallas.py) compiled for the device and compared
   with the XLA scan at ``--scan-length`` (values and gradients; causal runs are not in 1. or 2.).
4. ``efficiency/device-check__<device>__<date>.jsonl`` - one JSON line: what ran, each phase's wall
   time and exit status, and the device; the record to commit next to the files above (``.jsonl``,
   so the leaderboard's loader of bench files, ``efficiency/*.json``, does not take it for one).

Every phase runs even if an earlier one failed; the exit status is 0 only if all succeeded. The
sizes are options so that a CPU test can run the same code end to end at toy sizes
(tests/test_device_check.py): a typo cannot wait for the GPU to show up.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path

from lra import results
from lra import run as run_cli
from lra.bench import steps as bench

TRAIN_FAMILIES = ("softmax", "cosformer")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m lra.bench.device_check",
                                description=__doc__.split("\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--results-dir", type=Path, default=Path("results"))
    p.add_argument("--attn", default="all", help="families to bench (default: all)")
    p.add_argument("--lengths", default="1024,2048,3072,4096")
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--dtype", default="bfloat16", choices=("float32", "bfloat16"))
    p.add_argument("--steps", type=int, default=5, help="timed bench steps per config")
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--bench-set", action="append", default=[], metavar="KEY=VALUE",
                   help="config override for the bench (lra.bench --set, e.g. model.num_layers=1; "
                        "tests shrink the model with it)")
    p.add_argument("--train-steps", type=int, default=1000)
    p.add_argument("--train-preset", default="paper")
    p.add_argument("--train-set", action="append", default=[], metavar="KEY=VALUE",
                   help="config override for the ListOps runs (tests shrink the data with it)")
    p.add_argument("--workdir", type=Path, default=Path("workdirs") / "device-check",
                   help="parent of the training runs' workdirs (a fresh one per run)")
    p.add_argument("--data-dir", type=Path, default=None)
    p.add_argument("--scan-length", type=int, default=2048)
    p.add_argument("--skip-bench", action="store_true")
    p.add_argument("--skip-train", action="store_true")
    return p


def check_causal_scan(length: int, interpret: bool) -> dict:
    """Largest |Pallas - XLA| over the causal scan's outputs and input gradients (B=2, H=4, F=d=64)."""
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


def _scan_phase(length: int, interpret: bool) -> int:
    worst = check_causal_scan(length, interpret)
    print(f"device-check: causal scan Pallas vs XLA, max relative difference {worst}")
    return 0 if max(worst.values()) < 1e-3 else 1


def _phase(log: list, name: str, fn) -> int:
    print(f"device-check: {name} ...", flush=True)
    start = time.perf_counter()
    try:
        code = fn()
    except Exception as err:  # keep going: the other phases still tell us something
        print(f"device-check: {name} raised {type(err).__name__}: {err}", file=sys.stderr)
        code = 1
    seconds = time.perf_counter() - start
    log.append({"phase": name, "exit_status": code, "seconds": round(seconds, 1)})
    print(f"device-check: {name} -> exit {code} in {seconds:.0f} s", flush=True)
    return code


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parser().parse_args(argv)
    if args.train_steps < 1:
        print(f"error: --train-steps must be >= 1, got {args.train_steps}", file=sys.stderr)
        return 2
    device = results.device_info()
    stamp = results.now().replace(":", "").replace("-", "")
    log: list[dict] = []
    started = time.perf_counter()
    if not args.skip_bench:
        bench_argv = ["--attn", args.attn, "--lengths", args.lengths, "--batch", str(args.batch),
                      "--dtype", args.dtype, "--steps", str(args.steps), "--warmup",
                      str(args.warmup), "--isolate", "no", "--no-progress",
                      "--results-dir", str(args.results_dir)]
        for item in args.bench_set:
            bench_argv += ["--set", item]
        _phase(log, "bench " + " ".join(bench_argv), lambda: bench.main(bench_argv))
    if not args.skip_train:
        for family in TRAIN_FAMILIES:
            run_argv = ["--task", "listops", "--attn", family, "--preset", args.train_preset,
                        "--set", f"train.num_steps={args.train_steps}",
                        "--workdir", str(args.workdir / f"listops-{family}-{stamp}"),
                        "--results-dir", str(args.results_dir), "--no-progress"]
            if args.data_dir is not None:
                run_argv += ["--data-dir", str(args.data_dir)]
            for item in args.train_set:
                run_argv += ["--set", item]
            _phase(log, "run " + " ".join(run_argv), lambda a=run_argv: run_cli.main(a))
    _phase(log, f"pallas causal scan L={args.scan_length}",
           lambda: _scan_phase(args.scan_length, interpret=device["platform"] != "gpu"))
    kind = re.sub(r"[^a-z0-9]+", "-", device["kind"].lower()).strip("-")
    out = bench.claim(Path(args.results_dir) / "efficiency" /
                      f"device-check__{device['platform']}-{kind}__{stamp}.jsonl")
    ok = all(p["exit_status"] == 0 for p in log)
    out.write_text(json.dumps({
        "kind": "device-check", "ok": ok, "phases": log,
        "seconds": round(time.perf_counter() - started, 1), "device": device,
        "versions": results.versions(), "git": results.git_commit(), "date": results.now(),
        "command": ["python", "-m", "lra.bench.device_check", *argv]}) + "\n")
    print(f"device-check: wrote {out}; {'all phases passed' if ok else 'SOME PHASES FAILED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
