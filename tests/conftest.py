"""Test-wide settings: strict rank promotion (silent broadcasting fails) and fast XLA compiles.

Dtype promotion stays JAX's standard lattice: under ``jax_numpy_dtype_promotion="strict"`` the
library's deliberate mixes (complex state-space arithmetic with float32, float constants with bool
masks) raise, e.g. 4 of the 19 bfloat16 contract tests, so the suite does not claim it.

XLA compiles dominate the suite's time on CPU. ``--xla_backend_optimization_level=0`` roughly halves
them (measured side by side: the s5/lru memory tests 13-14 s -> 6.5 s each, the kill/resume, sweep and
device-check subprocess tests 28-36 s -> 18-21 s), and ``--xla_cpu_use_fusion_emitters=false`` (XLA:CPU's
older loop emitters for fusions, quicker to compile) takes another third off (2026-12-05, one
process: five families' contract tests 36 s -> 22 s, a tiny ``lra.run`` without the cache 5.6 s ->
4.6 s); ``--xla_cpu_parallel_codegen_split_count=1`` makes LLVM compile each program as one module
instead of splitting it for several threads, which spends more CPU on two cores shared by two test
workers than it saves in wall time (2026-12-07, ten families' layer gradients compiled in one
process, three runs each: 6.2-7.0 -> 4.8-5.3 CPU-seconds). The whole suite passes under all three,
and none changes what a program computes. None is set outside the tests. The flags are set
before jax is imported and reach the CLI subprocesses the tests start through the environment
(tests/helpers.py ``cli_env``, which also adds a device count for tests that need several devices).
"""

import gc
import os
import shutil
import tempfile
from pathlib import Path

import pytest

# YNN fusions off: their scratch memory is invisible to memory_analysis (tests/attention/test_memory.py).
# A flag already in XLA_FLAGS keeps its value (e.g. set the level to compare timings).
_FLAGS = ("--xla_cpu_experimental_ynn_fusion_type=", "--xla_backend_optimization_level=0",
          "--xla_cpu_use_fusion_emitters=false", "--xla_cpu_parallel_codegen_split_count=1")
_given = os.environ.get("XLA_FLAGS", "")
os.environ["XLA_FLAGS"] = " ".join([_given, *(f for f in _FLAGS if f.split("=")[0] not in _given)]).strip()

# One persistent compilation cache per test session, shared by the xdist workers (they inherit the
# controller's environment) and by the CLI subprocesses the tests start: the suite compiles the same
# small programs in many processes (every ``python -m lra.run --preset tiny`` run compiles the same
# steps). The folder is new for each session and removed at its end, so no executable outlives the
# code that built it. A test that needs a real compilation (a signal sent while XLA compiles) turns
# the cache off for its subprocess (``JAX_ENABLE_COMPILATION_CACHE=false``).
_OWN_CACHE = "JAX_COMPILATION_CACHE_DIR" not in os.environ
if _OWN_CACHE:
    os.environ["JAX_COMPILATION_CACHE_DIR"] = tempfile.mkdtemp(prefix="lra-tests-xla-")
    os.environ["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = "0"
    os.environ["JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES"] = "0"

# Bytecode for the session's processes. An environment that sets PYTHONDONTWRITEBYTECODE (this
# project's 2-core host does) makes every process the suite starts, and each xdist worker,
# compile the project's modules from source again, and pytest rewrite every test module again in
# each worker: about 0.3 CPU-seconds a process over some 190 processes. The workers and the CLI
# subprocesses inherit this environment, so they write and read ``__pycache__`` (ignored by git)
# as Python does by default; the installed packages already carry theirs.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)

# Python's cyclic collector in the test workers: tracing a family allocates many short-lived
# objects, so the default thresholds (700, 10, 10) run about a thousand collections in a few
# families' contract tests, 4-5% of their CPU; at (20000, 20, 10) there are some thirty (measured
# 2026-12-07: 1.22 -> 0.31 CPU-seconds of 26). A full collection still runs every few million
# allocations, so memory held by cycles stays bounded.
gc.set_threshold(20_000, 20, 10)

import jax  # noqa: E402

jax.config.update("jax_numpy_rank_promotion", "raise")


# The fast lane (``pytest -m "not slow"``, CONTRIBUTING.md "The fast lane") is chosen by folder.
# The tests mirror
# the package: tests/attention/ (the families and their machinery), tests/tasks/, tests/core/ (the
# modules of lra/), tests/commands/ (the ``python -m lra.*`` commands), tests/bench/ and
# tests/leaderboard/ (the two satellite packages), tests/slurm/ (a real SLURM, off by default).
# In tests/attention/ the per-family checks run in the fast lane for helpers.FAST_FAMILIES only, one
# of each kind of machinery; the full suite runs them for every family. A test there parametrized by
# another family's name is marked ``slow``, and a family's own file (tests/attention/test_<family>.py)
# is ``slow`` as a whole for the other families. Working on a family, run its file by name:
# ``pytest tests/attention/test_mamba.py`` runs all of it (only ``-m "not slow"`` leaves slow tests out).
# Fixtures that train or bench end to end (a tiny run, or a bench grid): every test using one is
# ``slow``, like the tests that start such runs themselves.
END_TO_END_FIXTURES = {"tiny_run", "trained", "finished", "reference", "contract_reference"}
PER_FAMILY_FOLDER = Path(__file__).parent / "attention"


def pytest_collection_modifyitems(config, items):
    from helpers import FAMILY_OF_VARIANT, FAST_FAMILIES

    from lra import attention

    families = set(attention.available())
    for item in items:
        if END_TO_END_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)
            continue
        if item.path.parent != PER_FAMILY_FOLDER:
            continue
        own = item.path.stem.removeprefix("test_")  # tests/attention/test_<family>.py
        if own in families:
            if own not in FAST_FAMILIES:
                item.add_marker(pytest.mark.slow)
            continue
        callspec = getattr(item, "callspec", None)
        if callspec is None:
            continue
        named = {FAMILY_OF_VARIANT.get(v, v) for v in callspec.params.values() if isinstance(v, str)}
        named &= families
        if named and not named & set(FAST_FAMILIES):
            item.add_marker(pytest.mark.slow)


