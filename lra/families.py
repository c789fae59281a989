"""The table of attention families, generated from the registry (README embeds it).

    python -m lra.families                  # print the markdown table
    python -m lra.families --update-readme  # rewrite the block between the README markers

The "state per layer" column is each family's declared ``recurrent_state`` formula: the numbers one
layer holds for one sequence at length L when it runs one token at a time (lra/state_size.py).
"""

from __future__ import annotations

import argparse
import inspect
import sys
from pathlib import Path

import attention
from lra import state_size

BEGIN, END = "<!-- families:begin -->", "<!-- families:end -->"


def table() -> str:
    """This tree's families (modules of ``attention/``); an installed out-of-tree family is not
    README's to list, so installing one cannot make README stale."""
    rows = ["| name | shown as | kind | paper | complexity | causal | state per layer | options |",
            "|---|---|---|---|---|---|---|---|"]
    for name in attention.available():
        cls = attention.family(name)
        if not cls.__module__.startswith(f"{attention.__name__}."):
            continue
        causal = "yes" if "causal" in inspect.signature(cls.__init__).parameters else "no"
        opts = ", ".join(f"`{k}={v!r}`" for k, v in attention.options(name).items()) or "—"
        state = getattr(cls, state_size.ATTRIBUTE, None)
        rows.append(f"| `{name}` | {getattr(cls, 'display_name', name)} | {getattr(cls, 'kind', '?')} "
                    f"| {getattr(cls, 'paper', '?')} | {getattr(cls, 'complexity', '?')} "
                    f"| {causal} | {f'`{state}`' if state else '?'} | {opts} |")
    return "\n".join(rows)


def readme_block(text: str) -> str:
    start, end = text.index(BEGIN) + len(BEGIN), text.index(END)
    return text[start:end].strip()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m lra.families", description=__doc__.split("\n")[0])
    p.add_argument("--update-readme", type=Path, nargs="?", const=Path("README.md"), default=None)
    args = p.parse_args(argv)
    if args.update_readme is None:
        print(table())
        return 0
    text = args.update_readme.read_text()
    start, end = text.index(BEGIN) + len(BEGIN), text.index(END)
    args.update_readme.write_text(text[:start] + "\n" + table() + "\n" + text[end:])
    print(f"updated {args.update_readme}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
