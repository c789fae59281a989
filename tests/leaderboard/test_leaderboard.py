"""`python -m lra.leaderboard` from fixture result files: tables, figures, byte-for-byte determinism."""

import json
import shutil

import pytest
from helpers import bench_record, run_record

from lra import leaderboard
from lra.bench import efficiency
from lra.leaderboard.peers import peers_section

PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture
def results_dir(tmp_path):
    root = tmp_path / "results"
    (root / "runs").mkdir(parents=True)
    (root / "efficiency").mkdir()
    accuracy = {"softmax": (0.36, 0.38), "linear": (0.17, 0.19), "local": (0.15, 0.16)}
    for name, (a0, a1) in accuracy.items():
        for seed, acc in enumerate((a0, a1)):
            rec = run_record("listops", name, "small", seed, acc, acc - 0.01)
            (root / "runs" / f"listops__{name}__small__seed{seed}.json").write_text(json.dumps(rec))
    (root / "efficiency" / "old.json").write_text(json.dumps(bench_record("2026-01-01T00:00:00Z")))
    (root / "efficiency" / "new.json").write_text(json.dumps(bench_record()))
    return root


def test_efficiency_table_like_lra_table2(results_dir):
    text = leaderboard.render(results_dir).split("## Measured efficiency")[1]
    assert "### `text` model, batch 4, float32, on cpu x1" in text
    assert "| attention | steps/s 512 | steps/s 1024 | steps/s 2048 | memory GiB 512 |" in text
    # linear at 2048: 4x softmax's speed, 1/4 of its memory; slopes 1 (linear) and 2 (softmax)
    row = next(line for line in text.splitlines() if line.startswith("| linear | 10 "))
    assert "2.5 (4.00x)" in row and "1 (0.25x)" in row and "| 1.00 | 1.00 |" in row
    # softmax's FLOPs / linear's at 2048: the speed ratio at softmax's efficiency (5x; it runs 4x)
    assert "| 1.6 | 5.00x | 25.0 |" in row
    soft = next(line for line in text.splitlines() if line.startswith("| softmax | 10 "))
    assert "| 2.00 | 2.00 |" in soft
    local = next(line for line in text.splitlines() if line.startswith("| local | "))
    assert "skipped" in local
    assert "- `local` at 2048: would not fit: needs 30 GiB" in text
    assert "Earlier files for this setting (not shown): `old.json`" in text
    assert "File `new.json`" in text
    assert "Step program timed" not in text  # files from before lra.xla_cpu record no choice


def test_each_bench_file_says_how_it_timed_its_families(tmp_path):
    """A file merged from several processes (the accelerator window's) says so under its heading;
    before, one line above every table said "timed round-robin in one process" of all of them."""
    from lra.bench.device_check import merge_bench_parts
    from lra.leaderboard.efficiency import ONE_PROCESS

    (tmp_path / "efficiency").mkdir()
    (tmp_path / "efficiency" / "one.json").write_text(json.dumps(bench_record()))
    text = leaderboard.render(tmp_path)
    assert f"Timing: {ONE_PROCESS}." in text and "round-robin in one process)" not in text
    parts = [{**bench_record(), "command": ["python", "-m", "lra.bench"]} for _ in range(2)]
    merged = merge_bench_parts(parts, ["p0.json", "p1.json"])
    (tmp_path / "efficiency" / "one.json").write_text(json.dumps(merged))
    text = leaderboard.render(tmp_path)
    assert f"Timing: {merged['timing']}." in text and ONE_PROCESS not in text


def test_a_share_of_peak_above_100_is_said_to_be_a_low_peak(tmp_path):
    """A matmul peak measured while another process shared the device comes out low, and a family's
    step then shows more than 100% of it (the MQAR bench file of 2026-12-07: up to 103%): the
    section names the families and says how to read the column; a file within its peak says
    nothing."""
    (tmp_path / "efficiency").mkdir()
    (tmp_path / "efficiency" / "b.json").write_text(json.dumps(bench_record()))
    assert "% of peak above 100" not in leaderboard.render(tmp_path)
    rec = bench_record()
    for r in rec["results"]:
        if r["attention"] == "linear" and r["status"] == "ok":
            r["fraction_of_peak"] = 1.03
    (tmp_path / "efficiency" / "b.json").write_text(json.dumps(rec))
    text = leaderboard.render(tmp_path)
    assert "% of peak above 100 for linear: the step ran faster than the matmul peak" in text


