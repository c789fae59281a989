"""The leaderboard's web page (``python -m lra.leaderboard --html DIR``), built from the committed
results into a temporary folder and checked in a real headless chromium: the table's numbers are
the CSV's cells, sorting and filtering change the rows as they should, a cell opens with its seeds,
an anchor opens its view. Without a chromium the browser tests skip, saying why."""

import csv
import html
import io
import json
import re
import shutil
import struct
from pathlib import Path

import pytest
from helpers import REPO

from lra import leaderboard
from lra.leaderboard import browser, names, published, reader, recall
from lra.leaderboard.accuracy import MODERN_HEADLINE_AND_SECOND, accuracy_section
from lra.leaderboard.load import load_efficiency, protocol
from lra.leaderboard.site import site_files

ROOT = REPO
RESULTS = ROOT / "results"
DRIVER = Path(__file__).with_name("site_driver.js")
# Every test here reads a leaderboard built from the committed results (some 20 s) and most drive a
# browser: the whole file runs in the full suite, not the fast lane.
pytestmark = pytest.mark.slow

NO_BROWSER = "no chromium on PATH (Debian: apt-get install chromium; .ci/run installs it as root)"


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """The committed results' runs and bench files copied to a temporary folder, the leaderboard
    built there with the page in a folder of its own (``--html``): (results folder, page folder)."""
    tmp = tmp_path_factory.mktemp("site")
    results = tmp / "results"
    for sub in ("runs", "efficiency"):
        shutil.copytree(RESULTS / sub, results / sub)
    web = tmp / "web"
    # the figures are not on the page (tests/leaderboard/test_leaderboard.py draws them)
    assert leaderboard.main(["--results-dir", str(results), "--html", str(web), "--no-figures"]) == 0
    return results, web


def _csv_rows(results):
    """The CSV's measured cells (its published rows are shown on demand, not in the table)."""
    return [r for r in csv.DictReader(io.StringIO((results / "leaderboard.csv").read_text()))
            if r["preset"] != "published"]


def _page_data(web):
    text = (web / "index.html").read_text(encoding="utf-8")
    found = re.search(r'<script id="data" type="application/json">(.*?)</script>', text, re.S)
    return json.loads(found.group(1))


def test_the_page_is_one_offline_file_with_the_csvs_cells(built):
    results, web = built
    assert sorted(p.name for p in web.iterdir()) == ["index.html"]
    text = (web / "index.html").read_text(encoding="utf-8")
    # nothing fetched from anywhere: no external scripts, styles, fonts or images
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", text)
    assert "<link" not in text and "@import" not in text and "url(" not in text
    assert "fetch(" not in text and "XMLHttpRequest" not in text
    data = _page_data(web)
    assert data["results"] == "../results/"  # --html elsewhere: links back to the results folder
    page_cells = {(v["protocol"], v["preset"], v["device"], metric, task, row["row"]): cell
                  for v in data["views"] for row in v["rows"]
                  for metric, per_task in row["cells"].items() for task, cell in per_task.items()}
    rows = _csv_rows(results)
    assert len(page_cells) == len(rows)
    for r in rows:
        cell = page_cells[(r["protocol"], r["preset"], r["device"], r["metric"], r["task"], r["row"])]
        assert cell["n"] == int(r["n"]) and abs(cell["m"] - float(r["mean"])) < 1e-3


def test_the_page_does_not_depend_on_the_order_of_the_files(built):
    """The same results in another order give the same bytes (``test_leaderboard`` checks that two
    builds give the same files, the page among them)."""
    results, _ = built
    runs, _ = recall.split(reader.read(results).runs)  # the LRA tables' runs, as build_all splits them
    bench = load_efficiency(results, [])

    def page(runs, bench):
        cells = []
        accuracy_section([r for r in runs if protocol(r) == "lra"], collect=cells)
        accuracy_section([r for r in runs if protocol(r) == "modern"], MODERN_HEADLINE_AND_SECOND,
                         protocol="modern", collect=cells)
        return site_files(cells, runs, bench)

    first = page(runs, bench)
    assert page(runs[::-1], bench[::-1]) == first
    assert _page_data_bytes(first["index.html"])["results"] == "../"  # default: results/site/


def _page_data_bytes(page: bytes):
    found = re.search(rb'<script id="data" type="application/json">(.*?)</script>', page, re.S)
    return json.loads(found.group(1))


def _drive(web, anchor="", actions=False):
    """The page with tests/leaderboard/site_driver.js appended, loaded in chromium: what the driver saw."""
    if browser.find() is None:
        pytest.skip(NO_BROWSER)
    page = web / "index.html"
    test_page = web / "driven.html"
    test_page.write_text(page.read_text(encoding="utf-8").replace(
        "</body>", "<script>\n" + DRIVER.read_text(encoding="utf-8") + "</script>\n</body>"),
        encoding="utf-8")
    dom = browser.dump_dom(test_page, anchor, query="actions=1" if actions else "", wait_ms=15000)
    found = re.findall(r'<pre id="driver-result">(.*?)</pre>', dom, re.S)
    assert found, "the driver wrote no result: the page's scripts failed"
    out = json.loads(html.unescape(found[-1]))
    assert not out.get("error"), out["error"]
    return out


@pytest.fixture(scope="module")
def driven(built):
    """What the driver saw doing its actions (clicks, selects, typing) on the page, once."""
    return _drive(built[1], actions=True)


def _mean(cell):
    return None if cell is None else float(cell["v"])


