"""Helpers shared by several test files: random inputs, padding masks and the module-level dense
check for the attention tests, the attention contract's modules and the memory measure, CLI
subprocess environments and tiny run arguments, result and bench files for the leaderboard tests.
Test files import from here, never from each other (pyproject's ``pythonpath`` puts tests/ on the
path of every folder).

Train-state construction is not here: lra/train.py owns it. conftest.py sets XLA_FLAGS for the test
process; ``cli_env`` passes the same flags on to a ``python -m lra...`` subprocess.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
from reference import dense_reference

from lra import attention
from lra.leaderboard import identity
from lra.testing import B, D, H, L, inputs, make, supports_causal  # noqa: F401  (re-exported)

# The repository's root folder (the test files sit one folder deeper, in tests/<folder>/).
REPO = Path(__file__).resolve().parent.parent


def length_mask(lengths, length: int) -> np.ndarray:
    """bool[B, length], True at the first ``lengths[b]`` positions of row b (right padding)."""
    return np.arange(length)[None, :] < np.asarray(lengths)[:, None]


def random_qkv(shape: tuple[int, ...], seed: int = 0, n: int = 3) -> list[np.ndarray]:
    """``n`` float32 arrays of ``shape`` (e.g. [B, L, H, Dh]) drawn N(0, 1) from ``n`` keys split
    from ``jax.random.key(seed)``."""
    return [np.asarray(jax.random.normal(k, shape)) for k in jax.random.split(jax.random.key(seed), n)]


def padded_inputs(lengths, length: int, dim: int, *, seed: int = 0, pad_scale: float = 0.0):
    """x float32[B, length, dim] with real tokens N(0, 1) and pads N(0, pad_scale^2) (non-zero pad
    activations when ``pad_scale`` > 0), and mask bool[B, length] from ``lengths`` (int[B])."""
    rng = np.random.default_rng(seed)
    mask = length_mask(lengths, length)
    shape = (len(lengths), length, dim)
    x = rng.standard_normal(shape)
    x = np.where(mask[..., None], x, pad_scale * rng.standard_normal(shape))
    return x.astype(np.float32), mask


def assert_module_matches_dense(module, x, mask, pattern) -> None:
    """A family's output at real positions equals dense attention restricted to ``pattern``
    (bool[L, L] or per head [H, L, L], True = may attend) and to real keys, computed from the
    module's own q, k, v projections and merged by its own output projection."""
    mask = np.asarray(mask)
    pattern = np.asarray(pattern)
    allowed = (pattern[None] if pattern.ndim == 3 else pattern[None, None]) & mask[:, None, None, :]
    q, k, v = nnx.jit(lambda m, x: m.proj.qkv(x))(module, x)
    o = jnp.asarray(dense_reference(q, k, v, allowed), jnp.float32)
    ref = nnx.jit(lambda m, o: m.proj.merge(o))(module, o)
    out = nnx.jit(lambda m, x, mask: m(x, mask))(module, x, jnp.asarray(mask))
    np.testing.assert_allclose(np.asarray(out)[mask], np.asarray(ref)[mask], atol=2e-5, rtol=1e-4)


# The families whose per-family checks run in the fast lane (conftest.py), one of each kind of
# machinery: dense, blocked, random features and their redraw, a state-space convolution, a chunked
# decayed scan.
FAST_FAMILIES = ("softmax", "local", "performer", "s4d", "gla")

# Named variants of a registered family that tests parametrize by their own name (the family with
# the option that gives the variant): the fast lane (conftest.py) counts them as the family.
FAMILY_OF_VARIANT = {"hgrn2": "gla", "deltanet": "gated_deltanet"}


# Tiny ListOps splits for end-to-end runs of the tiny preset (`--set` arguments).
SMALL_LISTOPS = ["--set", "data.train_size=128", "--set", "data.val_size=32",
                 "--set", "data.test_size=32"]


def cli_env(devices: int | None = None, **extra: str) -> dict[str, str]:
    """The environment for a CLI subprocess: this session's XLA flags (conftest.py), one CPU device
    unless ``devices`` forces that many host devices, plus ``extra`` variables."""
    env = dict(os.environ)
    env.pop("JAX_NUM_CPU_DEVICES", None)
    if devices is not None:
        env["XLA_FLAGS"] = f"{env.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count={devices}"
    env.update(extra)
    return env


