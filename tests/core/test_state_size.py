"""lra.state_size: every family declares its state-size formula in its own file; the formulas give
the sizes worked out by hand from each family's math; bytes over all layers from a resolved config or
a result file's; clear errors; no JAX.

The formulas are checked against the state the code carries in tests/attention/test_state_size.py;
the families here by hand are those without a causal form, and reformer (data-dependent buckets).
"""

import subprocess
import sys

import pytest

from lra import attention, declared, state_size
from lra import config as lra_config
from lra.state_size import StateSizeError, state_bytes, state_numbers


def _in_tree():
    return [n for n in attention.available() if attention.family(n).__module__.startswith("lra.attention.")]


CONFIG = {"model": {"emb_dim": 64, "num_heads": 4, "qkv_dim": 64, "num_layers": 2}, "attn": {}}


def test_every_family_declares_a_formula_that_evaluates():
    missing = [n for n in _in_tree()
               if not isinstance(declared.attribute("attention", n, state_size.ATTRIBUTE), str)]
    where = 'attention/README.md "The state size"'
    assert not missing, f"families without a recurrent_state formula ({where}): {', '.join(missing)}"
    for name in _in_tree():
        assert state_numbers(name, CONFIG, 128) > 0, name
        assert getattr(attention.family(name), state_size.ATTRIBUTE) == state_size.formula(name)


# At emb_dim = qkv_dim = 64, 4 heads (head width 16), L = 256, each family's default options, the
# numbers one layer holds, worked out from the family's math (its docstring) rather than its formula.
BY_HAND = {
    "softmax": 2 * 256 * 64,                    # keys and values of all 256 positions
    "local": 2 * 64 * 50,                       # the current block of 50 (no global token)
    "longformer": 2 * 64 * 256,                 # window 512 > L: every position
    "sparse": 2 * 64 * (50 + 10 * 5),           # block 50 + 10 summary columns of 5 earlier blocks
    "synthesizer": 2 * 256 * 64,                # random + dot product: keys and values
    "reformer": 2 * 64 * 256,                   # 1 round x 10 buckets x chunk 64 = 640 > L
    "linear": 4 * (16 * 16 + 16),               # per head S and z
    "performer": 4 * (256 * 16 + 256 + 1),      # 256 features: S, z, running max
    "cosformer": 4 * (32 * 16 + 32),            # sin/cos halves: S [2d, d], z [2d]
    "s4d": 64 * 32 * 2,                         # 32 complex modes per channel
    "s5": 32 * 2,                               # 64 states, conjugate-symmetric: 32 complex
    "lru": 64 * 2,                              # 64 complex states
    "mamba": 128 * 16 + 3 * 128,                # E = 128 channels x 16 states, conv of width 4
    "mamba2": 128 * 64 + 3 * (128 + 2 * 64),    # N E, conv over x, B, C
    "gla": 4 * (8 * 16),                        # K = 32 / 4 = 8, V = 16 per head
    "retnet": 4 * (16 * 32),                    # K = 64 / 4, V = 128 / 4
    "gated_deltanet": 4 * 16 * 16 + 3 * 3 * 64,  # S per head, three convs of width 4
    "mlstm": 4 * (16 * 16 + 16 + 1) + 3 * 64,   # C, n, m per head, conv of width 4 over D
    "mega": 16 * 64 + 256 * (64 + 128),         # EMA, full attention: z = 64 keys, 2D values
    "bigbird": 2 * 64 * 256,                    # (5 + 3) blocks of 64 = 512 > L: all 256
    "fnet": 256 * 64,                           # the whole input
    "linformer": 2 * 16 * 64,                   # k = 16 projected keys and values
    "luna": 16 * 64,                            # packed context, l = 16
    "nystromformer": 64 * (2 * 64 + 35),        # 64 landmark keys and values, conv of 35
    "sinkhorn": 4 * 64 * 50,                    # own and sorted block of 50, keys and values
}


@pytest.mark.parametrize("name", sorted(BY_HAND))
def test_each_formula_gives_the_size_worked_out_by_hand(name):
    assert state_numbers(name, {**CONFIG, "attn": {}}, 256) == BY_HAND[name]


