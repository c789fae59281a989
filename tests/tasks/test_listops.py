"""ListOps: the generator against an independent evaluator, determinism, the reader and the task."""

from __future__ import annotations

import csv
import statistics
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from lra.tasks import _listops_gen, listops

from lra import tasks

SMALL = {"min_length": 3, "max_length": 30}  # fast; about 2.5% of the trees drawn are duplicates
SMALL_SIZES = {"train": 700, "val": 150, "test": 150}  # 1000 trees: several shards


# ----------------------------------------------------------------------------------------------
# An independent reading of the original's format: parse the parenthesised pairs into the
# original's nested tuples and evaluate them the way its ``to_value`` does.


def _parse_pairs(words: list[str], i: int):
    if words[i] == "(":
        left, i = _parse_pairs(words, i + 1)
        right, i = _parse_pairs(words, i)
        assert words[i] == ")", f"expected ')' at word {i}, got {words[i]!r}"
        return (left, right), i + 1
    word = words[i]
    assert word in ("[MIN", "[MAX", "[MED", "[SM", "]") or word.isdigit(), word
    return (int(word) if word.isdigit() else word), i + 1


def _value(t):
    """(value or partial application, counted length) of a parsed pair tree."""
    if isinstance(t, int):
        return t, 1
    if isinstance(t, str):
        return t, 0
    left, left_len = _value(t[0])
    right, right_len = _value(t[1])
    if isinstance(left, str):  # the operator and its first argument
        return (left, [right]), 2 + right_len
    op, args = left
    if right == "]":
        result = {"[MIN": min, "[MAX": max, "[SM": lambda a: sum(a) % 10,
                  "[MED": lambda a: int(statistics.median(a))}[op](args)
        return result, left_len
    return (op, [*args, right]), left_len + right_len


def reference(source: str) -> tuple[int, int]:
    """(value, counted length) of a serialised tree, written without the package's code."""
    words = source.split(" ")
    tree, end = _parse_pairs(words, 0)
    assert end == len(words), "trailing words"
    value, length = _value(tree)
    assert isinstance(value, int), "an unfinished operator"
    return value, length


def read_rows(path: Path) -> list[tuple[str, int]]:
    with open(path, newline="") as f:
        rows = list(csv.reader(f, delimiter="\t"))
    assert rows[0] == ["Source", "Target"]
    return [(source, int(target)) for source, target in rows[1:]]


def mismatches(path: Path) -> list[int]:
    """Line numbers whose target differs from the reference value."""
    return [i + 2 for i, (source, target) in enumerate(read_rows(path))
            if reference(source)[0] != target]


# ----------------------------------------------------------------------------------------------
# Generated data (small lengths, shared by several tests)


