"""Display names (lra.leaderboard.names): every family and task of this tree declares one in its own
file, read without importing JAX and equal to what the registries import."""

import subprocess
import sys

from lra import attention, tasks
from lra.leaderboard import names


def _in_tree(registry_module, ids):
    return [i for i in ids
            if registry_module.family(i).__module__.startswith(f"{registry_module.__name__}.")]


def test_every_family_has_a_unique_display_name_and_a_kind_that_the_registry_agrees_with():
    ids = _in_tree(attention, attention.available())
    assert len(ids) >= 25
    shown = [names.family_name(i) for i in ids]
    assert len(set(shown)) == len(shown), shown
    for i in ids:
        cls = attention.family(i)
        assert names.family_name(i) == cls.display_name, i
        assert names.family_kind(i) == cls.kind in names.KINDS, i
    assert names.family_name("softmax") == "Transformer"
    assert names.family_name("gated_deltanet") == "Gated DeltaNet"
    assert {names.family_kind(i) for i in ids} == set(names.KINDS)


def test_every_task_has_a_unique_display_name_that_the_registry_agrees_with():
    ids = _in_tree(tasks, tasks.available())
    assert {"listops", "text", "retrieval", "image", "pathfinder", "pathx"} <= set(ids)
    shown = [names.task_name(i) for i in ids]
    assert len(set(shown)) == len(shown), shown
    for i in ids:
        assert names.task_name(i) == tasks.family(i).display_name, i
    assert names.task_name("pathx") == "Path-X" and names.task_name("listops") == "ListOps"


def test_unknown_ids_fall_back_to_themselves():
    assert names.family_name("my_family") == "my_family"
    assert names.family_kind("my_family") == names.OTHER_KIND
    assert names.task_name("copytask") == "copytask"


def test_names_are_read_without_importing_the_families_or_jax():
    code = ("import sys; from lra.leaderboard import names; "
            "assert names.family_name('cosformer') == 'cosFormer'; "
            "assert names.task_name('pathx') == 'Path-X'; "
            "bad = sorted(m for m in sys.modules if m == 'jax' or m.startswith(('lra.attention.', "
            "'lra.tasks.'))); assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True)
