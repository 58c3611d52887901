"""Integer and bool tensors (``IndexTensor``, ENG-INT-001) against torch's int64 and bool
tensors: every shape and counting method gives torch's values and shape, and every bad
dim, shape entry or index that torch refuses is refused here with a named error."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import ampref
from ampref.common.checks import TensorIndexError

torch = pytest.importorskip("torch")

#: name -> the call, written once for both libraries (torch's method names)
CALLS: dict[str, Callable[[Any], Any]] = {
    "flatten": lambda x: x.flatten(),
    "reshape(-1, 3)": lambda x: x.reshape(-1, 3),
    "reshape((2, 6))": lambda x: x.reshape((2, 6)),
    "view(12)": lambda x: x.view(12),
    "unsqueeze(0)": lambda x: x.unsqueeze(0),
    "unsqueeze(-1)": lambda x: x.unsqueeze(-1),
    "[1]": lambda x: x[1],
    "[-1, 2]": lambda x: x[-1, 2],
    "[:, 1:3]": lambda x: x[:, 1:3],
    "sum()": lambda x: x.sum(),
    "sum(dim=1)": lambda x: x.sum(dim=1),
    "sum(dim=-2, keepdim=True)": lambda x: x.sum(dim=-2, keepdim=True),
    "sum(dim=(0, 1))": lambda x: x.sum(dim=(0, 1)),
    "sum(dim=[])": lambda x: x.sum(dim=[]),
    "argmax()": lambda x: x.argmax(),
    "argmax(dim=1)": lambda x: x.argmax(dim=1),
    "argmax(dim=0, keepdim=True)": lambda x: x.argmax(dim=0, keepdim=True),
    "size(-1)": lambda x: x.size(-1),
    "clone": lambda x: x.clone(),
    "+ 3": lambda x: x + 3,
    "* self": lambda x: x * x,
    "- [1]": lambda x: x - x[1],
}


def _data(kind: str) -> np.ndarray:
    ints = np.array([[3, -7, 0, 11], [11, 2, -7, 5], [0, 0, 9, 9]], dtype=np.int64)
    return ints if kind == "int64" else ints > 2


def _outcome(call: Callable[[Any], Any], x: Any) -> tuple[Any, ...]:
    """What a call gives: its values, shape and dtype name, or that it was refused."""
    try:
        v = call(x)
    except (RuntimeError, TypeError):
        return ("refused",)
    if isinstance(v, int):
        return (v,)
    return v.tolist(), tuple(v.shape), str(v.dtype).removeprefix("torch.")


@pytest.mark.clause("ENG-INT-001")
@pytest.mark.parametrize("kind", ["int64", "bool"])
@pytest.mark.parametrize("name", list(CALLS))
def test_an_integer_tensor_method_gives_torchs_values_and_shape(kind: str, name: str) -> None:
    """Inputs: a 3 x 4 int64 tensor with repeated values and a bool mask of it (ties
    for argmax, negatives, zeros), through the call ``name`` (views, indexing, sums
    over every dim form, argmax, size, arithmetic). Expected: what torch's int64/bool
    tensor gives for the same call: its values, shape and dtype, or a refusal where
    torch refuses (argmax of a bool tensor, bool minus bool). Pass: equal outcomes."""
    data = _data(kind)
    call = CALLS[name]
    assert _outcome(call, ampref.tensor(data)) == _outcome(call, torch.tensor(data)), name


@pytest.mark.clause("ENG-INT-001")
def test_a_0d_integer_tensor_takes_dim_0_and_minus_1_as_torch() -> None:
    """Inputs: the 0-d int64 tensor 5: sum and argmax over dim 0 and -1 (keepdim both
    ways) and unsqueeze at 0 and -1. Expected: torch's values and shapes (a 0-d tensor's
    one dim is its element). Pass: equal outcomes."""
    ours, theirs = ampref.tensor(np.array(5)), torch.tensor(5)
    for call in (lambda x: x.sum(dim=0), lambda x: x.sum(dim=-1, keepdim=True),
                 lambda x: x.argmax(dim=0), lambda x: x.argmax(dim=-1),
                 lambda x: x.unsqueeze(0), lambda x: x.unsqueeze(-1)):
        assert _outcome(call, ours) == _outcome(call, theirs)


#: calls torch refuses on a 3 x 4 int64 tensor -> (the error ampref raises, words it names)
REFUSED: dict[str, tuple[Callable[[Any], Any], type[Exception], str]] = {
    "reshape(-2, 6)": (lambda x: x.reshape(-2, 6), ValueError, "invalid shape dimension -2"),
    "reshape(5, 3)": (lambda x: x.reshape(5, 3), ValueError, r"cannot reshape \(3, 4\)"),
    "reshape(-1, -1)": (lambda x: x.reshape(-1, -1), ValueError, "cannot reshape"),
    "reshape(2.0, 6)": (lambda x: x.reshape(2.0, 6), TypeError, "shape entries must be ints"),
    "unsqueeze(3)": (lambda x: x.unsqueeze(3), ValueError, r"unsqueeze: dim 3 .*-3 to 2"),
    "unsqueeze(1.0)": (lambda x: x.unsqueeze(1.0), TypeError, "unsqueeze: dim must be an int"),
    "sum(dim=2)": (lambda x: x.sum(dim=2), ValueError, r"sum: dim 2 .*-2 to 1"),
    "sum(dim=(0, -3))": (lambda x: x.sum(dim=(0, -3)), ValueError, "sum: dim -3"),
    "sum(keepdim=1)": (lambda x: x.sum(keepdim=1), TypeError, "keepdim must be a bool"),
    "argmax(dim=5)": (lambda x: x.argmax(dim=5), ValueError, "argmax: dim 5"),
    "argmax(dim=0.5)": (lambda x: x.argmax(dim=0.5), TypeError, "argmax: dim must be an int"),
    "size(2)": (lambda x: x.size(2), ValueError, "size: dim 2"),
    "[3]": (lambda x: x[3], TensorIndexError, r"index 3 of a tensor of shape \(3, 4\)"),
    "[0, 0, 0]": (lambda x: x[0, 0, 0], TensorIndexError, "too many indices"),
}


@pytest.mark.clause("ENG-INT-001", "API-ERR-001")
@pytest.mark.parametrize("name", list(REFUSED))
def test_a_bad_dim_shape_or_index_of_an_integer_tensor_is_refused_by_name(name: str) -> None:
    """Inputs: the 3 x 4 int64 tensor and a call torch refuses (a shape entry below -1,
    a shape of another size, two -1 entries, a float entry or dim, a dim past the shape,
    a non-bool keepdim, an index past the end or too many indices). Expected: torch
    raises; ampref raises the named TypeError/ValueError (TensorIndexError, an IndexError
    too, for indices) with the op and the valid range, never NumPy's AxisError or a
    silent reading of -2 as -1. Pass: both raise, ampref's message matches."""
    call, error, words = REFUSED[name]
    data = _data("int64")
    with pytest.raises((RuntimeError, IndexError, TypeError)):
        call(torch.tensor(data))
    with pytest.raises(error, match=words) as e:
        call(ampref.tensor(data))
    assert type(e.value).__name__ != "AxisError"
