"""Check an attention family against the contract: ``python -m lra.check_family NAME``.

    python -m lra.check_family myattn                    # a registered family (a plugin's too)
    python -m lra.check_family path/to/file.py:MyAttn    # a family in one file
    python -m lra.check_family myattn --check padding --check causal

Runs the checks of ``lra.testing`` (the ones the project's suite runs on its own families: shape
and dtype under jit, eager against jit, shared buffers, padding leaks in the bidirectional and
the causal mode, causality, gradients (none into padding), bfloat16, dropout), prints one line per
failed check (``FAIL <check>: <what>``) and a summary. Exit status: 0 when every check that
applies passed, 1 when one failed, 2 for a bad command line (an unknown family lists the
choices).
"""

from __future__ import annotations

import argparse
import sys

import lra._guard  # noqa: F401  (first: one line where lra was found only in part)


def parser(checks: list[str]) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m lra.check_family",
                                description=__doc__.split("\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="checks: " + ", ".join(checks))
    p.add_argument("name", metavar="NAME",
                   help="a registered family, or path/to/file.py:ClassName")
    p.add_argument("--check", action="append", choices=checks, default=None, metavar="CHECK",
                   help="run only this check (repeatable; default: all): " + ", ".join(checks))
    return p


def _family(text: str) -> str:
    """The registered name ``text`` gives (loading a file family); ValueError with one line."""
    from lra import attention

    if attention.is_file_spec(text):
        return attention.load_file(text)
    attention.family(text)  # raises with the choices
    return text


def main(argv: list[str] | None = None) -> int:
    from lra import testing

    args = parser(list(testing.CHECKS)).parse_args(argv)
    from lra import attention

    try:
        name = _family(args.name)
    except (ValueError, attention.UnknownAttentionError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    results = testing.run_checks(name, args.check)
    failed = {check: why for check, why in results.items() if why is not None}
    for check, why in failed.items():
        print(f"FAIL {check}: {why}")
    skipped = [c for c in (args.check or testing.CHECKS) if c not in results]
    note = f", {len(skipped)} not applicable ({', '.join(skipped)}: no causal mode)" if skipped else ""
    print(f"{name}: {len(results) - len(failed)} of {len(results)} checks passed{note}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
