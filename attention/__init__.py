"""Attention families behind one contract, and the registry that finds them.

The contract
------------
A family is one ``flax.nnx.Module`` class in its own file in this package, registered by name::

    from lra.attention import register

    @register("myattn")
    class MyAttention(nnx.Module):
        def __init__(self, dim, num_heads, *, qkv_dim=None, causal=False, max_len=None,
                     dropout=0.0, rngs, my_option=3): ...
        def __call__(self, x, mask=None, *, deterministic=True): ...

* ``x``: float[B, L, D] (float32 or bfloat16). ``mask``: bool[B, L], True = real token; ``None`` means
  every position is real.
* Returns float[B, L, D] in ``x.dtype``. Values at padded positions are unspecified; values at real
  positions must not depend on anything at padded positions (no padding leak).
* ``deterministic=False`` enables dropout (rng stream ``dropout``) and any random-feature redraw.
* Options are keyword arguments with defaults; ``check_options`` validates user options against them.
  A family without a causal mode does not declare ``causal`` (``build(..., causal=True)`` then fails).
* What a family may declare (class attributes unless marked; the tests and the config read them):

  ====================== ======== ===============================================================
  name                   needed   meaning
  ====================== ======== ===============================================================
  ``display_name``       required the name its paper uses (``"Transformer"``, ``"cosFormer"``), for
                                  figures, tables and pages; a plain string literal in the class
                                  body, since the leaderboard reads it from the file without
                                  importing JAX (lra/declared.py)
  ``kind``               required ``"2020 attention"``, ``"state space"`` or ``"2023-25 mixer"``
                                  (the groups of the README table and the leaderboard's pages);
                                  a string literal, like ``display_name``
  ``paper``              required citation (authors, title, venue, arXiv id) for the README table
  ``complexity``         required e.g. ``"O(L d^2)"``, for the README table
  ``subquadratic``       required True if memory grows slower than L^2 (tests/attention/test_memory.py)
  ``recurrent_state``    required the state one layer holds for one sequence at length L when it
                                  generates one token at a time, as a string formula of ``L``, the
                                  model's sizes and the family's options (``"2 * L * qkv_dim"``),
                                  with a docstring line under it saying what it counts; read
                                  without JAX by lra/state_size.py (attention/README.md "The
                                  state size")
  ``parameter_note``     optional why the parameter count differs from softmax attention's at the
                                  same encoder size; without one, tests/attention/test_comparability.py holds
                                  the family within 10% of softmax's count on every task
  ``contract_options``   optional small-size options (e.g. ``{"block_size": 8}``) under which the
                                  shared contract tests, run at L=64, exercise the real structure
  ``discrete_routing``   optional True for routing that is discontinuous in the input (LSH buckets):
                                  the bf16 contract test then asks agreement at 95% of positions
  ``attention_dropout``  optional False: the family drops no attention weights (it has none, or its
                                  paper drops none) and ignores ``dropout``; every other family must
                                  drop them when ``deterministic=False`` (tested both ways)
  ``global_tokens``      option   a constructor option: the first N positions attend to and are
                                  attended by all. With CLS pooling and no value set anywhere, the
                                  config sets it to 1 (lra/config.py), so the pooled vector sees the
                                  whole input through windowed or block patterns
  ``ssm_param(value)``   helper   (attention/_ssm.py) wraps a state-space parameter as an
                                  ``nnx.Param`` tagged for its own optimiser group (``train.ssm_lr``:
                                  Adam at that rate, no weight decay; lra/optim.py);
                                  ``step_size=True`` marks the log step (``train.dt_group``)
  ``length_options``     optional the options that are lengths in positions (``("block_size",)``):
                                  tests/attention/test_comparability.py scales them with the
                                  sequence, so a shortened model keeps the paper config's structure
  ``memory_levers(o)``   optional staticmethod: ``--set`` advice that lra/run.py prints first when a
                                  run with options ``o`` runs out of memory (softmax: its blocked
                                  path)
  ``peer_options``       optional the options under which lra/bench/peers_harness.py times the
                                  module next to third-party code of its mechanism; declaring it
                                  (``{}`` included) adds the case ``ours_<name>_module``
  ``peer_mechanism``     optional the peers' name of its mechanism where it is not the family's
                                  (``"nystrom"``; lra/leaderboard/peers.py pairs them by it)
  ``peer_kernel``        optional the mechanism of its pure ``<name>_kernel``, then also timed as
                                  a core case ``ours_<name>_kernel``
  ``peer_matmuls(...)``  optional staticmethod ``(B, H, L, D)``: (what, count, (batch, M, K, N)) of
                                  the matmuls that dominate the module under ``peer_options``,
                                  projections aside (lra/bench/peers.py ``family_matmuls``)
  ``lra_departure``      optional where its LRA-protocol rows depart from LRA's own run
                                  (``python -m lra.reproduce``)
  ``modern_row``         optional the published modern row its recipe reproduces (``"S5"``), with
                                  ``modern_departure`` (where the recipe runs differently here) and
                                  optionally ``modern_task_departures`` ({task: what differs})
  ====================== ======== ===============================================================

  ``display_name``, ``kind``, ``recurrent_state``, ``length_options``, the ``peer_`` values but
  ``peer_matmuls``, ``lra_departure`` and the ``modern_`` values must be literals in the class body
  (or a base class of the same file): code that runs without JAX reads them from the file
  (lra/declared.py).

* Train state. Only ``nnx.Param`` (trained) and ``nnx.BatchStat`` (running statistics, returned by
  the step) are train state: checkpointed and restored. Every other variable a family holds (fixed
  random features, random block patterns, positional tables, rng streams) is rebuilt from the config
  and seed whenever the model is built, is read-only inside the jitted step (a value a call writes
  there is discarded when the step returns) and is never checkpointed. So such a variable must be a
  deterministic function of the config and seed, and a per-call random draw must come from an rng
  stream, not from state carried between steps.
* Families whose core is a function of per-head q, k, v expose that pure function too
  (e.g. ``softmax_kernel(q, k, v, mask=None, *, causal=False)``), with q, k, v float[B, L, H, Dh]
  (the layout of ``jax.nn.dot_product_attention``) and ``mask`` bool[B, L] over keys.

Discovery: every module in this package whose name does not start with ``_`` is imported the first
time ``available()`` or ``build()`` is called, so dropping ``attention/myattn.py`` with
``@register("myattn")`` is all it takes. Families outside this tree plug in through the entry-point
group ``lra.attention`` (the entry point's value is a module or a ``module:Class`` to import):
``plugins()`` lists them with their distributions, and what they declare is read from their
module's file like a file of this tree's (lra/declared.py). A single file needs neither:
``load_file("path/to/file.py:ClassName")`` (what ``--attn path/to/file.py:ClassName`` calls)
registers its class as ``<name>@<8 hex digits of the file's SHA-256>``, ``<name>`` being its
``@register`` name, else the file's stem (attention/_file.py).

Building blocks
---------------
A family outside this tree builds from these public names (imported on first use, so that
``import lra.attention`` stays free of JAX): ``HeadProjections`` (q, k, v ``[B, L, H, Dh]`` from
``x`` and the output projection back, ``.qkv(x)`` and ``.merge(o)``), ``Dense`` (a bias-free
Xavier-initialised linear map), ``key_mask(mask, x)`` (the contract's mask as a concrete
bool[B, L]), ``dropout_probs(probs, rate, rng)`` (attention-weight dropout), ``MASKED_LOGIT`` (the
logit of a disallowed pair) and ``ssm_param(value)`` (a state-space parameter in its own optimiser
group). ``python -m lra.check_family NAME`` (or ``lra.testing`` from a pytest) checks a family
against this contract.
"""

