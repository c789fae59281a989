"""Run the peers harness (``lra/bench/peers_harness.py``) into a results file with provenance.

    python -m lra.bench.peers --python $PEERS_HOME/venv/bin/python -- \\
        --peers torch_sdpa ours_softmax_kernel --seq-lens 1024 2048 4096 --modes fwdbwd

The harness times third-party attention implementations next to ours, each case in its own process,
with a fixed GEMM probe before and after every case (its docstring gives the protocol). It runs under
the peers venv's python (``--python``), where torch and the peer packages live; docs/efficiency.md
"Against third-party implementations" tells how to build that venv, every version pinned. This wrapper writes
``results/efficiency/peers-cpu-<UTC date and time>.jsonl``: a first ``peers_run`` line (this
checkout's commit and whether it is dirty, the harness command, the host CPU, the date, and a GEMM
probe of the idle machine taken before the first case), then the harness's own lines, appended by
the harness itself, then (with ``--with-gemm``) one ``gemm`` line per dominant matmul of each of
our modules in the run (``family_matmuls``: the projections, the block logits, ...), timed in this
JAX under the cases' XLA flags and in the peers venv's torch. Nothing in the file is written by
hand. Add ``ours_projections`` to ``--peers`` to record the projections' own time, which the
leaderboard takes out of our module's when the peer is a core without projections.
``python -m lra.leaderboard`` turns the file into the "vs best peer" table.

Unless ``--retry-below`` is among the harness arguments, a case whose probe falls under 80% of the
initial probe is re-measured (the harness's fixed default, 200 GFLOP/s, fits one machine only).

``--gemm`` instead times plain (batched) matmuls of the shapes the attention layers run, in this
JAX and in the peers venv's PyTorch, alternating the two twice (each keeps its better median), and
prints the table: where a peer is faster, it shows whether the library's matmul already is.

    python -m lra.bench.peers --python $PEERS_HOME/venv/bin/python --gemm
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import lra._guard  # noqa: F401  (first: one line where lra was found only in part)
from lra import results, xla_cpu
from lra.bench.peers_harness import probe_gflops
from lra.results import RESULTS_DIR_HELP, default_results_dir

DEFAULT_SCRIPT = Path(__file__).resolve().with_name("peers_harness.py")
RETRY_FRACTION = 0.8


# (batch, M, K, N) of the matmuls that dominate: the q/k/v/out projections at B=4, L=1024, E=512;
# softmax's logits and its weighted sum of values (B=4, H=8, L=1024, head size 64); the Nystromformer
# pseudo-inverse (32 heads, 256 landmarks); block-local logits (B=4, H=8, 16 blocks of 64 queries
# against 128 keys, head size 64).
GEMM_SHAPES = ((1, 4096, 512, 512), (32, 1024, 64, 1024), (32, 1024, 1024, 64), (32, 256, 256, 256),
               (2048, 64, 64, 128))
MALLOC = {"MALLOC_MMAP_MAX_": "0", "MALLOC_TRIM_THRESHOLD_": "100000000000"}  # as the harness runs

# Run by both pythons: argv = framework, reps, then shapes "n,m,k,n2"; prints one JSON line per
# shape and variant (JAX: XLA's default compile and one without the YNN fusions, lra/xla_cpu.py).
_GEMM_CHILD = """
import json, statistics, sys, time
fw, reps, shapes = sys.argv[1], int(sys.argv[2]), [tuple(map(int, s.split(","))) for s in sys.argv[3:]]
if fw == "torch":
    import torch
    torch.set_num_threads(len(__import__("os").sched_getaffinity(0)))
    make = lambda shape, seed: torch.randn(*shape, generator=torch.Generator().manual_seed(seed))
    variants = {"default": lambda a, b: (lambda: torch.bmm(a, b))}
    version = torch.__version__
else:
    import jax, jax.numpy as jnp
    make = lambda shape, seed: jax.random.normal(jax.random.key(seed), shape)
    def compiled(options):
        def build(a, b):
            c = jax.jit(jnp.matmul).lower(a, b).compile(compiler_options=options)
            return lambda: c(a, b).block_until_ready()
        return build
    variants = {"default": compiled(None),
                "no-ynn": compiled({"xla_cpu_experimental_ynn_fusion_type": ""})}
    version = jax.__version__
for n, m, k, n2 in shapes:
    a, b = make((n, m, k), 0), make((n, k, n2), 1)
    for variant, build in variants.items():
        mm = build(a, b)
        mm(); mm()
        times = []
        for _ in range(reps):
            t0 = time.perf_counter(); mm(); times.append(time.perf_counter() - t0)
        print(json.dumps({"framework": fw, "variant": variant, "version": version,
                          "shape": [n, m, k, n2], "ms": statistics.median(times) * 1e3}))
