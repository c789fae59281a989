"""The names a reader knows: each family's and task's display name (and a family's kind), for figures,
tables and pages.

Every family (``attention/<name>.py``) and task (``tasks/<name>.py``) declares them in its own file,
as string class attributes of its registered class (``display_name``, and ``kind`` for a family; the
contracts in ``attention/__init__.py`` and ``tasks/__init__.py``). This module reads them through
``lra.declared``, which parses those files as text and never imports them, so it runs where JAX is
absent; a test keeps it equal to the values the registries import. A family installed through the
entry-point group ``lra.attention`` is read from its module's file the same way. A one-file family
(``--attn path.py:Class``, registered as ``<name>@<hash>``) is named from what its result files
record (``attention_file``), with the file's hash: ``ReLU linear @1a2b3c4d``, so that two versions of
the file are told apart. An id nothing declares (a task a test made up) is shown as itself, of kind
``OTHER_KIND``.
"""

from __future__ import annotations

import functools

from lra.declared import declared as _declared_literals

__all__ = ["KINDS", "OTHER_KIND", "declared", "family_kind", "family_name", "remember_file_family",
           "task_name"]

# A family's kind, in the order a page or figure groups them.
KINDS = ("2020 attention", "state space", "2023-25 mixer")
OTHER_KIND = "other"

# {"<name>@<hash>": {"display_name": ..., "kind": ...}} of the one-file families whose result files
# the reader has read (lra/leaderboard/load.py), the hash appended to the display name.
_FILE_FAMILIES: dict[str, dict[str, str]] = {}


def remember_file_family(family: str, source: dict) -> None:
    """Name the one-file family ``family`` (``<name>@<hash>``) as its result file's
    ``attention_file`` declares it (``source``)."""
    base, _, short = family.rpartition("@")
    facts = {"display_name": f"{source.get('display_name') or base} @{short}"}
    if isinstance(source.get("kind"), str):
        facts["kind"] = source["kind"]
    _FILE_FAMILIES[family] = facts


def _facts(family: str) -> dict[str, str]:
    return _FILE_FAMILIES.get(family) or declared("attention").get(family, {})


@functools.cache
def declared(package: str) -> dict[str, dict[str, str]]:
    """{id: {"display_name": ..., "kind": ...}} as declared in the files of ``package``
    (``"attention"`` or ``"tasks"``, read by ``lra.declared``); ids without a display name are left
    out."""
    return {name: {k: attrs[k] for k in ("display_name", "kind") if isinstance(attrs.get(k), str)}
            for name, attrs in _declared_literals(package).items()
            if isinstance(attrs.get("display_name"), str)}


def family_name(family: str) -> str:
    """The family's name in its paper (``softmax`` -> ``Transformer``); an unknown id as itself."""
    return _facts(family).get("display_name", family)


def family_kind(family: str) -> str:
    """One of ``KINDS`` as the family declares it; ``OTHER_KIND`` for an unknown id."""
    return _facts(family).get("kind", OTHER_KIND)


def task_name(task: str) -> str:
    """The task's name in LRA's paper (``pathx`` -> ``Path-X``); an unknown id as itself."""
    return declared("tasks").get(task, {}).get("display_name", task)
