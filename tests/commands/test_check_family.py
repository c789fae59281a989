"""``python -m lra.check_family``: the contract's checks shipped with the package (lra.testing) pass a
correct family, fail one that leaks padding with one line per failed check naming it, and refuse an
unknown name or an unusable file with one line. Run in this process (``main``), on one-file
families (``path.py:ClassName``) written here."""

from __future__ import annotations

import pytest
from helpers import readme_family_code

from lra import check_family

# The original LRA's Linear Transformer bug: the pad mask is ignored (keys and values at padded
# positions enter the sums).
LEAKY = '''
import jax
import jax.numpy as jnp
from flax import nnx

from lra.attention import HeadProjections


class LeakyLinear(nnx.Module):
    display_name = "Leaky linear"
    kind = "2020 attention"
    attention_dropout = False

    def __init__(self, dim, num_heads, *, qkv_dim=None, dropout=0.0, rngs):
        self.proj = HeadProjections(dim, num_heads, qkv_dim, rngs=rngs)

    def __call__(self, x, mask=None, *, deterministic=True):
        q, k, v = self.proj.qkv(x)
        q, k = jax.nn.elu(q) + 1, jax.nn.elu(k) + 1
        kv = jnp.einsum("blhd,blhe->bhde", k, v)
        den = jnp.einsum("blhd,bhd->blh", q, k.sum(1))[..., None]
        return self.proj.merge(jnp.einsum("blhd,bhde->blhe", q, kv) / den)


class NotAFamily:
    pass
'''


def _check(capsys, *argv):
    code = check_family.main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("families")
    (folder / "leaky.py").write_text(LEAKY)
    (folder / "relu_linear.py").write_text(readme_family_code())
    return folder


def test_a_family_that_leaks_padding_fails_with_one_line_per_failed_check(files, capsys):
    code, out, _ = _check(capsys, f"{files / 'leaky.py'}:LeakyLinear")
    assert code == 1
    failed = [line for line in out.splitlines() if line.startswith("FAIL ")]
    assert failed == ["FAIL padding: padding leaks into real positions (max diff "
                      + failed[0].split("max diff ")[1],
                      "FAIL gradients: gradient flows into padded inputs (max "
                      + failed[1].split("(max ")[1]], out
    assert out.splitlines()[-1].startswith("leaky@") and "5 of 7 checks passed, 2 not applicable" in out


def test_a_correct_family_passes_every_check(files, capsys):
    code, out, _ = _check(capsys, f"{files / 'relu_linear.py'}:ReLULinearAttention")
    assert code == 0, out
    assert "FAIL" not in out and "7 of 7 checks passed" in out


def test_one_check_at_a_time(capsys):
    code, out, _ = _check(capsys, "softmax", "--check", "buffers")
    assert code == 0 and out.strip() == "softmax: 1 of 1 checks passed"


@pytest.mark.parametrize(("spec", "says"), [
    ("sofmax", "unknown attention 'sofmax'. Did you mean softmax? Available: bigbird,"),
    ("{files}/missing.py:X", "attention file {files}/missing.py does not exist"),
    ("{files}/leaky.py:Leaky", "has no class 'Leaky'; its classes: LeakyLinear, NotAFamily"),
    ("{files}/leaky.py:NotAFamily", "NotAFamily in {files}/leaky.py is not an attention family: "
                                    "not a flax.nnx.Module class"),
])
def test_an_unusable_name_is_one_line_with_the_choices(files, capsys, spec, says):
    code, out, err = _check(capsys, spec.format(files=files))
    assert code == 2 and not out
    assert err.count("\n") == 1 and err.startswith("error: ") and says.format(files=files) in err, err
