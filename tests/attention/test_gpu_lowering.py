"""The GPU program of every family, lowered for CUDA on this CPU host.

A GPU runs code that a CPU never traces: the per-platform rules (attention/_platform.py) send
softmax to cuDNN or to dense attention sized by the device's free memory, the causal linear
attentions to a Pallas kernel lowered through Triton, the block kernels to one head group. The
first device window lost a phase to such code (the Pallas scan used a value slice that Triton
cannot lower; fixed in ca3697f). Here, with the rules made to plan for a GPU
(``_platform.target("gpu", memory_free=...)``), ``jax.export`` lowers for ``cuda``:

* the trainer's own jitted train step (``lra.train.create_train_state``) and eval step
  (``lra.train.jit_eval_step``) of every registered family, bfloat16, dropout on;
* every family's causal layer (``causal=True``), forward and backward with dropout on: linear,
  cosFormer and Performer through the Pallas scan that ``impl="auto"`` picks on GPU;
* softmax's three GPU paths: cuDNN (eval, no dropout), dense (the scores fit) and blocked (they
  do not).

What it cannot catch: Triton's own compile (PTX and the kernel's resources are produced on the
GPU); cuDNN's side of its fused call (the version JAX checks while tracing is set here, so the
call is built and its shape rules run, but whether the installed cuDNN accepts it is decided on
the device); XLA:GPU's compile (fusion, autotuning, memory: whether the program fits the device,
and so whether the dense rule's estimate holds, shows only there); and anything at run time
(speed, numerics on the device). tests/attention/test_causal_scan_pallas.py checks the kernel's sums in
interpret mode; the device window (lra.bench.device_check) runs the real thing.
"""

import inspect
import re
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from jax import export
from lra.attention import _platform

from lra import attention, sharding, tasks
from lra import config as config_lib
from lra.bench.steps import make_batch
from lra.train import create_train_state, jit_eval_step

B, L, DIM, HEADS = 2, 64, 32, 2
GPU_MEMORY = 80 * 10**9  # an H100's, free: the rules take the dense softmax path
CUDNN_VERSION = 90800  # cuDNN 9.8 as JAX reads it (while tracing) on a GPU host
# Custom calls export would refuse to serialise (no compatibility guarantee): fine for a lowering.
CUDNN_CALLS = ("__cudnn$fmhaSoftmax", "__cudnn$fmhaSoftmaxBackward")
TRITON_CALL = "__gpu$xla.gpu.triton"  # a Pallas kernel lowered through Triton
FAMILIES = attention.available()
CAUSAL = [f for f in FAMILIES if "causal" in inspect.signature(attention.family(f).__init__).parameters]
PALLAS_SCAN = ("linear", "cosformer", "performer")  # causal_linear_sums, impl="auto"


@pytest.fixture
def gpu_rules(monkeypatch):
    """The code's GPU rules active (platform and free memory), and cuDNN's version as a GPU host's
    JAX would read it (a CPU host has no cuDNN: JAX refuses to build the fused call without one)."""
    from jax._src.cudnn import fused_attention_stablehlo

    monkeypatch.setattr(fused_attention_stablehlo, "check_cudnn_version", lambda: CUDNN_VERSION)
    with _platform.target("gpu", memory_free=GPU_MEMORY):
        yield


def lower_for_cuda(fn, *args) -> str:
    """``fn`` (jitted) exported for CUDA from abstract ``args``; returns the StableHLO text."""
    structs = jax.tree.map(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype)
                           if hasattr(a, "shape") else a, args)
    exported = export.export(fn, platforms=["cuda"], disabled_checks=[
        export.DisabledSafetyCheck.custom_call(name) for name in (*CUDNN_CALLS, TRITON_CALL)])(*structs)
    assert exported.platforms == ("cuda",)
    return exported.mlir_module()


