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
"""

__version__ = "0.1.0"
