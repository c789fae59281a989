"""Run the peers harness (``../shared/tools/peers/peers.py``) into a results file with provenance.

    python -m lra.peers --python $PEERS_HOME/venv/bin/python -- \\
        --peers torch_sdpa ours_softmax_kernel --seq-lens 1024 2048 4096 --modes fwdbwd

The harness times third-party attention implementations next to ours, each case in its own process,
with a fixed GEMM probe before and after every case. This wrapper writes
``results/efficiency/peers-cpu-<UTC date and time>.jsonl``: a first ``peers_run`` line (this
checkout's commit and whether it is dirty, the harness command, the host CPU, the date, and a GEMM
probe of the idle machine taken before the first case), then the harness's own lines, appended by
the harness itself. Nothing in the file is written by hand. ``python -m lra.leaderboard`` turns it
into the "vs best peer" table.

Unless ``--retry-below`` is among the harness arguments, a case whose probe falls under 80% of the
initial probe is re-measured (the harness's fixed default, 200 GFLOP/s, fits one machine only).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path

from lra import results

DEFAULT_SCRIPT = Path(__file__).resolve().parents[2] / "shared" / "tools" / "peers" / "peers.py"
RETRY_FRACTION = 0.8


def probe_gflops(n: int = 1024, reps: int = 5) -> float:
    """The harness's probe: the median of ``reps`` float32 n^3 numpy GEMMs, in GFLOP/s."""
    import numpy as np

    x = np.ones((n, n), np.float32)
    z = np.empty_like(x)
    np.matmul(x, x, out=z)
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        np.matmul(x, x, out=z)
        times.append(time.perf_counter() - t0)
    return round(2.0 * n ** 3 / statistics.median(times) / 1e9, 1)


def parse_args(argv: list[str] | None = None) -> tuple[argparse.Namespace, list[str]]:
    p = argparse.ArgumentParser(prog="python -m lra.peers", description=__doc__.split("\n")[0],
                                epilog="Arguments after -- go to peers.py unchanged.")
    p.add_argument("--python", required=True,
                   help="the peers venv's python (torch and the peer packages live there)")
    p.add_argument("--script", type=Path, default=DEFAULT_SCRIPT,
                   help="the harness (default: ../shared/tools/peers/peers.py beside the checkout)")
    p.add_argument("--results-dir", type=Path, default=Path("results"))
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
    if not args.script.is_file():
        print(f"error: peers harness not found at {args.script} (give --script)", file=sys.stderr)
        return 2
    if not Path(args.python).exists():
        print(f"error: no python at {args.python}: create the peers venv as the header of "
              f"{args.script.name} says", file=sys.stderr)
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
    header = {"peers_run": {
        "git": git["commit"][:12], "dirty": git["dirty"],
        "command": shlex.join(["peers.py", *harness_args]),
        "host": results.host_info(), "date": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "initial_probe_gflops": probe}}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(header) + "\n")
    env = {**os.environ, "LRA_PROJECT": str(Path(__file__).resolve().parents[1])}
    cmd = [str(args.python), str(args.script), *harness_args, "--out", str(out)]
    print(f"peers: initial probe {probe} GFLOP/s; writing {out}", flush=True)
    return subprocess.run(cmd, env=env, check=False).returncode


if __name__ == "__main__":
    sys.exit(main())
