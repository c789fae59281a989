"""Test-wide settings: strict JAX so that silent broadcasting and dtype promotion fail."""

import os

# Tests that need several devices spawn their own subprocesses with XLA_FLAGS set there.
os.environ.setdefault("XLA_FLAGS", "--xla_cpu_experimental_ynn_fusion_type=")

import jax

jax.config.update("jax_numpy_rank_promotion", "raise")
