"""mLSTM (attention/mlstm.py): the layer on the stabilised chunked kernel against the same layer on
xLSTM's step-by-step stabilised cell, the gate initialisation, and huge input gates."""

import jax
import jax.numpy as jnp
import lra.attention.mlstm as mlstm_module
import numpy as np
import pytest
from flax import nnx
from helpers import padded_inputs
from lra.attention.mlstm import mlstm_cell
from recurrences import mlstm_recurrence, outputs_with

from lra import attention

B, L, D, H = 2, 11, 8, 2


@pytest.mark.parametrize("forget_gate", ["sigmoid", "exp"])
@pytest.mark.parametrize("causal", [False, True])
def test_layer_equals_the_step_by_step_cell(forget_gate, causal, monkeypatch):
    module = attention.build("mlstm", dim=D, num_heads=H, qkv_dim=D, causal=causal,
                             rngs=nnx.Rngs(0), forget_gate=forget_gate, chunk_size=4)
    # gates away from their initial values, so that the stabiliser and normaliser both matter
    module.i_gate.kernel[...] = jax.random.normal(jax.random.key(3), (D, H))
    module.f_gate.kernel[...] = 0.5 * jax.random.normal(jax.random.key(4), (D, H))
    if forget_gate == "exp":
        module.f_gate.bias[...] = -jnp.ones((H,))
    x, mask = padded_inputs([L, L - 4], L, D, seed=2)
    got, want = outputs_with(monkeypatch, mlstm_module, "mlstm_cell", mlstm_recurrence,
                             module, jnp.asarray(x), jnp.asarray(mask))
    np.testing.assert_allclose(got[mask], want[mask], atol=1e-4, rtol=1e-4)


@pytest.mark.slow
def test_huge_input_gates_stay_finite_and_match_the_cell():
    ks = jax.random.split(jax.random.key(0), 5)
    q, k, v = (jax.random.normal(kk, (1, 9, 1, 4)) for kk in ks[:3])
    log_i = 80.0 + 20.0 * jax.random.normal(ks[3], (1, 9, 1))   # exp(i) overflows float32
    log_f = jax.nn.log_sigmoid(jax.random.normal(ks[4], (1, 9, 1)))
    got = mlstm_cell(q, k, v, log_i, log_f, chunk_size=4)
    assert bool(jnp.all(jnp.isfinite(got)))
    np.testing.assert_allclose(np.asarray(got), np.asarray(mlstm_recurrence(q, k, v, log_i, log_f)),
                               atol=1e-4, rtol=1e-4)


def test_gate_initialisation_follows_xlstm():
    module = attention.build("mlstm", dim=16, num_heads=4, rngs=nnx.Rngs(0))
    np.testing.assert_allclose(np.asarray(module.f_gate.bias[...]), [3.0, 4.0, 5.0, 6.0], rtol=1e-6)
    for gate in (module.i_gate, module.f_gate):
        np.testing.assert_array_equal(np.asarray(gate.kernel[...]), 0.0)
    big = attention.build("mlstm", dim=8, num_heads=1024, qkv_dim=1024, rngs=nnx.Rngs(0))
    assert np.asarray(big.i_gate.bias[...]).std() == pytest.approx(0.1, rel=0.1)