def wait_until_training(workdir, timeout: float = 300) -> None:
    """Wait until ``workdir``'s run has logged a training record (its loop is running; the header
    line of metrics.jsonl is written before the loop starts). Needs ``train.log_every=1``."""
    metrics = Path(workdir) / "metrics.jsonl"
    deadline = time.time() + timeout
    while time.time() < deadline:
        if metrics.exists() and '"split": "train"' in metrics.read_text():
            return
        time.sleep(0.1)
    raise AssertionError(f"{workdir}: no training record within {timeout:.0f} s")


@contextlib.contextmanager
def full_disk(where: Path, keep: tuple[str, ...] = ()) -> Iterator[Path]:
    """A 1 MiB tmpfs mounted on ``where`` (created) with the folders ``keep`` made in it, then
    filled up by ``where/filler`` (a real full disk: every write of a byte fails with ENOSPC,
    creating an empty file or a folder does not). Deleting the filler frees it. Skips the test
    where mounting is not allowed (not root)."""
    import pytest

    if os.geteuid() != 0 or not shutil.which("mount"):
        pytest.skip("a real full disk needs root to mount a small tmpfs")
    where = Path(where)
    where.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1M", "tmpfs", str(where)],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        for folder in keep:
            (where / folder).mkdir(parents=True)
        with contextlib.suppress(OSError), open(where / "filler", "wb") as f:
            while True:
                f.write(bytes(65536))
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], capture_output=True)


def assert_head_groupings_agree(call, arrays) -> None:
    """A heads-first block kernel (``groups=``, attention._blocks.head_groups): ``call(*arrays,
    groups=g)`` gives the one-group output and the gradients of every array under every grouping of
    4 heads (the caller's dropout included) up to float32 rounding: a few ulp, never a different
    dropout mask, padding or global column (each of those moves values by far more). Bit for bit is
    a property of the code XLA:CPU emits for the host, not of the kernel: an Intel Xeon host gave
    equal bits (2026-12-05), an AMD EPYC host sums some products of a grouping in another order
    and differs by 1 ulp (2.4e-7 absolute, 2026-12-07). The programs are compiled with XLA:CPU's
    default fusion emitters, as a run compiles them (conftest.py turns them off for the rest of the
    suite, for quicker compiles)."""
    def run(groups):
        def loss(*arrays):
            out = call(*arrays, groups=groups)
            return (out ** 2).sum(), out
        argnums = tuple(range(len(arrays)))
        step = jax.jit(jax.value_and_grad(loss, argnums=argnums, has_aux=True),
                       compiler_options={"xla_cpu_use_fusion_emitters": True})
        (_, out), grads = step(*arrays)
        return [out, *grads]

    reference = run(1)
    for groups in (2, 4, None):
        for got, want in zip(run(groups), reference):
            want = np.asarray(want)
            scale = float(np.abs(want).max()) or 1.0
            np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-6 * scale)


def result_record(config: dict, *, val: float = 0.4, test: float = 0.4, fingerprint=None,
                  date: str = "2026-01-01T00:00:00Z", device: str = "cpu") -> dict:
    """A complete, valid result file (format 2) of the resolved ``config`` (``Config.to_dict()``),
    as ``lra.run`` writes it, with the given accuracies: what the one reader
    (``lra.leaderboard.reader``) counts. ``fingerprint``: the data's (``data_fingerprint``), else
    a made-up one."""
    import json

    from lra import config as config_lib
    from lra.results import config_overrides

    config = json.loads(json.dumps(config))
    overrides = config_overrides(config_lib.Config.from_dict(config))
    fp = fingerprint or {"sha256": "a" * 64, "generator": {"name": "test", "version": 1},
                         "files": {}}
    steps = config["train"]["num_steps"]
    return {
        "format_version": 2, "task": config["task"], "attention": config["attention"],
        "preset": config["preset"], "seed": config["seed"], "protocol": config.get("protocol", "lra"),
        "config": config, "overrides": overrides,
        "metrics": {"best_val_accuracy": val, "test_accuracy_at_best_val": test,
                    "test_accuracy_at_last": test, "final_val_accuracy": val, "steps": steps,
                    "best_val_step": steps, "wall_time_s": 1.0, "steps_per_s": 1.0},
        "data": {"evaluated": {"val": 1000, "test_at_last": 1000, "test_at_best_val": 1000},
                 "fingerprint": fp},
        "device": {"platform": device, "kind": device, "count": 1, "process_count": 1},
        "versions": {}, "git": {"commit": "0123456789abcdef", "dirty": False},
        "date": date, "status": "completed",
    }


