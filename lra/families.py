"""The table of attention families, generated from the registry (README embeds it).

    python -m lra.families                  # print the markdown table, installed plugins included
    python -m lra.families --update-readme  # rewrite the block between the README markers

The "state per layer" column is each family's declared ``recurrent_state`` formula: the numbers one
layer holds for one sequence at length L when it runs one token at a time (lra/state_size.py).
A family installed from another distribution (the entry-point group ``lra.attention``) is listed
after this tree's, its name marked ``(plugin: <distribution>)``; README's block holds this tree's
families only, so installing one cannot make README stale.
"""

from __future__ import annotations

import argparse
import inspect
import sys
from pathlib import Path

import lra._guard  # noqa: F401  (first: one line where lra was found only in part)
from lra import attention, state_size

BEGIN, END = "<!-- families:begin -->", "<!-- families:end -->"


def _row(name: str, label: str) -> str:
    cls = attention.family(name)
    causal = "yes" if "causal" in inspect.signature(cls.__init__).parameters else "no"
    opts = ", ".join(f"`{k}={v!r}`" for k, v in attention.options(name).items()) or "—"
    state = getattr(cls, state_size.ATTRIBUTE, None)
    return (f"| {label} | {getattr(cls, 'display_name', name)} | {getattr(cls, 'kind', '?')} "
            f"| {getattr(cls, 'paper', '?')} | {getattr(cls, 'complexity', '?')} "
            f"| {causal} | {f'`{state}`' if state else '?'} | {opts} |")


def table(*, plugins: bool = False) -> str:
    """This tree's families (modules of ``attention/``), then, with ``plugins``, the installed
    plugins' (module docstring)."""
    rows = ["| name | shown as | kind | paper | complexity | causal | state per layer | options |",
            "|---|---|---|---|---|---|---|---|"]
    rows += [_row(name, f"`{name}`") for name in attention.builtin()]
    if plugins:
        rows += [_row(name, f"`{name}` (plugin: {dist})")
                 for name, dist in sorted(attention.plugins().items())]
    return "\n".join(rows)


def readme_block(text: str) -> str:
    start, end = text.index(BEGIN) + len(BEGIN), text.index(END)
    return text[start:end].strip()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m lra.families", description=__doc__.split("\n")[0])
    p.add_argument("--update-readme", type=Path, nargs="?", const=Path("README.md"), default=None)
    args = p.parse_args(argv)
    if args.update_readme is None:
        print(table(plugins=True))
        return 0
    text = args.update_readme.read_text()
    start, end = text.index(BEGIN) + len(BEGIN), text.index(END)
    args.update_readme.write_text(text[:start] + "\n" + table() + "\n" + text[end:])
    print(f"updated {args.update_readme}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