def test_in_a_browser_the_tables_show_the_csvs_numbers(built, driven):
    results, _ = built
    out = driven
    shown = {}
    for table in out["tables"]:
        for group in ("measured", "variants"):
            for row in table[group]:
                for task, cell in row["cells"].items():
                    if cell is not None:
                        key = (table["protocol"], table["preset"], table["device"], table["metric"],
                               task, row["row"])
                        shown[key] = cell
    rows = _csv_rows(results)
    assert len(shown) == len(rows) > 0
    for r in rows:
        cell = shown[(r["protocol"], r["preset"], r["device"], r["metric"], r["task"], r["row"])]
        assert abs(float(cell["v"]) - float(r["mean"])) <= 0.005 + 1e-9, (r, cell)
        if r["std"]:
            assert abs(float(cell["sd"].removeprefix("± ")) - float(r["std"])) <= 0.005 + 1e-9
        assert cell["n"] == f"({r['n']})"
        assert (cell["best"], cell["tied"], cell["few"]) == (r["best"] == "1", r["tied"] == "1",
                                                             r["few_seeds"] == "1"), (r, cell)
        assert cell["chance"] == (f"{r['at_chance']}/{r['n']} at chance" if r["at_chance"] != "0"
                                  else None)


def test_in_a_browser_sorting_filtering_and_published_rows(driven):
    out = driven
    first = out["tables"][0]
    listops = {r["row"]: _mean(r["cells"].get("listops")) for r in first["measured"]}
    sort = out["sort"]
    by_name = sorted(listops, key=lambda row: f"{names.family_name(row)} ".lower())  # the shown name
    assert sort["initial"] == by_name == sort["nameFirst"]
    assert sort["nameSecond"] == by_name[::-1]
    for order, descending in ((sort["listopsFirst"], True), (sort["listopsSecond"], False)):
        values = [listops[r] for r in order]
        present = [v for v in values if v is not None]
        assert values[:len(present)] == present  # families without the task last
        assert present == sorted(present, reverse=descending)
        assert sorted(order) == sorted(listops)
    kinds = {r["row"]: names.family_kind(r["row"]) for r in first["measured"]}
    assert [r["row"] for r in out["kindFilter"]] == sorted(
        (k for k, v in kinds.items() if v == "state space"),
        key=lambda row: f"{names.family_name(row)} ".lower())
    assert [r["row"] for r in out["nameFilter"]] == ["mamba", "mamba2"]  # case-insensitive
    expected_published = sum(len(table) for _, table in published.SOURCES)
    assert len(out["withPublished"]) == expected_published and out["withoutPublished"] == []


def test_in_a_browser_a_cell_opens_with_its_seeds_and_closes(built, driven):
    results, web = built
    out = driven
    runs = reader.read(results).runs
    seeds = sorted((r for r in runs if protocol(r) == "lra" and r["preset"] == "small"
                    and r["task"] == "listops" and r["_row"] == "mamba"),
                   key=lambda r: (r["seed"], r["_file"]))
    opened = out["opened"]
    assert opened["hash"] == "#lra/small/listops/mamba"
    assert opened["detail"]["heading"] == "ListOps · Mamba"
    assert opened["detail"]["seeds"] == [str(r["seed"]) for r in seeds]
    assert opened["detail"]["files"] == [f"../results/runs/{r['_file']}" for r in seeds]
    assert opened["detail"]["curves"] == sum(bool((r.get("eval_history") or {}).get("step"))
                                             for r in seeds) > 0
    assert all((web / href).resolve().is_file() for href in opened["detail"]["files"])
    assert out["closed"] == {"hash": "#lra/small", "detail": None}  # Escape closes it


def test_in_a_browser_an_anchor_opens_its_view_and_cell(built):
    results, web = built
    # The cell is one the committed results hold (the reference set is re-run cell by cell, so a
    # fixed name could point at a cell that is being re-run): the first modern small-preset run's.
    cells = sorted((r["task"], r["_row"]) for r in reader.read(results).runs
                   if protocol(r) == "modern" and r["preset"] == "small")
    assert cells, "the committed results hold no modern small-preset run"
    task, row = cells[0]
    out = _drive(web, f"modern/small/{task}/{row}")["initial"]
    assert out["page"] == ["accuracy"] and out["nav"] == "#modern/small"
    assert out["table"]["protocol"] == "modern" and out["table"]["metric"] == "test_accuracy_at_best_val"
    assert out["detail"]["heading"] == f"{names.task_name(task)} · {names.family_name(row)}"
    assert out["detail"]["seeds"]
    wrong = _drive(web, "lra/paper")["initial"]
    assert "No view or cell #lra/paper" in wrong["warn"] and "modern/small" in wrong["warn"]
    eff = _drive(web, "efficiency")["initial"]
    assert eff["page"] == ["efficiency"] and eff["bubbles"] > 0
    # a setting measured at one length (the MQAR bench files) draws no curve of one point
    lengths = {f"eff-{e['id']}": len(e["lengths"]) for e in _page_data(web)["efficiency"]}
    assert {s["id"]: (s["scaling"], s["oneLength"]) for s in eff["settings"]} == {
        i: (0, 1) if n == 1 else (1, 0) for i, n in lengths.items()}
    assert 1 in lengths.values() and any(n > 1 for n in lengths.values())
    peers = _drive(web, "peers")["initial"]
    assert peers["page"] == ["peers"] and peers["peersRows"] > 0


def test_a_screenshot_at_phone_width(built, tmp_path):
    _, web = built
    if browser.find() is None:
        pytest.skip(NO_BROWSER)
    png = tmp_path / "phone.png"
    browser.screenshot(web / "index.html", png, (390, 844))
    head = png.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n" and struct.unpack(">II", head[16:24]) == (390, 844)
