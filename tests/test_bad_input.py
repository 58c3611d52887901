"""Bad and unusual input found by trying the API as a new user would (issue 12 §5): each
gets a ValueError/TypeError naming the value and the choices, or the exact result, never
a foreign exception or a silently wrong answer (API-ERR-001, FMT-API-003)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import ampref
from ampref.engine import functional as F
from ampref import nn, optim, recipes
from ampref.policy.policies import get_policy, load_policy
from ampref.testing import assert_bitwise_equal


@pytest.mark.clause("FMT-API-003")
@pytest.mark.parametrize("dtype", [">f8", "<f8", ">f4"])
def test_byte_swapped_input_rounds_once_from_its_exact_value(dtype: str) -> None:
    """Inputs: big- and little-endian float64 and big-endian float32 arrays (1 + 2^-8 +
    2^-24, -3.0000001, 1e-40). Expected: the same bf16 results as the native array,
    1.0078125 for the first float64 value (one rounding), the same through ampref.tensor.
    Pass: bitwise equal."""
    x = np.array([1 + 2**-8 + 2**-24, -3.0000001, 1e-40], dtype=dtype)
    native = x.astype(x.dtype.newbyteorder("="))
    assert_bitwise_equal(ampref.quantize(x, "bf16"), ampref.quantize(native, "bf16"))
    if dtype.endswith("8"):
        assert ampref.quantize(x, "bf16")[0] == 1.0078125  # not 1.0 (the double rounding)
    want = ampref.quantize(native, "bf16").astype(np.float32)[0]
    assert ampref.tensor(x, "bf16").numpy()[0] == want


@pytest.mark.clause("FMT-API-003")
def test_longdouble_input_is_used_when_exact_and_refused_when_not() -> None:
    """Inputs: a longdouble holding a float64 value; where longdouble is wider, 1 + 2^-60.
    Expected: 1.0078125 for the first; ValueError saying element 0 is not a float64 value
    from quantize and tensor. Pass: each."""
    exact = np.array([1 + 2**-8 + 2**-24], dtype=np.longdouble)
    assert ampref.quantize(exact, "bf16")[0] == 1.0078125
    if np.finfo(np.longdouble).nmant > 52:  # x86 80-bit or quad: a non-float64 value exists
        inexact = np.array([1], dtype=np.longdouble) + np.longdouble(2) ** -60
        with pytest.raises(ValueError, match="element 0 .* is not a float64 value"):
            ampref.quantize(inexact, "bf16")
        with pytest.raises(ValueError, match="not a float64 value"):
            ampref.tensor(inexact)


@pytest.mark.clause("API-ERR-001")
def test_format_arguments_accept_names_everywhere_and_codes_must_fit() -> None:
    """Inputs: value_table('bf16') and ('float32'); code 300 for e4m3; complex arrays to
    assert_bitwise_equal. Expected: 1.0 at 0x3F80; ValueError for 32 bits and for the code
    (index and format named); TypeError naming complex128. Pass: each."""
    assert ampref.value_table("bf16")[0x3F80] == 1.0
    with pytest.raises(ValueError, match="at most 16 bits, float32 has 32"):
        ampref.value_table("float32")
    with pytest.raises(ValueError,
                       match="code 300 at flat index 1 does not fit in float8_e4m3fn's 8 bits"):
        ampref.as_ml_dtype(np.array([1, 300]), "e4m3")
    with pytest.raises(TypeError, match="real numbers or codes .* dtype complex128"):
        assert_bitwise_equal(np.array([1j]), np.array([1j]))


@pytest.mark.clause("API-ERR-001")
@pytest.mark.parametrize("call", [
    lambda a: ampref.error_bound(a, np.ones(2)),
    lambda a: ampref.accumulation.dot(a, np.ones(2)),
    lambda a: ampref.tensorcore.dot(a, np.ones(2), gpu="h100", input_format="fp16"),
], ids=["error_bound", "accumulation.dot", "tensorcore.dot"])
def test_dot_products_and_bounds_refuse_scalars_and_none(call: object) -> None:
    """Inputs: a NumPy scalar and None as the first operand of error_bound,
    accumulation.dot, tensorcore.dot. Expected: ValueError (needs a dimension) and
    TypeError (None). Pass: both for each call."""
    with pytest.raises(ValueError, match="must have at least one dimension"):
        call(np.float64(2.0))  # type: ignore[operator]
    with pytest.raises(TypeError, match="must be an array of numbers, got None"):
        call(None)  # type: ignore[operator]


@pytest.mark.clause("API-ERR-001")
@pytest.mark.parametrize("model", ["sequential", "exact", "tensorcore:h100", "tensorcore:a100"])
def test_a_zero_size_matmul_gives_the_addend_under_every_model(model: str) -> None:
    """Inputs: (2, 0) @ (0, 3) with an addend C under sequential, exact, tensorcore:h100,
    tensorcore:a100. Expected: C rounded to float32. Pass: bitwise equal."""
    c = np.array([[1.5, -2.0, 0.0], [3.0, 1e-3, 7.0]])
    d = ampref.matmul(np.zeros((2, 0)), np.zeros((0, 3)), c, input_format="fp16",
                      accumulation=model)
    assert_bitwise_equal(d, c.astype(np.float32))


@pytest.mark.clause("API-ERR-001")
def test_zero_sizes_and_bad_recipe_arguments_name_the_value() -> None:
    """Inputs: Linear(0, 3), MultiheadAttention(8, 0), MX block 0 and format fp16, per-
    tensor scales 0, -1, NaN, inf, 1e39, DelayedScaling.update(None). Expected:
    ValueError/TypeError naming each value. Pass: each message matches."""
    with pytest.raises(ValueError, match="in_features must be an int >= 1, got 0"):
        nn.Linear(0, 3)
    with pytest.raises(ValueError, match="num_heads must be an int >= 1, got 0"):
        nn.MultiheadAttention(8, 0)
    with pytest.raises(ValueError, match="MX block size must be a positive int, got 0"):
        recipes.mx_quantize(np.ones(32), block=0)
    with pytest.raises(ValueError, match="MX element format must be one of .*got float16"):
        recipes.mx_quantize(np.ones(32), "fp16")
    for bad in (0.0, -1.0, np.nan, np.inf, 1e39):
        with pytest.raises(ValueError, match="scale must be a positive finite float32 value"):
            recipes.quantize_per_tensor(np.ones(4), bad)
    with pytest.raises(TypeError, match="expected a DelayedState .*got NoneType"):
        recipes.DelayedScaling().update(None)  # type: ignore[arg-type]


@pytest.mark.clause("API-ERR-001")
def test_optimizer_arguments_and_state_are_validated() -> None:
    """Inputs: SGD momentum 1.5, Adam eps 0, an empty state dict; SGD positional (lr,
    momentum, dampening). Expected: ValueErrors naming the values and the expected keys;
    the positional call maps as torch's. Pass: all."""
    p = ampref.tensor(np.ones(3), requires_grad=True)
    with pytest.raises(ValueError, match=r"momentum must be a number in \[0, 1\), got 1.5"):
        optim.SGD([p], lr=0.1, momentum=1.5)
    with pytest.raises(ValueError, match="eps must be a positive finite number, got 0"):
        optim.Adam([p], eps=0)
    opt = optim.SGD([p], lr=0.1)
    with pytest.raises(ValueError,
                       match=r"has the keys \['lr', 'master', 'state', 'steps'\], got \[\]"):
        opt.load_state_dict({})
    # a torch user's positional call means the same thing: SGD(params, lr, momentum, dampening)
    sgd = optim.SGD([p], 0.1, 0.9, 0.1)
    assert (sgd.momentum, sgd.dampening, sgd.weight_decay) == (0.9, 0.1, 0.0)


