"""CITATION.cff: valid Citation File Format, and a reference for every family the suite
reimplements (the paper each family's file declares) and every LRA task's source."""

import re
from pathlib import Path

import yaml

from lra import declared

CFF = Path(__file__).resolve().parent.parent / "CITATION.cff"
YEAR = re.compile(r"(?<![\d.])((?:19|20)\d\d)(?![\d.])")
# Each LRA task and where its data comes from: a word of the cited title.
TASK_SOURCES = {"listops": "ListOps", "pathfinder": "horizontal gated recurrent units",
                "text": "Sentiment", "image": "Tiny Images", "retrieval": "ACL Anthology Network"}


def _cff():
    return yaml.safe_load(CFF.read_text())


def test_the_citation_file_has_what_the_format_requires():
    cff = _cff()
    assert cff["cff-version"] == "1.2.0"
    for key in ("message", "title", "authors", "references"):
        assert cff[key], key
    for ref in cff["references"]:
        assert {"type", "title", "authors", "year"} <= set(ref), ref
        assert all("family-names" in a or "name" in a for a in ref["authors"]), ref


def test_every_family_s_declared_paper_is_cited():
    """The first author's surname and the year each family's file declares (``paper``) match one
    reference; a new family without its reference fails here, naming it."""
    cited = {(a.get("family-names"), ref["year"]) for ref in _cff()["references"]
             for a in ref["authors"][:1]}
    missing = []
    for name, facts in sorted(declared.declared("attention").items()):
        paper = facts.get("paper", "")
        year = YEAR.search(paper)
        surname = paper.split(",")[0].split(" ")[0]
        if not year or (surname, int(year.group(1))) not in cited:
            missing.append(f"{name}: {paper!r}")
    assert not missing, f"CITATION.cff has no reference for: {missing}"


def test_lra_and_the_sources_of_its_tasks_are_cited():
    titles = " | ".join(ref["title"] for ref in _cff()["references"])
    assert "Long Range Arena" in titles
    for task, words in TASK_SOURCES.items():
        assert words in titles, task
