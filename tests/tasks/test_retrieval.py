"""Retrieval (AAN pairs): the official TSV format, tokens and masks, the cache, malformed rows, the
two-tower model and one training step on a TSV written here."""

from __future__ import annotations

import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from lra.tasks import retrieval
from lra.tasks._heads import DualHead

from lra import config as config_lib
from lra import sharding, tasks
from lra.data_pipeline import TrainBatches
from lra.encoder import build_model
from lra.train import create_train_state

ROWS = [  # label, id1, id2, text1, text2 (as bytes: the reader takes fields verbatim)
    (b"1.0", b"P00-1001", b"P99-1002", "Parsing with café grammars".encode(), b"b'We cite \\n you'"),
    (b"0.0", b"W05-0101", b"J93-2004", b"short", b""),
    (b"1", b"A", b"B", b"x" * 50, b"nul\x00byte"),
    (b"0", b"C", b"D", b"\"quoted\" stays", b"y" * 7),
]


def tsv(rows=ROWS, end=b"\n") -> bytes:
    return b"".join(b"\t".join(row) + end for row in rows)


def write_release(folder: Path, rows=ROWS) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name in retrieval.FILES.values():
        (folder / name).write_bytes(tsv(rows))
    return folder


def test_pairs_are_bytes_plus_one_with_true_length_masks(tmp_path):
    write_release(tmp_path / "lra_release" / "lra_release" / "tsv_data")  # the archive's nesting
    task = tasks.build("retrieval", tmp_path, max_length=12)
    assert (task.vocab_size, task.max_len, task.num_classes, task.pad_id) == (257, 12, 2, 0)
    assert task.inputs == ("inputs", "inputs2")
    assert task.directory == tmp_path / "lra_release" / "lra_release" / "tsv_data"
    task.prepare()
    test = task.source("test")
    assert len(test) == len(ROWS)
    for ex, (label, _, _, text1, text2) in zip(test, ROWS):
        assert set(ex) == {"inputs", "mask", "inputs2", "mask2", "targets"}
        assert int(ex["targets"]) == int(float(label))
        for key, raw in (("", text1), ("2", text2)):
            ids, mask = ex["inputs" + key], ex["mask" + key]
            assert ids.dtype == np.int32 and ids.shape == (12,) and mask.dtype == np.bool_
            kept = raw[:12]
            assert ids.tolist() == [b + 1 for b in kept] + [0] * (12 - len(kept))
            assert mask.tolist() == [True] * len(kept) + [False] * (12 - len(kept))
    assert test[2]["inputs2"][3] == 1 and test[2]["mask2"][3]  # a NUL byte is a token, not a pad
    assert not test[1]["mask2"].any()  # an empty document
    assert len(tasks.build("retrieval", tmp_path, max_length=12, val_size=3).source("val")) == 3


def test_documents_are_cut_at_10000_bytes_as_in_lra(tmp_path):
    rows = [(b"1", b"a", b"b", b"z" * 12_000, b"w" * 9_000)]
    write_release(tmp_path / "tsv_data", rows)
    ex = tasks.build("retrieval", tmp_path, max_length=11_000).source("train")[0]
    assert ex["mask"].sum() == 10_000 and ex["mask2"].sum() == 9_000


def test_crlf_and_trailing_blank_lines_are_accepted(tmp_path):
    path = tmp_path / "pairs.tsv"
    path.write_bytes(tsv(end=b"\r\n") + b"\n\n")
    examples = retrieval.read_split(path, 8)
    assert len(examples) == len(ROWS)
    assert examples[1]["inputs"].tolist() == [b + 1 for b in b"short"] + [0, 0, 0]


@pytest.mark.parametrize("content, line, reason", [
    (tsv() + b"1\ta\tb\tonly four\n", 5, "expected 5 tab-separated fields (label, id1, id2, text1, "
                                         "text2), got 4"),
    (tsv() + b"1\ta\tb\tc\td\te\n", 5, "got 6"),
    (b"label\tid1\tid2\ttext1\ttext2\n" + tsv(), 1, "the label (field 1) must be 0 or 1, got 'label'"),
    (tsv()[:10] + b"\n" + tsv(), 1, "expected 5 tab-separated fields"),
    (b"2.0\ta\tb\tc\td\n", 1, "must be 0 or 1, got '2.0'"),
    (b"nan\ta\tb\tc\td\n", 1, "must be 0 or 1, got 'nan'"),
    (tsv(ROWS[:1]) + b"\n" + tsv(ROWS[1:]), 2, "empty line"),
])
def test_malformed_rows_name_the_file_line_and_reason(tmp_path, content, line, reason):
    path = tmp_path / "new_aan_pairs.train.tsv"
    path.write_bytes(content)
    with pytest.raises(tasks.DataError) as err:
        retrieval.read_split(path, 16)
    assert str(err.value).startswith(f"{path}:{line}: ")
    assert reason in str(err.value)


