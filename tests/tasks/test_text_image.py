"""Text (IMDB bytes) and Image (grayscale CIFAR-10 pixels): tokens, masks, splits, a training step on
tfds mock data, and the fast, explained failure when the data is missing and cannot be fetched."""

from __future__ import annotations

import dataclasses
import json
import os
import socket
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import tensorflow_datasets as tfds

import tasks
from lra import config as config_lib
from lra import sharding
from lra.data_pipeline import TrainBatches
from lra.train import create_train_state
from tasks import _tfds, image, text


@pytest.fixture
def silent_url():
    """A server that accepts connections and never answers: the worst case of a blocked network."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(8)
        yield f"http://127.0.0.1:{server.getsockname()[1]}/dataset.tar.gz"


@pytest.fixture(autouse=True)
def no_proxy(monkeypatch):
    """The network probe follows *_proxy variables; these tests decide reachability themselves."""
    for key in list(os.environ):
        if key.lower().endswith("_proxy"):
            monkeypatch.delenv(key)


def mark_prepared(tfds_dir: Path, name: str, file_format: str = "array_record") -> None:
    """What tfds leaves in a prepared dataset's folder, as far as the tasks look."""
    folder = tfds_dir / tfds.builder(name).info.full_name
    folder.mkdir(parents=True)
    (folder / "dataset_info.json").write_text(json.dumps({"name": name, "fileFormat": file_format}))


def mock(n: int):
    return tfds.testing.mock_data(num_examples=n, policy=tfds.testing.MockPolicy.USE_CODE)


# ----------------------------------------------------------------------------------------------
# Tokens and masks


def test_text_ids_are_utf8_bytes_plus_one_and_the_mask_is_the_true_length():
    inputs, mask = text.encode("café", 8)
    assert inputs.dtype == np.int32 and mask.dtype == np.bool_
    assert inputs.tolist() == [ord("c") + 1, ord("a") + 1, ord("f") + 1, 0xC3 + 1, 0xA9 + 1, 0, 0, 0]
    assert mask.tolist() == [True] * 5 + [False] * 3
    # A NUL byte is a real token (id 1), not padding: the mask comes from the length.
    inputs, mask = text.encode(b"a\x00b", 4)
    assert inputs.tolist() == [98, 1, 99, 0] and mask.tolist() == [True, True, True, False]
    # Longer reviews are cut at max_len bytes (LRA), even inside a multi-byte character.
    inputs, mask = text.encode("aé", 2)
    assert inputs.tolist() == [98, 0xC3 + 1] and mask.all()
    assert text.encode(b"\xff", 1)[0].tolist() == [256]  # the largest id: vocab 257


# (r, g, b) -> tf.image.rgb_to_grayscale, computed with TensorFlow 2.21. The first eight are colours
# where a float32 matmul (another summation order) gives a different value; pure green shows the
# truncation (round-to-nearest would give 150).
TF_GRAY = [((5, 171, 227), 128), ((94, 116, 93), 106), ((103, 143, 158), 133),
           ((118, 127, 96), 121), ((129, 174, 9), 142), ((131, 224, 114), 184),
           ((139, 139, 163), 142), ((146, 249, 51), 196), ((0, 0, 0), 0),
           ((255, 255, 255), 255), ((255, 0, 0), 76), ((0, 255, 0), 149), ((0, 0, 255), 29)]


def test_grayscale_matches_tensorflow():
    rgb = np.array([c for c, _ in TF_GRAY], np.uint8)
    assert image.grayscale(rgb).tolist() == [g for _, g in TF_GRAY]
    assert image.grayscale(rgb.reshape(13, 1, 3)).shape == (13, 1)


def test_pixels_are_shifted_so_black_is_a_token_and_nothing_is_masked():
    picture = np.zeros((32, 32, 3), np.uint8)
    picture[0, 1] = (255, 255, 255)
    picture[1, 0] = (0, 255, 0)
    ex = image.PixelExamples([{"image": picture, "label": np.int64(7)}], 0, 1)[0]
    assert ex["inputs"].dtype == np.int32 and ex["inputs"].shape == (1024,)
    assert ex["mask"].dtype == np.bool_ and ex["mask"].all()
    assert ex["inputs"][0] == 1 and ex["inputs"][1] == 256 and ex["inputs"][32] == 150  # row-major
    assert (np.delete(ex["inputs"], [1, 32]) == 1).all()  # black pixels: id 1, never the pad id 0
    assert int(ex["targets"]) == 7


