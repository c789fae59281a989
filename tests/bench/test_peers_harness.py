"""The project's peers harness (lra/bench/peers_harness.py): its pure parts, and its child protocol end
to end with the project's own JAX cases (the CI machine has no torch; the torch peers then report
"unavailable")."""

import argparse
import importlib.util
import json
import math
import subprocess
import sys

import pytest

from lra.bench import peers
from lra.bench import peers_harness as h

TINY = ["--seq-lens", "32", "--batch", "1", "--heads", "2", "--head-dim", "8", "--warmup", "0",
        "--repeats", "2", "--min-repeats", "1", "--threads", "1"]


def test_nominal_gflop_counts_softmax_matmuls_only():
    B, H, L, D = 2, 4, 128, 16
    fwd = 4.0 * B * H * L * L * D / 1e9
    assert h.nominal_gflop(h.PEERS["ours_softmax_kernel"], B, H, L, D, "fwd") == fwd
    assert math.isclose(h.nominal_gflop(h.PEERS["torch_sdpa"], B, H, L, D, "fwdbwd"), 3 * fwd)
    module = h.nominal_gflop(h.PEERS["torch_mha_module"], B, H, L, D, "fwd")
    assert math.isclose(module, fwd + 8.0 * B * L * (H * D) ** 2 / 1e9)
    assert h.nominal_gflop(h.PEERS["ours_cosformer_kernel"], B, H, L, D, "fwd") is None


def test_every_family_of_ours_has_a_module_case_and_mechanisms_match_the_leaderboard():
    from lra.leaderboard.peers import PEER_MECHANISM

    for family in h.OURS_FAMILIES:
        spec = h.PEERS[f"ours_{family}_module"]
        assert spec.framework == "jax" and spec.kind == "module" and spec.mechanism == family
    theirs = {s.mechanism for s in h.PEERS.values() if s.framework == "torch"}
    for ours, mechanism in PEER_MECHANISM.items():
        assert mechanism in theirs, (ours, mechanism)  # the leaderboard finds a rival to compare


def test_every_jax_case_builds_with_the_shapes_it_claims():
    """Traced, not compiled (jax.eval_shape): every JAX peer and every one of ours, with the options
    that match its peer, returns the layout of its kind."""
    import jax

    B, H, L, D = 1, 2, 512, 8
    for name, spec in h.PEERS.items():
        if spec.framework != "jax":
            continue
        fn, inputs = spec.build(B, H, L, D)
        shape = jax.eval_shape(fn, *inputs).shape
        assert shape == ((B, L, H * D) if spec.kind == "module" else (B, L, H, D)), name


def test_case_output_is_the_last_marked_line():
    out = "noise\n" + h.MARK + '{"a": 1}\nmore\n' + h.MARK + '{"a": 2}\n'
    assert h.parse_case_output(out) == {"a": 2}
    assert h.parse_case_output("no mark here") is None


def test_a_case_on_a_slow_machine_is_retried_and_the_healthiest_attempt_kept():
    probes = iter([(50, 60), (100, 90), (80, 200)])  # healths 50, 90, 80

    def fake(a, name, length, mode):
        before, after = next(probes)
        return {"status": "ok", "probe_gflops_before": before, "probe_gflops_after": after,
                "ms_median": before}
    a = argparse.Namespace(retry_below=150.0, retries=2)
    best, attempts = h.measure(a, "x", 1, "fwd", run=fake)
    assert attempts == 3 and best["ms_median"] == 100
    healthy = lambda *_: {"status": "ok", "probe_gflops_before": 300, "probe_gflops_after": 300}  # noqa: E731
    assert h.measure(a, "x", 1, "fwd", run=healthy)[1] == 1


def test_merge_names_each_mode_and_the_line_status_counts_them():
    line = {}
    res = {"status": "ok", "ms_median": 10.0, "ms_min": 9.0, "n": 5, "probe_gflops_before": 290,
           "probe_gflops_after": 300, "out_finite": True, "compile_s": 0.5}
    h.merge(line, "fwdbwd", res, 1, gflop=2.0)
    assert line["fwdbwd_ms_median"] == 10.0 and line["fwdbwd_probe_gflops"] == [290, 300]
    assert line["fwdbwd_gflops_achieved"] == 200.0 and line["fwdbwd_compile_s"] == 0.5
    assert h.line_status(line, ["fwdbwd"]) == "ok" and h.line_status(line, h.MODES) == "partial"
    h.merge(line, "fwd", {"status": "timeout"}, 1, None)
    assert line["fwd_status"] == "timeout" and h.line_status({}, h.MODES) == "failed"


def test_timed_calls_stop_after_the_time_budget_but_not_before_the_minimum():
    calls = []
    times = h.timed_calls(lambda: calls.append(1), 0.0, warmup=2, repeats=50, min_repeats=3,
                          max_seconds=0.0)
    assert len(times) == 3 and len(calls) == 5  # 2 warm-up calls, then the minimum
    calls.clear()
    h.timed_calls(lambda: calls.append(1), h.SLOW_FIRST_S + 1, warmup=2, repeats=2, min_repeats=1,
                  max_seconds=99)
    assert len(calls) == 2  # no warm-up after a slow first call


def test_the_harness_imports_no_framework_until_a_case_needs_one(tmp_path):
    code = ("import runpy, sys\n"
            f"sys.argv = [{str(h.__file__)!r}, '--list']\n"
            "try:\n    runpy.run_path(sys.argv[0], run_name='__main__')\n"
            "except SystemExit:\n    pass\n"
            "assert not {'jax', 'torch', 'flax', 'numpy'} & set(sys.modules), sys.modules.keys()\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    listed = {json.loads(x)["peer"]: json.loads(x) for x in done.stdout.splitlines()}
    assert listed["ours_softmax_kernel"]["available"] and set(listed) == set(h.PEERS)


@pytest.mark.slow
def test_our_jax_cases_through_the_wrapper_and_its_default_harness(tmp_path):
    """The real child protocol: a fresh process per case, JSON back, modes merged, probes kept."""
    out = tmp_path / "peers-cpu-x.jsonl"
    assert peers.DEFAULT_SCRIPT == peers.Path(h.__file__).resolve()
    rc = peers.main(["--python", sys.executable, "--out", str(out), "--",
                     "--peers", "ours_linear_module", "torch_sdpa",
                     "--modes", "fwd", "fwdbwd", *TINY])
    assert rc == 0
    header, *lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert header["peers_run"]["command"].startswith("peers_harness.py --peers ours_linear_module")
    by_peer = {line["peer"]: line for line in lines}
    line = by_peer["ours_linear_module"]  # a module: the gradient covers its parameters too
    assert line["status"] == "ok" and line["seq_len"] == 32 and line["kind"] == "module", line
    for mode in h.MODES:
        assert line[f"{mode}_ms_median"] > 0 and line[f"{mode}_out_finite"]
        assert len(line[f"{mode}_probe_gflops"]) == 2 and line[f"{mode}_compile_s"] >= 0
    if importlib.util.find_spec("torch") is None:
        assert by_peer["torch_sdpa"]["status"] == "unavailable"


def test_an_unknown_peer_is_a_command_line_error(capsys):
    assert h.main(["--peers", "no_such_peer"]) == 2
    assert "unknown peers ['no_such_peer']" in capsys.readouterr().err
