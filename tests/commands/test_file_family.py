"""``--attn path/to/file.py:ClassName``: a family in one file trains with no package, no entry point
and no install, is recorded with its file's SHA-256, and shows on the leaderboard under its name;
an edited file is another version, in another row. Its errors are one line each
(tests/commands/test_check_family.py checks the same loader's missing file, missing class and
non-family class through lra.check_family)."""

from __future__ import annotations

import hashlib
import json

import pytest
from helpers import preset_config, readme_family_code, result_record, run_in_process, tiny_run_args

from lra import run as run_cli
from lra.leaderboard import names, reader
from lra.leaderboard.build import build_all


def _train(tiny_listops, spec: str, work: str):
    base = tiny_listops
    code, _, err = run_in_process(*tiny_run_args(base / "data", base / work, base / "file-results"),
                                  "--attn", spec, "--set", "train.num_steps=2",
                                  "--set", "train.eval_every=2")
    assert code == 0, err[-3000:]
    return json.loads((base / work / "result.json").read_text())


@pytest.mark.slow
def test_a_one_file_family_trains_and_each_version_has_its_own_row(tiny_listops, tmp_path):
    family = tmp_path / "my_relu.py"
    family.write_text(readme_family_code())
    first = _train(tiny_listops, f"{family}:ReLULinearAttention", "file-v1")
    sha1 = hashlib.sha256(family.read_bytes()).hexdigest()
    # its @register name, then the file's version
    assert first["attention"] == f"relu_linear@{sha1[:8]}"
    assert first["attention_file"] == {"path": str(family), "class": "ReLULinearAttention",
                                       "sha256": sha1, "display_name": "ReLU linear",
                                       "kind": "2020 attention"}

    family.write_text(readme_family_code().replace("eps=1e-6", "eps=1e-5"))  # edited
    second = _train(tiny_listops, f"{family}:ReLULinearAttention", "file-v2")
    sha2 = hashlib.sha256(family.read_bytes()).hexdigest()
    assert second["attention"] == f"relu_linear@{sha2[:8]}" and sha2 != sha1

    out = build_all(tiny_listops / "file-results")
    for sha in (sha1, sha2):  # a row each, named as the file declares, with its version
        assert f"\n| relu_linear@{sha[:8]} [" in out["markdown"]
        assert f"ReLU linear @{sha[:8]}" in out["tex"]
        assert f"ReLU linear @{sha[:8]}" in out["csv"]


@pytest.mark.parametrize(("spec", "says"), [
    ("missing.py:X", "attention file missing.py does not exist"),
    ("family.py:Nope", "has no class 'Nope'; its classes: ReLULinearAttention"),
    ("family.py:register", "register in family.py is not an attention family"),
    ("broken.py:X", "attention file {path}/broken.py failed to import: NameError("),
])
def test_an_unusable_file_is_one_line(tmp_path, monkeypatch, capsys, spec, says):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "family.py").write_text(readme_family_code())
    (tmp_path / "broken.py").write_text("undefined_name\n")
    with pytest.raises(SystemExit) as exit_:
        run_cli.main(["--task", "listops", "--attn", spec, "--preset", "tiny"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err  # argparse's usage, then one line
    assert "Traceback" not in err and err.splitlines()[-1].startswith(
        "python -m lra.run: error: argument --attn: "), err
    assert says.format(path=tmp_path) in err.splitlines()[-1], err


def test_the_file_is_imported_once_and_named_by_its_version(tmp_path):
    from lra import attention

    family = tmp_path / "once.py"
    family.write_text(readme_family_code().replace("import jax\n", "import jax\nIMPORTS.append(1)\n", 1)
                      .replace('"""\n', '"""\nimport builtins\nIMPORTS = builtins.__dict__.setdefault('
                               '"_lra_test_imports", [])\n', 1))
    spec = f"{family}:ReLULinearAttention"
    name = attention.load_file(spec)
    assert attention.load_file(spec) == name and attention.load_file(f"{family}:ReLULinearAttention") == name
    import builtins

    assert builtins._lra_test_imports == [1]
    cls = attention.family(name)
    assert attention.file_source(name)["class"] == "ReLULinearAttention" and cls.family_name == name
    assert name not in attention.available()  # found by name; never part of --attn all
    assert "relu_linear" not in attention.available()  # its @register name alone registers nothing
    family.write_text(family.read_text() + "\n# edited\n")
    assert attention.load_file(spec) != name
    del builtins._lra_test_imports


def test_the_reader_names_a_file_family_and_refuses_a_hash_that_is_not_its_own(tmp_path):
    """JAX-free: the leaderboard names a one-file family from its result file, with the version;
    a file whose ``attention`` does not end with its file's hash is skipped with one line."""
    (tmp_path / "runs").mkdir()
    for i, sha in enumerate(("a" * 64, "b" * 64)):
        record = result_record(preset_config("listops", "mine@aaaaaaaa", "tiny"))
        record["attention_file"] = {"path": "/x/mine.py", "class": "Mine", "sha256": sha,
                                    "display_name": "My attention", "kind": "state space"}
        (tmp_path / "runs" / f"run{i}.json").write_text(json.dumps(record))
    result_set = reader.read(tmp_path)
    assert [r["_file"] for r in result_set.valid] == ["run0.json"]
    assert result_set.skipped == [f"{tmp_path / 'runs' / 'run1.json'}: attention: 'mine@aaaaaaaa' "
                                  "does not end with the file's hash @bbbbbbbb"]
    assert names.family_name("mine@aaaaaaaa") == "My attention @aaaaaaaa"
    assert names.family_kind("mine@aaaaaaaa") == "state space"
