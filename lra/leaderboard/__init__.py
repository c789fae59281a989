"""The leaderboard: ``results/LEADERBOARD.md`` and its figures, built from result files alone.

    python -m lra.leaderboard [--results-dir results]

It imports no JAX (a test checks it): tables can be rebuilt on any machine that holds the files.
``load`` reads and checks run and bench files, ``cells`` computes a cell's statistics and markers,
``accuracy``, ``efficiency``, ``peers``, ``curves`` and ``reference`` each build one section,
``figures`` draws the PNGs, ``published`` holds the published numbers, and ``build`` puts the page
together (``build``, ``render`` and ``main`` are re-exported here).
"""

from lra.leaderboard.build import build, main, render

__all__ = ["build", "main", "render"]
