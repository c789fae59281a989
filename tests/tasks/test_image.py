"""Image (grayscale CIFAR-10 pixels, tasks/image.py): TensorFlow's grayscale, pixel tokens, and the
task's 90/10 split of train on tfds mock data."""

from __future__ import annotations

import numpy as np
import tensorflow_datasets as tfds
from helpers import mark_prepared, tfds_mock
from lra.tasks import image

from lra import tasks

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


def test_image_task_splits_are_90_10_of_train(tmp_path):
    mark_prepared(tmp_path / "image", "cifar10")
    task = tasks.build("image", tmp_path, test_size=4)
    assert (task.vocab_size, task.max_len, task.num_classes, task.pad_id) == (257, 1024, 10, 0)
    with tfds_mock(20):
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