def write_grid_result(results: Path, name: str, argv: list[str], *, val: float, test: float,
                      date: str = "2026-01-01T00:00:00Z") -> dict:
    """Write ``<results>/runs/<name>``: a valid result of the config ``lra.run argv`` resolves
    (e.g. one cell of a ``lra.sweep --grid``), made on the data present now (the fingerprint the
    sweep's skip check computes), with the given accuracies. Returns the record."""
    import json

    from lra import run as run_cli
    from lra import skip_check
    from lra.data import default_data_dir

    config = run_cli.resolve_config(run_cli.parser().parse_args(argv))
    record = result_record(config.to_dict(), val=val, test=test, date=date,
                           fingerprint=skip_check.data_now(config, default_data_dir()))
    (results / "runs").mkdir(parents=True, exist_ok=True)
    (results / "runs" / name).write_text(json.dumps(record))
    return record


README_FAMILY = "relu_linear"  # the family of attention/README.md's example


def readme_family_code() -> str:
    """The Python block of attention/README.md "Add an attention family in one file", as written."""
    import re

    text = (REPO / "attention" / "README.md").read_text()
    section = text[text.index("## Add an attention family in one file"):]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


@contextlib.contextmanager
def installed_readme_family(site: Path) -> Iterator[str]:
    """attention/README.md's family installed in this process (``installed_plugin``) as module
    ``lra_readme_family`` of distribution ``lra-readme-family``; yields its class's name."""
    import re

    code = readme_family_code()
    class_name = re.search(rf'@register\("{README_FAMILY}"\)\nclass (\w+)', code).group(1)
    with installed_plugin(site, "lra_readme_family", code,
                          {README_FAMILY: f"lra_readme_family:{class_name}"},
                          distribution="lra-readme-family"):
        yield class_name


@contextlib.contextmanager
def installed_plugin(site: Path, module: str, code: str, entry_points: dict[str, str],
                     distribution: str = "lra-test-plugin") -> Iterator[Path]:
    """A distribution installed in this process while the block runs: ``site/<module>.py`` holding
    ``code`` and a ``*.dist-info`` whose ``entry_points.txt`` registers ``entry_points`` ({name:
    value}) under ``lra.attention``, on ``sys.path``. importlib.metadata and the import system read
    it for real; the registry and the declared facts are read again inside the block and restored
    after it."""
    import sys

    from lra import declared
    from lra.leaderboard import names

    site.mkdir(parents=True, exist_ok=True)
    (site / f"{module}.py").write_text(code)
    dist = site / f"{distribution.replace('-', '_')}-0.1.dist-info"
    dist.mkdir(exist_ok=True)
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {distribution}\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(
        f"[{attention.ENTRY_POINT_GROUP}]\n"
        + "".join(f"{name} = {value}\n" for name, value in entry_points.items()))
    registry = attention._REGISTRY
    before, discovered = dict(registry._entries), registry._discovered
    caches = (declared.declared, declared.plugins, names.declared)

    def forget():
        for cache in caches:
            cache.cache_clear()
        registry._discovered = False

    sys.path.insert(0, str(site))
    forget()
    try:
        yield site
    finally:
        sys.path.remove(str(site))
        sys.modules.pop(module, None)
        forget()
        registry._entries.clear()
        registry._entries.update(before)
        registry._discovered = discovered


# ----------------------------------------------------------------------------------------------
# The attention contract's sizes and modules (tests/attention/test_contract.py, and the checks that
# lower every family's step: tests/attention/test_host_calls.py).

# The sizes, modules and inputs are lra.testing's (the checks shipped with the package), one definition.
FAMILIES = attention.available()