"""


def gemm_flops(shape: tuple[int, int, int, int]) -> float:
    """Multiply-adds x 2 of ``batch`` products [M, K] x [K, N]."""
    n, m, k, n2 = shape
    return 2.0 * n * m * k * n2


def gemm_times(python: str, shapes, reps: int = 15, rounds: int = 2,
               env: dict | None = None) -> dict[tuple[str, str, tuple], float]:
    """Best median ms of each (framework, variant, shape): JAX's "default" (XLA as ``env``'s
    XLA_FLAGS say, i.e. as the cases ran) and "no-ynn", and ``python``'s torch "default"; the two
    frameworks alternate ``rounds`` times, each in its own process."""
    best: dict[tuple[str, str, tuple], float] = {}
    args = [str(reps), *(",".join(map(str, s)) for s in dict.fromkeys(map(tuple, shapes)))]
    for _ in range(rounds):
        for fw, exe in (("torch", python), ("jax", sys.executable)):  # torch first: fails fast
            done = subprocess.run([exe, "-c", _GEMM_CHILD, fw, *args], capture_output=True,
                                  text=True, env={**(env or os.environ), **MALLOC}, check=False)
            if done.returncode:
                tail = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
                raise RuntimeError(f"{fw} matmuls failed under {exe}: {tail}")
            for line in done.stdout.splitlines():
                row = json.loads(line)
                key = (fw, row["variant"], tuple(row["shape"]))
                best[key] = min(best.get(key, float("inf")), row["ms"])
    return best


def gemm_table(python: str, shapes=GEMM_SHAPES, reps: int = 15, rounds: int = 2) -> list[str]:
    """Markdown rows: each shape's best median time and GFLOP/s in JAX (XLA's default compile and
    one without the YNN fusions) and in ``python``'s torch."""
    best = gemm_times(python, shapes, reps, rounds)
    rows = ["| batch x [M x K] @ [K x N] | JAX ms | JAX GFLOP/s | JAX no-YNN ms | JAX no-YNN GFLOP/s "
            "| torch ms | torch GFLOP/s | faster JAX / torch |",
            "|---|---|---|---|---|---|---|---|"]
    for s in shapes:
        j, jn, t = (best[(fw, v, tuple(s))] for fw, v in
                    (("jax", "default"), ("jax", "no-ynn"), ("torch", "default")))
        rows.append(f"| {s[0]} x [{s[1]} x {s[2]}] @ [{s[2]} x {s[3]}] | "
                    + " | ".join(f"{ms:.3f} | {gemm_flops(s) / ms / 1e6:.0f}" for ms in (j, jn, t))
                    + f" | {min(j, jn) / t:.2f}x |")
    return rows


def family_matmuls(family: str, B: int, H: int, L: int, D: int) -> list[tuple[str, int, tuple]]:
    """(what, count per forward pass, (batch, M, K, N)) of the matmuls that dominate our
    ``family`` module at the peers harness's settings (the family's ``peer_options``), the four
    q/k/v/out projections first (``what`` = "projections"), then the family's own
    (``peer_matmuls``, declared in its file). Empty for a family that declares none. The backward
    pass runs two products of each shape's size per forward one, so the counts weigh fwd+bwd
    alike."""
    from lra import attention

    try:
        own = getattr(attention.family(family), "peer_matmuls", None)
    except attention.UnknownAttentionError:
        return []
    if own is None:
        return []
    E = H * D
    return [("projections", 4, (1, B * L, E, E)), *own(B, H, L, D)]


def gemm_lines(python: str, families, lengths, B: int, H: int, D: int, env: dict,
               reps: int = 7) -> list[dict]:
    """One ``{"gemm": ...}`` line per (family, length, matmul) of ``family_matmuls``, timed by
    ``gemm_times`` under ``env`` (the cases' XLA flags): the file's own record of what the same
    matmuls cost in XLA and in torch, which ``lra.leaderboard`` turns into a bound."""
    todo = [(f, L, *row) for f in families for L in lengths for row in family_matmuls(f, B, H, L, D)]
    if not todo:
        return []
    best = gemm_times(python, [row[-1] for row in todo], reps=reps, env=env)
    return [{"gemm": {"family": f, "seq_len": L, "what": what, "count": count, "shape": list(shape),
                      "jax_ms": round(best[("jax", "default", shape)], 3),
                      "jax_no_ynn_ms": round(best[("jax", "no-ynn", shape)], 3),
                      "torch_ms": round(best[("torch", "default", shape)], 3)}}
            for f, L, what, count, shape in todo]


