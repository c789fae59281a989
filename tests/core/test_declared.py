"""lra.declared: what the families declare in their own files, read as text, equals what the registry
imports; the facts the commands read from it name real options and rows."""

import inspect
import subprocess
import sys

from lra import attention, declared
from lra.leaderboard import published


def _in_tree():
    return [n for n in attention.available() if attention.family(n).__module__.startswith("lra.attention.")]


def test_every_literal_read_from_a_file_is_the_imported_value():
    facts = declared.declared("attention")
    assert set(facts) == set(attention.available())  # installed plugins' included
    assert declared.ENTRY_POINT_GROUPS["attention"] == attention.ENTRY_POINT_GROUP
    for name, attrs in facts.items():
        cls = attention.family(name)
        for attr, value in attrs.items():
            assert getattr(cls, attr) == value, (name, attr)
    assert declared.attribute("attention", "softmax", "display_name") == "Transformer"
    assert declared.attribute("attention", "no_such_family", "peer_options", {}) == {}


def test_init_defaults_read_from_a_file_are_the_imported_options():
    """Every literal default of a family's ``__init__`` equals the imported one; the few left out
    are module constants or expressions (``EPS``, ``2 * math.pi``)."""
    left_out = {}
    for name in _in_tree():
        read, options = declared.init_options("attention", name), attention.options(name)
        assert {k: read[k] for k in options if k in read} == {k: options[k] for k in read if k in options}
        left_out.update({f"{name}.{k}": v for k, v in options.items() if k not in read})
    assert set(left_out) == {"cosformer.eps", "linear.eps", "lru.max_phase", "performer.stabilizer",
                             "softmax.block_size"}
    assert declared.init_options("attention", "mamba")["state_size"] == 16
    assert declared.init_options("attention", "no_such_family") == {}


def test_declared_family_facts_name_real_options_and_rows():
    """``length_options`` and ``peer_options`` name options the family has; a ``modern_row`` is a
    published modern row and comes with its departure; ``peer_matmuls`` comes with the options it
    describes, and ``peer_kernel`` with the pure function ``<name>_kernel``."""
    for name in _in_tree():
        cls, options = attention.family(name), attention.options(name)
        assert set(getattr(cls, "length_options", ())) <= set(options), name
        assert all(isinstance(options[k], int) for k in getattr(cls, "length_options", ())), name
        assert set(getattr(cls, "peer_options", {})) <= set(options), name
        if hasattr(cls, "peer_matmuls"):
            assert hasattr(cls, "peer_options"), name
        if hasattr(cls, "peer_kernel"):
            assert callable(getattr(inspect.getmodule(cls), f"{name}_kernel")), name
        if hasattr(cls, "modern_row"):
            assert cls.modern_row in published.MODERN_PUBLISHED and cls.modern_departure, name
        if hasattr(cls, "memory_levers"):
            assert all(lever.startswith("--set ") for lever in cls.memory_levers({})), name


def test_facts_are_read_without_importing_the_families_or_jax():
    code = ("import sys; from lra import declared; "
            "assert declared.attribute('attention', 'local', 'peer_mechanism') == 'local/block'; "
            "bad = sorted(m for m in sys.modules if m == 'jax' or m.startswith('lra.attention.')); "
            "assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True)
