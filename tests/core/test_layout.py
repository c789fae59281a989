"""The layout rule of lra/__init__.py: ``lra/`` holds the core (the modules on the path of a run and
its commands); the satellite packages ``lra.bench`` and ``lra.leaderboard`` import the core, and the
core imports them only where a command hands over to one, through their public names."""

import ast
import subprocess
import sys

import pytest
from helpers import REPO

SATELLITES = ("lra.bench", "lra.leaderboard")


def _satellite_imports(path):
    """(line, dotted name) of every import of a satellite package in ``path``, at module level or
    inside a function: ``from lra.leaderboard.curves import x`` gives ``lra.leaderboard.curves.x``."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [f"{node.module}.{a.name}" for a in node.names]
        else:
            continue
        for dotted in names:
            if dotted.startswith(tuple(s + "." for s in SATELLITES)) or dotted in SATELLITES:
                yield node.lineno, dotted


@pytest.mark.slow
def test_the_leaderboard_imports_no_jax_and_the_core_no_satellite():
    """The layout rule (lra/__init__.py): the leaderboard runs where JAX is absent; the modules on the
    path of a run import neither satellite package; and a core module that hands over to one (lra.curves
    draws with the leaderboard's figures; lra.sweep, lra.cluster and lra.reproduce read its results)
    imports only public modules and names of it. Every module of lra/ is read, lra.curves included:
    it imported the leaderboard's private ``_chance_lines`` (now ``chance_lines``)."""
    subprocess.run([sys.executable, "-c", "import sys, lra.leaderboard; "
                    "assert 'jax' not in sys.modules, 'lra.leaderboard imported jax'"], check=True)
    core = "lra.run, lra.sweep, lra.train, lra.data, lra.release, lra.families"
    subprocess.run([sys.executable, "-c", f"import sys, {core}; bad = sorted(m for m in sys.modules "
                    "if m.startswith(('lra.bench', 'lra.leaderboard'))); assert not bad, bad"],
                   check=True)
    private, checked = [], set()
    for path in sorted((REPO / "lra").glob("*.py")):
        checked.add(f"lra.{path.stem}")
        for line, dotted in _satellite_imports(path):
            if any(part.startswith("_") for part in dotted.split(".")[1:]):
                private.append(f"lra/{path.name}:{line} imports {dotted}")
    assert {"lra.curves", "lra.sweep", "lra.run"} <= checked
    assert not private, private


# The core modules that hand over to a satellite package: commands that read results through the one
# reader, rebuild the leaderboard or draw with its figures (lra/__init__.py). Nothing else in lra/
# imports lra.bench or lra.leaderboard, not even inside a function.
HANDS_OVER = {"lra.cluster", "lra.curves", "lra.reproduce", "lra.sweep"}


def test_only_the_commands_that_hand_over_import_a_satellite():
    """Reporting imports the core, never the reverse (issue 56): lra.selection read the protocol's
    headline metric from lra.leaderboard.reader; the headline is a fact of the results format and
    lives in lra.results, read by both."""
    found = {f"lra.{path.stem}": [dotted for _, dotted in _satellite_imports(path)]
             for path in sorted((REPO / "lra").glob("*.py"))}
    assert HANDS_OVER <= found.keys()
    assert {name: names for name, names in found.items() if names and name not in HANDS_OVER} == {}
