"""Config validation of the modern encoder / optimiser options, and the ``--protocol`` track."""

import pytest
from helpers import assert_one_line_error, run_in_process

from lra import config as config_lib
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


def test_choices_are_declared_on_the_fields():
    assert config_lib.choices("model.norm") == ("layer", "batch")
    assert config_lib.choices("model.channel_mixer") == ("mlp", "glu", "none")
    assert config_lib.choices("train.schedule") == ("rsqrt", "cosine", "constant", "cosine_to_min",
                                                    "cosine_s5", "linear_decay")
    assert config_lib.choices("train.decay_exclude") == ("none", "bias_norm")
    assert config_lib.choices("train.dt_group") == ("ssm", "no_decay")


# ----------------------------------------------------------------------------------------------
# --protocol modern


@pytest.mark.slow
def test_modern_resolves_for_every_task_family_and_preset():
    """The whole grid, config resolution only (lra.config.load validates each config)."""
    from lra import attention, tasks

    for task in tasks.in_track("lra"):  # another track's task (mqar) has no modern protocol
        for family in attention.available():
            for preset in config_lib.PRESETS:
                cfg = config_lib.load(task, family, preset=preset, protocol="modern")
                assert cfg.protocol == "modern" and cfg.model.pooling == "mean", (task, family)
                assert cfg.model.prenorm or family == "mega" or family == "s4d", (task, family)


def test_print_config_resolves_modern(capsys):
    import json

    from lra import run as run_cli

    code = run_cli.main(["--task", "pathfinder", "--attn", "s5", "--protocol", "modern",
                         "--print-config"])
    assert code == 0
    cfg = json.loads(capsys.readouterr().out)
    # S5@3c18fdb run_lra_pathfinder.sh: 6 layers, H 192, P 256, J 8, ssm lr 9e-4, lr 5 x 9e-4,
    # BatchNorm 0.9, 200 epochs of 160,000 / 64 = 2,500 steps
    assert cfg["protocol"] == "modern" and cfg["preset"] == "paper"
    assert (cfg["model"]["num_layers"], cfg["model"]["emb_dim"]) == (6, 192)
    assert (cfg["attn"]["state_size"], cfg["attn"]["blocks"]) == (256, 8)
    assert cfg["train"]["ssm_lr"] == 9e-4 and abs(cfg["train"]["lr"] - 4.5e-3) < 1e-12
    assert cfg["model"]["norm"] == "batch" and cfg["model"]["bn_momentum"] == 0.9
    assert cfg["model"]["input_encoder"] == "linear" and cfg["model"]["channel_mixer"] == "glu"
    assert cfg["train"]["num_steps"] == 500_000 and cfg["train"]["warmup_steps"] == 2_500


def test_presets_scale_the_modern_recipe_and_keep_it():
    paper = config_lib.load("listops", "s5", preset="paper", protocol="modern")
    tiny = config_lib.load("listops", "s5", preset="tiny", protocol="modern")
    lra_tiny = config_lib.load("listops", "s5", preset="tiny")
    # scale from the preset ...
    assert (tiny.model.emb_dim, tiny.train.num_steps) == (lra_tiny.model.emb_dim, lra_tiny.train.num_steps)
    assert tiny.data == lra_tiny.data
    # ... the recipe from the protocol
    for key in ("norm", "channel_mixer", "bn_momentum", "dropout", "pooling"):
        assert getattr(tiny.model, key) == getattr(paper.model, key), key
    for key in ("lr", "ssm_lr", "weight_decay", "schedule", "b2"):
        assert getattr(tiny.train, key) == getattr(paper.train, key), key
    assert tiny.attn == paper.attn


def test_attention_families_keep_their_lra_size_under_modern():
    for task, family in [("image", "local"), ("listops", "softmax"), ("pathfinder", "bigbird")]:
        lra_cfg = config_lib.load(task, family)
        modern = config_lib.load(task, family, protocol="modern")
        for key in ("emb_dim", "num_heads", "num_layers", "qkv_dim", "mlp_dim"):
            assert getattr(modern.model, key) == getattr(lra_cfg.model, key), (task, family, key)
        assert modern.train.num_steps == lra_cfg.train.num_steps
        assert modern.model.pooling == "mean" and modern.model.prenorm


