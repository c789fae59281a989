"""Every --protocol modern recipe value says where it comes from (issue 51; configs/_sources.py,
lra/recipe_sources.py, docs/families-and-protocols.md "Where each recipe value comes from")."""

import json
import math
from pathlib import Path

import pytest
from helpers import assert_one_line_error, run_in_process
from lra.configs import _sources

from lra import recipe_sources

ROOT = Path(__file__).resolve().parents[2]


def test_every_modern_recipe_value_has_a_source():
    missing = recipe_sources.missing()
    assert not missing, ("recipe values without a source (declare them in configs/_sources.py, "
                         "then run python -m lra.recipe_sources --update-docs):\n" + "\n".join(missing))


def test_every_source_entry_is_well_formed():
    problems = recipe_sources.problems()
    assert not problems, "\n".join(problems)


def test_a_new_recipe_key_without_a_source_is_named(monkeypatch):
    import lra.configs.pathx as pathx

    monkeypatch.setitem(pathx.MODERN, "s4d", {**pathx.MODERN["s4d"], "train.new_knob": 1})
    monkeypatch.setitem(pathx.MODERN, "newfamily", {"model.dropout": 0.0})
    missing = recipe_sources.missing()
    assert "pathx/s4d: train.new_knob" in missing
    assert "pathx/newfamily: model.dropout" in missing  # a family with no declared recipe
    assert not [m for m in missing if not m.startswith("pathx/")]


def test_a_departure_without_a_reason_is_a_problem(monkeypatch):
    bad = _sources.Source("{file}:{line} `--x`", _sources.DEPARTURE, "", (1, 2))
    monkeypatch.setitem(_sources.S5.keys, "train.eps", bad)
    problems = recipe_sources.problems()
    assert any("s5 train.eps" in p and "says why" in p for p in problems), problems
    assert any("s5 train.eps" in p and "2 lines for 6 tasks" in p for p in problems), problems


def test_no_departure_waits_on_an_issue_item():
    """A departure names its reason; "issue 51 item N" was a to-do, and every one is now removed
    or stated."""
    waiting = [f"{name} {key} ({', '.join(e.tasks)})"
               for name, recipe in _sources.RECIPES.items()
               for table in (recipe.keys, recipe.around) for key, found in table.items()
               for e in (found if isinstance(found, tuple) else (found,))
               if e.verdict != _sources.SAME and "(issue 51 item" in e.note]
    assert not waiting, waiting


def test_the_counts_are_the_cells_of_the_tables():
    counts = recipe_sources.counts()
    for name in ("s5", "s4d", "lru", "mega", "hgrn2", "*"):
        table = recipe_sources.recipe_table(name).splitlines()[4:]
        cells = sum(row.split(" | ")[1:7].count("·") for row in table)
        assert sum(counts[name].values()) == 6 * len(table) - cells, name
    # a family without a recipe: S5's values but its own options and head count
    assert sum(counts["no_recipe"].values()) == sum(counts["s5"].values()) - 48
    assert counts["*"] == {"same": 0, "departure": 0, "ours": 16, "unverified": 0}


def test_the_docs_tables_are_the_generated_ones():
    text = (ROOT / "docs" / "families-and-protocols.md").read_text()
    assert recipe_sources.docs_block(text) == recipe_sources.markdown(), (
        "docs/families-and-protocols.md is stale: run python -m lra.recipe_sources --update-docs")


def test_sources_name_the_file_and_line_of_the_task():
    assert (recipe_sources.reference(_sources.S5, recipe_sources.entry("s5", "train.lr", "text"),
                                     "text")
            == "lindermanlab/S5@3c18fdb bin/run_experiments/run_lra_imdb.sh:4 `--lr_factor` x "
               "`--ssm_lr_base` (s5/train.py:37)")
    e = recipe_sources.entry("s4d", "train.num_steps", "retrieval")
    assert e.verdict == _sources.SAME and "45,960" in e.note
    # a family without a recipe of its own falls back to S5's sources, except its head count
    assert recipe_sources.entry("no_recipe", "train.lr", "listops") is recipe_sources.entry(
        "s5", "train.lr", "listops")
    assert recipe_sources.entry("no_recipe", "model.num_heads", "listops").verdict == _sources.OURS


# P-LRU (Orvieto et al. 2023, App. D): H, N, iterations, batch, lr factor, weight decay, dropout,
# r_min, r_max, max phase, per task (issue 51 item 10).
LRU_PAPER = {
    "listops": (128, 256, 80_000, 32, 0.5, 0.05, 0.0, 0.0, 0.99, 2 * math.pi),
    "text": (256, 192, 50_000, 32, 0.1, 0.05, 0.1, 0.5, 0.9, 2 * math.pi),
    "retrieval": (128, 256, 100_000, 64, 0.5, 0.05, 0.1, 0.5, 0.9, 2 * math.pi),
    "image": (512, 384, 180_000, 50, 0.25, 0.05, 0.1, 0.9, 0.999, 2 * math.pi),
    "pathfinder": (192, 256, 500_000, 64, 0.25, 0.05, 0.0, 0.9, 0.999, 2 * math.pi),
    "pathx": (128, 256, 250_000, 32, 0.25, 0.05, 0.0, 0.999, 0.9999, math.pi / 10),
}


@pytest.mark.parametrize("task", list(LRU_PAPER))
def test_lru_recipe_is_the_papers_table(task):
    r = recipe_sources.task_module(task).MODERN["lru"]
    got = (r["model.emb_dim"], r["attn.state_size"], r["train.num_steps"], r["train.batch_size"],
           r["train.ssm_lr"] / r["train.lr"], r["train.weight_decay"], r["model.dropout"],
           r["attn.r_min"], r["attn.r_max"], r["attn.max_phase"])
    assert got == pytest.approx(LRU_PAPER[task]), task
    assert r["train.warmup_steps"] == r["train.num_steps"] // 10 and r["model.num_layers"] == 6


def test_print_config_sources_puts_each_value_beside_its_source():
    code, out, err = run_in_process("--task", "listops", "--attn", "s5", "--protocol", "modern",
                                    "--preset", "tiny", "--set", "train.weight_decay=0.1",
                                    "--print-config", "--sources")
    assert code == 0, err
    lines = {line.split(" = ")[0]: line for line in out.splitlines() if " = " in line}
    assert lines["train.lr"].startswith("train.lr = 0.003  [same]  lindermanlab/S5@3c18fdb "
                                        "bin/run_experiments/run_lra_listops.sh:3")
    assert "[--set; the recipe's value: 0.04]" in lines["train.weight_decay"]
    assert "[preset tiny's scale; the recipe's value: 128]" in lines["model.emb_dim"]
    assert "departure" in lines["model.channel_mixer"] and "half_glu2" in lines["model.channel_mixer"]
    assert lines["model.head"].startswith("model.head = linear  [same]  lindermanlab/S5@3c18fdb "
                                          "s5/seq_model.py:143")
    assert any(line.startswith("(positions) ") for line in out.splitlines())  # an around row
    assert "NO SOURCE" not in out


def test_print_config_alone_stays_json_and_sources_needs_the_modern_protocol():
    code, out, _ = run_in_process("--task", "listops", "--attn", "s5", "--protocol", "modern",
                                  "--print-config")
    assert code == 0 and json.loads(out)["train"]["lr"] == pytest.approx(0.003)
    code, out, err = run_in_process("--task", "listops", "--attn", "s5", "--print-config",
                                    "--sources")
    assert code == 2 and not out
    assert_one_line_error(err)
