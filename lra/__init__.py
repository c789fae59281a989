"""lra: the Long-Range Arena benchmark in JAX/Flax.

Entry points: ``python -m lra.run`` (train + evaluate), ``python -m lra.data`` (generate/prepare
data), ``python -m lra.leaderboard`` (tables from result files).
"""

__version__ = "0.1.0"
