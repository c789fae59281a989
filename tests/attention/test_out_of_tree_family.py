"""An attention family from outside this tree, installed through the entry-point group, trains.

The family is the example of attention/README.md "Add an attention family in one file", taken
from that page as written (editing that block changes what runs here): it is installed as a
throw-away distribution (a ``*.dist-info`` with an ``entry_points.txt`` in a temporary directory on
PYTHONPATH), trained one step by ``python -m lra.run`` with the tiny preset, and put through the
contract tests as that page says.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest
from helpers import REPO, SMALL_LISTOPS, cli_env

import attention

ROOT = REPO
NAME = "relu_linear"


def readme_family_code() -> str:
    text = (ROOT / "attention" / "README.md").read_text()
    section = text[text.index("## Add an attention family in one file"):]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


@pytest.fixture(scope="module")
def plugin_env(tmp_path_factory) -> dict[str, str]:
    """A site directory holding attention/README.md's family as module ``lra_readme_family`` and a
    dist-info that registers it under ``lra.attention``; the returned environment puts it on sys.path."""
    site = tmp_path_factory.mktemp("site")
    code = readme_family_code()
    class_name = re.search(rf'@register\("{NAME}"\)\nclass (\w+)', code).group(1)
    (site / "lra_readme_family.py").write_text(code)
    dist = site / "lra_readme_family-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: lra-readme-family\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(
        f"[{attention.ENTRY_POINT_GROUP}]\n{NAME} = lra_readme_family:{class_name}\n")
    return cli_env(PYTHONPATH=str(site))


def test_the_family_is_not_in_this_tree():
    assert NAME not in attention.available()  # else this test would not exercise the entry point


@pytest.mark.slow
def test_installed_family_trains_one_step_through_the_trainer(plugin_env, tmp_path):
    cmd = [sys.executable, "-m", "lra.run", "--task", "listops", "--attn", NAME, "--preset", "tiny",
           "--data-dir", str(tmp_path / "data"), "--workdir", str(tmp_path / "work"),
           "--results-dir", str(tmp_path / "results"), "--no-progress", *SMALL_LISTOPS,
           "--set", "train.num_steps=1", "--set", "train.eval_every=1",
           "--set", "train.checkpoint_every=1"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=plugin_env,
                         cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    (result,) = (tmp_path / "results" / "runs").glob("*.json")
    record = json.loads(result.read_text())
    assert record["attention"] == NAME and record["metrics"]["steps"] == 1


@pytest.mark.slow
def test_readme_family_passes_the_tests_readme_names(plugin_env):
    """attention/README.md: `python -m pytest tests/attention/test_contract.py -k relu_linear`
    checks it; its memory claim is checked too, and installing it leaves README's table (this
    tree's) valid."""
    cmd = [sys.executable, "-m", "pytest", "-q", "-n", "0", "-p", "no:randomly", "-p", "no:cacheprovider",
           "tests/attention/test_contract.py", "tests/attention/test_memory.py", "tests/test_readme.py",
           "-k", f"{NAME} or test_readme"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=plugin_env, cwd=ROOT)
    assert out.returncode == 0, out.stdout[-4000:]
    passed = int(re.search(r"(\d+) passed", out.stdout).group(1))
    assert passed >= 7, out.stdout[-2000:]  # contract cases and the memory check, not deselected