# ----------------------------------------------------------------------------------------------
# XLA's compiled temp bytes of a family's training step (tests/attention/test_memory.py, and Mega's
# chunked attention in tests/attention/test_mega.py).

SHORT, LONG = 1024, 4096  # 4x the length: quadratic memory grows 16x, linear 4x


def train_temp_bytes(name: str, length: int, **options) -> int:
    module = attention.build(name, dim=64, num_heads=2, qkv_dim=64, max_len=length, dropout=0.0,
                             rngs=nnx.Rngs(0), **options)
    graph, params, rest = nnx.split(module, nnx.Param, ...)

    def loss(params, x, mask):
        m = nnx.merge(graph, params, rest)
        return jnp.sum(m(x, mask) ** 2)

    x = jax.ShapeDtypeStruct((1, length, 64), jnp.float32)
    mask = jax.ShapeDtypeStruct((1, length), jnp.bool_)
    # gradients w.r.t. the input too: a parameter-free family (fnet) must not compile to nothing
    compiled = jax.jit(jax.grad(loss, argnums=(0, 1))).lower(params, x, mask).compile()
    return compiled.memory_analysis().temp_size_in_bytes


# ----------------------------------------------------------------------------------------------
# Result and bench files as the leaderboard reads them (tests/leaderboard/).

BENCH_LENGTHS = (512, 1024, 2048)


def preset_config(task, attention, preset, seed=0, protocol="lra"):
    """The nested resolved config of a preset run (JAX-free, as the leaderboard resolves it)."""
    return identity.nested(identity.preset_config(task, attention, preset, protocol), seed)


def run_record(task, attention, preset, seed, best, last, protocol="lra"):
    return {
        "task": task, "attention": attention, "preset": preset, "seed": seed, "protocol": protocol,
        "config": preset_config(task, attention, preset, seed, protocol),
        "metrics": {"best_val_accuracy": best, "test_accuracy_at_best_val": best,
                    "test_accuracy_at_last": last, "steps": 100, "wall_time_s": 60.0,
                    "steps_per_s": 2.0, "peak_memory": {"bytes": 2**30, "source": "test"}},
        "device": {"platform": "cpu", "kind": "cpu", "count": 1, "process_count": 1},
        "versions": {}, "git": {"commit": "0123456789abcdef", "dirty": False},
        "date": "2026-01-01T00:00:00Z", "status": "completed",
    }


def bench_result(name, length, seconds, memory, base_seconds, base_memory, flop_share=1.0):
    flops = 2e9 * length / 512 * flop_share
    return {"attention": name, "length": length, "status": "ok", "reason": None, "compile_s": 1.0,
            "compiled_memory": {"total": memory}, "memory": {"bytes": memory, "source": "test"},
            "flops": {"xla": flops, "matmul": flops, "loops": False, "per_step": flops},
            "step_time_s": {"median": seconds, "min": seconds, "max": seconds, "samples": [seconds]},
            "steps_per_s": 1 / seconds, "achieved_flops_per_s": flops / seconds,
            "fraction_of_peak": 0.25, "speed_vs_softmax": base_seconds / seconds,
            "memory_vs_softmax": memory / base_memory}


def bench_record(date="2026-01-02T00:00:00Z"):
    """softmax: time and memory ~ L^2; linear: ~ L; local skipped at 2048 (too big)."""
    results = []
    for n in BENCH_LENGTHS:
        r = n / 512
        soft_t, soft_m = 0.1 * r**2, 2**28 * r**2
        results.append(bench_result("softmax", n, soft_t, soft_m, soft_t, soft_m))
        results.append(bench_result("linear", n, 0.1 * r, 2**28 * r, soft_t, soft_m, 0.2))
        if n < 2048:
            results.append(bench_result("local", n, 0.08 * r, 2**27 * r, soft_t, soft_m))
        else:
            results.append({"attention": "local", "length": n, "status": "skipped",
                            "reason": "would not fit: needs 30 GiB; budget 20 GiB (test)",
                            "speed_vs_softmax": None, "memory_vs_softmax": None})
    return {"schema": "lra.bench/1", "kind": "efficiency", "task": "text", "model": {}, "batch": 4,
            "dtype": "float32", "lengths": list(BENCH_LENGTHS), "families": ["linear", "local", "softmax"],
            "steps": 10, "warmup": 2, "memory_method": "compiled memory analysis (test)",
            "memory_budget": {"bytes": 20 * 2**30, "source": "test"},
            "matmul_peak": {"flops_per_s": 1.5e11}, "results": results, "slopes": {},
            "device": {"platform": "cpu", "kind": "cpu", "count": 1, "process_count": 1},
            "versions": {}, "git": {"commit": "fedcba9876543210", "dirty": False}, "date": date}


