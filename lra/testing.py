"""The attention contract's checks, shipped with the package: what the project's own suite runs on
every family (tests/attention/test_contract.py calls these functions), for a family of yours.

From a shell (``python -m lra.check_family NAME``, or ``path/to/file.py:ClassName``) or from your
own pytest::

    import pytest
    from lra import testing

    @pytest.mark.parametrize("check", testing.CHECKS)
    def test_my_family(check):
        testing.run_check("myattn", check)     # raises ContractError, or skips where it does not apply

Each check builds the family at a small size (``B, L, D, H``: batch 2, length 64, width 32, 4 heads;
the family's ``contract_options`` added, attention/__init__.py) on random inputs whose second row is
padded (41 real tokens of 64), calls it jitted as the trainer does, and raises ``ContractError`` (an
``AssertionError``) with one line saying what failed:

* ``shape``: float[B, L, D] in ``x``'s dtype, finite, under ``jit``; ``mask=None`` equals an
  all-True mask.
* ``jit``: a call outside ``jit`` (a notebook's) gives the jitted output.
* ``buffers``: no two variables share one array (a training step donates the whole state).
* ``padding``: values at real positions do not change when only padded inputs change (no padding
  leak), and do change with real inputs; ``padding_causal``: the same in the causal mode. Both
  directions of a bidirectional family's scan are covered: the padded positions of the second row
  sit at its end, where a reverse scan starts.
* ``causal``: in the causal mode, no output depends on a later input.
* ``gradients``: finite, non-zero gradients for the parameters and the input, and none into padded
  inputs (no leak backwards).
* ``bfloat16``: a bfloat16 input gives a bfloat16 output within 10% (+0.05) of float32's scale
  (at 95% of positions for ``discrete_routing`` families).
* ``dropout``: ``deterministic=True`` ignores the rate; ``deterministic=False`` drops attention
  weights, a new mask each call, unless the family declares ``attention_dropout = False`` (then the
  rate changes nothing).

``padding_causal`` and ``causal`` apply to families with a causal mode only (``applies``).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from lra import attention

__all__ = ["CHECKS", "B", "ContractError", "D", "H", "L", "applies", "inputs", "make",
           "padding_leak", "run_check", "run_checks", "supports_causal"]

B, L, D, H = 2, 64, 32, 4


class ContractError(AssertionError):
    """A family breaks the contract; the message is one line."""


def _require(ok: bool, message: str) -> None:
    if not ok:
        raise ContractError(message)


def make(name: str, *, causal: bool = False, seed: int = 0, dropout: float = 0.0, **opts: Any):
    """Family ``name`` at the checks' size, with its ``contract_options`` (then ``opts``)."""
    opts = {**getattr(attention.family(name), "contract_options", {}), **opts}
    return attention.build(name, dim=D, num_heads=H, qkv_dim=D, causal=causal, max_len=L,
                           dropout=dropout, rngs=nnx.Rngs(seed), **opts)


def inputs(seed: int = 1, dtype=jnp.float32) -> tuple[jax.Array, jax.Array]:
    """x: float[B, L, D] drawn N(0, 1); mask: bool[B, L], row 0 all real, row 1 with L - 23 real."""
    x = jax.random.normal(jax.random.key(seed), (B, L, D), dtype=dtype)
    lengths = jnp.array([L, L - 23])
    return x, jnp.arange(L)[None, :] < lengths[:, None]


def supports_causal(name: str) -> bool:
    """Whether family ``name`` has a causal mode (it declares ``causal``)."""
    return "causal" in inspect.signature(attention.family(name).__init__).parameters


@functools.partial(nnx.jit, static_argnames=("deterministic",))
def _run(module, x, mask=None, deterministic=True):
    """The forward pass, jitted, as the trainer, the bench and lra.evaluate call a family (and one
    compile per program instead of one per operation: 5-10 times quicker than eager)."""
    return module(x, mask, deterministic=deterministic)


def _max(a) -> float:
    a = np.asarray(a)
    return float(a.max()) if a.size else 0.0


def _excess(a, b, rtol: float = 1e-7) -> float:
    """max |a - b| - rtol |b|: within ``atol`` where numpy's ``assert_allclose(a, b, rtol, atol)``
    passes."""
    a, b = np.asarray(a), np.asarray(b)
    return _max(np.abs(a - b) - rtol * np.abs(b))


