"""No family's training step calls the host's LAPACK.

On CPU, ``lax.linalg`` and ``jnp.linalg`` decompositions (triangular solves, QR, eigh, ...) lower to
custom calls into the host LAPACK (OpenBLAS through SciPy). Inside a training step that thread
pool deadlocked gated_deltanet's step once orbax's checkpoint threads were running: every thread
waited on a futex and the run never finished (``python -m lra.run --task listops --attn
gated_deltanet --preset tiny`` before its chunked solve became matmuls; see
attention/_chunked.py ``unit_lower_inverse``). The step of every family, forward and backward in
training mode (where Performer redraws its features), is lowered here and searched for such calls.
This test failed on gated_deltanet (``lapack_strsm``) and performer (``lapack_sgeqrf``) before.
Set-up code that runs once, outside the step (S5's HiPPO eigendecomposition, in NumPy), is not
concerned.
"""

from __future__ import annotations

import re

import jax
import jax.numpy as jnp
import pytest
from flax import nnx
from helpers import FAMILIES, inputs, make, supports_causal

HOST_CALL = re.compile(r"custom_call\s*@(\w*(lapack|blas)\w*)|custom_call_target\s*=\s*\"(\w*lapack\w*)",
                       re.I)


def host_calls(name: str, causal: bool) -> set[str]:
    module = make(name, causal=causal)
    graphdef, params, rest = nnx.split(module, nnx.Param, ...)
    x, mask = inputs()

    def step(params, rest, x, mask):  # as lra.train's step: merged at the jit level, then grad
        m = nnx.merge(graphdef, params, rest)
        return nnx.grad(lambda m: m(x, mask, deterministic=False).astype(jnp.float32).sum())(m)

    text = jax.jit(step).lower(params, rest, x, mask).as_text()
    return {m.group(1) or m.group(3) for m in HOST_CALL.finditer(text)}


@pytest.mark.parametrize("name", FAMILIES)
def test_the_training_step_makes_no_host_lapack_call(name):
    calls = host_calls(name, causal=False)
    if supports_causal(name):
        calls |= host_calls(name, causal=True)
    assert not calls, f"{name}'s training step calls the host LAPACK: {sorted(calls)}"
