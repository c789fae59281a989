"""tasks/README.md's "Add a task in two files" example, taken from that page as written, meets the
task contract and trains through ``python -m lra.run``.

The two code blocks of that section become ``parity.py`` in a temporary ``tasks`` folder and
``parity.py`` in a temporary ``configs`` folder; the run's process adds both folders to the
packages' search paths before ``lra.run`` starts (a task in this tree needs no such step: its files
sit in ``tasks/`` and ``configs/``).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from helpers import REPO, cli_env

ROOT = REPO
NAME = "parity"

BOOTSTRAP = """
import runpy, sys
from lra import configs, tasks
tasks.__path__.append(sys.argv[1]); tasks._REGISTRY.path.append(sys.argv[1])
configs.__path__.append(sys.argv[2])
sys.argv = ["lra.run", *sys.argv[3:]]
runpy.run_module("lra.run", run_name="__main__", alter_sys=True)
"""


def readme_task_blocks() -> tuple[str, str]:
    text = (ROOT / "tasks" / "README.md").read_text()
    section = text[text.index("## Add a task in two files"):]
    section = section[:section.index("\n## ", 1)]
    task_code, config_code = re.findall(r"```python\n(.*?)```", section, re.S)[:2]
    return task_code, config_code


@pytest.fixture(scope="module")
def example_dirs(tmp_path_factory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("example_task")
    task_code, config_code = readme_task_blocks()
    (root / "tasks").mkdir()
    (root / "configs").mkdir()
    (root / "tasks" / f"{NAME}.py").write_text(task_code)
    (root / "configs" / f"{NAME}.py").write_text(config_code)
    return root / "tasks", root / "configs"


def test_the_task_is_not_in_this_tree():
    from lra import tasks

    assert NAME not in tasks.available()  # else the test would not exercise the page's files


def test_readme_task_meets_the_contract(example_dirs, tmp_path):
    """Every split: examples of ``max_len`` tokens, mask from true lengths, padding = pad_id,
    targets in range, and the same examples on a second read (the splits are seeded)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("readme_parity", example_dirs[0] / f"{NAME}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    task = module.ParityTask(tmp_path)
    task.prepare()
    for split in ("train", "val", "test"):
        src = task.source(split)
        assert len(src) == task.sizes[split]
        for i in (0, len(src) // 2, -1):
            ex = src[i]
            assert ex["inputs"].shape == ex["mask"].shape == (task.max_len,)
            assert ex["inputs"].dtype == np.int32 and ex["mask"].dtype == bool
            assert ex["mask"][0] and not ex["mask"][ex["mask"].sum():].any()  # a prefix
            assert (ex["inputs"][~ex["mask"]] == task.pad_id).all()
            assert (ex["inputs"][ex["mask"]] != task.pad_id).all()
            assert 0 <= int(ex["targets"]) < task.num_classes
            assert int(ex["targets"]) == int((ex["inputs"] == 2).sum() % 2)
            np.testing.assert_array_equal(task.source(split)[i]["inputs"], ex["inputs"])


@pytest.mark.slow
def test_readme_task_trains_through_the_trainer(example_dirs, tmp_path):
    tasks_dir, configs_dir = example_dirs
    results = tmp_path / "results"
    cmd = [sys.executable, "-c", BOOTSTRAP, str(tasks_dir), str(configs_dir),
           "--task", NAME, "--attn", "softmax", "--preset", "tiny",
           "--data-dir", str(tmp_path / "data"), "--workdir", str(tmp_path / "work"),
           "--results-dir", str(results), "--no-progress"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=cli_env(),
                         cwd=ROOT)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-3000:]
    (result,) = (results / "runs").glob(f"{NAME}__softmax__tiny__*.json")
    record = json.loads(result.read_text())
    assert record["task"] == NAME and record["status"] == "completed"
    assert record["metrics"]["steps"] == 4
    assert record["data"]["origin"] == "generated"
