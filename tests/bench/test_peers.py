"""`python -m lra.bench.peers`: the provenance line, the harness's own lines after it, clear errors."""

import json
import sys

import pytest

from lra.bench import peers

FAKE_HARNESS = '''
import json, os, sys
args = sys.argv[1:]
out = args[args.index("--out") + 1]
line = {"peer": "ours_softmax_kernel", "seq_len": 1024, "status": "ok", "argv": args,
        "project": os.environ["LRA_PROJECT"], "xla_flags": os.environ.get("XLA_FLAGS", "")}
with open(out, "a") as f:
    f.write(json.dumps(line) + "\\n")
'''


def test_header_then_the_harness_lines(tmp_path):
    script = tmp_path / "peers.py"
    script.write_text(FAKE_HARNESS)
    out = tmp_path / "res" / "efficiency" / "peers-cpu-x.jsonl"
    rc = peers.main(["--python", sys.executable, "--script", str(script), "--out", str(out), "--",
                     "--peers", "ours_softmax_kernel", "--seq-lens", "1024"])
    assert rc == 0
    header, line = [json.loads(x) for x in out.read_text().splitlines()]
    run = header["peers_run"]
    assert run["command"].startswith("peers.py --peers ours_softmax_kernel --seq-lens 1024 --retry-below ")
    assert run["initial_probe_gflops"] > 0 and run["host"]["cores"] >= 1 and len(run["git"]) == 12
    retry = float(line["argv"][line["argv"].index("--retry-below") + 1])
    assert abs(retry - peers.RETRY_FRACTION * run["initial_probe_gflops"]) <= 1.0
    assert (peers.Path(line["project"]) / "attention").is_dir()  # ours_* import this checkout
    # a second run never appends to an existing file
    assert peers.main(["--python", sys.executable, "--script", str(script), "--out", str(out)]) == 2


def test_xla_cpu_fusions_reach_the_harness_and_the_header(tmp_path, monkeypatch):
    script = tmp_path / "peers.py"
    script.write_text(FAKE_HARNESS)
    flag = "--xla_cpu_experimental_ynn_fusion_type="
    monkeypatch.setenv("XLA_FLAGS", f"--xla_backend_optimization_level=0 {flag}")
    seen = {}
    for choice in ("on", "off", None):
        out = tmp_path / f"peers-{choice}.jsonl"
        argv = ["--python", sys.executable, "--script", str(script), "--out", str(out)]
        assert peers.main(argv + (["--xla-cpu-fusions", choice] if choice else [])) == 0
        header, line = [json.loads(x) for x in out.read_text().splitlines()]
        assert header["peers_run"]["xla_flags"] == line["xla_flags"]
        assert "--xla_backend_optimization_level=0" in line["xla_flags"]  # other flags stay
        seen[choice] = (header["peers_run"]["xla_cpu_fusions"], flag in line["xla_flags"])
    assert seen == {"on": ("on", False), "off": ("off", True), None: ("off", True)}


def test_missing_harness_or_python_is_a_clear_error(tmp_path, capsys):
    assert peers.main(["--python", sys.executable, "--script", str(tmp_path / "nope.py")]) == 2
    assert "peers harness not found" in capsys.readouterr().err
    script = tmp_path / "peers.py"
    script.write_text(FAKE_HARNESS)
    assert peers.main(["--python", str(tmp_path / "no-python"), "--script", str(script)]) == 2
    assert "create the peers venv" in capsys.readouterr().err


@pytest.mark.slow
def test_gemm_table_times_both_sides_and_reports_their_ratio(monkeypatch):
    """The table's GFLOP/s come from the shape's FLOPs and the better median of two rounds; here
    the "torch" side is this python's JAX again (torch is not in the test venv), so only the
    plumbing of the child processes is exercised, not a speed."""
    assert peers.gemm_flops((2, 3, 4, 5)) == 2 * 2 * 3 * 4 * 5
    child = peers._GEMM_CHILD
    monkeypatch.setattr(peers, "_GEMM_CHILD", child.replace('if fw == "torch":', 'if False:'))
    rows = peers.gemm_table(sys.executable, shapes=((2, 8, 8, 8), (1, 16, 8, 4)), reps=3)
    assert rows[0].startswith("| batch x [M x K] @ [K x N] | JAX ms")
    assert rows[2].startswith("| 2 x [8 x 8] @ [8 x 8] |")
    assert rows[3].startswith("| 1 x [16 x 8] @ [8 x 4] |")
    for row, shape in zip(rows[2:], ((2, 8, 8, 8), (1, 16, 8, 4))):
        cells = [float(c.strip().rstrip("x")) for c in row.strip("|").split("|")[1:]]
        jax_ms, jax_gf, no_ynn_ms, no_ynn_gf, torch_ms, torch_gf, ratio = cells
        flops = peers.gemm_flops(shape)
        for ms, gf in ((jax_ms, jax_gf), (no_ynn_ms, no_ynn_gf), (torch_ms, torch_gf)):
            assert ms > 0 and abs(gf - flops / ms / 1e6) <= 0.5 + 0.05 * gf  # ms has 3 decimals
        assert abs(ratio - min(jax_ms, no_ynn_ms) / torch_ms) <= 0.01 + 0.05 * ratio


def test_gemm_without_torch_is_a_clear_error(capsys):
    rc = peers.main(["--python", sys.executable, "--gemm"])  # the test venv has no torch
    assert rc == 1
    assert "torch matmuls failed under" in capsys.readouterr().err