def test_efficiency_table_names_the_step_program_each_config_timed(tmp_path):
    rec = bench_record()
    for r in rec["results"]:
        if r["status"] == "ok":
            off = r["attention"] == "linear" or (r["attention"] == "local" and r["length"] == 1024)
            r["xla_cpu_fusions"] = {"choice": "off" if off else "on", "source": "auto",
                                    "step_s": {"on": 0.2, "off": 0.1 if off else 0.3}}
    (tmp_path / "efficiency").mkdir()
    (tmp_path / "efficiency" / "b.json").write_text(json.dumps(rec))
    text = leaderboard.render(tmp_path)
    assert ("Step program timed (the faster of the two, as `lra.run --xla-cpu-fusions auto` picks "
            "it): without XLA:CPU's YNN fusions for linear (every length), local (1024); with them "
            "for the rest.") in text


def test_accuracy_tables_and_published_rows_stay_apart(results_dir):
    text = leaderboard.render(results_dir)
    measured, published = text.split("## Published reference rows (not measured here)")
    # softmax test accuracy at best val, mean ± std over seeds [95% interval] (n) ...
    assert "37.00 ± 1.41 [24.29, 49.71] (2)" in measured
    assert "36.00 ± 1.41 [23.29, 48.71] (2)" in measured  # ... and at the last step
    assert "| published |" not in measured and "| published |" in published
    assert "### Published: LRA Table 2" in published
    assert "| softmax | 8.1 | 4.9 | 2.3 | 1.4 | 0.85 | 2.65 | 5.51 | 9.48 | published |" in published


def test_headline_is_the_last_step_and_best_val_marks_text(results_dir):
    measured = leaderboard.render(results_dir).split("## Published")[0]
    headline, second = measured.split("Test accuracy at the best-validation step")
    assert "**Test accuracy at the last step** (LRA's protocol; the headline)" in headline
    assert "| softmax | **36.00 ± 1.41 [23.29, 48.71] (2)** |" in headline  # last step (best - 0.01)
    assert "| softmax | **37.00 ± 1.41 [24.29, 49.71] (2)** |" in second
    assert "| text (validation = test split) |" in second
    assert "validation = test split" not in headline


def test_published_cells_are_the_printed_ones(results_dir):
    published = leaderboard.render(results_dir).split("## Published reference rows")[1]
    # LRA prints 51.39 for Sinkhorn; its cells average to 51.48, shown only in the labelled column
    row = next(line for line in published.splitlines() if line.startswith("| sinkhorn | 33.67"))
    assert row.endswith("| FAIL | 51.39 | published | 51.48 |")
    assert "avg recomputed here (not published)" in published


def test_figures_are_written_embedded_and_non_empty(results_dir):
    assert leaderboard.main(["--results-dir", str(results_dir)]) == 0
    text = (results_dir / "LEADERBOARD.md").read_text()
    pngs = sorted((results_dir / "figures").glob("*.png"))
    assert [p.name for p in pngs] == ["efficiency-cpu-x1-text-b4-float32-bubble.png",
                                      "efficiency-cpu-x1-text-b4-float32-scaling.png"]
    for p in pngs:
        data = p.read_bytes()
        assert data.startswith(PNG) and len(data) > 10_000
        assert f"](figures/{p.name})" in text
        assert b"Software" not in data and b"matplotlib" not in data
    # the bubble chart is at the longest length every measured family reached (local: 1024)
    assert "x = speed relative to softmax at length 1024" in text
    assert "preset `small`, over listops" in text
    assert "y = mean test accuracy at the last step" in text


def test_two_renders_give_identical_bytes(results_dir, tmp_path):
    assert leaderboard.main(["--results-dir", str(results_dir)]) == 0
    first = {p.name: p.read_bytes() for p in results_dir.rglob("*") if p.is_file()}
    copy = tmp_path / "again"
    shutil.copytree(results_dir, copy)
    for p in (copy / "figures").glob("*.png"):
        p.unlink()
    (copy / "LEADERBOARD.md").unlink()
    (copy / "site" / "index.html").unlink()  # the web page, written beside the Markdown
    assert leaderboard.main(["--results-dir", str(copy)]) == 0
    second = {p.name: p.read_bytes() for p in copy.rglob("*") if p.is_file()}
    assert second == first
    _, figs = leaderboard.build(copy)
    assert figs == {n: b for n, b in first.items() if n.endswith((".png", ".svg", ".pdf"))}
    assert {n.rsplit(".", 1)[1] for n in figs} == {"png", "svg", "pdf"}
    for name, data in figs.items():  # nothing that changes from one build to the next
        assert b"CreationDate" not in data and b"<dc:date>" not in data, name