@pytest.mark.clause("API-ERR-001", "AUT-POL-003")
@pytest.mark.parametrize("text,err", [
    ('name = "p"\ndefault_dtype = "float16"\n[ops]\nfp32 = "exp"\n',
     "category 'fp32' must be a list of op name strings"),
    ('name = "p"\ndefault_dtype = "float16"\n[ops]\nfp32 = [1, 2]\n',
     "must be a list of op name strings"),
    ('name = "p"\ndefault_dtype = 16\n[ops]\nfp32 = ["exp"]\n',
     "default_dtype must be a format name string"),
    ('name = "p"\ndefault_dtype = "float16"\n[ops]\nfp32 = ["exp"]\n[banned_advice]\nexp = 3\n',
     r"\[banned_advice\] must map op names to strings"),
    ('name = "p"\ndefault_dtype = "float16"\n[ops]\nfp32 = ["exp"]\n[listed_since]\n'
     'log = "2.12"\n', r"\[listed_since\] must map listed op names"),
    ('name = "p"\ndefault_dtype = "float16"\n[ops]\nfp32 = ["exp"]\n[listed_since]\n'
     'exp = 2.12\n', r"\[listed_since\] must map listed op names"),
])
def test_malformed_policy_files_are_refused_with_the_fault_named(
        tmp_path: Path, text: str, err: str) -> None:
    """Inputs: six malformed policy TOMLs (a string category, numbers as ops, a numeric
    dtype, numeric advice, a release for an op the policy does not list, a numeric
    release). Expected: ValueError naming the fault. Pass: each message matches."""
    f = tmp_path / "p.toml"
    f.write_text(text)
    with pytest.raises(ValueError, match=err):
        load_policy(f)


