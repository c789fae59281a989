"""Text (IMDB as bytes, tasks/text.py): token ids and masks, and the task's facts and splits on tfds
mock data."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow_datasets as tfds
from helpers import mark_prepared, tfds_mock
from lra.tasks import text

from lra import tasks


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


def test_text_task_facts_and_splits(tmp_path):
    mark_prepared(tmp_path / "text", "imdb_reviews")
    task = tasks.build("text", tmp_path, val_size=5)
    assert (task.vocab_size, task.max_len, task.num_classes, task.pad_id) == (257, 1000, 2, 0)
    assert task.inputs == ("inputs",)
    assert tasks.build("text", tmp_path, max_length=4000).max_len == 4000
    with tfds_mock(12):
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
