"""The names a reader knows: each family's and task's display name (and a family's kind), for figures,
tables and pages.

Every family (``attention/<name>.py``) and task (``tasks/<name>.py``) declares them in its own file,
as string class attributes of its registered class (``display_name``, and ``kind`` for a family; the
contracts in ``attention/__init__.py`` and ``tasks/__init__.py``). This module reads those files as
text (``ast``), never imports them, so it runs where JAX is absent; a test keeps it equal to the
values the registries import. An id no file of this tree declares (an out-of-tree family, a task a
test made up) is shown as itself, of kind ``OTHER_KIND``.
"""

from __future__ import annotations

import ast
import functools
import importlib.util
from pathlib import Path

__all__ = ["KINDS", "OTHER_KIND", "declared", "family_kind", "family_name", "task_name"]

# A family's kind, in the order a page or figure groups them.
KINDS = ("2020 attention", "state space", "2023-25 mixer")
OTHER_KIND = "other"


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


def _string_attributes(node: ast.ClassDef) -> dict[str, str]:
    out = {}
    for stmt in node.body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
            target, value = stmt.targets[0], stmt.value
        elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
            target, value = stmt.target, stmt.value
        else:
            continue
        if isinstance(target, ast.Name) and isinstance(value, ast.Constant) \
                and isinstance(value.value, str):
            out[target.id] = value.value
    return out


def _read_file(path: Path) -> dict[str, dict[str, str]]:
    """{registered name: its string class attributes, those of base classes of the same file
    included} of one file."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    except (OSError, SyntaxError, UnicodeDecodeError):
        return {}  # the registry's import reports a broken file; here it simply declares nothing
    classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}

    def attributes(node: ast.ClassDef, seen: frozenset[str]) -> dict[str, str]:
        inherited: dict[str, str] = {}
        for base in reversed(node.bases):
            if isinstance(base, ast.Name) and base.id in classes and base.id not in seen:
                inherited.update(attributes(classes[base.id], seen | {base.id}))
        return inherited | _string_attributes(node)

    out = {}
    for node in classes.values():
        name = _registered_name(node)
        if name is not None:
            out[name] = attributes(node, frozenset({node.name}))
    return out


@functools.cache
def declared(package: str) -> dict[str, dict[str, str]]:
    """{id: {"display_name": ..., "kind": ...}} as declared in the files of ``package``
    (``"attention"`` or ``"tasks"``); ids without a display name are left out."""
    folder = _package_dir(package)
    if folder is None:
        return {}
    out: dict[str, dict[str, str]] = {}
    for path in sorted(folder.glob("*.py")):
        if path.name.startswith("_"):
            continue
        for name, attrs in _read_file(path).items():
            if "display_name" in attrs:
                out[name] = {k: attrs[k] for k in ("display_name", "kind") if k in attrs}
    return out


def family_name(family: str) -> str:
    """The family's name in its paper (``softmax`` -> ``Transformer``); an unknown id as itself."""
    return declared("attention").get(family, {}).get("display_name", family)


def family_kind(family: str) -> str:
    """One of ``KINDS`` for the families of this tree; ``OTHER_KIND`` for an unknown id."""
    return declared("attention").get(family, {}).get("kind", OTHER_KIND)


def task_name(task: str) -> str:
    """The task's name in LRA's paper (``pathx`` -> ``Path-X``); an unknown id as itself."""
    return declared("tasks").get(task, {}).get("display_name", task)
