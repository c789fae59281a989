"""Like with like in the peers table: our projections' time taken out against a core peer, and the
bound the same matmuls give (``gemm`` lines of the peers file), with the wrapper that records them."""

import json
import sys

import pytest

from lra.bench import peers
from lra.bench import peers_harness as h
from lra.leaderboard.peers import peers_section


def _case(peer, mech, kind, seq_len, ms):
    return json.dumps({"peer": peer, "mechanism": mech, "kind": kind, "seq_len": seq_len,
                       "status": "ok", "fwdbwd_ms_median": ms, "fwdbwd_probe_gflops": [300, 300]})


def _gemm(family, seq_len, what, count, jax_ms, torch_ms):
    return json.dumps({"gemm": {"family": family, "seq_len": seq_len, "what": what, "count": count,
                                "shape": [1, 2, 3, 4], "jax_ms": jax_ms, "jax_no_ynn_ms": jax_ms,
                                "torch_ms": torch_ms}})


def _section(tmp_path, name, lines) -> str:
    """The peers section of a results folder holding one peers file of ``lines``."""
    eff = tmp_path / "efficiency"
    eff.mkdir()
    (eff / name).write_text("\n".join(lines) + "\n")
    return "\n".join(peers_section(tmp_path))


def test_projections_are_taken_out_against_a_core_and_the_bound_shown(tmp_path):
    text = _section(tmp_path, "peers-cpu-2026-01-06.jsonl", [
        _case("sinkhorn_attention", "sinkhorn", "core", 1024, 60.0),
        _case("ours_sinkhorn_module", "sinkhorn", "module", 1024, 300.0),
        _case("ours_projections", "projections", "module", 1024, 150.0),
        _case("nystrom_module", "nystrom", "module", 1024, 400.0),
        _case("ours_nystromformer_module", "nystromformer", "module", 1024, 440.0),
        _gemm("sinkhorn", 1024, "projections", 4, 10.0, 10.0),  # left out against a core
        _gemm("sinkhorn", 1024, "block logits", 1, 30.0, 10.0),
        _gemm("sinkhorn", 1024, "P K, P V", 2, 5.0, 5.0),
        _gemm("nystromformer", 1024, "pinv", 24, 3.0, 1.0),
    ])
    assert "| ours - projections / peer | bound: same matmuls, XLA / torch |" in text
    # (300 - 150) / 60 = 2.5x; bound (30 + 2 x 5) / (10 + 2 x 5) = 2.0x, the logits at 3.0x
    assert ("| ours_sinkhorn_module | 1024 | 300 | sinkhorn_attention (core) | 60 | 5.00x (ours has "
            "q/k/v/out projections, the peer none) | 300 / 300 | 2.50x | 2.00x (costliest: block "
            "logits, 3.00x) |") in text
    # module against module within 1.5x: no adjustment, no bound
    assert ("| ours_nystromformer_module | 1024 | 440 | nystrom_module (module) | 400 | 1.10x "
            "| 300 / 300 |  |  |") in text
    assert "ours_projections |" not in text  # measured for the others, no row of its own


def test_a_file_without_projections_or_gemm_lines_keeps_its_columns(tmp_path):
    text = _section(tmp_path, "peers-cpu-2026-01-07.jsonl", [
        _case("sinkhorn_attention", "sinkhorn", "core", 1024, 60.0),
        _case("ours_sinkhorn_module", "sinkhorn", "module", 1024, 300.0)])
    assert "projections / peer" not in text and "bound" not in text


def test_each_family_with_a_peer_names_its_dominant_matmuls():
    for family in ("sinkhorn", "softmax", "nystromformer", "linformer", "performer", "reformer",
                   "local", "cosformer"):
        rows = peers.family_matmuls(family, 4, 8, 1024, 64)
        assert rows[0] == ("projections", 4, (1, 4096, 512, 512)) and len(rows) > 1, family
        assert all(count >= 1 and len(shape) == 4 for _, count, shape in rows)
        assert family in h.OURS_FAMILIES
    assert peers.family_matmuls("fnet", 4, 8, 1024, 64) == []
    # sinkhorn at block 64: 16 blocks of 64 queries against their own and their sorted block
    assert ("block logits", 1, (512, 64, 64, 128)) in peers.family_matmuls("sinkhorn", 4, 8, 1024, 64)