# ----------------------------------------------------------------------------------------------
# Tasks on tfds mock data


def test_text_task_facts_and_splits(tmp_path):
    mark_prepared(tmp_path / "text", "imdb_reviews")
    task = tasks.build("text", tmp_path, val_size=5)
    assert (task.vocab_size, task.max_len, task.num_classes, task.pad_id) == (257, 1000, 2, 0)
    assert task.inputs == ("inputs",)
    assert tasks.build("text", tmp_path, max_length=4000).max_len == 4000
    with mock(12):
        task.prepare()  # finds the prepared folder: nothing to do
        records = tfds.data_source("imdb_reviews", split="test", data_dir=str(tmp_path / "text"))
        train, val, test = (task.source(s) for s in ("train", "val", "test"))
        assert (len(train), len(val), len(test)) == (12, 5, 12)
        for i in range(5):  # LRA validates on the test split
            assert np.array_equal(val[i]["inputs"], test[i]["inputs"])
            inputs, mask = text.encode(records[i]["text"], 1000)
            assert np.array_equal(test[i]["inputs"], inputs) and np.array_equal(test[i]["mask"], mask)
            assert int(test[i]["targets"]) == int(records[i]["label"])
        ex = train[-1]
        assert set(ex) == {"inputs", "mask", "targets"} and ex["targets"].shape == ()
        with pytest.raises(IndexError):
            val[5]
        with pytest.raises(ValueError, match="unknown split"):
            task.source("dev")


def test_image_task_splits_are_90_10_of_train(tmp_path):
    mark_prepared(tmp_path / "image", "cifar10")
    task = tasks.build("image", tmp_path, test_size=4)
    assert (task.vocab_size, task.max_len, task.num_classes, task.pad_id) == (257, 1024, 10, 0)
    with mock(20):
        task.prepare()
        records = tfds.data_source("cifar10", split="train", data_dir=str(tmp_path / "image"))
        train, val, test = (task.source(s) for s in ("train", "val", "test"))
        assert (len(train), len(val), len(test)) == (18, 2, 4)
        expected = image.grayscale(records[18]["image"]).reshape(-1) + 1
        assert np.array_equal(val[0]["inputs"], expected)  # val starts where train[:90%] ends
        assert int(val[0]["targets"]) == int(records[18]["label"])
        assert all(train[i]["mask"].all() for i in range(3))
        assert 1 <= train[0]["inputs"].min() and train[0]["inputs"].max() <= 256
    assert [image.train_val_boundary(n) for n in (50_000, 20, 15)] == [45_000, 18, 14]


def test_a_tfds_data_dir_is_recognised_and_tfrecord_copies_are_explained(tmp_path):
    mark_prepared(tmp_path, "imdb_reviews")  # --data-dir ~/tensorflow_datasets
    assert text.IMDB.find(tmp_path) == (tmp_path, [])
    other = tmp_path / "other"
    mark_prepared(other, "cifar10", file_format="tfrecord")
    found, notes = image.CIFAR10.find(other)
    assert found is None and "tfrecord" in notes[0] and "array_record" in notes[0]


def _setup(cfg, task):
    _, state, rest, _, step = create_train_state(cfg, task, sharding.make_mesh(), init="eager")
    return state, rest, step


@pytest.mark.parametrize("name, dataset", [("text", "imdb_reviews"), ("image", "cifar10")])
@pytest.mark.slow
def test_tiny_preset_trains_one_step_on_mock_data(tmp_path, name, dataset):
    cfg = config_lib.load(name, "softmax", preset="tiny",
                          overrides={"train.schedule": "constant", "train.lr": 1e-3})
    mark_prepared(tmp_path / name, dataset)
    task = tasks.build(name, tmp_path, **cfg.data)
    with mock(cfg.train.batch_size):
        task.prepare()
        batch = TrainBatches(task.source("train"), cfg.train.batch_size, seed=0)[0]
    assert batch["inputs"].shape == (cfg.train.batch_size, task.max_len)
    state, rest, step = _setup(cfg, task)
    new, metrics = step(jax.tree.map(jnp.copy, state), rest, batch, jax.random.key(0))
    assert int(new["step"]) == 1 and np.isfinite(float(metrics["loss"]))
    moved = jax.tree.map(lambda a, b: bool(jnp.any(a != b)), state["params"], new["params"])
    assert all(jax.tree.leaves(moved)), "some parameters did not move"


