"""``--config FILE`` (lra/config_file.py): JSON or TOML in --print-config's form, read before --set."""

import json

import pytest
from helpers import assert_one_line_error, run_in_process

from lra import config as config_lib
from lra import run as run_cli
from lra import sweep


def _printed(*flags: str) -> str:
    code, out, err = run_in_process(*flags, "--print-config")
    assert code == 0, err
    return out


def _resolved(*flags: str) -> dict:
    return run_cli.resolve_config(run_cli.parser().parse_args(list(flags))).to_dict()


@pytest.mark.parametrize("flags", [
    ("--task", "listops", "--attn", "softmax", "--preset", "small", "--set", "train.lr=0.003"),
    # global_tokens set by the CLS rule, a family option changed, the modern protocol, a seed
    ("--task", "listops", "--attn", "longformer", "--preset", "tiny", "--seed", "3",
     "--set", "attn.window=16"),
    ("--task", "image", "--attn", "s4d", "--preset", "tiny", "--protocol", "modern"),
])
def test_a_printed_config_read_back_resolves_to_the_same_config(tmp_path, flags):
    printed = _printed(*flags)
    path = tmp_path / "printed.json"
    path.write_text(printed)
    assert _printed("--config", str(path)) == printed
    # The same resolved config: the same result identity, what a sweep's skip check compares.
    assert _resolved("--config", str(path)) == _resolved(*flags)


def test_layers_preset_then_file_then_set_and_the_command_line_names_the_run(tmp_path):
    toml = tmp_path / "exp.toml"
    toml.write_text('task = "listops"\nattention = "softmax"\npreset = "tiny"\n\n'
                    '[train]\nlr = 1\nnum_steps = 7\n\n[model]\ndropout = 0.0\n')
    cfg = _resolved("--config", str(toml))
    assert (cfg["task"], cfg["attention"], cfg["preset"], cfg["seed"]) == ("listops", "softmax",
                                                                          "tiny", 0)
    assert cfg["train"]["lr"] == 1.0 and isinstance(cfg["train"]["lr"], float)  # as --set parses
    assert cfg["train"]["num_steps"] == 7 and cfg["model"]["dropout"] == 0.0
    tiny = config_lib.load("listops", "softmax", preset="tiny").to_dict()
    assert cfg["train"]["batch_size"] == tiny["train"]["batch_size"]  # the preset below the file
    # --set after the file; a flag over the file's name.
    over = _resolved("--config", str(toml), "--set", "train.num_steps=9", "--preset", "small")
    assert over["train"]["num_steps"] == 9 and over["train"]["lr"] == 1.0
    assert over["preset"] == "small"
    # Another family: the file's attn table is the file's family's, so it is left out (said once).
    printed = tmp_path / "softmax.json"
    printed.write_text(_printed("--task", "listops", "--attn", "longformer", "--preset", "tiny"))
    code, _, err = run_in_process("--config", str(printed), "--attn", "performer", "--print-config")
    assert code == 0 and (f"note: --config {printed}: its attn table (options of longformer) left "
                          f"out for listops/performer") in err


@pytest.mark.parametrize("name,text,error", [
    ("bad.json", '{\n  "train": {"lr": 0.1,}\n}',
     "error: --config {path}:2:23: not valid JSON: Expecting property name enclosed in double quotes"),
    ("bad.toml", "[train]\nlr = = 1\n",
     "error: --config {path}: not valid TOML: Invalid value (at line 2, column 6)"),
    ("top.json", '{"task": "listops", "modle": {}}',
     "error: --config {path}:1: unknown key 'modle'; choose from task, attention, preset, "
     "protocol, seed, model, train, data, attn"),
    ("key.toml", 'task = "listops"\n[train]\nlrr = 0.1\n',
     "error: --config {path}:3: unknown train key 'lrr'. Did you mean lr? Valid keys: b1, b2,"),
    ("value.json", '{"task": "listops",\n "train": {"lr": "fast"}}',
     "error: --config {path}:2: train.lr='fast': expected a number > 0"),
    ("task.json", '{"task": "listopz", "attention": "softmax"}',
     "error: --config {path}:1: unknown task 'listopz'; choose from "),
    ("list.json", "[1, 2]", "error: --config {path}: expected an object of keys"),
])
def test_a_bad_file_is_one_line_naming_the_file_and_line(tmp_path, name, text, error):
    path = tmp_path / name
    path.write_text(text)
    code, _, err = run_in_process("--attn", "softmax", "--config", str(path), "--print-config")
    assert code == 2
    assert_one_line_error(err)
    assert err.strip().startswith(error.format(path=path)), err


def test_the_result_file_records_the_config_file(tmp_path, monkeypatch):
    path = tmp_path / "exp.json"
    path.write_text('{"train": {"num_steps": 3}}')
    seen = {}

    def fake_train(cfg, workdir, **kwargs):
        seen.update(kwargs, cfg=cfg)
        return {"status": "preempted"}

    monkeypatch.setattr("lra.train.train_and_evaluate", fake_train)
    code, _, err = run_in_process("--task", "listops", "--attn", "softmax", "--preset", "tiny",
                                  "--config", str(path), "--workdir", str(tmp_path / "w"))
    assert code == 75, err
    assert seen["cfg"].train.num_steps == 3
    assert seen["config_file"]["path"] == str(path)
    assert len(seen["config_file"]["sha256"]) == 64
    # A sweep passes the file on to every cell as an absolute path.
    args = sweep.parser().parse_args(["--config", str(path), "--task", "listops", "--attn",
                                      "softmax"])
    sweep._fill_from_config(args)
    argv = sweep.run_argv(sweep.expand("listops", "softmax", [0])[0], args, tmp_path / "w")
    assert argv[argv.index("--config") + 1] == str(path.absolute())
    assert json.loads(json.dumps(_resolved(*argv)))["train"]["num_steps"] == 3