@pytest.mark.clause("API-ERR-001", "AUT-JMP-001")
def test_non_utf8_policy_files_and_repeated_jmp_keys_are_refused(tmp_path: Path) -> None:
    """Inputs: a non-UTF-8 policy file; 'params=f32,p=f16'; load_policy(3). Expected:
    ValueError (not UTF-8), ValueError (params twice), TypeError (int). Pass: each."""
    f = tmp_path / "p.toml"
    f.write_bytes(b'name = "\xff\xfe"\n')
    with pytest.raises(ValueError, match="is not UTF-8 text"):
        load_policy(f)
    with pytest.raises(ValueError, match="sets params twice"):
        get_policy("params=f32,p=f16")
    with pytest.raises(TypeError, match="policy must be a name or a path, got int"):
        load_policy(3)  # type: ignore[arg-type]


@pytest.mark.clause("API-ERR-001", "SCL-AUD-002")
def test_export_into_a_missing_folder_names_the_folder_not_a_temporary_file(tmp_path: Path) -> None:
    """Inputs: an audit export into a folder that does not exist. Expected:
    FileNotFoundError naming the missing folder, not a .tmp- file. Pass: both."""
    s = ampref.LossScaler.from_profile("torch")
    s.update(False)
    target = tmp_path / "missing" / "audit.csv"
    with pytest.raises(FileNotFoundError, match="folder .*missing' does not exist") as e:
        s.export_audit(target)
    assert ".tmp-" not in str(e.value)


@pytest.mark.clause("API-ERR-001")
def test_flags_must_be_bools_not_truthy_strings() -> None:
    """Inputs: sum keepdim 'yes', dropout training 'no', update found_inf 'False'.
    Expected: TypeError naming each flag. Pass: each."""
    x = ampref.tensor(np.ones((2, 3)))
    with pytest.raises(TypeError, match="keepdim must be a bool"):
        F.sum(x, 0, "yes")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="training must be a bool"):
        F.dropout(x, 0.5, "no", seed=1)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="found_inf must be a bool"):
        ampref.LossScaler.from_profile("jmp").update(found_inf="False")  # type: ignore[arg-type]