# ----------------------------------------------------------------------------------------------
# lra.run on a tiny ListOps set, in this process (the fault tests: conftest.py's ``tiny_listops``
# and ``finished``) or as a subprocess (``tiny_run_cmd``: kill, signals, several devices).

TINY_LISTOPS_OPTIONS = {"min_length": 5, "max_length": 40, "max_depth": 3,
                        "train_size": 128, "val_size": 32, "test_size": 32}
# Subprocesses write every compile to the persistent cache (``module_compile_cache`` sets its folder).
CACHE_EVERY_COMPILE = {"JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0"}


def tiny_run_args(data: Path, work: Path, results: Path, *extra: str, task: str = "listops") -> list[str]:
    """``lra.run`` arguments: the tiny preset of softmax on ``task`` (ListOps: the tiny splits)."""
    return ["--task", task, "--attn", "softmax", "--preset", "tiny", "--data-dir", str(data),
            "--workdir", str(work), "--results-dir", str(results), "--no-progress",
            *(SMALL_LISTOPS if task == "listops" else []), *extra]


# The run contract tests' run (tests/commands/test_run_*.py; conftest.py's ``contract_data`` and
# ``contract_reference``): ListOps tiny on the tiny set, checkpoints every 2 of 6 steps.
CONTRACT_STEPS = ["--set", "train.num_steps=6", "--set", "train.eval_every=3",
                  "--set", "train.checkpoint_every=2", "--set", "train.log_every=1"]


def contract_run_args(data: Path, work: Path, res: Path, *extra: str) -> list[str]:
    """``lra.run`` arguments of the run contract tests (XLA:CPU's fusions on: no timing at start)."""
    sizes = [x for k in ("train_size", "val_size", "test_size")
             for x in ("--set", f"data.{k}={TINY_LISTOPS_OPTIONS[k]}")]
    return ["--task", "listops", "--attn", "softmax", "--preset", "tiny", "--data-dir", str(data),
            "--workdir", str(work), "--results-dir", str(res), "--no-progress",
            "--xla-cpu-fusions", "on", *sizes, *CONTRACT_STEPS, *extra]


def run_in_process(*args: str) -> tuple[int, str, str]:
    """run_cli.main in this process -> (exit status, stdout, stderr); a traceback fails the test."""
    import contextlib
    import io

    from lra import run as run_cli

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = run_cli.main(list(args))
    return code, out.getvalue(), err.getvalue()


def run_module_in_process(cmd: list[str]) -> subprocess.CompletedProcess[str]:
    """``cmd`` (``[python, "-m", "lra.<command>", *arguments]``) as a call of that command's
    ``main`` in this process: its exit status, stdout and stderr, as ``subprocess.run(cmd,
    capture_output=True, text=True)`` would give them, without a new interpreter (its imports alone
    cost about 3 s of CPU). For the runs of a test whose subject is not the process boundary: the
    re-run after a signal, a plain run whose files the test reads. A traceback fails the test."""
    import importlib
    import io

    assert cmd[1] == "-m" and cmd[2].startswith("lra."), cmd
    main = importlib.import_module(cmd[2]).main
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(list(cmd[3:]))
        except SystemExit as exit_:  # argparse's errors
            code = exit_.code if isinstance(exit_.code, int) else 2
    return subprocess.CompletedProcess(cmd, code, out.getvalue(), err.getvalue())


def run_ok_in_process(cmd: list[str]) -> subprocess.CompletedProcess[str]:
    """``run_module_in_process(cmd)``; exit status 0 or the test fails with its stderr."""
    out = run_module_in_process(cmd)
    assert out.returncode == 0, out.stderr[-4000:]
    return out