def pytest_sessionfinish(session, exitstatus):
    # The controller (not an xdist worker) removes the session's compilation cache.
    if _OWN_CACHE and not hasattr(session.config, "workerinput"):
        shutil.rmtree(os.environ["JAX_COMPILATION_CACHE_DIR"], ignore_errors=True)


# The tiny ListOps set and one finished tiny run of it, shared by the fault tests of several folders
# (tests/core/test_checkpoint.py, test_workdir.py, test_results.py, tests/tasks/test_data_checks.py,
# tests/commands/test_permissions.py, tests/leaderboard/test_inputs.py): made once per process.
@pytest.fixture(scope="session")
def tiny_listops(tmp_path_factory):
    """A folder whose ``data`` holds the tiny ListOps set (helpers.TINY_LISTOPS_OPTIONS)."""
    import contextlib
    import io

    from helpers import TINY_LISTOPS_OPTIONS

    from lra import tasks

    path = tmp_path_factory.mktemp("fi")
    with contextlib.redirect_stderr(io.StringIO()):
        tasks.build("listops", path / "data", **TINY_LISTOPS_OPTIONS).prepare()
    return path


@pytest.fixture(scope="session")
def finished(tiny_listops):
    """One completed tiny run: (its work directory, its results directory, its stderr)."""
    from helpers import run_in_process, tiny_run_args

    base = tiny_listops
    code, _, err = run_in_process(*tiny_run_args(base / "data", base / "done", base / "results"))
    assert code == 0, err[-3000:]
    return base / "done", base / "results", err


# The run contract tests' data and their one uninterrupted run (tests/commands/test_run_result.py,
# test_run_data.py, test_run_disk_full.py, test_run_signals.py): made once per process.
@pytest.fixture(scope="session")
def contract_data(tmp_path_factory):
    """A folder ``data`` holding the tiny ListOps set (helpers.TINY_LISTOPS_OPTIONS)."""
    import contextlib
    import io

    from helpers import TINY_LISTOPS_OPTIONS

    from lra import tasks

    path = tmp_path_factory.mktemp("contract") / "data"
    with contextlib.redirect_stderr(io.StringIO()):
        tasks.build("listops", path, **TINY_LISTOPS_OPTIONS).prepare()
    return path


@pytest.fixture(scope="session")
def contract_reference(contract_data) -> dict:
    """One uninterrupted run (in this process) of helpers.contract_run_args: its result record, its
    work directory ``reference`` beside the data."""
    import json

    from helpers import contract_run_args, run_in_process

    work = contract_data.parent / "reference"
    code, _, err = run_in_process(*contract_run_args(contract_data, work, contract_data.parent / "results"))
    assert code == 0, err[-3000:]
    return json.loads((work / "result.json").read_text())
