"""Devices and processes (lra/sharding.py), with real processes: the same training losses on 4
emulated CPU devices as on 1, a batch that does not divide over the devices, and two processes
joined by jax.distributed that train like one.
"""

import socket
import subprocess

import pytest
from helpers import (
    cli_env,
    prepare_tiny_listops_cli,
    read_result,
    run_ok,
    run_ok_in_process,
    tiny_run_cmd,
    train_losses,
)


@pytest.fixture(scope="module")
def tmp(tmp_path_factory):
    return prepare_tiny_listops_cli(tmp_path_factory.mktemp("faults"))


@pytest.mark.slow
@pytest.mark.parametrize("attn,norm", [("cosformer", "layer"), ("softmax", "batch")])
def test_four_devices_match_one(tmp, attn, norm):
    """Data parallelism: the same training losses on 4 emulated devices as on 1 (BatchNorm's batch
    statistics are taken over the global batch; the running ones are replicated like the
    parameters). LayerNorm with cosFormer, BatchNorm with softmax: each norm and each family once
    (a LayerNorm is per token, the same on any device count). Evaluation is not compared under
    BatchNorm: parameters whose true gradient is zero (a shift that the final BatchNorm removes)
    get Adam steps of +-lr from rounding noise, which differ between device counts and move the
    running mean."""
    steps = ["--set", "train.num_steps=8", "--set", "train.log_every=1", "--set",
             "model.dropout=0", "--set", "model.attention_dropout=0", "--set", f"model.norm={norm}"]
    one_dir, four_dir = f"dev1-{attn}-{norm}", f"dev4-{attn}-{norm}"
    run_ok_in_process(tiny_run_cmd(tmp, one_dir, *steps, attn=attn))  # this process: one device
    run_ok(tiny_run_cmd(tmp, four_dir, *steps, attn=attn), devices=4)
    one, four = train_losses(tmp, one_dir), train_losses(tmp, four_dir)
    assert len(one) == len(four) == 8
    assert max(abs(a - b) for a, b in zip(one, four)) < 1e-5, (one, four)
    assert read_result(tmp, four_dir)["device"]["count"] == 4


@pytest.mark.slow
def test_batch_not_divisible_by_devices_is_a_clear_error(tmp):
    out = subprocess.run(tiny_run_cmd(tmp, "baddiv", "--set", "train.batch_size=6"), capture_output=True,
                         text=True, timeout=600, env=cli_env(4))
    assert out.returncode == 2 and "does not divide over 4 devices" in out.stderr


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_two_processes_train_like_one(tmp):
    steps = ["--set", "train.num_steps=6", "--set", "train.log_every=1", "--set",
             "model.dropout=0", "--set", "model.attention_dropout=0"]
    run_ok_in_process(tiny_run_cmd(tmp, "single", *steps))  # this process: one device
    port = _free_port()
    procs = [subprocess.Popen(
        tiny_run_cmd(tmp, "multi", *steps, "--coordinator", f"127.0.0.1:{port}", "--num-processes", "2",
                     "--process-id", str(i)),
        env=cli_env(1), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for i in range(2)]
    for p in procs:
        _, err = p.communicate(timeout=600)
        assert p.returncode == 0, err[-3000:]
    one, two = train_losses(tmp, "single"), train_losses(tmp, "multi")
    assert len(one) == len(two) == 6
    assert max(abs(a - b) for a, b in zip(one, two)) < 1e-5, (one, two)
    result = read_result(tmp, "multi")
    assert result["device"]["count"] == 2 and result["device"]["process_count"] == 2
