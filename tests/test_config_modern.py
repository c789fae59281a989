"""Config validation of the modern encoder / optimiser options, and the ``--protocol`` track."""

import pytest

from lra import config as config_lib
from lra import encoder
from lra.config import ConfigError


@pytest.mark.parametrize("key, value, allowed", [
    ("model.norm", "group", "choose from layer, batch"),
    ("model.channel_mixer", "swiglu", "choose from mlp, glu"),
    ("model.input_encoder", "conv", "choose from embed, linear"),
    ("model.prenorm", "maybe", "expected true/false"),
    ("model.bn_momentum", "1.0", "in [0, 1)"),
    ("model.bn_momentum", "-0.1", "in [0, 1)"),
    ("train.ssm_lr", "-1e-3", ">= 0"),
    ("train.chance_patience", "-1", ">= 0"),
])
def test_bad_modern_option_is_one_config_error(key, value, allowed):
    with pytest.raises(ConfigError) as err:
        config_lib.load("listops", "softmax", preset="tiny", overrides=[f"{key}={value}"])
    message = str(err.value)
    assert "\n" not in message and key.split(".")[1] in message and allowed in message, message


def test_prenorm_must_be_a_bool_when_set_from_a_layer():
    with pytest.raises(ConfigError, match=r"model\.prenorm=1: expected true or false"):
        config_lib.load("listops", "softmax", preset="tiny", overrides={"model.prenorm": 1})


def test_good_modern_options_resolve():
    cfg = config_lib.load("image", "s5", preset="tiny", overrides=[
        "model.norm=batch", "model.prenorm=false", "model.channel_mixer=glu",
        "model.input_encoder=linear", "model.bn_momentum=0", "train.ssm_lr=0",
        "train.chance_patience=0"])
    assert (cfg.model.norm, cfg.model.prenorm, cfg.model.input_encoder) == ("batch", False, "linear")


@pytest.mark.parametrize("task", ["listops", "text", "retrieval"])
def test_linear_input_encoder_needs_a_pixel_task(task):
    with pytest.raises(ConfigError) as err:
        config_lib.load(task, "softmax", preset="tiny", overrides=["model.input_encoder=linear"])
    message = str(err.value)
    assert "\n" not in message and "model.input_encoder='linear'" in message and task in message


def test_choice_tables_match_the_encoder():
    assert config_lib._CHOICES["model.norm"] == encoder.NORMS
    assert config_lib._CHOICES["model.channel_mixer"] == encoder.CHANNEL_MIXERS
    assert config_lib._CHOICES["model.input_encoder"] == encoder.INPUT_ENCODERS
