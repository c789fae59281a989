"""An attention family from outside this tree, installed through the entry-point group, is a family
like this tree's: it trains, it is listed, named and grouped as it declares, and it is not pinned.

The family is the example of attention/README.md "Add an attention family in one file", taken
from that page as written (editing that block changes what runs here): it is installed as a
throw-away distribution (a ``*.dist-info`` with an ``entry_points.txt`` in a temporary directory on
PYTHONPATH, or on ``sys.path`` in this process: ``helpers.installed_plugin``), trained one step by
``python -m lra.run`` with the tiny preset, and put through the contract tests as that page says.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest
from helpers import README_FAMILY, REPO, SMALL_LISTOPS, cli_env, installed_readme_family, readme_family_code

from lra import attention, declared, families
from lra.leaderboard import names

ROOT = REPO
NAME = README_FAMILY


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
    return cli_env(PYTHONPATH=os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")])))


def test_the_family_is_not_in_this_tree():
    assert NAME not in attention.available()  # else this test would not exercise the entry point


def test_the_example_builds_from_public_names_only():
    imports = re.findall(r"^(?:from|import) .*$", readme_family_code(), re.M)
    assert imports and not [line for line in imports if re.search(r"\b_\w", line)], imports


@pytest.fixture
def installed(tmp_path):
    """attention/README.md's family, installed in this process as distribution lra-readme-family."""
    with installed_readme_family(tmp_path / "site") as class_name:
        yield class_name


def test_an_installed_family_declares_its_facts_like_a_family_of_this_tree(installed):
    """Read from its module's file without importing it (as the leaderboard, the LaTeX and the
    curves read names), equal to what the registry imports; listed by ``lra.families`` as a
    plugin with its distribution, never in README's table, never pinned by the golden fixture."""
    facts = declared.declared("attention")[NAME]
    assert "lra_readme_family" not in sys.modules  # nothing was imported to read them
    cls = attention.family(NAME)
    assert {k: getattr(cls, k) for k in facts} == facts and facts["display_name"] == "ReLU linear"
    assert names.family_name(NAME) == "ReLU linear"
    assert names.family_kind(NAME) == "2020 attention"
    assert attention.plugins() == {NAME: "lra-readme-family"} and NAME not in attention.builtin()
    assert f"| `{NAME}` (plugin: lra-readme-family) | ReLU linear | 2020 attention |" in \
        families.table(plugins=True)
    assert NAME not in families.table()  # README's block: this tree's families


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