# ----------------------------------------------------------------------------------------------
# Missing data: a fast failure that says how to get it


@pytest.mark.slow
def test_reachable_is_quick_either_way(silent_url):
    import http.server
    import threading

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), http.server.BaseHTTPRequestHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        assert _tfds.reachable(f"http://127.0.0.1:{server.server_port}/x")  # answers 501: up
    finally:
        server.shutdown()
        server.server_close()
    assert not _tfds.reachable(f"http://127.0.0.1:{server.server_port}/x")  # refused at once
    start = time.perf_counter()
    assert not _tfds.reachable(silent_url)
    assert time.perf_counter() - start < _tfds.PROBE_TIMEOUT_S + 1


@pytest.fixture
def never_download(monkeypatch):
    def fail(*args, **kwargs):
        pytest.fail("tfds was asked to download")

    monkeypatch.setattr(tfds.core.DatasetBuilder, "download_and_prepare", fail)


@pytest.mark.slow
def test_no_network_fails_within_seconds_with_directions(tmp_path, monkeypatch, never_download,
                                                        silent_url):
    monkeypatch.setattr(text, "IMDB", dataclasses.replace(text.IMDB, url=silent_url))
    monkeypatch.setattr(_tfds, "_tensorflow_installed", lambda: True)
    start = time.perf_counter()
    with pytest.raises(tasks.DataError) as err:
        tasks.build("text", tmp_path).prepare()
    assert time.perf_counter() - start < 10
    message = str(err.value)
    assert "imdb_reviews is not prepared in" in message and str(tmp_path / "text") in message
    assert "download server 127.0.0.1 did not answer within 3 s" in message
    assert "python -m lra.data prepare --task text" in message and "--data-dir" in message
    assert "TensorFlow, which is not installed" not in message


def test_without_tensorflow_the_message_names_the_extra(tmp_path, monkeypatch, never_download):
    monkeypatch.setattr(_tfds, "_tensorflow_installed", lambda: False)
    monkeypatch.setattr(_tfds, "reachable", lambda url, timeout=3.0: True)
    with pytest.raises(tasks.DataError, match=r"pip install 'lra\[prepare\]'"):
        tasks.build("image", tmp_path).prepare()


def test_prepare_asks_tfds_for_array_record_in_the_task_folder(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(_tfds, "_tensorflow_installed", lambda: True)
    monkeypatch.setattr(_tfds, "reachable", lambda url, timeout=3.0: True)
    calls = []

    def download_and_prepare(builder, *args, **kwargs):
        calls.append((Path(builder.data_dir), builder.info.file_format.value))
        mark_prepared(tmp_path / "text", "imdb_reviews")

    monkeypatch.setattr(tfds.core.DatasetBuilder, "download_and_prepare", download_and_prepare)
    task = tasks.build("text", tmp_path)
    task.prepare()
    assert calls == [(tmp_path / "text" / "imdb_reviews" / "plain_text" / "1.0.0", "array_record")]
    assert "downloading http://ai.stanford.edu/" in capsys.readouterr().err
    task.prepare()  # now it is there
    assert len(calls) == 1


def test_source_before_prepare_says_to_prepare(tmp_path):
    with pytest.raises(tasks.DataError, match=r"lra\.data prepare --task image"):
        tasks.build("image", tmp_path).source("train")


@pytest.mark.slow
def test_run_and_prepare_commands_fail_fast_without_data(tmp_path, monkeypatch, capsys,
                                                         never_download, silent_url):
    from lra import data, run

    monkeypatch.setattr(image, "CIFAR10", dataclasses.replace(image.CIFAR10, url=silent_url))
    start = time.perf_counter()
    assert run.main(["--task", "image", "--attn", "softmax", "--preset", "tiny", "--data-dir",
                     str(tmp_path), "--workdir", str(tmp_path / "work"), "--results-dir",
                     str(tmp_path / "results"), "--no-progress"]) == 1
    assert time.perf_counter() - start < 10
    assert "python -m lra.data prepare --task image" in capsys.readouterr().err
    start = time.perf_counter()
    assert data.main(["prepare", "--task", "image", "--data-dir", str(tmp_path)]) == 2
    assert time.perf_counter() - start < 10
    err = capsys.readouterr().err
    assert err.startswith("error: image: tfds dataset cifar10 is not prepared") and err.count("\n") == 1