def test_the_default_protocol_is_lra_and_old_configs_read_as_lra():
    default = config_lib.load("listops", "s5", preset="tiny")
    assert default == config_lib.load("listops", "s5", preset="tiny", protocol="lra")
    assert default.protocol == "lra" and default.model.norm == "layer"
    old = default.to_dict()
    del old["protocol"]  # a result file written before protocols existed
    assert config_lib.Config.from_dict(old) == default
    assert config_lib.with_protocol(old) == default.to_dict()


def test_unknown_protocol_is_one_config_error():
    with pytest.raises(ConfigError, match="unknown protocol 'new'; choose from lra, modern"):
        config_lib.load("listops", "s5", protocol="new")


def test_sweep_passes_the_protocol_and_names_workdirs_apart():
    from lra import run as run_cli
    from lra import sweep

    args = sweep.parser().parse_args(["--task", "listops", "--attn", "s5", "--preset", "tiny",
                                      "--protocol", "modern"])
    cell = sweep.expand("listops", "s5", [0])[0]
    argv = sweep.run_argv(cell, args, __import__("pathlib").Path("w"))
    assert argv[argv.index("--protocol") + 1] == "modern"
    cfg = run_cli.resolve_config(run_cli.parser().parse_args(argv))
    assert cfg.protocol == "modern"
    assert run_cli.workdir_name(cfg) == "listops-s5-tiny-modern-seed0"
    lra_cfg = config_lib.load("listops", "s5", preset="tiny")
    assert run_cli.workdir_name(lra_cfg) == "listops-s5-tiny-seed0"


@pytest.mark.slow
def test_s5_trains_under_modern_at_tiny_scale(tmp_path):
    """CI: lra.run --protocol modern end to end (s5, ListOps, tiny); the result records it."""
    import json
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, "-m", "lra.run", "--task", "listops", "--attn", "s5", "--preset", "tiny",
         "--protocol", "modern", "--data-dir", str(tmp_path / "data"), "--workdir",
         str(tmp_path / "w"), "--results-dir", str(tmp_path / "res"), "--no-progress"],
        capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "modern protocol" in out.stdout
    [path] = (tmp_path / "res" / "runs").glob("*.json")
    record = json.loads(path.read_text())
    assert record["protocol"] == record["config"]["protocol"] == "modern" and "-modern" in path.name
    assert record["config"]["model"]["norm"] == "batch" and record["config"]["train"]["ssm_lr"] > 0
    assert record["metrics"]["batch_stats_sha256"] != __import__("hashlib").sha256().hexdigest()


# ----------------------------------------------------------------------------------------------
# Every value is checked when the config is resolved, also by --print-config (issue 11, bugs 8
# and 2): exit status 2 and one line naming the key and the value.


@pytest.mark.parametrize("extra", [
    ["--set", "model.num_heads=0"], ["--set", "train.grad_accum=0"],
    ["--set", "train.grad_accum=-1"], ["--set", "model.emb_dim=0"],
    ["--set", "data.max_length=0"], ["--set", "data.train_size=-1"],
    ["--set", "attn.query_chunk=-3"], ["--seed", "-1"], ["--seed", "99999999999999999999"],
    ["--set", "model.num_layers=-1"], ["--set", "model.dropout=2.5"], ["--set", "train.lr=-1"],
    ["--set", "train.b2=1.5"], ["--set", "train.eval_batches=-1"],
])
def test_bad_value_exits_2_naming_key_and_value(extra):
    code, _, err = run_in_process("--task", "listops", "--attn", "softmax", "--preset", "tiny", *extra,
                                  "--print-config")
    assert code == 2, err
    assert_one_line_error(err)
    key = extra[1].split("=")[0] if extra[0] == "--set" else "seed"
    value = extra[1].split("=")[1] if extra[0] == "--set" else extra[1]
    assert value in err and (key in err or key.split(".")[1] in err), err


def test_bad_attention_option_value_exits_2():
    code, _, err = run_in_process("--task", "listops", "--attn", "performer", "--set", "attn.kernel=foo",
                                  "--print-config")
    assert code == 2 and "foo" in err and "softmax" in err and "relu" in err
    assert_one_line_error(err)