from __future__ import annotations

import difflib
import inspect
from collections.abc import Callable
from typing import Any

from lra.registry import Registry, UnknownNameError

__all__ = ["MASKED_LOGIT", "Dense", "HeadProjections", "UnknownAttentionError", "available",
           "build", "builtin", "dropout_probs", "family", "has_causal_mode", "key_mask",
           "load_file", "options", "plugins", "register", "ssm_param"]

# The building blocks (module docstring), each from the private module that defines it.
_PUBLIC = {"HeadProjections": "_projections", "Dense": "_projections", "key_mask": "_projections",
           "dropout_probs": "_projections", "MASKED_LOGIT": "_projections", "ssm_param": "_ssm"}


def __getattr__(name: str) -> Any:
    if name in _PUBLIC:
        import importlib

        return getattr(importlib.import_module(f"{__name__}.{_PUBLIC[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


ENTRY_POINT_GROUP = "lra.attention"

# The arguments every family receives from the encoder; anything else is a family option.
# ``layers_held``: how many layers' activations the backward pass holds at once (the encoder's depth,
# or 1 under ``model.remat``), for a family that sizes its memory by it (softmax on GPU).
COMMON_ARGS = ("dim", "num_heads", "qkv_dim", "causal", "max_len", "dropout", "rngs", "layers_held")

class UnknownAttentionError(UnknownNameError):
    """Raised for a name that no family registered; the message lists the valid names."""


_REGISTRY = Registry("attention", __name__, __path__, entry_point_group=ENTRY_POINT_GROUP,
                     error=UnknownAttentionError)


# True while ``load_file`` imports a file: its ``@register("name")`` then names the class only
# (the file's family is registered under ``name@<hash>``), so that a copy of a family's file can
# never replace the family of this tree that it was copied from.
_importing_file = [False]


def register(name: str) -> Callable[[type], type]:
    """Class decorator: make ``cls`` available as attention family ``name``."""

    def wrap(cls: type) -> type:
        if not _importing_file[0]:
            _REGISTRY.register(name)(cls)
        cls.family_name = name
        return cls

    return wrap


def load_file(spec: str) -> str:
    """Register the class of ``path/to/file.py:ClassName`` (imported once per process) and return
    its registered name, ``<name>@<hash>`` (module docstring). Raises ``ValueError`` with one line
    for a missing file, a missing class, a class that is not a family or a file that fails."""
    from lra.attention import _file

    available()  # discover this tree and the plugins first: they register under their own names
    _importing_file[0] = True
    try:
        return _file.load(spec, _REGISTRY.register)
    finally:
        _importing_file[0] = False


def is_file_spec(text: str) -> bool:
    """Whether ``text`` has the form ``path/to/file.py:ClassName`` (``load_file``'s argument)."""
    from lra.attention import _file

    return _file.is_spec(text)


def file_source(name: str) -> dict[str, Any] | None:
    """What a result file records of a family ``load_file`` registered (``attention_file``: path,
    class, sha256, and the declared display_name and kind), else None."""
    from lra.attention import _file

    return _file.source(name)


def builtin() -> list[str]:
    """Sorted names of the families of this tree (modules of this package)."""
    return [n for n in available() if family(n).__module__.startswith(f"{__name__}.")]


def plugins() -> dict[str, str]:
    """{name: the distribution that installed it} of the families registered through the
    entry-point group ``lra.attention`` (and not shadowed by a family of this tree)."""
    from lra import declared

    found = declared.plugins("attention")
    return {n: found[n]["distribution"] for n in available()
            if n in found and not family(n).__module__.startswith(f"{__name__}.")}


def available() -> list[str]:
    """Sorted names of every registered attention family (this tree's and the plugins'; not the
    one-file families ``load_file`` registered, which are found by name only)."""
    from lra.attention import _file

    return [n for n in _REGISTRY.names() if _file.source(n) is None]


def family(name: str) -> type:
    """The class registered as ``name``; unknown names raise with the valid choices."""
    return _REGISTRY.get(name)


def options(name: str) -> dict[str, Any]:
    """A family's own options (keyword arguments beyond the common ones) and their defaults."""
    params = inspect.signature(family(name).__init__).parameters
    return {
        p.name: p.default
        for p in params.values()
        if p.name != "self" and p.name not in COMMON_ARGS
        and p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)
    }


def has_causal_mode(name: str) -> bool:
    """Whether family ``name`` declares ``causal`` (its causal mode: each position sees only its
    past); a family without one is refused by ``build(..., causal=True)``."""
    return "causal" in inspect.signature(family(name).__init__).parameters


def build(name: str, **kwargs: Any):
    """Instantiate family ``name``; keyword arguments it does not take are ignored.

    The encoder builds every family with the same call (dim, num_heads, qkv_dim, causal, max_len,
    dropout, rngs, layers_held, plus user options); a family that needs no ``max_len`` simply does
    not declare it.
    Validate user-facing options with ``check_options`` first so that typos fail loudly.
    """
    cls = family(name)
    params = inspect.signature(cls.__init__).parameters
    if kwargs.get("causal") and "causal" not in params:
        raise ValueError(f"attention {name!r} has no causal mode")
    if any(p.kind is p.VAR_KEYWORD for p in params.values()):
        return cls(**kwargs)
    return cls(**{k: v for k, v in kwargs.items() if k in params})


def check_options(name: str, user_options: dict[str, Any]) -> None:
    """Raise ``ValueError`` naming any option that family ``name`` does not have."""
    known = options(name)
    for key in user_options:
        if key not in known:
            close = difflib.get_close_matches(key, known, n=3)
            hint = f" Did you mean {', '.join(close)}?" if close else ""
            choices = ", ".join(sorted(known)) or "(none)"
            raise ValueError(f"attention {name!r} has no option {key!r}.{hint} "
                             f"Its options: {choices}")
