"""The tasks read through tensorflow-datasets (tasks/_tfds.py: Text and Image): a tfds data folder
recognised, a training step on tfds mock data, and the fast, explained failure when the data is
missing and cannot be fetched."""

from __future__ import annotations

import dataclasses
import os
import socket
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import tensorflow_datasets as tfds
from helpers import mark_prepared, tfds_mock
from lra.tasks import _tfds, image, text

from lra import config as config_lib
from lra import sharding, tasks
from lra.data_pipeline import TrainBatches
from lra.train import create_train_state


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
    with tfds_mock(cfg.train.batch_size):
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


@pytest.mark.parametrize("name,dataset", [("text", "imdb_reviews"), ("image", "cifar10")])
def test_the_fingerprint_of_a_prepared_dataset_covers_its_files(tmp_path, name, dataset):
    """Every split names the dataset's version folder, which exists on disk: the fingerprint hashes
    its shards, so a copy with other bytes is other data and an identical copy the same data (main:
    the splits named ``<folder> (train)``, no path, and every copy got one empty fingerprint)."""
    from lra import data_fingerprint

    def prepared(root: Path, shard: bytes) -> dict:
        mark_prepared(root / name, dataset)
        task = tasks.build(name, root)
        folder = root / task.provenance().folder
        (folder / f"{dataset}-train.array_record-00000-of-00001").write_bytes(shard)
        assert set(task.provenance().files.values()) == {task.provenance().folder}
        return data_fingerprint.fingerprint(task.provenance(), root)

    a = prepared(tmp_path / "a", b"examples")
    assert len(a["files"]) == 1 and next(iter(a["files"].values()))["count"] == 2
    assert prepared(tmp_path / "same", b"examples")["sha256"] == a["sha256"]
    assert prepared(tmp_path / "other", b"other examples")["sha256"] != a["sha256"]
