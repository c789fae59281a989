"""``lra.sweep --dry-run`` (lra/dry_run.py): each cell's data and its expected time."""

import json

from helpers import result_record

from lra import cluster, sweep
from lra import config as config_lib
from lra.dry_run import clock as _clock


def test_the_dry_run_flags_absent_data_and_estimates_from_a_measured_run(tmp_path, monkeypatch,
                                                                          capsys):
    monkeypatch.setattr(cluster, "find_gpus", lambda override=None: cluster.Gpus((), {}, "none"))
    results, data = tmp_path / "res", tmp_path / "data"  # an empty data directory
    # One measured run: listops/softmax at tiny on 1 x cpu, 4 steps/s, another seed and lr (the
    # same step), so it is no skip but times the cell.
    measured = config_lib.load("listops", "softmax", preset="tiny", seed=7,
                               overrides=["train.lr=0.5"]).to_dict()
    record = result_record(measured)
    record["metrics"]["steps_per_s"] = 4.0
    (results / "runs").mkdir(parents=True)
    (results / "runs" / "listops__softmax__tiny__seed7__cpu1__x.json").write_text(json.dumps(record))
    steps = config_lib.load("listops", "softmax", preset="tiny").train.num_steps
    code = sweep.main(["--task", "listops,text,retrieval", "--attn", "softmax,performer",
                       "--preset", "tiny", "--dry-run", "--data-dir", str(data),
                       "--results-dir", str(results), "--workdirs", str(tmp_path / "wd")])
    out = capsys.readouterr().out
    assert code == 0, out
    lines = {ln.split(" in ")[0].split()[1]: ln for ln in out.splitlines() if ln.startswith("run ")}
    assert lines["listops/softmax"].endswith(
        f"[data generated on first use, ~{_clock(steps / 4.0)}]")
    assert lines["listops/performer"].endswith("[data generated on first use]")
    assert lines["text/softmax"].endswith("[DATA MISSING]")
    assert lines["retrieval/performer"].endswith("[DATA MISSING]")
    text_sets = "".join(f" --set {k}={v}" for k, v in sorted(
        config_lib.load("text", "softmax", preset="tiny").data.items()))
    assert (f"data missing for 2 text cells (they would fail): prepare it first with "
            f"`python -m lra.data prepare --task text --data-dir {data}{text_sets}`") in out
    assert ("data missing for 2 retrieval cells (they would fail): prepare it first with "
            "`python -m lra.data fetch-release --out DIR` (then pass --data-dir DIR)") in out
    assert "data generated on first use (by the first cell that reads it) for: listops (2 cells)" in out
    assert (f"expected time on 1 x cpu: {_clock(steps / 4.0)} in all for the 1 cells with a "
            f"measured step time") in out
    assert "no measured step time on 1 x cpu for 5 cells" in out
