"""The attention contract, checked for every registered family (attention/__init__.py states it).

The checks themselves ship with the package (``lra.testing``, run by ``python -m lra.check_family``
on a user's family): each test here runs one of them, so the suite and a user check the same
thing. They call a family jitted, as the trainer does: one compile per program instead of one per
operation (eager), which takes 5-10 times longer (measured 2026-12-05: gated_deltanet, s5,
bigbird 1.4-1.8 s eager, 0.14-0.38 s jitted); test_eager_calls_agree_with_jit checks eager calls
for one family of each machinery.
"""

import re
from pathlib import Path

import jax
import jax.numpy as jnp
import pytest
from flax import nnx
from helpers import FAMILIES, FAST_FAMILIES, D, H

from lra import attention, testing


def test_registry_lists_the_foundation_families():
    assert {"softmax", "cosformer"} <= set(FAMILIES)


def test_unknown_name_lists_choices():
    with pytest.raises(attention.UnknownAttentionError, match=r"Available: .*softmax"):
        attention.family("sofmax")
    with pytest.raises(attention.UnknownAttentionError, match="Did you mean softmax"):
        attention.build("sofmax", dim=D, num_heads=H, rngs=nnx.Rngs(0))


def test_unknown_option_is_an_error():
    with pytest.raises(ValueError, match="no option 'blok_size'"):
        attention.check_options("softmax", {"blok_size": 3})


@pytest.mark.parametrize("name", FAMILIES)
def test_shape_dtype_and_jit(name):
    testing.run_check(name, "shape")


@pytest.mark.parametrize("name", FAST_FAMILIES)
def test_eager_calls_agree_with_jit(name):
    """A family called outside ``jit`` (a notebook) gives the jitted output. One family of each
    machinery (dense, blocked, random features, a state-space convolution, a chunked scan;
    helpers.FAST_FAMILIES): eager execution compiles every operation on its own, 1-2 s a family."""
    testing.run_check(name, "jit")


@pytest.mark.parametrize("name", FAMILIES)
def test_no_two_variables_share_a_buffer(name):
    """A training step donates the whole state; two variables holding one array fail it at run
    time ("Attempt to donate the same buffer twice"). Fails on d51d66b for mlstm, whose two gate
    kernels were one zeros array (lra.bench --attn mlstm: every step of the config failed)."""
    testing.run_check(name, "buffers")


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("name", FAMILIES)
def test_padding_cannot_leak(name, causal):
    testing.run_check(name, "padding_causal" if causal else "padding")


class _LeakyLinearAttention(nnx.Module):
    """The original LRA's Linear Transformer bug: the pad mask is ignored."""

    def __init__(self, rngs):
        self.proj = attention.HeadProjections(D, H, D, rngs=rngs)

    def __call__(self, x, mask=None, *, deterministic=True):
        q, k, v = self.proj.qkv(x)
        q, k = jax.nn.elu(q) + 1, jax.nn.elu(k) + 1
        kv = jnp.einsum("blhd,blhe->bhde", k, v)
        out = jnp.einsum("blhd,bhde->blhe", q, kv) / jnp.einsum("blhd,bhd->blh", q, k.sum(1))[..., None]
        return self.proj.merge(out)


def test_the_leak_check_catches_the_original_bug():
    assert testing.padding_leak(_LeakyLinearAttention(nnx.Rngs(0))) > 1e-2


@pytest.mark.parametrize("name", FAMILIES)
def test_causal_outputs_ignore_the_future(name):
    testing.run_check(name, "causal")


@pytest.mark.parametrize("name", FAMILIES)
def test_gradients_are_finite_and_nonzero(name):
    testing.run_check(name, "gradients")


@pytest.mark.parametrize("name", FAMILIES)
def test_bfloat16_input(name):
    testing.run_check(name, "bfloat16")


@pytest.mark.parametrize("name", FAMILIES)
def test_dropout_is_active_only_when_not_deterministic(name):
    """Train mode with rate 0.5 against rate 0 from the same seed (``lra.testing.check_dropout``):
    the rate drops attention weights in training only, unless the family declares
    ``attention_dropout = False``."""
    testing.run_check(name, "dropout")


def test_the_suite_runs_every_shipped_check():
    """One definition: the checks ``lra.check_family`` ships are the ones this file runs."""
    source = Path(__file__).read_text()
    calls = re.findall(r"testing\.run_check\(name, (.*)\)", source)
    assert set(re.findall(r'"(\w+)"', " ".join(calls))) == set(testing.CHECKS)
