"""lra: the Long-Range Arena benchmark in JAX/Flax.

Entry points (``python -m NAME``):

    lra.run                  train and evaluate one (task, attention) run
    lra.sweep                a grid of runs, one lra.run process per cell
    lra.data                 generate or prepare a task's data (fetch-release: LRA's archive)
    lra.curves               learning curves of work directories
    lra.families             the families table README embeds
    lra.check_family         an attention family checked against the contract (lra.testing)
    lra.leaderboard          LEADERBOARD.md and its figures from the result files
    lra.bench                speed, memory and FLOPs of one training step per family and length
    lra.bench.peers          our layers next to third-party implementations
    lra.bench.device_check   the first-accelerator check

The layout rule: ``lra/`` is flat and holds the modules on the path of a run and its commands. Two
satellite packages sit beside them: ``lra.bench`` (measuring a run) and ``lra.leaderboard`` (turning
result files into tables and figures; it imports no JAX). Both import the core; nothing in the core
imports them, except a command that hands over to one (``lra.sweep`` rebuilds the leaderboard; its
skip check and grid choice, ``lra.skip_check`` and ``lra.sweep_selection``, read result files
through the leaderboard's one reader, as do ``lra.reproduce``, ``lra.cluster``'s result lookup,
``lra.curves`` and ``lra.data refingerprint``).

The attention families, the tasks and their configs are ``lra.attention``, ``lra.tasks`` and
``lra.configs``. In the repository they are the top-level folders ``attention/``, ``tasks/`` and
``configs/`` (DESIGN.md's layout); an install maps them under ``lra`` (pyproject.toml
``package-dir``), and in a source checkout used without installing (``PYTHONPATH=<clone>``) the
finder below maps them to the checkout's folders, so a clone never imports another copy's families.
"""

import importlib.util
import sys
from pathlib import Path

__version__ = "0.1.0"

SATELLITES = ("attention", "tasks", "configs")
_ROOT = Path(__file__).resolve().parent.parent


class _CheckoutFinder:
    """``lra.attention``, ``lra.tasks``, ``lra.configs`` from the folders beside this ``lra/`` when
    it is a source checkout's (a ``pyproject.toml`` beside it); installed wheels never get here,
    since their packages sit inside ``lra/``."""

    @classmethod
    def find_spec(cls, fullname, path=None, target=None):
        head, _, name = fullname.rpartition(".")
        if head != __name__ or name not in SATELLITES:
            return None
        folder = _ROOT / name
        return importlib.util.spec_from_file_location(
            fullname, folder / "__init__.py", submodule_search_locations=[str(folder)])


if (_ROOT / "pyproject.toml").is_file() and all(
        (_ROOT / name / "__init__.py").is_file() for name in SATELLITES):
    if not any(getattr(f, "__name__", "") == "_CheckoutFinder" and getattr(f, "__module__", "") == __name__
               for f in sys.meta_path):
        sys.meta_path.insert(0, _CheckoutFinder)
