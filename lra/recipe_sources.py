"""Where each ``--protocol modern`` recipe value comes from: the lookups, checks and generated
tables over the declarations in configs/_sources.py (docs/families-and-protocols.md "Where each
recipe value comes from").

    python -m lra.recipe_sources                 # print the generated tables
    python -m lra.recipe_sources --update-docs   # rewrite them in docs/families-and-protocols.md
    python -m lra.recipe_sources --check         # list recipe values without a source (exit 1)

Imports no JAX: the values come from configs/<task>.py; a default the recipes leave unset is
read from lra.config's dataclasses only when a table shows one.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import sys
from pathlib import Path
from typing import Any

import lra._guard  # noqa: F401  (first: one line where lra was found only in part)
from lra.configs import _sources as S

DOCS = Path("docs/families-and-protocols.md")
BEGIN, END = "<!-- recipe-sources:begin -->", "<!-- recipe-sources:end -->"
TASKS = S.TASKS


def task_module(task: str):
    return importlib.import_module(f"lra.configs.{task}")


def recipe_name(family: str) -> str:
    """The recipe whose sources ``family``'s modern values follow ("*": the every-family layer)."""
    return S.FAMILY_RECIPE.get(family, "*")


def _entries(name: str, key: str, *, around: bool = False) -> tuple[S.Source, ...]:
    recipe = S.RECIPES[name]
    table = recipe.around if around else recipe.keys
    if key in table:
        found = table[key]
        return found if isinstance(found, tuple) else (found,)
    return _entries(recipe.base, key, around=around) if recipe.base else ()


def entry(name: str, key: str, task: str, *, around: bool = False) -> S.Source | None:
    """The source entry of ``key`` in recipe ``name`` for ``task`` (None: none declared)."""
    return next((e for e in _entries(name, key, around=around) if task in e.tasks), None)


def _recipe_with(name: str, key: str, around: bool = False) -> S.Recipe:
    """The recipe that declares ``key`` (``name`` or the one it falls back to)."""
    recipe = S.RECIPES[name]
    table = recipe.around if around else recipe.keys
    return recipe if key in table or not recipe.base else _recipe_with(recipe.base, key, around)


def reference(recipe: S.Recipe, e: S.Source, task: str | None) -> str:
    """``e.ref`` written out: the repository prefixed, ``{file}`` and ``{line}`` filled for
    ``task`` (None: the docs' form, the file pattern and every line of the row)."""
    if not e.ref:
        return ""
    lines = e.lines
    if task is None:
        line = "/".join(str(n) for n in lines)
        file = recipe.file
    else:
        line = str(lines[e.tasks.index(task)]) if lines else ""
        file = recipe.files.get(task, recipe.file)
    text = e.ref.replace("{file}", file).replace("{line}", line).replace("<task>", task or "<task>")
    return f"{recipe.repo} {text}" if e.in_repo and recipe.repo else text


def verdict_text(e: S.Source) -> str:
    """"same", or the verdict with what the source has and why ours differs."""
    if e.verdict == S.SAME:
        return f"same ({e.note})" if e.note else "same"
    return f"{e.verdict}: {e.note}"


def required_keys(task: str, family: str) -> list[str]:
    """The keys the modern layers set for (task, family): ``MODERN["*"]`` and ``MODERN[family]``."""
    modern = task_module(task).MODERN
    return sorted({**modern.get("*", {}), **modern.get(family, {})})


def modern_tasks() -> list[str]:
    from lra import tasks

    return [t for t in tasks.available() if getattr(task_module(t), "MODERN", None) is not None]


def missing() -> list[str]:
    """"task/family: key" for every modern recipe value without a source entry (family "*": the
    every-family layer, as an attention family runs it)."""
    out = []
    for task in modern_tasks():
        modern = task_module(task).MODERN
        for family in ["*", *sorted(k for k in modern if k != "*")]:
            name = recipe_name(family)
            keys = required_keys(task, family) if family != "*" else sorted(modern["*"])
            out += [f"{task}/{family}: {key}" for key in keys if entry(name, key, task) is None]
    return out