def test_by_hand_covers_every_family():
    assert set(BY_HAND) == set(_in_tree())


def test_options_and_length_enter_the_formulas():
    def at(name, length=256, **attn):
        return state_numbers(name, {**CONFIG, "attn": attn}, length)

    assert at("reformer", n_hashes=2, n_buckets=4, chunk_size=16) == 2 * 64 * 128
    assert at("bigbird", block_size=16, num_random_blocks=2) == 2 * 64 * 7 * 16
    assert at("mega", chunk_size=32) == 16 * 64 + 32 * (64 + 128)
    assert at("mega", chunk_size=32, hidden_dim=48) == 16 * 64 + 32 * (64 + 48)
    assert at("sparse", pattern="strided") == 2 * 256 * 64
    assert at("sparse", block_size=16, num_summary=4, global_tokens=1, length=257) == 2 * 64 * (
        1 + 16 + 4 * 15)
    assert at("synthesizer", mix_dot_product=False) == 256 * 64
    assert at("gla", variant="hgrn2") == 4 * 16 * 16
    assert at("s5", conj_sym=False, blocks=1) == 64 * 2
    assert at("softmax", length=1000) == 2 * 1000 * 64 and at("linear", length=1000) == at("linear")


def test_bytes_over_all_layers_from_a_config_or_a_result_files_config():
    cfg = lra_config.load("listops", "s4d", preset="small")
    per_layer = cfg.model.emb_dim * cfg.attn.get("state_size", attention.options("s4d")["state_size"])
    assert state_bytes("s4d", cfg, 100) == per_layer * cfg.model.num_layers * 4
    assert state_bytes("s4d", cfg.to_dict(), 100, dtype_bytes=2) == per_layer * cfg.model.num_layers * 2
    smaller = lra_config.load("listops", "s4d", preset="small", overrides={"attn.state_size": 16})
    assert state_bytes("s4d", smaller, 100) == state_bytes("s4d", cfg, 100) // 4


def test_errors_name_what_is_wrong():
    with pytest.raises(StateSizeError, match=r"unknown attention family 'nope'.*softmax"):
        state_numbers("nope", CONFIG, 8)
    with pytest.raises(StateSizeError, match="model"):
        state_numbers("softmax", {"attn": {}}, 8)
    with pytest.raises(StateSizeError, match=">= 1"):
        state_bytes("softmax", CONFIG, 0)


@pytest.mark.parametrize("text, message", [
    ("2 * L * width", "unknown name 'width' .*qkv_dim"),
    ("__import__('os').getcwd()", "outside the formula grammar"),
    ("L ** 2", "outside the formula grammar"),
    ("L / 3", "outside the formula grammar"),
    ("L - 2 * L", "not a whole number >= 0"),
    ("'cache'", "not a whole number >= 0"),
    ("2 *", "not an expression"),
])
def test_a_bad_formula_is_a_one_line_error(text, message, monkeypatch):
    monkeypatch.setattr(state_size, "formula", lambda name: text)
    with pytest.raises(StateSizeError, match=message):
        state_numbers("softmax", CONFIG, 8)


def test_a_family_without_a_formula_is_named(monkeypatch):
    facts = {**declared.declared("attention"), "mine": {"display_name": "Mine"}}
    monkeypatch.setattr(declared, "declared", lambda package: facts)
    with pytest.raises(StateSizeError, match="'mine' declares no recurrent_state"):
        state_numbers("mine", CONFIG, 8)


def test_sizes_are_computed_without_importing_the_families_or_jax():
    code = ("import sys; from lra import state_size; "
            "cfg = {'model': {'emb_dim': 8, 'num_heads': 2, 'qkv_dim': 8, 'num_layers': 3}}; "
            "assert state_size.state_bytes('softmax', cfg, 10) == 2 * 10 * 8 * 3 * 4; "
            "assert state_size.state_bytes('mamba', cfg, 10) == 16 * 19 * 3 * 4; "
            "bad = sorted(m for m in sys.modules if m == 'jax' or m.startswith('lra.attention.')); "
            "assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True)
