"""Sub-quadratic families must have sub-quadratic memory (XLA's compiled temp bytes, fwd + bwd).

conftest.py disables XLA:CPU's YNN fusions, whose scratch memory the analysis would not count.
"""

import jax
import jax.numpy as jnp
import pytest
from flax import nnx

import attention

SHORT, LONG = 1024, 4096  # 4x the length: quadratic memory grows 16x, linear 4x


def train_temp_bytes(name: str, length: int, **options) -> int:
    module = attention.build(name, dim=64, num_heads=2, qkv_dim=64, max_len=length, dropout=0.0,
                             rngs=nnx.Rngs(0), **options)
    graph, params, rest = nnx.split(module, nnx.Param, ...)

    def loss(params, x, mask):
        m = nnx.merge(graph, params, rest)
        return jnp.sum(m(x, mask) ** 2)

    x = jax.ShapeDtypeStruct((1, length, 64), jnp.float32)
    mask = jax.ShapeDtypeStruct((1, length), jnp.bool_)
    # gradients w.r.t. the input too: a parameter-free family (fnet) must not compile to nothing
    compiled = jax.jit(jax.grad(loss, argnums=(0, 1))).lower(params, x, mask).compile()
    return compiled.memory_analysis().temp_size_in_bytes


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