def parse_args(argv: list[str] | None = None) -> tuple[argparse.Namespace, list[str]]:
    p = argparse.ArgumentParser(prog="python -m lra.bench.peers", description=__doc__.split("\n")[0],
                                epilog="Arguments after -- go to the harness unchanged.")
    p.add_argument("--python", required=True,
                   help="the peers venv's python (torch and the peer packages live there)")
    p.add_argument("--script", type=Path, default=DEFAULT_SCRIPT,
                   help="the harness (default: lra/bench/peers_harness.py)")
    p.add_argument("--results-dir", type=Path, default=default_results_dir(), help=RESULTS_DIR_HELP)
    p.add_argument("--gemm", action="store_true",
                   help="time plain matmuls of the layers' shapes in JAX and in --python's torch, "
                        "print the table and exit (no harness, no results file)")
    p.add_argument("--with-gemm", action="store_true",
                   help="after the harness, time the dominant matmuls of our modules in the run "
                        "in JAX and in --python's torch, into the file (the leaderboard's bound "
                        "column)")
    p.add_argument("--xla-cpu-fusions", default=None, choices=("on", "off"),
                   help="compile the JAX cases with XLA:CPU's YNN fusions (on: XLA's default) or "
                        "without (off), as lra.run picks per model (docs/running.md 'Running'); recorded "
                        "in the file. Default: as XLA_FLAGS says")
    p.add_argument("--out", type=Path, default=None,
                   help="the jsonl to write (default: <results-dir>/efficiency/peers-cpu-<date>.jsonl);"
                        " an existing file is never appended to")
    argv = list(sys.argv[1:] if argv is None else argv)
    rest: list[str] = []
    if "--" in argv:
        cut = argv.index("--")
        argv, rest = argv[:cut], argv[cut + 1:]
    return p.parse_args(argv), rest


def main(argv: list[str] | None = None) -> int:
    args, harness_args = parse_args(argv)
    if not Path(args.python).exists():
        print(f"error: no python at {args.python}: create the peers venv as "
              f"docs/efficiency.md 'Against third-party implementations' says", file=sys.stderr)
        return 2
    if args.gemm:
        try:
            rows = gemm_table(args.python)
        except RuntimeError as err:
            print(f"error: {err}", file=sys.stderr)
            return 1
        print(f"host: {results.host_info()}")
        print("\n".join(rows))
        return 0
    if not args.script.is_file():
        print(f"error: peers harness not found at {args.script} (give --script)", file=sys.stderr)
        return 2
    now = dt.datetime.now(dt.UTC)
    out = args.out or args.results_dir / "efficiency" / f"peers-cpu-{now:%Y%m%dT%H%M%SZ}.jsonl"
    if out.exists():
        print(f"error: {out} exists; results files are never appended to", file=sys.stderr)
        return 2
    probe = probe_gflops()
    if "--retry-below" not in harness_args:
        harness_args += ["--retry-below", f"{RETRY_FRACTION * probe:.0f}"]
    git = results.git_commit()
    env = {**os.environ, "LRA_PROJECT": str(Path(__file__).resolve().parents[2])}
    if args.xla_cpu_fusions is not None:
        flags = [f for f in env.get("XLA_FLAGS", "").split()
                 if f.lstrip("-").partition("=")[0] != xla_cpu.FLAG]
        env["XLA_FLAGS"] = " ".join(flags + ([f"--{xla_cpu.FLAG}="]
                                             if args.xla_cpu_fusions == "off" else []))
    header = {"peers_run": {
        "git": git["commit"][:12], "dirty": git["dirty"],
        "command": shlex.join([args.script.name, *harness_args]),
        "host": results.host_info(), "date": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "initial_probe_gflops": probe, "xla_flags": env.get("XLA_FLAGS", ""),
        "xla_cpu_fusions": ("off" if (xla_cpu.env_setting_of(env.get("XLA_FLAGS", "")) == "")
                            else "on")}}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(header) + "\n")
    cmd = [str(args.python), str(args.script), *harness_args, "--out", str(out)]
    print(f"peers: initial probe {probe} GFLOP/s; writing {out}", flush=True)
    rc = subprocess.run(cmd, env=env, check=False).returncode
    if rc or not args.with_gemm:
        return rc
    from lra.bench import peers_harness

    run = peers_harness.parser().parse_known_args(harness_args)[0]
    families = [n[len("ours_"):-len("_module")] for n in (run.peers or peers_harness.PEERS)
                if n.startswith("ours_") and n.endswith("_module")]
    print(f"peers: timing the dominant matmuls of {families} in JAX and torch", flush=True)
    try:
        lines = gemm_lines(args.python, families, run.seq_lens, run.batch, run.heads,
                           run.head_dim, env)
    except RuntimeError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    with out.open("a") as f:
        f.writelines(json.dumps(line) + "\n" for line in lines)
    return 0


if __name__ == "__main__":
    sys.exit(main())