def trainer_steps(family: str, *overrides: str):
    """The trainer's jitted train and eval steps for ``family`` on ListOps at a tiny size (one
    block: a second lowers the same code again), bfloat16, dropout on (abstract state: nothing is
    allocated), and their arguments."""
    config = config_lib.load("listops", family, preset="tiny", seed=0, overrides=[
        "model.dtype=bfloat16", "model.dropout=0.1", "model.attention_dropout=0.1",
        f"model.emb_dim={DIM}", f"model.qkv_dim={DIM}", f"model.num_heads={HEADS}",
        "model.mlp_dim=64", "model.num_layers=1", f"train.batch_size={B}", *overrides])
    task = tasks.build(config.task, Path("."), **config.data)  # facts only: reads no files
    mesh = sharding.make_mesh()
    setup = create_train_state(config, task, mesh, init="abstract", max_len=L)
    batch = make_batch(task, B, L)
    rng = jax.eval_shape(lambda: jax.random.key(0))
    train = (setup.train_step, setup.state, setup.rest, batch, rng)
    batch = {**batch, "weights": np.ones(B, np.float32)}
    evaluate = (jit_eval_step(setup.graphdef, mesh), setup.state["params"],
                setup.state["batch_stats"], setup.rest, batch)
    return train, evaluate


def calls(text: str) -> set[str]:
    """The custom-call targets of a lowered module."""
    return set(re.findall(r"custom_call @([\w$.]+)", text))


@pytest.mark.parametrize("family", FAMILIES)
def test_trainer_steps_lower_for_cuda(family, gpu_rules):
    train, evaluate = trainer_steps(family)
    train_text = lower_for_cuda(*train)
    eval_text = lower_for_cuda(*evaluate)
    if family == "softmax":  # dropout in training: dense (the scores fit); none in eval: cuDNN
        assert not calls(train_text) & set(CUDNN_CALLS)
        assert "stablehlo.while" not in train_text  # the blocked path is a loop over key blocks
        assert "__cudnn$fmhaSoftmax" in calls(eval_text)


@pytest.mark.parametrize("family", CAUSAL)
def test_causal_layer_lowers_for_cuda(family, gpu_rules):
    """The layer's forward and backward pass, bfloat16 input, dropout on."""
    cls = attention.family(family)
    module = attention.build(family, dim=DIM, num_heads=HEADS, qkv_dim=DIM, causal=True,
                             max_len=L, dropout=0.1, rngs=nnx.Rngs(0),
                             **getattr(cls, "contract_options", {}))
    graphdef, params, rest = nnx.split(module, nnx.Param, ...)

    def step(params, rest, x, mask):  # the layer rebuilt inside, as the trainer's step does
        layer = nnx.merge(graphdef, params, rest)
        loss = lambda layer: jnp.sum(layer(x, mask, deterministic=False).astype(jnp.float32))  # noqa: E731
        return nnx.value_and_grad(loss, argnums=nnx.DiffState(0, nnx.Param))(layer)

    x = jnp.zeros((B, L, DIM), jnp.bfloat16)
    mask = jnp.ones((B, L), bool)
    text = lower_for_cuda(jax.jit(step), params, rest, x, mask)
    if family in PALLAS_SCAN:
        assert TRITON_CALL in calls(text)




def test_softmax_training_lowers_blocked_when_the_scores_do_not_fit(gpu_rules):
    """The other side of the memory rule: too little free memory sends training to the blocked
    loop. The encoder's depth reaches the rule (2 layers held, 1 under ``model.remat``)."""
    from lra.attention.softmax import decisions

    with _platform.target("gpu", memory_free=10**5):  # the scores need 0.44 MB
        train, _ = trainer_steps("softmax", "attn.block_size=16", "model.num_layers=2")  # 5 key blocks
        text = lower_for_cuda(*train)
        assert "stablehlo.while" in text
        assert decisions()[-1]["impl"] == "blocked" and decisions()[-1]["layers"] == 2
        lower_for_cuda(*trainer_steps("softmax", "model.remat=true", "model.num_layers=2")[0])
        assert decisions()[-1]["layers"] == 1


def test_rules_read_the_target():
    """One switch: the platform and the free memory every rule reads."""
    from lra.attention._blocks import head_groups

    assert _platform.platform() == jax.default_backend()
    if jax.default_backend() == "cpu":
        assert _platform.memory_free() is None  # XLA:CPU keeps no count
    with _platform.target("cpu"):
        assert head_groups(8) == 2
        with _platform.target("gpu", memory_free=123) as target:
            assert (target.platform, _platform.platform(), _platform.memory_free()) == (
                "gpu", "gpu", 123)
            assert head_groups(8) == 1
        assert (_platform.platform(), _platform.memory_free()) == ("cpu", None)
    with pytest.raises(ValueError, match="target platform must be one of cpu, gpu, tpu"):
        with _platform.target("cuda"):
            pass
