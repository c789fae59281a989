"""The documentation stays true to itself and to the code.

* Every citation of a page in code, tests and docs names a page and a heading that exist:
  ``docs/running.md "Running"``, ``README 'Quick start'``, ``tasks/README.md's "The golden
  fixture"`` (the heading exactly), or ``docs/results.md#the-web-page`` (a GitHub anchor).
  This file's own deliberately wrong examples are left out of the scan.
* Every relative link in the Markdown pages (README.md, docs/, the folders' READMEs, CONTRIBUTING.md,
  CHANGELOG.md) reaches a file, and its ``#anchor`` a heading of it.
* docs/architecture.md names every module of the packages it maps.
* The golden-fixture command of tasks/README.md runs a test that exists and honours the variable.

Each checker returns its findings, so the tests below also show each one failing on a wrong input.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest


def _root() -> Path:
    here = Path(__file__).resolve().parent
    while not (here / "pyproject.toml").exists():
        here = here.parent
    return here


ROOT = _root()
PAGES = ["README.md", "CONTRIBUTING.md", "CHANGELOG.md", "attention/README.md", "tasks/README.md",
         *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md"))]
CODE_DIRS = ["lra", "attention", "tasks", "configs", "tests", "scripts"]
MAPPED = ["lra", "lra/bench", "lra/leaderboard", "attention", "tasks", "configs"]

# A page: README (bare), or a path ending in .md; never part of a longer path or a URL.
_FILE = r"(?<![\w/.:-])((?:[\w.-]+/)*[\w.-]+\.md|README)(?![\w.])"
# <file> "<heading>" / <file> '<heading>' / <file>'s "<heading>" / <file>, "<heading>"; the quote
# may follow on the next line of a comment (``# "Two protocols"``) and wrap inside a Markdown page.
CITATION = re.compile(_FILE + r"""(?:'s)?,?(?:[ \t]+|[ \t]*\n[ \t#]*)(?:"([^"]{1,120})"|'([^'\n]{1,120})')""")
ANCHOR = re.compile(_FILE + r"#([\w-]+)")
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^(```|~~~)")


def _prose(text: str) -> str:
    """``text`` with its fenced code blocks blanked (their ``#`` lines are not headings)."""
    out, fenced = [], False
    for line in text.split("\n"):
        if FENCE.match(line):
            fenced = not fenced
            out.append("")
            continue
        out.append("" if fenced else line)
    return "\n".join(out)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.replace("`", "").strip().lower())
    return text.replace(" ", "-")


def headings(page: Path) -> tuple[set[str], set[str]]:
    """The page's heading texts (backticks dropped) and their anchors (duplicates numbered)."""
    texts, anchors, seen = set(), set(), {}
    for m in re.finditer(r"^#{1,6}[ \t]+(.+?)[ \t]*#*$", _prose(page.read_text()), re.M):
        text = m.group(1).replace("`", "")
        texts.add(text)
        base = slug(text)
        n = seen.get(base, 0)
        anchors.add(base if n == 0 else f"{base}-{n}")
        seen[base] = n + 1
    return texts, anchors


def _page(name: str, citing: Path) -> Path | None:
    """The page a citation names: from the repository root, else beside the citing file."""
    name = "README.md" if name == "README" else name
    for base in (ROOT, citing.parent):
        path = (base / name).resolve()
        if path.is_file():
            return path
    return None


def _text(path: Path) -> str:
    """What a scan reads: escaped quotes of Python strings unescaped; a page without its links
    (link_problems checks them)."""
    text = path.read_text(errors="replace").replace('\\"', '"').replace("\\'", "'")
    return LINK.sub("", text) if path.suffix == ".md" else text


def citation_problems(path: Path) -> list[str]:
    """Every citation of a page in ``path`` that names a missing page, heading or anchor."""
    text = _text(path)
    where = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
    problems = []
    for m in CITATION.finditer(text):
        section = " ".join(re.sub(r"\n[ \t#]*", " ", m.group(2) or m.group(3)).split())
        page = _page(m.group(1), path)
        line = text.count("\n", 0, m.start()) + 1
        if page is None:
            problems.append(f"{where}:{line}: no page {m.group(1)}")
        elif section not in headings(page)[0]:
            problems.append(f"{where}:{line}: {m.group(1)} has no heading {section!r}")
    for m in ANCHOR.finditer(text):
        page = _page(m.group(1), path)
        line = text.count("\n", 0, m.start()) + 1
        if page is None:
            problems.append(f"{where}:{line}: no page {m.group(1)}")
        elif m.group(2) not in headings(page)[1]:
            problems.append(f"{where}:{line}: {m.group(1)} has no anchor #{m.group(2)}")
    return problems


def link_problems(page: Path) -> list[str]:
    """Every relative link of a Markdown page that reaches no file, or no heading of it."""
    problems, where = [], page.relative_to(ROOT) if page.is_relative_to(ROOT) else page.name
    for m in LINK.finditer(_prose(page.read_text())):
        target = m.group(1)
        if re.match(r"[a-z]+:", target):  # https:, mailto:
            continue
        name, _, anchor = target.partition("#")
        dest = (page.parent / name).resolve() if name else page
        if not dest.exists():
            problems.append(f"{where}: {target}: no such file")
        elif anchor and (dest.suffix != ".md" or anchor not in headings(dest)[1]):
            problems.append(f"{where}: {target}: no heading #{anchor}")
    return problems


def _sources() -> list[Path]:
    files = [p for d in CODE_DIRS for p in (ROOT / d).rglob("*")
             if p.suffix in (".py", ".sh", ".md") and "__pycache__" not in p.parts]
    files = {*files, *(ROOT / p for p in PAGES), ROOT / "pyproject.toml", ROOT / ".ci" / "run"}
    return sorted(files - {Path(__file__).resolve()})


def test_every_citation_names_a_page_and_a_heading_that_exist():
    sources = _sources()
    found = sum(len(CITATION.findall(_text(p))) for p in sources)
    assert found >= 30, found  # the scan sees the citations (lra, configs, tests, docs)
    problems = [x for p in sources for x in citation_problems(p)]
    assert not problems, "\n".join(problems)


LOOSE = re.compile(_FILE + r"""(?:'s)?,?\s*["'](?!s\b)""")


def unparsed_citations(path: Path) -> list[str]:
    """A page named right before a quote is a citation: one CITATION misses would go unchecked."""
    text, missed = _text(path), []
    parsed = {m.start() for m in CITATION.finditer(text)}
    for m in LOOSE.finditer(text):
        closing = text[m.end(1)] in "\"'"  # a string's closing quote: ``"README.md"``
        if m.start() not in parsed and not closing:
            missed.append(f"{path.name}: {text[m.start():m.end() + 40]!r}")
    return missed


def test_no_citation_of_a_page_is_left_unparsed():
    missed = [x for p in _sources() for x in unparsed_citations(p)]
    assert not missed, "\n".join(missed)


@pytest.mark.parametrize("page", PAGES)
def test_every_relative_link_of_a_page_resolves(page):
    problems = link_problems(ROOT / page)
    assert not problems, "\n".join(problems)


def test_the_checks_fail_on_a_wrong_citation_or_link(tmp_path):
    code = tmp_path / "cites.py"
    code.write_text('# docs/running.md "Running" and README \'Quick start\' exist\n'
                    '# docs/running.md "No such section", README \'Nope\' and docs/nope.md "Running"\n'
                    '# docs/results.md#the-web-page exists, docs/results.md#nowhere does not\n'
                    'HELP = "see docs/families-and-protocols.md\n'
                    '# \\"Two protocols\\""\n')
    problems = citation_problems(code)
    assert len(problems) == 4, problems
    assert any("'No such section'" in p for p in problems)
    assert any("'Nope'" in p for p in problems)
    assert any("no page docs/nope.md" in p for p in problems)
    assert any("#nowhere" in p for p in problems)
    code.write_text("# README 'Quick\n# start' cut across lines, README.md's own \"README.md\" literal\n")
    assert len(unparsed_citations(code)) == 1, unparsed_citations(code)
    (tmp_path / "running.md").write_text("# Running and watching\n\n## Running\n")
    page = tmp_path / "probe.md"
    page.write_text("# Probe\n\n[ok](running.md#running) [bad](running.md#nowhere) [gone](gone.md)\n"
                    "```bash\n[in code](not-checked.md)\n```\n")
    problems = link_problems(page)
    assert len(problems) == 2 and "#nowhere" in problems[0] and "gone.md" in problems[1], problems


def test_slugs_follow_github():
    assert slug("Comparability with LRA's Table 1") == "comparability-with-lras-table-1"
    assert slug("Encoder options (the modern recipes)") == "encoder-options-the-modern-recipes"
    assert slug("Sweeps: regenerating the table") == "sweeps-regenerating-the-table"
    assert slug("`lra.run` flags") == "lrarun-flags"


def _registered() -> tuple[set[str], set[str]]:
    from lra import attention, tasks

    return set(attention.available()), set(tasks.available())


def architecture_problems(text: str) -> list[str]:
    """Modules of the mapped packages the page does not name. A family's or a task's own file is
    named by ``attention/<name>.py`` / ``tasks/<name>.py`` / ``configs/<task>.py``; every other
    module by its path."""
    families, task_names = _registered()
    placeholders = {"attention": ("attention/<name>.py", families),
                    "tasks": ("tasks/<name>.py", task_names), "configs": ("configs/<task>.py", task_names)}
    missing = []
    for folder in MAPPED:
        for module in sorted((ROOT / folder).glob("*.py")):
            rel = module.relative_to(ROOT).as_posix()
            covered = folder in placeholders and module.stem in placeholders[folder][1]
            if covered:
                rel = placeholders[folder][0]
            if rel not in text:
                missing.append(rel)
    return missing


def test_the_architecture_page_names_every_module():
    text = (ROOT / "docs" / "architecture.md").read_text()
    missing = architecture_problems(text)
    assert not missing, f"docs/architecture.md does not name: {missing}"
    assert architecture_problems(text.replace("lra/atomic.py", "")) == ["lra/atomic.py"]


def test_the_golden_fixture_command_runs_a_test_that_writes_it():
    text = (ROOT / "tasks" / "README.md").read_text()
    m = re.search(r"^(\w+)=1 python -m pytest .*?(tests/\S+\.py) -k (\w+)$", text, re.M)
    assert m, "tasks/README.md: no regeneration command"
    variable, test_file, keyword = m.groups()
    source = (ROOT / test_file).read_text()
    assert variable in source and re.search(rf"def test_\w*{keyword}\w*\(", source), m.group(0)
    assert re.search(r'FIXTURE = .*"resolved_configs.json"', source)
    fixture = "tests/core/data/resolved_configs.json"
    assert fixture in text and (ROOT / fixture).exists()
