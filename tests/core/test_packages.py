"""Where ``lra.attention``, ``lra.tasks`` and ``lra.configs`` come from (lra/__init__.py): the
repository's top-level folders, installed under ``lra`` (pyproject.toml ``package-dir``) and mapped
the same way in a checkout used without installing; a user's own ``attention.py`` never shadows them,
and a half-found ``lra`` (lra/_guard.py) stops a command with one line."""

import os
import shutil
import subprocess
import sys
import tomllib

from helpers import REPO

import lra
from lra import attention, configs, tasks

SATELLITES = {"lra.attention": "attention", "lra.tasks": "tasks", "lra.configs": "configs"}


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["JAX_PLATFORMS"] = "cpu"
    return env


def _editable() -> bool:
    """Whether lra is installed in editable mode (``pip install -e``, as README and CI do): setuptools
    then adds a meta-path finder of its own for the project."""
    return any(getattr(f, "__module__", "").startswith("__editable___lra_") for f in sys.meta_path)


def test_pyproject_installs_every_package_folder_under_lra():
    setup = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert setup["package-dir"] == SATELLITES
    folders = {str(p.parent.relative_to(REPO)).replace("/", ".")
               for p in (REPO / "lra").rglob("__init__.py")}
    assert set(setup["packages"]) == folders | set(SATELLITES)
    for folder in SATELLITES.values():
        assert (REPO / folder / "__init__.py").is_file()


def test_the_satellites_are_the_checkouts_folders_under_lras_name():
    for module in (attention, tasks, configs):
        folder = SATELLITES[module.__name__]
        assert module.__file__ == str(REPO / folder / "__init__.py")
    assert "attention" not in sys.modules or sys.modules["attention"] is not attention
    assert lra.SATELLITES == tuple(f.split(".")[1] for f in SATELLITES)


def test_a_users_attention_py_in_the_working_folder_shadows_nothing(tmp_path):
    for name in ("attention", "tasks", "configs"):
        (tmp_path / f"{name}.py").write_text(f"raise RuntimeError('the user's own {name}.py ran')\n")
    out = subprocess.run([sys.executable, "-m", "lra.run", "--task", "listops", "--attn", "softmax",
                          "--preset", "tiny", "--print-config"], cwd=tmp_path, env=_env(),
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert '"attention": "softmax"' in out.stdout


def test_a_checkout_on_pythonpath_imports_its_own_folders(tmp_path):
    """A second copy of the tree, used through PYTHONPATH while this one is installed: its
    families are its own (an editable install's mapping would otherwise hand it this tree's)."""
    copy = tmp_path / "copy"
    for name in ("lra", "attention", "tasks", "configs"):
        shutil.copytree(REPO / name, copy / name, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "pyproject.toml", copy / "pyproject.toml")
    code = ("import lra.attention, lra.tasks, lra.configs, lra.attention.softmax as s; "
            "print(lra.attention.__file__, lra.tasks.__file__, lra.configs.__file__, s.__file__, "
            "lra.attention.__name__)")
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env={**_env(), "PYTHONPATH": str(copy)},
                         capture_output=True, text=True, timeout=300, check=True)
    files = out.stdout.split()
    assert files[:4] == [str(copy / "attention" / "__init__.py"), str(copy / "tasks" / "__init__.py"),
                         str(copy / "configs" / "__init__.py"), str(copy / "attention" / "softmax.py")]
    assert files[4] == "lra.attention"


def test_a_folder_named_lra_in_the_working_folder_gets_one_line(tmp_path):
    """The parent folder of a clone named ``lra``: with an editable install, the clone is found first
    as a namespace package; every command stops with one line naming the folder. (Where lra is
    installed from a wheel, the installed package wins and the command runs.)"""
    clone = tmp_path / "lra"
    (clone / "results").mkdir(parents=True)  # a namespace lra.results: the reported failure
    (clone / "lra").mkdir()
    for command in (["lra.run", "--task", "listops", "--attn", "softmax", "--print-config"],
                    ["lra.leaderboard", "--help"], ["lra.sweep", "--help"]):
        out = subprocess.run([sys.executable, "-m", *command], cwd=tmp_path, env=_env(),
                             capture_output=True, text=True, timeout=300)
        assert "Traceback" not in out.stderr, out.stderr
        if _editable() or out.returncode != 0:
            lines = out.stderr.strip().splitlines()
            assert len(lines) == 1 and str(clone) in lines[0] and "no __init__.py" in lines[0], lines
