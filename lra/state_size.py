"""The state a model holds while it generates one token at a time, in bytes, from each family's
declared formula (the x-axis of the Based paper's Figure 2: Arora et al., "Simple linear attention
language models balance the recall-throughput tradeoff", arXiv 2402.18668).

Each family declares ``recurrent_state`` in its own file (the contract: attention/__init__.py): a
string, an arithmetic expression for the numbers ONE layer holds for one sequence at length ``L``:

* a family with a causal mode: what the causal form carries from step to step when run one token at
  a time, at its largest over the first ``L`` positions: a KV cache (softmax: ``2 * L * qkv_dim``,
  growing with L), a window of it (local, longformer), a fixed recurrent state (linear attention's
  ``d_k x d_v`` per head, an SSM's states, Mamba's states plus its convolution's last inputs);
* a family without one (bigbird, fnet, linformer, luna, nystromformer, sinkhorn): what a query
  reads of the whole-sequence computation (Linformer's projected keys and values, Nystromformer's
  landmarks, FNet's whole input), stated in one line of its module docstring; its bidirectional
  form has no step-by-step state.

A complex number counts as two. The expression may use ``L``, ``dim`` (``model.emb_dim``),
``heads`` (``model.num_heads``), ``qkv_dim`` (``model.qkv_dim``), ``head_dim`` (``qkv_dim //
heads``) and the family's options by name; numbers, strings, ``+ - * //``, comparisons, ``and``,
``or``, ``x if c else y`` and ``min``, ``max``, ``int``. It is read from the file without importing
the family (lra/declared.py), so this module needs no JAX: the leaderboard uses it.

    state_bytes("softmax", config, 128)   # 2 * 128 * qkv_dim * num_layers * 4
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Mapping
from typing import Any

from lra import declared

__all__ = ["ATTRIBUTE", "StateSizeError", "formula", "state_bytes", "state_numbers", "variables"]

ATTRIBUTE = "recurrent_state"

_BINARY = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
           ast.FloorDiv: operator.floordiv}
_COMPARE = {ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le,
            ast.Gt: operator.gt, ast.GtE: operator.ge}
_CALLS = {"min": min, "max": max, "int": int}


class StateSizeError(ValueError):
    """A family declares no formula, or its formula cannot be evaluated; the message says which."""


def formula(family: str) -> str:
    """The ``recurrent_state`` expression ``family`` declares in its file."""
    facts = declared.declared("attention")
    if family not in facts:
        raise StateSizeError(f"unknown attention family {family!r} (families of this tree: "
                             f"{', '.join(sorted(facts))})")
    text = facts[family].get(ATTRIBUTE)
    if not isinstance(text, str):
        raise StateSizeError(f"attention family {family!r} declares no {ATTRIBUTE} formula (a string "
                             f"class attribute in attention/{family}.py; lra/state_size.py)")
    return text


def _parts(config: Any) -> tuple[Mapping[str, Any], Mapping[str, Any]]:
    """(model, attn) of a ``lra.config.Config`` or of its dict form (a result file's config)."""
    if hasattr(config, "to_dict"):
        config = config.to_dict()
    if not isinstance(config, Mapping) or not isinstance(config.get("model"), Mapping):
        raise StateSizeError("config must be a lra.config.Config or its dict form with a 'model' "
                             f"mapping, got {type(config).__name__}")
    return config["model"], config.get("attn") or {}


def variables(family: str, config: Any, length: int) -> dict[str, Any]:
    """The names a formula may use: the model's sizes, ``L`` and the family's resolved options
    (the file's literal defaults, then the config's ``attn``)."""
    model, attn = _parts(config)
    dim, heads = int(model["emb_dim"]), int(model["num_heads"])
    qkv_dim = int(model.get("qkv_dim") or dim)
    names = declared.init_options("attention", family) | dict(attn)
    return names | {"L": int(length), "dim": dim, "heads": heads, "qkv_dim": qkv_dim,
                    "head_dim": qkv_dim // heads}


def _name(node: ast.Name, ev, names: Mapping[str, Any], where: str) -> Any:
    if node.id not in names:
        raise StateSizeError(f"{where}: unknown name {node.id!r} (known: {', '.join(sorted(names))})")
    return names[node.id]


def _bool_op(node: ast.BoolOp, ev, names, where) -> Any:
    """Python's ``and`` / ``or``: the first operand that decides, evaluated left to right."""
    out = ev(node.values[0])
    for value in node.values[1:]:
        if (isinstance(node.op, ast.Or) and out) or (isinstance(node.op, ast.And) and not out):
            break
        out = ev(value)
    return out


def _compare(node: ast.Compare, ev, names, where) -> Any:
    if len(node.ops) != 1 or type(node.ops[0]) not in _COMPARE:
        raise _outside(node, where)
    return _COMPARE[type(node.ops[0])](ev(node.left), ev(node.comparators[0]))


def _call(node: ast.Call, ev, names, where) -> Any:
    if not (isinstance(node.func, ast.Name) and node.func.id in _CALLS) or node.keywords:
        raise _outside(node, where)
    return _CALLS[node.func.id](*(ev(a) for a in node.args))


def _binary(node: ast.BinOp, ev, names, where) -> Any:
    if type(node.op) not in _BINARY:
        raise _outside(node, where)
    return _BINARY[type(node.op)](ev(node.left), ev(node.right))


def _constant(node: ast.Constant, ev, names, where) -> Any:
    if not isinstance(node.value, (int, float, str, bool)):
        raise _outside(node, where)
    return node.value


def _negative(node: ast.UnaryOp, ev, names, where) -> Any:
    if not isinstance(node.op, ast.USub):
        raise _outside(node, where)
    return -ev(node.operand)


_NODES = {ast.Expression: lambda n, ev, names, where: ev(n.body), ast.Constant: _constant,
          ast.Name: _name, ast.BinOp: _binary, ast.UnaryOp: _negative,
          ast.IfExp: lambda n, ev, names, where: ev(n.body) if ev(n.test) else ev(n.orelse),
          ast.BoolOp: _bool_op, ast.Compare: _compare, ast.Call: _call}


def _outside(node: ast.AST, where: str) -> StateSizeError:
    return StateSizeError(f"{where}: {ast.unparse(node)!r} is outside the formula grammar "
                          "(numbers, names, + - * //, comparisons, and/or, if-else, min, max, int)")


def _evaluate(node: ast.AST, names: Mapping[str, Any], where: str) -> Any:
    """The value of one node of a formula; anything outside the small grammar is an error."""
    handler = _NODES.get(type(node))
    if handler is None:
        raise _outside(node, where)
    return handler(node, lambda n: _evaluate(n, names, where), names, where)


def state_numbers(family: str, config: Any, length: int) -> int:
    """How many numbers one layer of ``family`` holds for one sequence at length ``length`` (a
    complex number counts as two), from its declared formula."""
    text = formula(family)
    where = f"{family}'s {ATTRIBUTE} {text!r}"
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError as e:
        raise StateSizeError(f"{where}: not an expression ({e.msg})") from None
    try:
        value = _evaluate(tree, variables(family, config, length), where)
    except (TypeError, ZeroDivisionError) as e:
        raise StateSizeError(f"{where}: {e}") from None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0 \
            or value != int(value):
        raise StateSizeError(f"{where}: gives {value!r}, not a whole number >= 0")
    return int(value)


def state_bytes(family: str, config: Any, length: int, dtype_bytes: int = 4) -> int:
    """Bytes of state the whole model's mixers hold for one sequence at length ``length``: the
    family's per-layer numbers times ``model.num_layers`` times ``dtype_bytes`` (4: the families
    keep their states in float32 whatever the compute dtype). The encoder's own pieces (embeddings,
    MLP) hold no state across positions and are not counted."""
    if length < 1 or dtype_bytes < 1:
        raise StateSizeError(f"length and dtype_bytes must be >= 1, got {length}, {dtype_bytes}")
    model, _ = _parts(config)
    return state_numbers(family, config, length) * int(model["num_layers"]) * int(dtype_bytes)