def test_stale_figures_are_removed_and_no_bench_files_means_no_figures(results_dir):
    assert leaderboard.main(["--results-dir", str(results_dir)]) == 0
    for p in (results_dir / "efficiency").glob("*.json"):
        p.unlink()
    keep = results_dir / "figures" / "mine.png"
    keep.write_bytes(b"not ours")
    assert leaderboard.main(["--results-dir", str(results_dir)]) == 0
    assert sorted(p.name for p in (results_dir / "figures").iterdir()) == ["mine.png"]
    assert "No efficiency files yet" in (results_dir / "LEADERBOARD.md").read_text()


def test_no_figures_writes_the_tables_and_leaves_the_figures_folder_as_it_is(results_dir, monkeypatch):
    """``--no-figures``: every table, the same bytes as a full build, and not one figure drawn
    (matplotlib's savefig is never called) or removed."""
    from matplotlib.figure import Figure

    assert leaderboard.main(["--results-dir", str(results_dir)]) == 0
    tables = ("LEADERBOARD.md", "leaderboard.csv", "leaderboard.tex")
    full = {name: (results_dir / name).read_bytes() for name in tables}
    figures_before = {p.name: p.stat().st_mtime_ns for p in (results_dir / "figures").iterdir()}
    for name in tables:
        (results_dir / name).unlink()
    for p in (results_dir / "efficiency").glob("*.json"):  # its figures are now stale: kept
        p.unlink()

    def no_drawing(*args, **kwargs):
        raise AssertionError("a figure was drawn")

    monkeypatch.setattr(Figure, "savefig", no_drawing)
    assert leaderboard.main(["--results-dir", str(results_dir), "--no-figures"]) == 0
    assert {p.name: p.stat().st_mtime_ns for p in (results_dir / "figures").iterdir()} == figures_before
    assert (results_dir / "LEADERBOARD.md").read_bytes() != full["LEADERBOARD.md"]  # no bench now
    assert (results_dir / "leaderboard.csv").read_bytes() == full["leaderboard.csv"]
    assert (results_dir / "leaderboard.tex").read_bytes() == full["leaderboard.tex"]


def test_without_accuracy_runs_the_bubble_chart_is_left_out(results_dir):
    for p in (results_dir / "runs").glob("*.json"):
        p.unlink()
    text, figs = leaderboard.build(results_dir)
    assert sorted(figs) == sorted(f"efficiency-cpu-x1-text-b4-float32-scaling{end}"
                                  for end in (".pdf", ".png", ".svg", "-onecolumn.pdf",
                                              "-onecolumn.svg"))
    assert "Bubble chart: needs softmax measured here and accuracy result files" in text


def test_a_bad_efficiency_file_is_skipped_in_one_line(results_dir, capsys):
    """Fails on main 9185bb1 (one bad bench file stopped the whole leaderboard)."""
    (results_dir / "efficiency" / "bad.json").write_text('{"schema": "something else"}')
    assert leaderboard.main(["--results-dir", str(results_dir)]) == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "bad.json: schema: str 'something else', expected" in err[0]
    assert leaderboard.main(["--results-dir", str(results_dir), "--strict"]) == 1


def test_loglog_slope():
    assert efficiency.loglog_slope([512, 1024, 2048], [1.0, 4.0, 16.0]) == pytest.approx(2.0)
    assert efficiency.loglog_slope([512], [1.0]) is None


def _peer_line(peer, mech, kind, seq_len, ms, probes):
    return json.dumps({"peer": peer, "mechanism": mech, "kind": kind, "seq_len": seq_len,
                       "status": "ok", "fwdbwd_ms_median": ms, "fwdbwd_probe_gflops": probes})


