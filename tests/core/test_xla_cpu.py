"""XLA:CPU's YNN fusions chosen per step program (lra/xla_cpu.py), in the trainer and the bench."""

import json
import subprocess
import sys

import pytest
from helpers import SMALL_LISTOPS, cli_env

from lra import train, xla_cpu
from lra.checkpoint import Checkpoints

FLAG = "--xla_cpu_experimental_ynn_fusion_type"


def _without_the_flag(flags: str) -> str:
    return " ".join(f for f in flags.split() if not f.startswith(FLAG))


@pytest.fixture
def untuned_env(monkeypatch):
    """XLA_FLAGS as this session has them, less the YNN setting conftest.py adds."""
    import os

    monkeypatch.setenv("XLA_FLAGS", _without_the_flag(os.environ.get("XLA_FLAGS", "")))


def test_a_setting_in_xla_flags_wins_and_nothing_is_tuned(monkeypatch):
    monkeypatch.setenv("XLA_FLAGS", f"--xla_backend_optimization_level=0 {FLAG}=")
    assert xla_cpu.resolve("auto") == ("off", "env")
    assert xla_cpu.resolve("on", stored="off") == ("off", "env")
    monkeypatch.setenv("XLA_FLAGS", f"{FLAG}=eltwise")
    assert xla_cpu.resolve("auto") == ("on", "env")


def test_resolve_requested_stored_and_auto(untuned_env):
    assert xla_cpu.resolve("auto") == ("auto", "auto")
    assert xla_cpu.resolve("off") == ("off", "requested")
    assert xla_cpu.resolve("auto", stored="off") == ("off", "resumed")  # a resumed run keeps it
    assert xla_cpu.resolve("on", stored="off") == ("on", "requested")
    with pytest.raises(ValueError, match="auto, on, off"):
        xla_cpu.resolve("fast")


@pytest.mark.slow
def test_off_compiles_the_step_without_the_ynn_fusions_xla_adds_by_default():
    code = ("import jax, jax.numpy as jnp, json; from lra import xla_cpu\n"
            "low = jax.jit(jnp.matmul).lower(jnp.ones((64, 16, 16)), jnp.ones((64, 16, 32)))\n"
            "print(json.dumps({v: '%ynn_fusion' in low.compile(compiler_options=o).as_text()\n"
            "                  for v, o in xla_cpu.OPTIONS.items()}))")
    env = cli_env()
    env["XLA_FLAGS"] = _without_the_flag(env.get("XLA_FLAGS", ""))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout.splitlines()[-1]) == {"on": True, "off": False}


class FakeClock:
    """``time.perf_counter`` for ``xla_cpu.pick``: a timed call advances it by its variant's cost, so
    the choice does not depend on how loaded the machine is (sleeps did, under a busy host)."""

    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def step(self, seconds: float):
        return lambda: setattr(self, "now", self.now + seconds)


@pytest.mark.parametrize("slow", ["on", "off"])
def test_pick_keeps_the_faster_variant(slow, monkeypatch):
    clock = FakeClock()
    monkeypatch.setattr(xla_cpu.time, "perf_counter", clock)
    calls = {"on": 0, "off": 0}

    def prepare(variant):
        calls[variant] += 1
        return clock.step(0.03 if variant == slow else 0.002)

    choice, medians = xla_cpu.pick(prepare, rounds=3)
    assert choice == ("off" if slow == "on" else "on")
    assert medians[slow] > 5 * medians[choice]
    assert calls == {"on": 4, "off": 4}  # one untimed (compiling) call, then 3 timed, each


def test_within_the_margin_xla_default_stays(monkeypatch):
    # "off" 2% faster: inside MARGIN (5%), not worth leaving XLA's default for
    clock = FakeClock()
    monkeypatch.setattr(xla_cpu.time, "perf_counter", clock)
    choice, medians = xla_cpu.pick(lambda v: clock.step(0.049 if v == "off" else 0.050), rounds=3)
    assert choice == "on" and medians["off"] < medians["on"]


def test_a_resumed_run_keeps_its_program_without_timing(untuned_env, capsys):
    made = []

    def make_step(options):
        made.append(options)
        return lambda *args: "off-step"

    def never(*args):
        raise AssertionError("a resumed run must not time anything")

    history = train.History(xla_cpu_fusions="off")
    step, record = train._choose_step("auto", history, "on-step", make_step, None, None, never,
                                      None)
    assert step(None) == "off-step" and made == [xla_cpu.OPTIONS["off"]]
    assert record == {"choice": "off", "source": "resumed"}

    step, record = train._choose_step("on", history, "on-step", make_step, None, None, never, None)
    assert step == "on-step" and record == {"choice": "on", "source": "requested"}
    assert history.xla_cpu_fusions == "on"
    assert "will not match an uninterrupted run" in capsys.readouterr().err


@pytest.mark.slow
def test_lra_run_times_both_programs_and_records_its_choice(tmp_path):
    env = cli_env()
    env["XLA_FLAGS"] = _without_the_flag(env.get("XLA_FLAGS", ""))
    cmd = [sys.executable, "-m", "lra.run", "--task", "listops", "--attn", "softmax",
           "--preset", "tiny", "--data-dir", str(tmp_path / "data"), "--workdir",
           str(tmp_path / "work"), "--results-dir", str(tmp_path / "results"), "--no-progress",
           *SMALL_LISTOPS]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    [path] = (tmp_path / "results" / "runs").glob("*.json")
    fusions = json.loads(path.read_text())["xla_cpu_fusions"]
    assert fusions["source"] == "auto" and set(fusions["step_s"]) == {"on", "off"}
    on, off = fusions["step_s"]["on"], fusions["step_s"]["off"]
    assert fusions["choice"] == ("off" if off < (1 - xla_cpu.MARGIN) * on else "on")
    assert f"xla:cpu fusions: {fusions['choice']} (auto: " in proc.stderr
    # the choice is in the checkpoint, where a resumed run reads it
    ckpt = Checkpoints(tmp_path / "work")
    meta = ckpt.restore_meta("last", max(ckpt.steps("last")))
    ckpt.close()
    assert meta["history"]["xla_cpu_fusions"] == fusions["choice"]
