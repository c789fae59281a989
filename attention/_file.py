"""One-file families: ``--attn path/to/file.py:ClassName`` without a package or an entry point.

``load`` imports the file once per process (as a module of its own, ``lra_attn_file_<stem>_<hash>``),
checks that the class is a family (an ``nnx.Module`` with the contract's constructor and call) and
registers it as ``<base>@<first 8 hex digits of the file's SHA-256>``, ``<base>`` being the name
the class gives itself with ``@register("...")``, else the file's stem. The hash in the name keeps
two versions of a file apart everywhere a family's name is a key: the work directory a run resumes,
the result file, the leaderboard's rows. ``source`` gives what the result file records of it
(``attention_file``: the file's path, the class, the SHA-256 and the declared display name and
kind, read as ``lra.declared`` reads every family).
"""

from __future__ import annotations

import hashlib
import importlib.util
import inspect
import re
import sys
from pathlib import Path
from typing import Any

# ``path.py:ClassName``: what ``--attn`` takes besides a registered name.
SPEC = re.compile(r"^(?P<path>.+\.py):(?P<cls>[A-Za-z_][A-Za-z0-9_]*)$")

_LOADED: dict[tuple[str, str, str], str] = {}  # (resolved path, sha256, class) -> registered name
_SOURCES: dict[str, dict[str, Any]] = {}  # registered name -> its ``attention_file`` record


class FamilyFileError(ValueError):
    """A ``path.py:ClassName`` that cannot be used: the message is one line saying why."""


def is_spec(text: str) -> bool:
    return bool(SPEC.match(text))


def _import(path: Path, sha: str):
    name = f"lra_attn_file_{re.sub(r'[^0-9A-Za-z_]', '_', path.stem)}_{sha[:8]}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses and pickling look a class's module up by name
    try:
        spec.loader.exec_module(module)
    except Exception as err:
        del sys.modules[name]
        raise FamilyFileError(f"attention file {path} failed to import: {err!r}") from None
    return module


def _not_a_family(cls: Any) -> str | None:
    """Why ``cls`` is not an attention family (the contract of attention/__init__.py), or None."""
    from flax import nnx

    if not (isinstance(cls, type) and issubclass(cls, nnx.Module)):
        return "not a flax.nnx.Module class"
    init = inspect.signature(cls.__init__).parameters
    missing = [a for a in ("dim", "num_heads", "rngs") if a not in init]
    if missing and not any(p.kind is p.VAR_KEYWORD for p in init.values()):
        return f"its __init__ takes no {', '.join(missing)}"
    call = list(inspect.signature(cls.__call__).parameters)
    if len(call) < 3 or "deterministic" not in call:  # self, x, mask, *, deterministic
        return "its __call__ is not (x, mask=None, *, deterministic=True)"
    return None


def load(text: str, register) -> str:
    """Register the class that ``text`` (``path.py:ClassName``) names and return its name; the
    same file and class give the same name, imported once. ``register``: the registry's decorator
    factory. Raises ``FamilyFileError`` for a missing file, a missing class, or a class that is
    not a family."""
    match = SPEC.match(text)
    if match is None:
        raise FamilyFileError(f"{text!r} is not path/to/file.py:ClassName")
    path = Path(match["path"]).expanduser().resolve()
    if not path.is_file():
        raise FamilyFileError(f"attention file {match['path']} does not exist")
    data = path.read_bytes()
    sha = hashlib.sha256(data).hexdigest()
    key = (str(path), sha, match["cls"])
    if key in _LOADED:
        return _LOADED[key]
    module = _import(path, sha)
    cls = module.__dict__.get(match["cls"])
    if cls is None:
        classes = sorted(k for k, v in vars(module).items()
                         if isinstance(v, type) and v.__module__ == module.__name__)
        raise FamilyFileError(f"attention file {match['path']} has no class {match['cls']!r}; "
                              f"its classes: {', '.join(classes) or '(none)'}")
    why = _not_a_family(cls)
    if why is not None:
        raise FamilyFileError(f"{match['cls']} in {match['path']} is not an attention family: {why} "
                              "(the contract: attention/__init__.py)")
    base = cls.__dict__.get("family_name") or path.stem
    name = f"{base}@{sha[:8]}"
    register(name)(cls)
    cls.family_name = name
    _LOADED[key] = name
    _SOURCES[name] = _record(path, match["cls"], sha)
    return name


def _record(path: Path, class_name: str, sha: str) -> dict[str, Any]:
    from lra import declared

    facts = declared.class_facts(path, class_name)
    return {"path": str(path), "class": class_name, "sha256": sha,
            **{k: facts[k] for k in ("display_name", "kind") if isinstance(facts.get(k), str)}}


def source(name: str) -> dict[str, Any] | None:
    """The ``attention_file`` record of a family loaded by ``load`` (a copy), else None."""
    found = _SOURCES.get(name)
    return None if found is None else dict(found)
