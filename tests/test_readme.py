"""README stays true: its family table is the registry's, its quick start is two commands."""

import re
from pathlib import Path

from lra import families

README = Path(__file__).resolve().parent.parent / "README.md"


def test_family_table_matches_the_registry():
    assert families.readme_block(README.read_text()) == families.table(), (
        "README's family table is stale: run `python -m lra.families --update-readme`")


def test_quick_start_is_two_commands_install_and_run_then_tests():
    text = README.read_text()
    section = text[text.index("## Quick start"):]
    block = re.search(r"```bash\n(.*?)```", section, re.S).group(1).strip().splitlines()
    assert len(block) == 2
    assert "pip install" in block[0] and "python -m lra.run" in block[0]
    assert block[1].startswith("python -m pytest")