def _entry_problems(name: str, key: str, entries: tuple[S.Source, ...]) -> list[str]:
    out, seen = [], set()
    for e in entries:
        where = f"{name} {key} ({', '.join(e.tasks)})"
        if e.verdict not in S.VERDICTS:
            out.append(f"{where}: verdict {e.verdict!r}; choose from {', '.join(S.VERDICTS)}")
        if e.verdict == S.SAME and not e.ref:
            out.append(f"{where}: 'same' names no file, line, paper or table")
        if e.verdict != S.SAME and not e.note:
            out.append(f"{where}: a {e.verdict} says why (note)")
        if ("{line}" in e.ref) != bool(e.lines) or (e.lines and len(e.lines) != len(e.tasks)):
            out.append(f"{where}: {len(e.lines)} lines for {len(e.tasks)} tasks and ref {e.ref!r}")
        if seen & set(e.tasks):
            out.append(f"{where}: tasks {sorted(seen & set(e.tasks))} have two entries")
        seen |= set(e.tasks)
    return out


def problems() -> list[str]:
    """Malformed declarations: an unknown verdict, a 'same' without a reference, a departure
    without a reason, lines that do not match the tasks, a task with two entries."""
    out = []
    for name, recipe in S.RECIPES.items():
        for table in (recipe.keys, recipe.around):
            for key, found in table.items():
                out += _entry_problems(name, key, found if isinstance(found, tuple) else (found,))
    return out


def _default(key: str) -> Any:
    from lra import config as config_lib

    section, name = key.split(".", 1)
    cls = {"model": config_lib.ModelConfig, "train": config_lib.TrainConfig}.get(section)
    return dataclasses.asdict(cls())[name] if cls else None


def value(task: str, family: str, key: str) -> Any:
    """The value ``key`` resolves to for (task, family) at the recipe's full budget (the layers of
    lra.config's docstring without the preset's scale keys)."""
    module = task_module(task)
    for layer in (module.MODERN.get(family, {}), module.MODERN.get("*", {}),
                  getattr(module, "ATTENTION", {}).get(family, {}), module.BASE):
        if key in layer:
            return layer[key]
    return _default(key)


def show(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.6g}"
    return str(v).lower() if isinstance(v, bool) else str(v)


# A family whose values each table shows (the recipe's own family).
SHOWN_FAMILY = {"s5": "s5", "s4d": "s4d", "lru": "lru", "mega": "mega", "hgrn2": "gla",
                "no_recipe": S.NO_LRA_RECIPE[0], "*": "*"}


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _row(name: str, recipe: S.Recipe, label: str, e: S.Source, cells: list[str]) -> str:
    ref = reference(recipe, e, None)
    return (f"| {label} | " + " | ".join(cells) + f" | {_cell(ref) or '—'} | "
            f"{_cell(verdict_text(e))} |")


def recipe_table(name: str) -> str:
    """One recipe's generated table: a row per key (and per group of tasks whose source differs),
    then the rows of what the code around the keys does."""
    recipe, family = S.RECIPES[name], SHOWN_FAMILY[name]
    head = ["| key | " + " | ".join(TASKS) + " | source | same / stated departure |",
            "|---" * (len(TASKS) + 3) + "|"]
    rows = []
    for key, found in sorted(recipe.keys.items()):
        for e in found if isinstance(found, tuple) else (found,):
            cells = [f"`{show(value(t, family, key))}`" if t in e.tasks else "·" for t in TASKS]
            rows.append(_row(name, recipe, f"`{key}`", e, cells))
    for key, found in recipe.around.items():
        for e in found if isinstance(found, tuple) else (found,):
            cells = ["✓" if t in e.tasks else "·" for t in TASKS]
            rows.append(_row(name, recipe, f"*{key}*: {_cell(e.ours or e.note)}", e, cells))
    where = f" (`{recipe.repo}`, `{recipe.file}`)" if recipe.repo else ""
    return "\n".join([f"#### {recipe.title}{where}", "", *head, *rows])


def counts() -> dict[str, dict[str, int]]:
    """Per recipe, how many cells (one value or around row x one task) each verdict holds: the
    keys its shown family sets on each task (``MODERN["*"]`` for "*"), the keys the recipe
    declares itself (a family without a recipe: its head count) and the around rows."""
    out = {}
    for name in S.RECIPES:
        family, tally = SHOWN_FAMILY[name], dict.fromkeys(S.VERDICTS, 0)
        for task in TASKS:
            modern = task_module(task).MODERN
            keys = modern["*"] if family == "*" else required_keys(task, family)
            keys = sorted({*keys, *S.RECIPES[name].keys})
            found = [entry(name, key, task) for key in keys]
            found += [entry(name, key, task, around=True) for key in dict.fromkeys(_around_keys(name))]
            for e in found:
                if e is not None:
                    tally[e.verdict] += 1
        out[name] = tally
    return out


