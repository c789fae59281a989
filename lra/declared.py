"""What the families and tasks declare in their own files, read as text without importing them.

A family (``attention/<name>.py``) or a task (``tasks/<name>.py``) states its facts as class
attributes of its registered class (the contracts in ``attention/__init__.py`` and
``tasks/__init__.py``). Where a literal value is all that is needed (a display name, the options a
family is timed under next to third-party code, where a published row's recipe departs from its
paper), code that must run without JAX reads it here: the leaderboard, the peers harness under the
peers venv's python, ``lra.reproduce --list``. This module parses the files (``ast``) and evaluates
literal values only (``ast.literal_eval``: strings, numbers, tuples, lists, dicts, sets, None,
booleans); a value that is not a literal is left out. The tests keep what it reads equal to what the
registries import. Standard library only.
"""

from __future__ import annotations

import ast
import functools
import importlib.util
from pathlib import Path
from typing import Any

__all__ = ["attribute", "declared", "init_options"]


def _package_dir(package: str) -> Path | None:
    """The folder of top-level package ``package``, found without importing it."""
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def _registered_name(node: ast.ClassDef) -> str | None:
    """``name`` of a class decorated ``@register("name")`` (or ``@<module>.register("name")``)."""
    for dec in node.decorator_list:
        if not (isinstance(dec, ast.Call) and dec.args):
            continue
        func = dec.func
        called = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
        arg = dec.args[0]
        if called == "register" and isinstance(arg, ast.Constant) and isinstance(arg.value, str):
            return arg.value
    return None


def _literal_attributes(node: ast.ClassDef) -> dict[str, Any]:
    out = {}
    for stmt in node.body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
            target, value = stmt.targets[0], stmt.value
        elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
            target, value = stmt.target, stmt.value
        else:
            continue
        if not isinstance(target, ast.Name):
            continue
        try:
            out[target.id] = ast.literal_eval(value)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            continue  # not a literal: only an import can tell its value
    return out


def _literal_defaults(node: ast.ClassDef) -> dict[str, Any] | None:
    """{keyword: literal default} of the class's own ``__init__``; None when it defines none."""
    for stmt in node.body:
        if isinstance(stmt, ast.FunctionDef) and stmt.name == "__init__":
            args = stmt.args
            pairs = list(zip(args.args[len(args.args) - len(args.defaults):], args.defaults))
            pairs += [(a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None]
            out = {}
            for arg, default in pairs:
                try:
                    out[arg.arg] = ast.literal_eval(default)
                except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                    continue  # not a literal (a module constant, an expression)
            return out
    return None


def _classes(path: Path) -> dict[str, ast.ClassDef]:
    """The top-level classes of one file by name; ``{}`` for a file that does not parse (the
    registry's import reports a broken file; here it simply declares nothing)."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    except (OSError, SyntaxError, UnicodeDecodeError):
        return {}
    return {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}


def _inherited(node: ast.ClassDef, classes: dict[str, ast.ClassDef], read, seen: frozenset[str]):
    """``read(node)`` merged over the same-file bases it inherits from (the class's own wins)."""
    inherited: dict[str, Any] = {}
    for base in reversed(node.bases):
        if isinstance(base, ast.Name) and base.id in classes and base.id not in seen:
            inherited.update(_inherited(classes[base.id], classes, read, seen | {base.id}))
    return inherited | (read(node) or {})


def _init_defaults(path: Path) -> dict[str, dict[str, Any]]:
    """{registered name: literal defaults of its ``__init__``} of one file (the nearest same-file
    class that defines ``__init__``)."""
    classes = _classes(path)

    def own(node: ast.ClassDef, seen: frozenset[str]) -> dict[str, Any]:
        found = _literal_defaults(node)
        if found is not None:
            return found
        for base in node.bases:
            if isinstance(base, ast.Name) and base.id in classes and base.id not in seen:
                return own(classes[base.id], seen | {base.id})
        return {}

    return {name: own(node, frozenset({node.name})) for node in classes.values()
            if (name := _registered_name(node)) is not None}


def _read_file(path: Path) -> dict[str, dict[str, Any]]:
    """{registered name: its literal class attributes, those of base classes of the same file
    included} of one file."""
    classes = _classes(path)

    out = {}
    for node in classes.values():
        name = _registered_name(node)
        if name is not None:
            out[name] = _inherited(node, classes, _literal_attributes, frozenset({node.name}))
    return out


@functools.cache
def declared(package: str) -> dict[str, dict[str, Any]]:
    """{registered id: {attribute: literal value}} over the files of ``package`` (``"attention"``
    or ``"tasks"``) whose names do not start with ``_``, in file order; ``{}`` where the package
    cannot be found. The dicts are shared: do not change them."""
    folder = _package_dir(package)
    if folder is None:
        return {}
    out: dict[str, dict[str, Any]] = {}
    for path in sorted(folder.glob("*.py")):
        if not path.name.startswith("_"):
            out.update(_read_file(path))
    return out


@functools.cache
def _all_init_defaults(package: str) -> dict[str, dict[str, Any]]:
    folder = _package_dir(package)
    if folder is None:
        return {}
    out: dict[str, dict[str, Any]] = {}
    for path in sorted(folder.glob("*.py")):
        if not path.name.startswith("_"):
            out.update(_init_defaults(path))
    return out


def init_options(package: str, name: str) -> dict[str, Any]:
    """{keyword: default} of the ``__init__`` of ``name``'s registered class, for the defaults that
    are literals (a module constant or an expression is left out: only an import can tell its
    value); the common arguments included. ``{}`` for an unknown id or an out-of-tree family."""
    return dict(_all_init_defaults(package).get(name, {}))


def attribute(package: str, name: str, attr: str, default: Any = None) -> Any:
    """The literal ``attr`` that ``name`` of ``package`` declares, else ``default`` (an unknown
    id, an out-of-tree family, an attribute not declared or not a literal)."""
    return declared(package).get(name, {}).get(attr, default)