def assert_one_line_error(err: str) -> None:
    lines = [x for x in err.splitlines() if x.startswith("error:")]
    assert len(lines) == 1 and "Traceback" not in err, err[-3000:]


def module_compile_cache(tmp_path_factory):
    """The body of a module's autouse fixture: the runs of a module compile the same few programs,
    and JAX's persistent cache in a folder of the module's own compiles them once (in this process
    and in the subprocesses, through JAX_COMPILATION_CACHE_DIR); the other modules then compile as
    they would alone."""
    cache = str(tmp_path_factory.mktemp("jax-cache"))
    keys = ("jax_compilation_cache_dir", "jax_persistent_cache_min_compile_time_secs",
            "jax_persistent_cache_min_entry_size_bytes")
    before = {k: getattr(jax.config, k) for k in keys}
    for key, value in zip(keys, (cache, 0.0, 0)):
        jax.config.update(key, value)
    session_cache = os.environ.get("JAX_COMPILATION_CACHE_DIR")  # conftest.py's, removed at the end
    os.environ["JAX_COMPILATION_CACHE_DIR"] = cache
    yield
    if session_cache is None:
        os.environ.pop("JAX_COMPILATION_CACHE_DIR")
    else:
        os.environ["JAX_COMPILATION_CACHE_DIR"] = session_cache
    for key, value in before.items():
        jax.config.update(key, value)
    from jax.experimental.compilation_cache import compilation_cache

    compilation_cache.reset_cache()


def copy_resumable(finished, dest: Path) -> Path:
    """A copy of the finished work directory as a run killed after its last save would leave it."""
    import shutil

    shutil.copytree(finished[0], dest)
    (dest / "result.json").unlink()
    (dest / "lock").unlink()
    return dest


def prepare_tiny_listops_cli(path: Path) -> Path:
    """``path`` with the tiny ListOps set generated under ``path / "data"`` by ``lra.data prepare``
    (once per module, in this process: tests/commands/test_data.py checks the command itself)."""
    import sys

    run_ok_in_process([sys.executable, "-m", "lra.data", "prepare", "--task", "listops",
                       "--data-dir", str(path / "data"), "--set", "min_length=5",
                       "--set", "max_length=40", "--set", "max_depth=3", "--set", "train_size=128",
                       "--set", "val_size=32", "--set", "test_size=32"])
    return path


def tiny_run_cmd(tmp: Path, work: str, *extra: str, attn: str = "softmax") -> list[str]:
    """``python -m lra.run`` of the tiny preset on the data of ``prepare_tiny_listops_cli(tmp)``."""
    import sys

    return [sys.executable, "-m", "lra.run", "--task", "listops", "--attn", attn,
            "--preset", "tiny", "--data-dir", str(tmp / "data"), "--workdir", str(tmp / work),
            "--results-dir", str(tmp / "results"), "--no-progress", *SMALL_LISTOPS, *extra]


def run_ok(cmd, devices=1, timeout=600):
    """Run ``cmd`` on ``devices`` CPU devices; exit status 0 or the test fails with its stderr."""
    import subprocess

    out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=cli_env(devices))
    assert out.returncode == 0, out.stderr[-4000:]
    return out


def read_result(tmp: Path, work: str) -> dict:
    import json

    return json.loads((tmp / work / "result.json").read_text())


def train_losses(tmp: Path, work: str) -> list[float]:
    import json

    lines = (tmp / work / "metrics.jsonl").read_text().splitlines()
    return [r["loss"] for r in map(json.loads, lines) if r["split"] == "train"]


def mark_prepared(tfds_dir: Path, name: str, file_format: str = "array_record") -> None:
    """What tfds leaves in a prepared dataset's folder, as far as the tasks (Text, Image) look."""
    import tensorflow_datasets as tfds

    folder = tfds_dir / tfds.builder(name).info.full_name
    folder.mkdir(parents=True)
    (folder / "dataset_info.json").write_text(json.dumps({"name": name, "fileFormat": file_format}))


def tfds_mock(n: int):
    """tfds's mock data (``n`` examples per split, made from the dataset's features) in a ``with``."""
    import tensorflow_datasets as tfds

    return tfds.testing.mock_data(num_examples=n, policy=tfds.testing.MockPolicy.USE_CODE)