def check_shape(name: str) -> None:
    module = make(name)
    x, mask = inputs()
    y = _run(module, x, mask)
    _require(y.shape == (B, L, D) and y.dtype == x.dtype,
             f"output {y.dtype}{list(y.shape)}, expected {x.dtype}{[B, L, D]}")
    _require(bool(jnp.all(jnp.isfinite(y))), "the output is not finite")
    diff = _excess(_run(module, x), _run(module, x, jnp.ones((B, L), bool)))
    _require(diff <= 1e-6, f"mask=None differs from an all-True mask by {diff:.3g}")


def check_jit(name: str) -> None:
    module = make(name)
    x, mask = inputs()
    for m in (mask, None):
        diff = _excess(module(x, m), _run(module, x, m), rtol=2e-5)
        _require(diff <= 2e-5, f"a call outside jit differs from the jitted one by {diff:.3g}"
                               f" (mask={'None' if m is None else 'given'})")


def check_buffers(name: str) -> None:
    leaves = jax.tree.leaves(nnx.state(make(name)))
    pointers = [leaf.unsafe_buffer_pointer() for leaf in leaves if isinstance(leaf, jax.Array)]
    _require(len(set(pointers)) == len(pointers),
             "two variables share one array (a training step donates the state: it would fail)")


def padding_leak(module) -> float:
    """Largest change at real positions when only padded positions of x change."""
    x, mask = inputs()
    noise = 100.0 * jax.random.normal(jax.random.key(7), x.shape)
    x_changed = jnp.where(mask[..., None], x, noise)
    diff = np.abs(np.asarray(_run(module, x, mask)) - np.asarray(_run(module, x_changed, mask)))
    return float(diff[np.asarray(mask)].max())


def check_padding(name: str, *, causal: bool = False) -> None:
    module = make(name, causal=causal)
    leak = padding_leak(module)
    _require(leak < 1e-4, f"padding leaks into real positions (max diff {leak:.3g})")
    x, mask = inputs()
    y = _run(module, x, mask)
    moved = _max(np.abs(np.asarray(_run(module, x.at[1, 3].add(5.0), mask) - y))[np.asarray(mask)])
    _require(moved > 1e-4, "real positions do not react to a change of a real input")


def check_causal(name: str) -> None:
    module = make(name, causal=True)
    x, _ = inputs()
    t = 40
    x_future = x.at[:, t + 1:].set(jax.random.normal(jax.random.key(3), (B, L - t - 1, D)))
    y, y2 = np.asarray(_run(module, x)), np.asarray(_run(module, x_future))
    past = _excess(y[:, : t + 1], y2[:, : t + 1])
    _require(past <= 1e-4, f"outputs up to position {t} depend on later inputs (max diff {past:.3g})")
    _require(_max(np.abs(y[:, t + 1:] - y2[:, t + 1:])) > 1e-4,
             "later outputs do not react to later inputs")


def check_gradients(name: str) -> None:
    module = make(name)
    x, mask = inputs()

    def loss(m, x):
        y = m(x, mask, deterministic=True)
        return jnp.sum(jnp.where(mask[..., None], y, 0.0) ** 2)

    grads_m, grads_x = nnx.jit(nnx.grad(loss, argnums=(0, 1)))(module, x)
    leaves = jax.tree.leaves(nnx.state(grads_m, nnx.Param))
    parameter_free = not attention.family(name).__dict__.get("has_parameters", True)
    _require(parameter_free or bool(leaves), "the family has no parameters to train")
    _require(all(bool(jnp.all(jnp.isfinite(leaf))) for leaf in leaves),
             "a parameter's gradient is not finite")
    _require(bool(jnp.all(jnp.isfinite(grads_x))), "the input's gradient is not finite")
    _require(float(jnp.abs(grads_x).max()) > 0, "the input's gradient is zero")
    into_pads = float(jnp.abs(jnp.where(mask[..., None], 0.0, grads_x)).max())
    _require(into_pads < 1e-6, f"gradient flows into padded inputs (max {into_pads:.3g})")