def test_vs_best_peer_table_from_peers_files(tmp_path):
    eff = tmp_path / "efficiency"
    eff.mkdir()
    assert peers_section(tmp_path) == []  # no peers file, no section
    (eff / "peers-cpu-2026-01-03.jsonl").write_text("\n".join([
        json.dumps({"peers_run": {"git": "abc1234", "command": "peers.py --seq-lens 1024"}}),
        json.dumps({"matmul_peak": {}}),
        _peer_line("torch_sdpa", "softmax", "core", 1024, 200.0, [300, 300]),
        _peer_line("jax_nn_dpa", "softmax", "core", 1024, 800.0, [300, 300]),
        _peer_line("ours_softmax_kernel", "softmax", "core", 1024, 500.0, [290, 310]),
        _peer_line("cosformer_official_core", "cosformer", "core", 1024, 100.0, [300, 300]),
        _peer_line("ours_cosformer_kernel", "cosformer", "core", 1024, 80.0, [150, 150]),
        _peer_line("ours_cosformer_kernel", "cosformer", "core", 2048, 160.0, [100, 100]),
        _peer_line("cosformer_official_core", "cosformer", "core", 2048, 200.0, [100, 105]),
        _peer_line("nystrom_module", "nystrom", "module", 1024, 400.0, [300, 300]),
        _peer_line("ours_nystromformer_module", "nystromformer", "module", 1024, 300.0, [300, 300]),
        _peer_line("ours_fnet_module", "fnet", "module", 1024, 10.0, [300, 300]),  # no peer
    ]) + "\n")
    text = "\n".join(peers_section(tmp_path))
    assert "code at abc1234" in text
    assert ("| ours_softmax_kernel | 1024 | 500 | torch_sdpa (core) | 200 | 2.50x | 300 / 300 |"
            in text)  # the fastest peer, not jax_nn_dpa
    assert "| 0.80x (probes differ, machine slow) |" in text  # 150 vs 300 GFLOP/s: flagged
    assert "| 0.80x (machine slow) |" in text  # alike, but both under 200 GFLOP/s
    assert "| ours_nystromformer_module | 1024 | 300 | nystrom_module (module) | 400 | 0.75x |" in text
    assert "ours_fnet_module" not in text
    assert "vs the best third-party" in leaderboard.render(tmp_path)


def test_protocols_get_separate_tables_and_the_modern_published_rows(results_dir):
    """A modern result never enters the LRA table (nor its ranking); files without a protocol are
    lra; the published modern rows sit in their own table."""
    rec = run_record("listops", "s5", "small", 0, 0.55, 0.50, protocol="modern")
    (results_dir / "runs" / "listops__s5__small-modern__seed0.json").write_text(json.dumps(rec))
    text = leaderboard.render(results_dir)
    lra_part, rest = text.split("## Measured, modern protocol")
    modern_part = rest.split("## Measured efficiency")[0]
    assert "| s5 |" not in lra_part and "| softmax |" in lra_part
    assert "| s5 | **55.00 (1)** |" in modern_part and "| softmax |" not in modern_part
    assert "best-validation step** (the modern protocol's selection" in modern_part
    published = text.split("## Published reference rows, modern protocol")[1]
    for name in ("S4", "S4D-LegS", "S5", "LRU", "Mega", "Megalodon"):
        assert f"| {name} |" in published
    assert "| Megalodon | 63.79 |" in published and "88.63" in published
    assert "published: Megalodon (Ma et al., 2024" in published


def test_a_seed_measured_twice_counts_once(results_dir):
    again = run_record("listops", "softmax", "small", 0, 0.50, 0.49)
    again["date"] = "2026-02-01T00:00:00Z"  # newer than the fixture's seed 0
    (results_dir / "runs" / "listops__softmax__small__seed0__again.json").write_text(json.dumps(again))
    text = leaderboard.render(results_dir)
    row = next(line for line in text.splitlines() if line.startswith("| softmax |"))
    assert "(2)" in row and "(3)" not in row  # seeds 0 and 1, not three runs
    assert "43.00 ± " in row  # the headline (last step): seed 0's newer 49.00 and seed 1's 37.00
    assert "Superseded" in text and "`listops__softmax__small__seed0.json`" in text