def test_arrays_are_cached_and_the_cache_follows_the_file(tmp_path, monkeypatch):
    path = tmp_path / "new_aan_pairs.train.tsv"
    path.write_bytes(tsv())
    assert len(retrieval.read_split(path, 16)) == 4
    assert (tmp_path / "new_aan_pairs.train.tsv.bytes16.npz").is_file()
    parsed = []
    real = retrieval._parse_tsv
    monkeypatch.setattr(retrieval, "_parse_tsv", lambda *a: parsed.append(a[0]) or real(*a))
    assert len(retrieval.read_split(path, 16)) == 4 and parsed == []  # from the cache
    with open(path, "ab") as f:
        f.write(b"1\tE\tF\tnew\tpair\n")
    examples = retrieval.read_split(path, 16)
    assert parsed == [path] and len(examples) == 5 and int(examples[4]["targets"]) == 1
    retrieval.read_split(path, 8)  # another cut is another cache
    assert (tmp_path / "new_aan_pairs.train.tsv.bytes8.npz").is_file()


def test_a_read_only_release_folder_caches_in_the_data_dir(tmp_path, monkeypatch):
    release = write_release(tmp_path / "tsv_data")
    real_replace = retrieval.os.replace

    def replace(src, dst):
        if Path(dst).parent == release:
            raise PermissionError(f"read-only: {dst}")
        real_replace(src, dst)

    monkeypatch.setattr(retrieval.os, "replace", replace)
    tasks.build("retrieval", tmp_path, max_length=16).prepare()
    cached = sorted(p.name for p in (tmp_path / "retrieval" / "cache").iterdir())
    assert cached == sorted(f"{name}.bytes16.npz" for name in retrieval.FILES.values())
    assert not list(release.glob("*.npz")) and not list(release.glob(".*tmp"))


def test_missing_files_say_how_to_get_them_at_once(tmp_path):
    start = time.perf_counter()
    with pytest.raises(tasks.DataError) as err:
        tasks.build("retrieval", tmp_path).prepare()
    assert time.perf_counter() - start < 1
    message = str(err.value)
    assert "new_aan_pairs.train.tsv" in message and "python -m lra.data fetch-release" in message
    assert str(tmp_path / "lra_release" / "lra_release" / "tsv_data") in message


@pytest.mark.slow
def test_tiny_preset_trains_one_step_with_two_towers(tmp_path):
    rng = np.random.default_rng(0)
    rows = [(b"%d" % (i % 2), b"a", b"b", bytes(rng.integers(32, 127, 90, dtype=np.uint8)),
             bytes(rng.integers(32, 127, 40, dtype=np.uint8))) for i in range(40)]
    write_release(tmp_path / "tsv_data", rows)
    cfg = config_lib.load("retrieval", "softmax", preset="tiny",
                          overrides={"train.schedule": "constant", "train.lr": 1e-3})
    task = tasks.build("retrieval", tmp_path, **cfg.data)
    task.prepare()
    batch = TrainBatches(task.source("train"), cfg.train.batch_size, seed=0)[0]
    assert batch["inputs"].shape == batch["inputs2"].shape == (16, 64)
    assert batch["mask"].sum(1).tolist() == [64] * 16 and batch["mask2"].sum(1).tolist() == [40] * 16

    model = build_model(cfg, task, rngs=nnx.Rngs(params=0, dropout=0, default=0))
    assert isinstance(model.head, DualHead) and model.inputs == ("inputs", "inputs2")
    logits = model(batch)
    swapped = model({**batch, "inputs2": batch["inputs"][::-1], "mask2": batch["mask"][::-1]})
    assert logits.shape == (16, 2) and not np.allclose(logits, swapped)  # the second tower counts

    _, state, rest, _, step = create_train_state(cfg, task, sharding.make_mesh(), init="eager")
    new, metrics = step(jax.tree.map(jnp.copy, state), rest, batch, jax.random.key(0))
    assert int(new["step"]) == 1 and np.isfinite(float(metrics["loss"]))
    moved = jax.tree.map(lambda a, b: bool(jnp.any(a != b)), state["params"], new["params"])
    assert all(jax.tree.leaves(moved)), "some parameters did not move"