def check_bfloat16(name: str) -> None:
    module = make(name)
    x, mask = inputs()
    y32 = _run(module, x, mask)
    y16 = _run(module, x.astype(jnp.bfloat16), mask)
    _require(y16.dtype == jnp.bfloat16, f"a bfloat16 input gives a {y16.dtype} output")
    _require(bool(jnp.all(jnp.isfinite(y16.astype(jnp.float32)))), "the bfloat16 output is not finite")
    real = np.asarray(mask)
    err = np.abs(np.asarray(y16.astype(jnp.float32)) - np.asarray(y32))[real].max(axis=-1)
    scale = np.abs(np.asarray(y32))[real].max()
    close = err < 0.1 * scale + 0.05
    if getattr(attention.family(name), "discrete_routing", False):
        # Hash/sort routing is discontinuous: a bucket that flips under bf16 rounding changes that
        # token's output by O(1). Nearly all positions must agree instead of all.
        _require(close.mean() >= 0.95, f"bfloat16 agrees with float32 at only {close.mean():.0%} "
                                       "of positions")
    else:
        _require(bool(close.all()), f"bfloat16 deviates from float32 by {err.max():.3g} "
                                    f"(scale {scale:.3g})")


def check_dropout(name: str) -> None:
    """Train mode with rate 0.5 against rate 0 from the same seed: the only difference is the rate,
    so a redraw of random features or buckets is the same in both and cannot hide dropout."""
    x, mask = inputs()
    dropped, plain = make(name, dropout=0.5), make(name, dropout=0.0)
    a = np.asarray(_run(dropped, x, mask, deterministic=True))
    again = _max(np.abs(a - np.asarray(_run(dropped, x, mask, deterministic=True))))
    _require(again == 0.0, f"deterministic=True gives different outputs twice ({again:.3g})")
    vs_plain = _excess(a, _run(plain, x, mask, deterministic=True))
    _require(vs_plain <= 1e-6, f"deterministic=True depends on the dropout rate ({vs_plain:.3g})")
    real = np.asarray(mask)
    train_dropped = np.asarray(_run(dropped, x, mask, deterministic=False))
    change = float(np.abs(train_dropped - np.asarray(_run(plain, x, mask, deterministic=False)))[real].max())
    if getattr(attention.family(name), "attention_dropout", True):
        # Ignoring the rate reproduces rate 0 to the last bit (same seed, same code path) or to
        # float noise; Mega's near-uniform attention at initialisation moves by ~2e-4.
        _require(change > 1e-5, f"the attention dropout is ignored in training (rate 0.5 changes "
                                f"real outputs by {change:.3g}); if it has none, declare "
                                "attention_dropout = False")
        fresh = float(np.abs(np.asarray(_run(dropped, x, mask, deterministic=False))
                             - train_dropped)[real].max())
        _require(fresh > 1e-5, "the dropout mask is the same at every call")
    else:
        _require(change == 0.0, f"it declares attention_dropout = False but rate 0.5 changes its "
                                f"training output by {change:.3g}")


# The checks, in the order they run: {name: the function of a family's name}.
CHECKS: dict[str, Callable[[str], None]] = {
    "shape": check_shape,
    "jit": check_jit,
    "buffers": check_buffers,
    "padding": check_padding,
    "padding_causal": functools.partial(check_padding, causal=True),
    "causal": check_causal,
    "gradients": check_gradients,
    "bfloat16": check_bfloat16,
    "dropout": check_dropout,
}
CAUSAL_ONLY = ("padding_causal", "causal")


def applies(name: str, check: str) -> bool:
    """Whether ``check`` applies to family ``name`` (the causal ones need a causal mode)."""
    return check not in CAUSAL_ONLY or supports_causal(name)


def run_check(name: str, check: str) -> None:
    """Run one check of ``CHECKS`` on family ``name``: raises ``ContractError`` where it fails;
    under pytest, skips a check that does not apply."""
    if not applies(name, check):
        import pytest

        pytest.skip(f"{name} has no causal mode")
    CHECKS[check](name)


def run_checks(name: str, checks: list[str] | None = None) -> dict[str, str | None]:
    """{check: None where it passed, else its one-line failure} for every check of ``checks``
    (default: all) that applies to family ``name``. An exception other than ``ContractError`` is
    a failure too, named by its type."""
    out: dict[str, str | None] = {}
    for check in checks or list(CHECKS):
        if not applies(name, check):
            continue
        try:
            CHECKS[check](name)
        except ContractError as err:
            out[check] = " ".join(str(err).split())
        except Exception as err:  # the family raised: that is its failure of this check
            out[check] = " ".join(f"{type(err).__name__}: {err}".split())[:500]
        else:
            out[check] = None
    return out
