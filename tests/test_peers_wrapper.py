"""`python -m lra.peers`: the provenance line, the harness's own lines after it, clear errors."""

import json
import sys

from lra import peers

FAKE_HARNESS = '''
import json, os, sys
args = sys.argv[1:]
out = args[args.index("--out") + 1]
line = {"peer": "ours_softmax_kernel", "seq_len": 1024, "status": "ok", "argv": args,
        "project": os.environ["LRA_PROJECT"]}
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


def test_missing_harness_or_python_is_a_clear_error(tmp_path, capsys):
    assert peers.main(["--python", sys.executable, "--script", str(tmp_path / "nope.py")]) == 2
    assert "peers harness not found" in capsys.readouterr().err
    script = tmp_path / "peers.py"
    script.write_text(FAKE_HARNESS)
    assert peers.main(["--python", str(tmp_path / "no-python"), "--script", str(script)]) == 2
    assert "create the peers venv" in capsys.readouterr().err
