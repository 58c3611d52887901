"""Float tensors beside integer tensors, Python numbers and Python's number protocol, as
torch has them: an int64 or bool tensor in + - * / takes the float tensor's format
(through float32, as torch converts), ``2 ** x``, ``float(t)``/``int(t)``/``bool(t)``,
``isnan``/``isinf``/``isfinite``, ``square`` and ``type_as`` (specs/engine.md
ENG-PRM-001, ENG-MTH-001)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import ampref
from torch_compare import assert_same_result

torch = pytest.importorskip("torch")

TORCH_DT = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
DATA = np.array([[0.5, -1.25, 3.0, np.inf], [-0.0, 7.5, np.nan, -2.0]], np.float32)
#: 2^24 + 2^16 + 1: float32 rounds it onto a bfloat16 tie (which goes to 2^24); one
#: rounding from the exact integer would give 2^24 + 2^17. 2^60 + 2^36 + 1: float64
#: rounds it onto a float32 tie (to 2^60); torch's direct int64 -> float32 gives 2^60 + 2^37
INTS = np.array([[1, -3, 0, 16842753], [2**60 + 2**36 + 1, 16777217, -7, 5]])

CALLS: dict[str, Callable[[Any, Any], Any]] = {
    "x * mask": lambda x, i: x * (i > 0),
    "mask * x": lambda x, i: (i > 0) * x,
    "x + ints": lambda x, i: x + i,
    "ints - x": lambda x, i: i - x,
    "x / (ints + 10)": lambda x, i: x / (i + 10),
    "zeros + ints": lambda x, i: x * 0 + i,
    "2 ** x": lambda x, i: 2 ** x,
    "square": lambda x, i: x.square(),
    "type_as(half)": lambda x, i: x.type_as(x.half()),
    "isnan": lambda x, i: x.isnan(),
    "isinf": lambda x, i: x.isinf(),
    "isfinite": lambda x, i: x.isfinite(),
}


@pytest.mark.clause("ENG-PRM-001", "ENG-MTH-001")
@pytest.mark.parametrize("fmt", sorted(TORCH_DT))
@pytest.mark.parametrize("name", list(CALLS))
def test_mixed_operands_give_torchs_format_and_bits(name: str, fmt: str) -> None:
    """Inputs: a 2 x 4 float tensor in ``fmt`` (±0, inf, NaN, plain values) and an int64
    tensor with 2^24 + 1, 2^24 + 2^16 + 1 and 2^60 + 2^36 + 1, through ``name``:
    arithmetic with the int tensor or its bool mask on either side, 2 ** x, square,
    type_as, isnan/isinf/isfinite.
    Expected: torch's result dtype and bits (the float tensor's format; integers past
    2^24 rounded once to float32, then to the format, as torch converts them; any NaN
    equal to any NaN).
    Pass: equal."""
    x32 = ampref.quantize(DATA, fmt).astype(np.float32)
    ours = CALLS[name](ampref.tensor(x32, fmt), ampref.tensor(INTS))
    theirs = CALLS[name](torch.tensor(x32).to(TORCH_DT[fmt]), torch.tensor(INTS))
    assert_same_result(ours, theirs, f"{name} {fmt}")


@pytest.mark.clause("ENG-MTH-001")
def test_float_int_and_bool_of_a_tensor_behave_as_torchs() -> None:
    """Inputs: one-element tensors 2.75, -2.75, -0.0, NaN, inf (float, int, bool of
    each), a 2-element tensor (bool), a 0-d tensor (len). Expected: torch's numbers
    (int truncates; bool of NaN is True, of -0 False) and torch's refusals (int of NaN
    and inf, bool of 2 elements, len of 0-d). Pass: equal outcomes."""
    def outcome(f: Callable[..., Any], *args: Any) -> Any:
        try:
            return f(*args)
        except (ValueError, TypeError, RuntimeError, OverflowError):
            return "refused"
    for v in (2.75, -2.75, -0.0, float("nan"), float("inf")):
        for conv in (float, int, bool):
            a = outcome(conv, ampref.tensor([v]))
            t = outcome(conv, torch.tensor([v]))
            assert a == t or (a != a and t != t), (conv, v, a, t)
    assert outcome(lambda: bool(ampref.tensor([1.0, 2.0]))) == "refused"
    assert outcome(lambda: bool(torch.tensor([1.0, 2.0]))) == "refused"
    assert outcome(lambda: len(ampref.tensor(1.0))) == outcome(lambda: len(torch.tensor(1.0)))
