"""The "vs best peer" tables: our attention layers against third-party implementations, from the
peers files of ``python -m lra.bench.peers``."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

from lra.declared import declared
from lra.leaderboard.cells import md_table
from lra.leaderboard.load import ResultFileError

# {our family: the peers' name of its mechanism} where they differ, as each family's file declares
# (``peer_mechanism``, read without importing the family)
PEER_MECHANISM = {family: facts["peer_mechanism"] for family, facts in declared("attention").items()
                  if "peer_mechanism" in facts}


PROBE_TOLERANCE = 0.15  # ours and the peer compared only when their GEMM probes are this close


HEALTHY_FRACTION = 0.7  # a probe under this fraction of the file's median probe: the machine was slowed


LIKE_BOUND = 1.5  # a like-with-like ratio above this gets the bound beside it

_KIND_MARK = {"module": "ours has q/k/v/out projections, the peer none",
              "core": "the peer has projections, ours none"}


def peers_section(results_dir: Path) -> list[str]:
    """"vs best peer" tables from ``efficiency/peers-cpu-*.jsonl`` (``lra/bench/peers_harness.py``
    output; ours and the peers measured in one invocation, so one file is one comparison).

    Per (our entry, length): the fastest peer of the same mechanism and the same kind in the same
    file (a module, with q/k/v/out projections, against a module; a core against a core), else the
    fastest of the other kind, marked, since then one side does work the other does not. Then the
    ratio of fwd+bwd medians (ours / peer: below 1 is faster) and each side's GEMM probes (GFLOP/s
    before and after its case). A pair whose probes differ by more than 15% is marked, and so is
    one with any probe under 70% of the file's median probe (the shared machine was slowed down;
    relative, because a healthy probe is ~300 GFLOP/s on one host CPU and ~80 on another, and to
    the median, not the best, so that one fast outlier does not mark a whole file): such a ratio
    measures the machine's load as much as the code.

    Two more columns where the file holds what they need. "ours - projections / peer": against the
    fastest core peer of the mechanism, our module's time less ``ours_projections``' at the same
    length (the q/k/v/out projections, measured in the same file), over the peer's: like against
    like; where a module peer is the best peer, the core peer is named beside it, so a row shows
    both routes (module against module, and core against core). "bound": where either
    like-with-like ratio is above 1.5x, what the same matmuls cost, Σ count x XLA ms / Σ count x
    torch ms over the file's ``gemm`` lines of that family and length
    (``lra.bench.peers.family_matmuls``; the projections left out where the core route is the
    worse one), with the costliest of them named: a ratio near it is the libraries' matmuls, not
    our code.
    """
    files = sorted((Path(results_dir) / "efficiency").glob("peers-cpu-*.jsonl"))
    if not files:
        return []
    lines = ["### Attention layer vs the best third-party implementation (CPU, fwd+bwd)", ""]
    for path in files:
        lines += _file_section(path)
    return lines


def _probe(r: dict) -> float:
    return statistics.fmean(r.get("fwdbwd_probe_gflops") or [0])


def _file_section(path: Path) -> list[str]:
    """The caption and table of one peers file (``peers_section``'s docstring)."""
    try:
        rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    except json.JSONDecodeError as err:
        raise ResultFileError(f"{path}: not a valid peers file ({err!r})") from err
    header = next((r for r in rows if "peers_run" in r), {}).get("peers_run", {})
    cases = [r for r in rows if r.get("status") == "ok" and "fwdbwd_ms_median" in r]
    probes = [p for r in cases for p in r.get("fwdbwd_probe_gflops") or []]
    healthy_probe = HEALTHY_FRACTION * statistics.median(probes) if probes else 0.0
    proj = {r["seq_len"]: r["fwdbwd_ms_median"] for r in cases if r["peer"] == "ours_projections"}
    gemms: dict[tuple[str, int], list[dict]] = {}
    for r in rows:
        if "gemm" in r:
            gemms.setdefault((r["gemm"]["family"], r["gemm"]["seq_len"]), []).append(r["gemm"])
    extra = bool(proj or gemms)
    table = []
    for ours in (r for r in cases if r["peer"].startswith("ours_")):
        mech = PEER_MECHANISM.get(ours["mechanism"], ours["mechanism"])
        rivals = [r for r in cases if not r["peer"].startswith("ours_")
                  and r["mechanism"] == mech and r["seq_len"] == ours["seq_len"]]
        if rivals:
            table.append(_row(ours, rivals, healthy_probe, proj, gemms if extra else None))
    host = header.get("host")
    lines = [f"From `{path.name}`" + (f" (code at {header['git']}; `{header['command']}`)"
                                      if header else "")
             + (f", on {host['cpu']}, {host['cores']} cores" if host else "")
             + (f", XLA:CPU YNN fusions {header['xla_cpu_fusions']}"
                if header.get("xla_cpu_fusions") else "") + ":", ""]
    lines += md_table(["ours", "L", "ours ms", "best peer", "peer ms", "ours / peer",
                       "probes GFLOP/s (ours / peer)"]
                      + (["ours - projections / peer", "bound: same matmuls, XLA / torch"]
                         if extra else []), sorted(table, key=lambda r: (r[0], int(r[1]))))
    return [*lines, ""]


def _row(ours: dict, rivals: list[dict], healthy_probe: float, proj: dict[int, float],
         gemms: dict[tuple[str, int], list[dict]] | None) -> list[str]:
    """One table row: our case against the best rival; with ``gemms`` (the file has projections
    or gemm lines) the like-with-like and bound cells too."""
    alike = [r for r in rivals if r["kind"] == ours["kind"]]
    best = min(alike or rivals, key=lambda r: r["fwdbwd_ms_median"])
    close = abs(_probe(ours) - _probe(best)) <= PROBE_TOLERANCE * max(_probe(ours), _probe(best))
    healthy = min(ours.get("fwdbwd_probe_gflops") or [0]) >= healthy_probe and \
        min(best.get("fwdbwd_probe_gflops") or [0]) >= healthy_probe
    ratio = ours["fwdbwd_ms_median"] / best["fwdbwd_ms_median"]
    marks = ([] if alike else [_KIND_MARK.get(ours["kind"], "other kind")]) + \
        ([] if close else ["probes differ"]) + ([] if healthy else ["machine slow"])
    row = [ours["peer"], str(ours["seq_len"]), f"{ours['fwdbwd_ms_median']:.0f}",
           f"{best['peer']} ({best['kind']})", f"{best['fwdbwd_ms_median']:.0f}",
           f"{ratio:.2f}x" + (f" ({', '.join(marks)})" if marks else ""),
           " / ".join(f"{_probe(r):.0f}" for r in (ours, best))]
    if gemms is None:
        return row
    # like with like: module against module, and our module less our projections against the
    # fastest core peer (even where a module peer is the best peer)
    cores = [r for r in rivals if r["kind"] == "core"]
    core = min(cores, key=lambda r: r["fwdbwd_ms_median"]) if cores else None
    # a route is named by what it compares: "module" (projections on both sides) or "core" (none
    # on either), which decides whether the projections' matmuls belong in the bound
    routes = [(ours["kind"], ratio)] if alike else []
    cell = ""
    if ours["kind"] == "module" and core is not None and ours["seq_len"] in proj:
        like = (ours["fwdbwd_ms_median"] - proj[ours["seq_len"]]) / core["fwdbwd_ms_median"]
        routes.append(("core", like))
        cell = f"{like:.2f}x" + ("" if core is best else f" (vs {core['peer']})")
    return [*row, cell, _bound(routes, gemms.get((ours["mechanism"], ours["seq_len"]), []))]


def _bound(routes: list[tuple[str, float]], found: list[dict]) -> str:
    """The "bound" cell: where the worse like-with-like ratio is above ``LIKE_BOUND``, what the
    same matmuls cost in XLA over torch (the projections left out on the core route)."""
    worst = max(routes, key=lambda r: r[1]) if routes else None
    used = [g for g in found if not (worst and worst[0] == "core" and g["what"] == "projections")]
    if worst is None or worst[1] <= LIKE_BOUND or not used:
        return ""
    xla = sum(g["count"] * g["jax_ms"] for g in used)
    torch = sum(g["count"] * g["torch_ms"] for g in used)
    top = max(used, key=lambda g: g["count"] * g["jax_ms"])
    return f"{xla / torch:.2f}x (costliest: {top['what']}, {top['jax_ms'] / top['torch_ms']:.2f}x)"
