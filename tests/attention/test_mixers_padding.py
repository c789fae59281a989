"""The 2023-25 mixers (mamba, mamba2, gla, hgrn2, retnet, gated_deltanet, deltanet, mlstm) under
large non-zero pad activations: each padded row's real outputs equal those of the row alone at its
true length, in both directions, while the naive form (the pads read as real tokens: a reverse scan
started at the end of the padded sequence, pads written into the state) does not."""

import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from helpers import FAMILY_OF_VARIANT, padded_inputs

from lra import attention

B, L, D, H = 2, 12, 8, 2
LENGTHS = np.array([L - 7, L - 3])
CASES = {
    "mamba": {"state_size": 4, "chunk_size": 4},
    "mamba2": {"state_size": 4, "chunk_size": 5},
    "gla": {"chunk_size": 4},
    "hgrn2": {"variant": "hgrn2", "lower_bound": 0.3, "chunk_size": 4},
    "retnet": {"chunk_size": 5},
    "gated_deltanet": {"chunk_size": 4},
    "deltanet": {"gate": False, "chunk_size": 4},
    "mlstm": {"chunk_size": 5},
}


def make(case, causal=False):
    name = FAMILY_OF_VARIANT.get(case, case)
    return attention.build(name, dim=D, num_heads=H, qkv_dim=D, causal=causal, rngs=nnx.Rngs(0),
                           **CASES[case])


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.slow
def test_large_pads_change_nothing_and_a_naive_reverse_reads_them(case):
    """Bidirectional (the causal direction alone cannot read pads: they follow every real token;
    tests/attention/test_contract.py checks causal padding for every family)."""
    module = make(case)
    x, mask = padded_inputs(LENGTHS, L, D, seed=1, pad_scale=100.0)
    run = nnx.jit(lambda m, x, mask: m(x, mask))
    got = np.asarray(run(module, jnp.asarray(x), jnp.asarray(mask)))
    for b, n in enumerate(LENGTHS):
        alone = np.asarray(run(module, jnp.asarray(x[b:b + 1, :n]), None))[0]
        np.testing.assert_allclose(got[b, :n], alone, atol=1e-4, rtol=1e-4)
    naive = np.asarray(run(module, jnp.asarray(x), None))
    diff = np.abs(naive - got)[mask].max()
    assert diff > 1e-2, f"{case}: the naive reverse over the pads gives the same outputs"


@pytest.mark.parametrize("case", list(CASES))
def test_pad_gates_alone_make_a_whole_sequence_reverse_exact(case, monkeypatch):
    """The second defence: with the reverse run over the whole padded sequence (pads first), the
    pads' zero writes (k, Delta, beta = 0, the input gate's -1e4), unit decays and zeroed short convs
    still keep every real output equal to that of the row alone."""
    import lra.attention._mixers as mixers

    monkeypatch.setattr(mixers, "flip_within_length", lambda a, lengths: jnp.flip(a, axis=1))
    module = make(case)
    x, mask = padded_inputs(LENGTHS, L, D, seed=1, pad_scale=100.0)
    run = nnx.jit(lambda m, x, mask: m(x, mask))
    got = np.asarray(run(module, jnp.asarray(x), jnp.asarray(mask)))
    for b, n in enumerate(LENGTHS):
        alone = np.asarray(run(module, jnp.asarray(x[b:b + 1, :n]), None))[0]
        np.testing.assert_allclose(got[b, :n], alone, atol=1e-4, rtol=1e-4)