@pytest.mark.slow
def test_gemm_lines_and_the_projections_case(monkeypatch):
    """The "torch" side is this python's JAX again (no torch in the test venv): plumbing only."""
    monkeypatch.setattr(peers, "_GEMM_CHILD",
                        peers._GEMM_CHILD.replace('if fw == "torch":', 'if False:'))
    lines = peers.gemm_lines(sys.executable, ["sinkhorn"], [128], 1, 2, 8, env=dict(peers.os.environ),
                             reps=2)
    whats = [line["gemm"]["what"] for line in lines]
    assert whats == [w for w, _, _ in peers.family_matmuls("sinkhorn", 1, 2, 128, 8)]
    for line in lines:
        g = line["gemm"]
        assert g["family"] == "sinkhorn" and g["seq_len"] == 128
        assert g["jax_ms"] > 0 and g["jax_no_ynn_ms"] > 0 and g["torch_ms"] > 0
    assert peers.gemm_lines(sys.executable, ["fnet"], [128], 1, 2, 8, env={}) == []
    spec = h.PEERS["ours_projections"]
    assert spec.framework == "jax" and spec.kind == "module" and spec.mechanism == "projections"


def test_a_module_peer_is_the_best_peer_and_the_core_route_is_shown_beside_it(tmp_path):
    """Both like-with-like routes on one row: module against module (the ratio), and our module
    less our projections against the core peer (named, since it is not the best peer); the bound
    comes with the worse route, here the core one, so the projections' matmuls are left out."""
    text = _section(tmp_path, "peers-cpu-2026-01-08.jsonl", [
        _case("local_mha_lucidrains", "local/block", "module", 1024, 150.0),
        _case("local_attention_lucidrains", "local/block", "core", 1024, 40.0),
        _case("ours_local_module", "local", "module", 1024, 165.0),
        _case("ours_projections", "projections", "module", 1024, 95.0),
        _case("local_mha_lucidrains", "local/block", "module", 2048, 300.0),
        _case("local_attention_lucidrains", "local/block", "core", 2048, 100.0),
        _case("ours_local_module", "local", "module", 2048, 330.0),
        _case("ours_projections", "projections", "module", 2048, 200.0),
        _gemm("local", 1024, "projections", 4, 50.0, 10.0),
        _gemm("local", 1024, "block logits", 1, 12.0, 10.0),
        _gemm("local", 2048, "block logits", 1, 12.0, 10.0),
    ])
    # 165 / 150 = 1.10x module against module; (165 - 95) / 40 = 1.75x > 1.5: bound 12 / 10
    assert ("| ours_local_module | 1024 | 165 | local_mha_lucidrains (module) | 150 | 1.10x "
            "| 300 / 300 | 1.75x (vs local_attention_lucidrains) | 1.20x (costliest: block logits, "
            "1.20x) |") in text
    # both routes within 1.5x ((330 - 200) / 100 = 1.30x): no bound
    assert ("| ours_local_module | 2048 | 330 | local_mha_lucidrains (module) | 300 | 1.10x "
            "| 300 / 300 | 1.30x (vs local_attention_lucidrains) |  |") in text


def test_a_core_against_a_core_gets_the_bound_of_its_core_matmuls(tmp_path):
    """Our softmax kernel against torch SDPA: core against core, so the bound leaves the
    projections out."""
    text = _section(tmp_path, "peers-cpu-2026-01-09.jsonl", [
        _case("torch_sdpa", "softmax", "core", 1024, 100.0),
        _case("ours_softmax_kernel", "softmax", "core", 1024, 190.0),
        _case("ours_projections", "projections", "module", 1024, 50.0),
        _gemm("softmax", 1024, "projections", 4, 10.0, 10.0),
        _gemm("softmax", 1024, "logits", 1, 40.0, 20.0),
        _gemm("softmax", 1024, "values", 1, 20.0, 20.0),
    ])
    # (40 + 20) / (20 + 20) = 1.50x without the projections (with them: 1.25x)
    assert ("| ours_softmax_kernel | 1024 | 190 | torch_sdpa (core) | 100 | 1.90x | 300 / 300 |  "
            "| 1.50x (costliest: logits, 2.00x) |") in text
