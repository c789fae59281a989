"""What the families and tasks declare in their own files, read as text without importing them.

A family (``attention/<name>.py``) or a task (``tasks/<name>.py``) states its facts as class
attributes of its registered class (the contracts in ``attention/__init__.py`` and
``tasks/__init__.py``). A family installed from another distribution (an entry point of the group
``lra.attention``) is read the same way, from its module's file, found through
``importlib.metadata`` and the import system's finders without running the module or its
packages (``plugins``). Where a literal value is all that is needed (a display name, the options a
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
import importlib.machinery
import importlib.util
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

__all__ = ["attribute", "class_facts", "declared", "init_options", "module_file", "plugins"]

# The entry-point group through which other distributions add entries to a package's registry
# (``attention/__init__.py`` ``ENTRY_POINT_GROUP``; tests/core/test_declared.py keeps them equal).
ENTRY_POINT_GROUPS = {"attention": "lra.attention"}


def _package_dir(package: str) -> Path | None:
    """The folder of package ``lra.<package>`` (``"attention"``, ``"tasks"``), found without
    importing it (``lra`` itself is imported: it holds no more than the finder of a checkout)."""
    try:
        spec = importlib.util.find_spec(f"lra.{package}")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def _find_spec(fullname: str, path: list[str] | None):
    """The spec the import system would find for ``fullname`` under ``path`` (its parent's search
    locations), asked of every finder on ``sys.meta_path`` in order, executing nothing: a checkout's
    ``lra.attention`` (``lra/__init__.py``) and an editable install's package-dir mapping are
    meta-path finders, not path entries."""
    for finder in sys.meta_path:
        find = getattr(finder, "find_spec", None)
        spec = find(fullname, path) if find is not None else None
        if spec is not None:
            return spec
    return None


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


def _read_file(path: Path, class_name: str | None = None) -> dict[str, dict[str, Any]]:
    """{registered name: its literal class attributes, those of base classes of the same file
    included} of one file; with ``class_name``, {``class_name``: the attributes of that class},
    registered or not (``{}`` if the file has no such class)."""
    classes = _classes(path)
    if class_name is not None:
        node = classes.get(class_name)
        return {} if node is None else {
            class_name: _inherited(node, classes, _literal_attributes, frozenset({class_name}))}
    out = {}
    for node in classes.values():
        name = _registered_name(node)
        if name is not None:
            out[name] = _inherited(node, classes, _literal_attributes, frozenset({node.name}))
    return out


def module_file(module: str) -> Path | None:
    """The source file of module ``module`` (dotted), found without importing it or the packages
    above it (``importlib.util.find_spec`` would run each package's ``__init__``); None where no
    finder finds a Python source file."""
    parts = module.split(".")
    try:
        spec = _find_spec(parts[0], None)
        for i in range(1, len(parts)):
            if spec is None or not spec.submodule_search_locations:
                return None
            spec = _find_spec(".".join(parts[:i + 1]), list(spec.submodule_search_locations))
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        return None
    return Path(spec.origin)


def _entry_point_facts(ep: metadata.EntryPoint) -> dict[str, dict[str, Any]]:
    """{the entry point's name: the literal attributes of the class it names}, or, for an entry
    point naming a module, the module's ``@register``-ed classes by their registered names."""
    module, _, attr = ep.value.partition(":")
    path = module_file(module.strip())
    if path is None:
        return {}
    attr = attr.strip()
    if not attr:
        return _read_file(path)
    found = _read_file(path, attr.split(".")[0])
    return {ep.name: next(iter(found.values()))} if found else {}


def class_facts(path: Path, class_name: str) -> dict[str, Any]:
    """The literal attributes of class ``class_name`` of the file ``path`` (a one-file family,
    ``--attn path.py:ClassName``); ``{}`` where the file has no such class."""
    return next(iter(_read_file(Path(path), class_name).values()), {})


@functools.cache
def plugins(package: str) -> dict[str, dict[str, str]]:
    """{id: {"distribution": its installed distribution's name, "value": the entry point}} of the
    entries other distributions add to ``package``'s registry through its entry-point group (no
    entry declared by a file of this tree). ``{}`` for a package without a group."""
    group = ENTRY_POINT_GROUPS.get(package)
    if group is None:
        return {}
    out = {}
    for ep in metadata.entry_points(group=group):
        dist = getattr(ep, "dist", None)
        out.setdefault(ep.name, {"distribution": dist.name if dist is not None else "?",
                                 "value": ep.value})
    return out


def _plugin_facts(package: str, in_tree: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    group = ENTRY_POINT_GROUPS.get(package)
    out: dict[str, dict[str, Any]] = {}
    if group is None:
        return out
    for ep in metadata.entry_points(group=group):
        for name, attrs in _entry_point_facts(ep).items():
            if name not in in_tree:  # the registry keeps this tree's entry, as here
                out.setdefault(name, attrs)
    return out


@functools.cache
def declared(package: str) -> dict[str, dict[str, Any]]:
    """{registered id: {attribute: literal value}} over the files of ``package`` (``"attention"``
    or ``"tasks"``) whose names do not start with ``_``, in file order, then over the modules of
    installed plugins (``plugins``); ``{}`` where the package cannot be found. The dicts are
    shared: do not change them."""
    out = _over_files(package, _read_file)
    return out | _plugin_facts(package, out)


def _over_files(package: str, read) -> dict[str, dict[str, Any]]:
    """``read(path)`` merged over the files of ``package`` whose names do not start with ``_``,
    in file order; ``{}`` where the package cannot be found."""
    folder = _package_dir(package)
    out: dict[str, dict[str, Any]] = {}
    for path in sorted(folder.glob("*.py")) if folder is not None else []:
        if not path.name.startswith("_"):
            out.update(read(path))
    return out


@functools.cache
def _all_init_defaults(package: str) -> dict[str, dict[str, Any]]:
    return _over_files(package, _init_defaults)


def init_options(package: str, name: str) -> dict[str, Any]:
    """{keyword: default} of the ``__init__`` of ``name``'s registered class, for the defaults that
    are literals (a module constant or an expression is left out: only an import can tell its
    value); the common arguments included. ``{}`` for an unknown id or an out-of-tree family."""
    return dict(_all_init_defaults(package).get(name, {}))


def attribute(package: str, name: str, attr: str, default: Any = None) -> Any:
    """The literal ``attr`` that ``name`` of ``package`` declares, else ``default`` (an unknown
    id, an attribute not declared or not a literal)."""
    return declared(package).get(name, {}).get(attr, default)
