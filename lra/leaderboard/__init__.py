"""The leaderboard: ``results/LEADERBOARD.md``, ``leaderboard.csv``, ``leaderboard.tex`` and the
figures (PNG, SVG, PDF), built from result files alone.

    python -m lra.leaderboard [--results-dir results]

It imports no JAX (a test checks it): tables can be rebuilt on any machine that holds the files.
``load`` reads and checks run, bench and peers files, ``identity`` decides which cell a run belongs
to (its config against its preset's), ``cells`` computes a cell's statistics and markers,
``accuracy``, ``efficiency``, ``peers``, ``curves`` and ``reference`` each build one section,
``export`` writes the accuracy cells as CSV and LaTeX, ``figures`` draws the figures, ``site``
writes the web page from the same cells (``browser`` drives a headless chromium for its test and
screenshots; ``names`` gives display names and kinds), ``published`` holds the published numbers,
and ``build`` puts the outputs together (``build``, ``render`` and
``main`` are re-exported here).
"""

import lra._guard  # noqa: F401  (first: one line where lra was found only in part)
from lra.leaderboard.build import build, main, render

__all__ = ["build", "main", "render"]