@pytest.fixture(scope="module")
def small(tmp_path_factory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("small")
    return listops.generate(out, **SMALL_SIZES, seed=0, workers=1, progress=False, **SMALL)


@pytest.fixture(scope="module")
def paper_length(tmp_path_factory) -> Path:
    """3000 trees at the paper's lengths (only a train file)."""
    out = tmp_path_factory.mktemp("paper")
    return listops.generate(out, train=3000, val=0, test=0, seed=0, workers=1,
                            progress=False)["train"]


def test_spec_example_serialises_exactly():
    assert listops.serialize(("MAX", [2, 9])) == "( ( ( [MAX 2 ) 9 ) ] )"
    tree = ("SM", [5, ("MIN", [4, 7]), 8])
    assert listops.serialize(tree) == "( ( ( ( [SM 5 ) ( ( ( [MIN 4 ) 7 ) ] ) ) 8 ) ] )"
    assert listops.evaluate(tree) == (5 + 4 + 8) % 10
    assert listops.evaluate(("MED", [3, 4])) == 3  # int(np.median) truncates
    assert listops.evaluate(("MED", [9, 0, 4, 7])) == 5


def test_every_target_matches_an_independent_evaluator(small, paper_length):
    for path in small.values():
        assert mismatches(path) == []
    rows = read_rows(paper_length)[:150]
    assert all(reference(source)[0] == target for source, target in rows)


def test_the_evaluator_catches_a_tampered_target(small, tmp_path):
    rows = read_rows(small["val"])
    source, target = rows[3]
    rows[3] = (source, (target + 1) % 10)
    tampered = tmp_path / "basic_val.tsv"
    with open(tampered, "w", newline="") as f:
        writer = csv.writer(f, delimiter="\t")
        writer.writerow(["Source", "Target"])
        writer.writerows(rows)
    assert mismatches(tampered) == [5]


def test_lengths_are_strictly_inside_the_bounds(small, paper_length):
    for path in small.values():
        lengths = [reference(source)[1] for source, _ in read_rows(path)]
        assert SMALL["min_length"] < min(lengths) and max(lengths) < SMALL["max_length"]
    for source, _ in read_rows(paper_length)[:150]:
        assert 500 < reference(source)[1] < 2000


def test_same_seed_same_files_on_any_worker_count(small, tmp_path):
    two = listops.generate(tmp_path / "two", **SMALL_SIZES, seed=0, workers=2, progress=False,
                           **SMALL)
    for split in listops.SPLITS:
        assert two[split].read_bytes() == small[split].read_bytes(), split
    other = listops.generate(tmp_path / "other", **SMALL_SIZES, seed=1, workers=1,
                             progress=False, **SMALL)
    assert other["train"].read_bytes() != small["train"].read_bytes()


def test_no_duplicates_within_or_across_splits(small):
    sources = [source for path in small.values() for source, _ in read_rows(path)]
    assert len(sources) == sum(SMALL_SIZES.values())
    assert len(set(sources)) == len(sources)


def test_files_are_the_originals_format(small):
    raw = small["test"].read_bytes()
    assert raw.startswith(b"Source\tTarget\r\n")
    assert raw.count(b"\r\n") == SMALL_SIZES["test"] + 1
    assert not list(small["test"].parent.glob(".*tmp"))


def test_labels_and_lengths_are_like_the_original(paper_length):
    rows = read_rows(paper_length)
    counts = Counter(target for _, target in rows)
    share = np.array([counts[d] for d in range(10)]) / len(rows)
    # Original (spec section 5): 0 and 9 about 17% each, 1-8 about 7.6-9.1% each.
    assert 0.13 < share[0] < 0.21 and 0.13 < share[9] < 0.21, share
    assert np.all((share[1:9] > 0.05) & (share[1:9] < 0.12)), share
    assert min(share[0], share[9]) > share[1:9].max()
    # Counted length = tokens without parentheses. Original: 5th/50th/95th pct 540/995/1819.
    lengths = np.array([sum(w not in "()" for w in s.split()) for s, _ in rows])
    p5, p50, p95 = np.percentile(lengths, [5, 50, 95])
    assert 515 < p5 < 580 and 880 < p50 < 1080 and 1700 < p95 < 1900, (p5, p50, p95)


def test_a_failed_write_leaves_no_file(tmp_path, monkeypatch):
    calls = []
    real = _listops_gen._write_tsv

    def failing(path, rows):
        calls.append(path)
        if len(calls) == 2:
            raise OSError("disk full")
        real(path, rows)

    monkeypatch.setattr(_listops_gen, "_write_tsv", failing)
    with pytest.raises(OSError, match="disk full"):
        listops.generate(tmp_path, train=5, val=5, test=5, workers=1, progress=False, **SMALL)
    # no split file, no temporary; the finished shards are kept for the next try
    assert [p.name for p in tmp_path.iterdir()] == [_listops_gen.SHARD_STORE]


def test_options_that_cannot_give_enough_trees_fail_clearly(tmp_path):
    with pytest.raises(ValueError, match="strict"):
        listops.generate(tmp_path, train=5, min_length=10, max_length=11, progress=False)
    with pytest.raises(ValueError, match="at most"):
        listops.generate(tmp_path, train=5, max_depth=2, min_length=500, progress=False)
    # Only the ten one-digit trees fit in length < 2.
    with pytest.raises(tasks.DataError, match="only 10 distinct"):
        listops.generate(tmp_path, train=11, val=0, test=0, min_length=0, max_length=2,
                         workers=1, progress=False)


# ----------------------------------------------------------------------------------------------
# Reading


OFFICIAL_ROWS = [  # (source, target, ids without parentheses)
    ("( ( ( [MAX 2 ) 9 ) ] )", 9, [2, 8, 15, 5]),
    ("( ( ( [MED 3 ) 4 ) ] )", 3, [3, 9, 10, 5]),
    ("( ( ( ( [SM 5 ) ( ( ( [MIN 4 ) 7 ) ] ) ) 8 ) ] )", 7, [4, 11, 1, 10, 13, 5, 14, 5]),
]


def write_official(folder: Path, rows=OFFICIAL_ROWS) -> None:
    folder.mkdir(parents=True)
    text = "Source\tTarget\r\n" + "".join(f"{s}\t{t}\r\n" for s, t, _ in rows)
    for split in listops.SPLITS:
        (folder / f"basic_{split}.tsv").write_bytes(text.encode())


def test_official_format_round_trip(tmp_path):
    write_official(tmp_path / "listops-1000")
    examples = listops.read_split(tmp_path / "listops-1000" / "basic_val.tsv", 12)
    assert len(examples) == len(OFFICIAL_ROWS)
    for ex, (source, target, ids) in zip(examples, OFFICIAL_ROWS):
        assert ex["inputs"].tolist() == ids + [0] * (12 - len(ids))
        assert ex["mask"].tolist() == [True] * len(ids) + [False] * (12 - len(ids))
        assert ex["targets"] == target == reference(source)[0]
    lf = tmp_path / "lf.tsv"  # LF line ends read the same
    lf.write_bytes((tmp_path / "listops-1000" / "basic_val.tsv").read_bytes().replace(b"\r", b""))
    assert [e["inputs"].tolist() for e in listops.read_split(lf, 12)] == \
           [e["inputs"].tolist() for e in examples]


@pytest.mark.parametrize("text, line, expected", [
    ("Source\tTarget\n( ( ( [MAX 2 ) 9 ) ] )\t9\n( ( ( [MAX 2 ) 9 ) ] )\n", 3, "2 tab-separated"),
    ("Source\tTarget\n( ( ( [MAX 2 ) 9 ) ] )\t9\t1\n", 2, "2 tab-separated"),
    ("Source\tTarget\n( ( ( [MAX 2 ) 9 ) ] )\t10\n", 2, "target digit"),
    ("Source\tTarget\n( ( ( [MAX 2 ) 9 ) ] )\tnine\n", 2, "target digit"),
    ("Source\tTarget\n( ( ( [MAX 2 ) 9 ) ] )\t9\n( ( ( [MAX 2 ) 9 ) X )\t9\n", 3,
     "unknown token 'X'"),
    ("( ( ( [MAX 2 ) 9 ) ] )\t9\n", 1, "header"),
    ("", 1, "header"),
    ("Source\tTarget\n\t4\n", 2, "empty"),
    ("Source\tTarget\n( ( ( [MAX 2 ) 9 ) ] )\t9\n[MAX 1 2 3 4 5 6 7 8 9 ]\t9\n", 3, "at most 10"),
])
def test_malformed_files_name_the_file_and_line(tmp_path, text, line, expected):
    path = tmp_path / "basic_train.tsv"
    path.write_text(text)
    with pytest.raises(tasks.DataError) as err:
        listops.read_split(path, 10)
    assert f"{path}:{line}: " in str(err.value)
    assert expected in str(err.value)


def test_tokens_are_cached_and_the_cache_follows_the_file(tmp_path, monkeypatch):
    path = tmp_path / "basic_train.tsv"
    path.write_text("Source\tTarget\n( ( ( [MAX 2 ) 9 ) ] )\t9\n")
    assert len(listops.read_split(path, 8)) == 1
    assert (tmp_path / "basic_train.tsv.tokens.npz").is_file()

    parsed = []
    real = listops._parse_tsv
    monkeypatch.setattr(listops, "_parse_tsv", lambda p: parsed.append(p) or real(p))
    assert listops.read_split(path, 8)[0]["targets"] == 9
    assert parsed == []  # served from the cache
    with open(path, "a") as f:
        f.write("( ( ( [MIN 2 ) 9 ) ] )\t2\n")
    examples = listops.read_split(path, 8)
    assert parsed == [path] and len(examples) == 2 and examples[1]["targets"] == 2


# ----------------------------------------------------------------------------------------------
# The task


def test_facts_and_head():
    task = tasks.build("listops", Path("/nonexistent"))
    assert (task.num_classes, task.pad_id, task.vocab_size, task.max_len) == (10, 0, 16, 2000)
    assert task.vocab_size == 1 + max(listops.VOCAB.values())
    assert tasks.build("listops", Path("/x"), max_length=700).max_len == 700
    from flax import nnx
    from lra.tasks._heads import ClassifierHead

    head = task.head(8, 16, rngs=nnx.Rngs(0))
    assert isinstance(head, ClassifierHead) and head.logits.out_features == 10


def test_prepare_generates_once_and_source_follows_the_contract(tmp_path, capsys, monkeypatch):
    options = {"min_length": 10, "max_length": 60, "train_size": 40, "val_size": 10,
               "test_size": 10}
    task = tasks.build("listops", tmp_path, **options)
    task.prepare()
    folder = tmp_path / "listops" / "min10_max60_train40_val10_test10"
    assert task.directory == folder
    assert sorted(p.name for p in folder.glob("*.tsv")) == [
        "basic_test.tsv", "basic_train.tsv", "basic_val.tsv"]
    message = capsys.readouterr().err
    assert f"ListOps data not found in {folder}; generating 60 examples with seed 0 (about" \
           in message

    monkeypatch.setattr(listops, "generate", lambda *a, **k: pytest.fail("regenerated"))
    task.prepare()  # the files are there: nothing to do
    rows = read_rows(folder / "basic_train.tsv")
    src = task.source("train")
    assert len(src) == 40
    for i in (0, 17, -1):
        ex = src[i]
        assert set(ex) == {"inputs", "mask", "targets"}
        assert ex["inputs"].dtype == np.int32 and ex["inputs"].shape == (60,)
        assert ex["mask"].dtype == np.bool_ and ex["mask"].shape == (60,)
        assert ex["targets"].dtype == np.int32 and ex["targets"].shape == ()
        source, target = rows[i]
        value, length = reference(source)
        assert int(ex["targets"]) == target == value
        assert ex["mask"].sum() == length and ex["mask"][:length].all()
        assert (ex["inputs"][length:] == 0).all() and (ex["inputs"][:length] > 0).all()
    with pytest.raises(IndexError):
        src[40]
    with pytest.raises(ValueError, match="unknown split"):
        task.source("dev")


def test_an_official_release_is_read_not_regenerated(tmp_path, monkeypatch):
    official = tmp_path / "lra_release" / "listops-1000"
    write_official(official)
    monkeypatch.setattr(listops, "generate", lambda *a, **k: pytest.fail("regenerated"))
    task = tasks.build("listops", tmp_path)
    assert task.directory == official
    task.prepare()
    assert not (tmp_path / "listops").exists()
    ex = task.source("test")[2]
    assert ex["inputs"][:8].tolist() == OFFICIAL_ROWS[2][2] and ex["mask"].sum() == 8
    # Non-paper options never read the official folder.
    assert tasks.build("listops", tmp_path, seed=3).directory == tmp_path / "listops" / "seed3"


def test_missing_files_say_how_to_get_them(tmp_path):
    with pytest.raises(tasks.DataError, match=r"lra\.data prepare"):
        tasks.build("listops", tmp_path).source("train")


def test_paper_defaults_live_in_the_task_folder(tmp_path):
    task = tasks.build("listops", tmp_path)
    assert task.directory == tmp_path / "listops"
