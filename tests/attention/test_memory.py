"""Sub-quadratic families must have sub-quadratic memory (XLA's compiled temp bytes, fwd + bwd).

conftest.py disables XLA:CPU's YNN fusions, whose scratch memory the analysis would not count.
"""

import pytest
from helpers import LONG, SHORT, train_temp_bytes

from lra import attention


@pytest.mark.parametrize(
    "name", [n for n in attention.available() if attention.family(n).subquadratic])
def test_subquadratic_memory(name):
    small, big = train_temp_bytes(name, SHORT), train_temp_bytes(name, LONG)
    assert big / small < 8, f"{name}: temp bytes {small} -> {big} ({big / small:.1f}x for 4x length)"


def test_the_check_detects_quadratic_memory():
    small = train_temp_bytes("softmax", SHORT, impl="dense")
    big = train_temp_bytes("softmax", LONG, impl="dense")
    assert big / small > 12


def test_softmax_default_is_blocked_with_linear_memory():
    """The default (auto) softmax is the blocked path at these lengths: memory slope ~1, not 2."""
    small, big = train_temp_bytes("softmax", SHORT), train_temp_bytes("softmax", LONG)
    assert big / small < 5, f"temp bytes {small} -> {big} ({big / small:.1f}x for 4x length)"


def test_softmax_query_chunks_make_memory_linear():
    small = train_temp_bytes("softmax", SHORT, query_chunk=256)
    big = train_temp_bytes("softmax", LONG, query_chunk=256)
    assert big / small < 8, f"temp bytes {small} -> {big} ({big / small:.1f}x for 4x length)"
    assert big < train_temp_bytes("softmax", LONG, impl="dense") / 4  # far below the dense form