def counts_table() -> str:
    """The generated table of ``counts()``."""
    head = ["#### Cells per recipe", "",
            "| recipe | cells | " + " | ".join(S.VERDICTS) + " |", "|---" * (len(S.VERDICTS) + 2) + "|"]
    rows = [f"| {name} | {sum(t.values())} | " + " | ".join(str(t[v]) for v in S.VERDICTS) + " |"
            for name, t in counts().items()]
    return "\n".join(head + rows)


def markdown() -> str:
    """Every recipe's table, in the order of ``configs._sources.RECIPES``, then ``counts_table``."""
    return "\n\n".join([*(recipe_table(name) for name in S.RECIPES), counts_table()])


def docs_block(text: str) -> str:
    return text[text.index(BEGIN) + len(BEGIN):text.index(END)].strip()


def update_docs(path: Path) -> None:
    text = path.read_text()
    start, end = text.index(BEGIN) + len(BEGIN), text.index(END)
    path.write_text(text[:start] + "\n" + markdown() + "\n" + text[end:])


def annotated(cfg, overrides: list[str]) -> list[str]:
    """``--print-config --sources``: one line per value the modern layers set for ``cfg`` (a
    resolved ``lra.config.Config``), its value beside where it comes from: the recipe's source,
    or the preset's scale, or ``--set``; then the rows of what the code around the keys does."""
    from lra import config as config_lib

    flat = config_lib.flatten({"model": cfg.model.__dict__, "train": cfg.train.__dict__,
                               "data": cfg.data, "attn": cfg.attn})
    name = recipe_name(cfg.attention)
    recipe = S.RECIPES[name]
    module = task_module(cfg.task)
    scale = config_lib.layers(module, cfg.attention, cfg.preset, "modern")[-1]
    given = {k for k, _ in config_lib.parse_overrides(overrides)}
    out = [f"# {cfg.task} / {cfg.attention}: recipe {name!r} ({recipe.title}); "
           f"docs/families-and-protocols.md \"Where each recipe value comes from\""]
    for key in required_keys(cfg.task, cfg.attention):
        out.append(_annotated_line(key, flat.get(key), cfg, name, given, scale))
    for key in _around_keys(name):
        e = entry(name, key, cfg.task, around=True)
        if e is not None:
            holder = _recipe_with(name, key, around=True)
            out.append(f"({key}) {e.ours or e.note}  [{verdict_text(e)}]  "
                       f"{reference(holder, e, cfg.task)}".rstrip())
    out.append("# every other value: the task's LRA config (configs/" + cfg.task + ".py BASE, "
               "ATTENTION) or the dataclass default")
    return out


def _around_keys(name: str) -> list[str]:
    recipe = S.RECIPES[name]
    return [*recipe.around, *(_around_keys(recipe.base) if recipe.base else [])]


def _annotated_line(key: str, v: Any, cfg, name: str, given: set, scale: dict) -> str:
    recipe_value = show(value(cfg.task, cfg.attention, key))
    if key in given:
        return f"{key} = {show(v)}  [--set; the recipe's value: {recipe_value}]"
    if key in scale:
        return f"{key} = {show(v)}  [preset {cfg.preset}'s scale; the recipe's value: {recipe_value}]"
    e = entry(name, key, cfg.task)
    if e is None:
        return f"{key} = {show(v)}  [NO SOURCE]"
    ref = reference(_recipe_with(name, key), e, cfg.task)
    return f"{key} = {show(v)}  [{verdict_text(e)}]  {ref}".rstrip()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m lra.recipe_sources",
                                description=__doc__.split("\n")[0])
    p.add_argument("--update-docs", type=Path, nargs="?", const=DOCS, default=None,
                   help=f"rewrite the tables between the markers of this page (default {DOCS})")
    p.add_argument("--check", action="store_true",
                   help="list every recipe value without a source and every malformed entry")
    args = p.parse_args(argv)
    if args.check:
        bad = missing() + problems()
        print("\n".join(bad) if bad else "every modern recipe value has a source")
        return 1 if bad else 0
    if args.update_docs is None:
        print(markdown())
        return 0
    update_docs(args.update_docs)
    print(f"updated {args.update_docs}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