def test_bench_files_of_two_host_cpus_get_two_tables(results_dir):
    """On CPU the host sets the speed: a newer file from another CPU must not hide the older one
    as "an earlier file for this setting"."""
    other = bench_record("2026-01-03T00:00:00Z")
    other["device"]["host"] = {"cpu": "Example CPU 9000", "cores": 2}
    (results_dir / "efficiency" / "other-host.json").write_text(json.dumps(other))
    text, figs = leaderboard.build(results_dir)
    assert "### `text` model, batch 4, float32, on cpu x1 (Example CPU 9000, 2 cores)" in text
    assert "### `text` model, batch 4, float32, on cpu x1\n" in text
    assert "Earlier files for this setting (not shown): `old.json`" in text
    assert "other-host.json" not in text.split("Earlier files")[1].split("\n")[0]
    assert sum(name.endswith("-scaling.png") for name in figs) == 2


def test_device_info_names_the_host_cpu():
    from lra import results

    host = results.device_info()["host"]
    assert host["cpu"] and host["cpu"] != "unknown" and host["cores"] >= 1


def _peers_text(tmp_path, *lines) -> str:
    """The "vs best peer" section of one peers file holding ``lines``."""
    eff = tmp_path / "efficiency"
    eff.mkdir(exist_ok=True)
    (eff / "peers-cpu-2026-01-05.jsonl").write_text("\n".join(lines) + "\n")
    return "\n".join(peers_section(tmp_path))


def test_a_module_is_compared_with_a_module_peer_first(tmp_path):
    """A core peer is faster because it skips the projections: it is the comparison only when
    the mechanism has no module peer, and then the row says so."""
    text = _peers_text(
        tmp_path,
        _peer_line("cosformer_official_core", "cosformer", "core", 1024, 70.0, [300, 300]),
        _peer_line("cosformer_official_module", "cosformer", "module", 1024, 250.0, [300, 300]),
        _peer_line("ours_cosformer_module", "cosformer", "module", 1024, 300.0, [300, 300]),
        _peer_line("sinkhorn_attention", "sinkhorn", "core", 1024, 60.0, [300, 300]),
        _peer_line("ours_sinkhorn_module", "sinkhorn", "module", 1024, 300.0, [300, 300]))
    assert ("| ours_cosformer_module | 1024 | 300 | cosformer_official_module (module) | 250 | 1.20x |"
            in text)
    assert ("| ours_sinkhorn_module | 1024 | 300 | sinkhorn_attention (core) | 60 | "
            "5.00x (ours has q/k/v/out projections, the peer none) |" in text)


def test_machine_slow_is_relative_to_the_files_median_probe(tmp_path):
    """One fast outlier probe does not mark every other case of its file as slowed."""
    text = _peers_text(
        tmp_path,
        _peer_line("torch_sdpa", "softmax", "core", 1024, 500.0, [180, 400]),
        _peer_line("ours_softmax_kernel", "softmax", "core", 1024, 400.0, [170, 180]),
        _peer_line("torch_sdpa", "softmax", "core", 2048, 2000.0, [175, 180]),
        _peer_line("ours_softmax_kernel", "softmax", "core", 2048, 1600.0, [100, 180]))
    assert "| ours_softmax_kernel | 1024 | 400 | torch_sdpa (core) | 500 | 0.80x (probes differ) |" in text
    assert "| 0.80x (probes differ, machine slow) |" in text  # 2048: 100 < 0.7 x the median 180


def test_machine_slow_is_relative_not_absolute(tmp_path):
    """A host whose healthy probe is 80 GFLOP/s is not 'slow' everywhere: the mark is relative."""
    text = _peers_text(
        tmp_path,
        json.dumps({"peers_run": {"git": "abc1234", "command": "peers.py",
                                  "host": {"cpu": "Example CPU 9000", "cores": 2}}}),
        _peer_line("torch_sdpa", "softmax", "core", 1024, 500.0, [80, 82]),
        _peer_line("ours_softmax_kernel", "softmax", "core", 1024, 400.0, [78, 80]),
        _peer_line("torch_sdpa", "softmax", "core", 2048, 2000.0, [40, 41]),
        _peer_line("ours_softmax_kernel", "softmax", "core", 2048, 1600.0, [40, 42]))
    assert "on Example CPU 9000, 2 cores" in text
    assert "| ours_softmax_kernel | 1024 | 400 | torch_sdpa (core) | 500 | 0.80x | 79 / 81 |" in text
    assert "| 0.80x (machine slow) |" in text  # 2048: probes at about half the others


