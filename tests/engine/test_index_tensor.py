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

#: ENG-INT-003: what labels and masks compute, written once for both libraries
OPS: dict[str, Callable[[Any], Any]] = {
    "contiguous": lambda x: x.contiguous(),
    "t()": lambda x: x.t(),
    "T": lambda x: x.T,
    "transpose(0, -1)": lambda x: x.transpose(0, -1),
    "permute(1, 0)": lambda x: x.permute(1, 0),
    "permute((1, 0))": lambda x: x.permute((1, 0)),
    "squeeze()": lambda x: x.unsqueeze(0).unsqueeze(-1).squeeze(),
    "squeeze(0)": lambda x: x.unsqueeze(0).squeeze(0),
    "squeeze(1) of size 4 stays": lambda x: x.squeeze(1),
    "squeeze((0, 2))": lambda x: x.unsqueeze(0).squeeze((0, 2)),
    "expand(-1, 4)": lambda x: x[:, :1].expand(-1, 4),
    "expand(2, 3, 4)": lambda x: x.expand(2, 3, 4),
    "expand_as": lambda x: x[:1].expand_as(x),
    "repeat(2, 1)": lambda x: x.repeat(2, 1),
    "repeat(2, 1, 3)": lambda x: x.repeat(2, 1, 3),
    "flip(0)": lambda x: x.flip(0),
    "flip((0, 1))": lambda x: x.flip((0, 1)),
    "view_as": lambda x: x.flatten().view_as(x),
    "bool()": lambda x: x.bool(),
    "long()": lambda x: x.long(),
    "eq(3)": lambda x: x.eq(3),
    "ne(0)": lambda x: x.ne(0),
    "lt(x[0])": lambda x: x.lt(x[0]),
    "ge(2)": lambda x: x.ge(2),
    "== 2.5": lambda x: x == 2.5,
    "> 2.5": lambda x: x > 2.5,
    "<= 9.0": lambda x: x <= 9.0,
    "~x": lambda x: ~x,
    "(x > 2) & (x < 10)": lambda x: (x > 2) & (x < 10),
    "(x > 2) | (x < 0)": lambda x: (x > 2) | (x < 0),
    "(x > 2) ^ (x < 10)": lambda x: (x > 2) ^ (x < 10),
    "x & 6": lambda x: x & 6,
    "5 | x": lambda x: 5 | x,
    "3 + x": lambda x: 3 + x,
    "3 - x": lambda x: 3 - x,
    "x - True": lambda x: x - True,
    "2 * x": lambda x: 2 * x,
    "x * True": lambda x: x * True,
    "x + x": lambda x: x + x,
    "-x": lambda x: -x,
    "x // 2": lambda x: x // 2,
    "x // -2": lambda x: x // -2,
    "x % 3": lambda x: x % 3,
    "x % -3": lambda x: x % -3,
    "x // 0": lambda x: x // 0,
    "x % x": lambda x: x % x,
    "abs()": lambda x: x.abs(),
    "abs(x)": lambda x: abs(x),
    "clamp(0, 5)": lambda x: x.clamp(0, 5),
    "clamp(min=0)": lambda x: x.clamp(min=0),
    "clamp(max=2)": lambda x: x.clamp(max=2),
    "clamp(5, 0)": lambda x: x.clamp(5, 0),
    "clamp()": lambda x: x.clamp(),
    "max()": lambda x: x.max(),
    "min()": lambda x: x.min(),
    "max(dim=1).values": lambda x: x.max(dim=1).values,
    "max(dim=1).indices": lambda x: x.max(dim=1).indices,
    "min(0, keepdim=True)[0]": lambda x: x.min(0, keepdim=True)[0],
    "min(0, keepdim=True)[1]": lambda x: x.min(0, keepdim=True)[1],
    "max(x.flip(0))": lambda x: x.max(x.flip(0)),
    "max() of empty": lambda x: x[:0].max(),
    "argmin()": lambda x: x.argmin(),
    "argmin(dim=0)": lambda x: x.argmin(dim=0),
    "all()": lambda x: x.all(),
    "all(dim=1)": lambda x: x.all(dim=1),
    "any(1, True)": lambda x: x.any(1, True),
    "any(dim=0)": lambda x: x.any(dim=0),
    "count_nonzero()": lambda x: x.count_nonzero(),
    "count_nonzero(dim=1)": lambda x: x.count_nonzero(dim=1),
    "cumsum(1)": lambda x: x.cumsum(1),
    "cumsum(dim=0)": lambda x: x.cumsum(dim=0),
    "nonzero()": lambda x: x.nonzero(),
    "equal(self)": lambda x: x.equal(x.clone()),
    "equal(a row)": lambda x: x.equal(x[:1]),
    "masked_fill(x > 2, -100)": lambda x: x.masked_fill(x > 2, -100),
    "masked_fill(row mask, 2.7)": lambda x: x.masked_fill(x[0] > 2, 2.7),
    "masked_fill(x > 2, 0)": lambda x: x.masked_fill(x > 2, 0),
    "masked_fill_(x > 2, 7)": lambda x: x.clone().masked_fill_(x > 2, 7),
    "fill_(2)": lambda x: x.clone().fill_(2),
    "fill_(-2.7)": lambda x: x.clone().fill_(-2.7),
    "x[x > 2] = -100": lambda x: _set(x.clone(), lambda y: y > 2, -100),
    "x[0] = 5": lambda x: _set(x.clone(), lambda y: 0, 5),
    "x[:, 1] = x[:, 2]": lambda x: _set(x.clone(), lambda y: (slice(None), 1), x[:, 2]),
    "x[0].fill_(1) writes x": lambda x: _through(x.clone(), lambda y: y[0].fill_(1)),
    "x[1, 2].fill_(1) writes x": lambda x: _through(x.clone(), lambda y: y[1, 2].fill_(1)),
    "x.t().fill_(0) writes x": lambda x: _through(x.clone(), lambda y: y.t().fill_(0)),
    "x.long().fill_(0) writes x": lambda x: _through(x.clone(), lambda y: y.long().fill_(0)),
    "x.clone().fill_(0) leaves x": lambda x: _through(x, lambda y: y.clone().fill_(0)),
    "x[[0, 2]].fill_(0) leaves x": lambda x: _through(x, lambda y: y[[0, 2]].fill_(0)),
    "x.view(4, 3).fill_(0) writes x":
        lambda x: _through(x.clone(), lambda y: y.view(4, 3).fill_(0)),
    "x[:, 1].view(-1).fill_(0) writes x":
        lambda x: _through(x.clone(), lambda y: y[:, 1].view(-1).fill_(0)),
    "x.t().view(-1) refused": lambda x: x.t().view(-1),
    "x[:, :2].view(6) refused": lambda x: x[:, :2].view(6),
    "x.t().reshape(-1) copies": lambda x: x.t().reshape(-1),
    "is_floating_point": lambda x: x.is_floating_point(),
}


def _set(x: Any, key: Callable[[Any], Any], value: Any) -> Any:
    x[key(x)] = value
    return x


def _through(x: Any, write: Callable[[Any], Any]) -> Any:
    """x after a write into a tensor made from it: x changes only through a view."""
    write(x)
    return x


def _data(kind: str) -> np.ndarray:
    ints = np.array([[3, -7, 0, 11], [11, 2, -7, 5], [0, 0, 9, 9]], dtype=np.int64)
    return ints if kind == "int64" else ints > 2


def _outcome(call: Callable[[Any], Any], x: Any) -> tuple[Any, ...]:
    """What a call gives: its values, shape and dtype name, or that it was refused."""
    try:
        v = call(x)
    except (RuntimeError, TypeError, ValueError, ZeroDivisionError, NotImplementedError):
        return ("refused",)
    if isinstance(v, (int, bool)):
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


@pytest.mark.clause("ENG-INT-003")
@pytest.mark.parametrize("kind", ["int64", "bool"])
@pytest.mark.parametrize("name", list(OPS))
def test_what_an_integer_tensor_computes_is_what_torch_computes(kind: str, name: str) -> None:
    """Inputs: the 3 x 4 int64 tensor (negatives, zeros, ties) and its bool mask, through
    the call ``name``: views (t, transpose, permute, squeeze, expand, repeat, flip),
    comparisons with ints, tensors and floats (float32 on both sides), logic, integer
    arithmetic (reflected, floor division and remainder of both signs, a zero divisor),
    abs, clamp, max/min with and without dim, argmin, all/any, count_nonzero, cumsum,
    nonzero, equal, masked_fill and the in-place stores (float values truncated), and
    writes through views and copies. Expected: torch's values, shape and dtype, or a
    refusal where torch refuses (bool minus anything, -bool, abs of bool, a zero divisor,
    clamp without bounds, max of an empty tensor). Pass: equal outcomes."""
    data = _data(kind)
    call = OPS[name]
    assert _outcome(call, ampref.tensor(data)) == _outcome(call, torch.tensor(data)), name


@pytest.mark.clause("ENG-INT-003")
def test_an_integer_tensor_compares_with_a_float_in_float32_as_torch() -> None:
    """Inputs: int64 values next to float32's spacing (2^24 + 1, -(2^24 + 1), 2^53 + 1,
    2^24 + 3, the largest int64) compared by ==, <, > and != with floats that sit between
    or on them. Expected: torch's bools, which round both sides to float32 first (2^24 + 1
    == 2^24 is True there; an exact comparison would say False). Pass: equal lists."""
    vals = [2**24 + 1, -(2**24 + 1), 2**53 + 1, 2**24 + 3, 2**63 - 1]
    ours, theirs = ampref.tensor(vals), torch.tensor(vals)
    for f in (16777216.0, -16777216.0, 16777218.5, 9.007199254740992e15, 9.223372036854776e18):
        for op in ("__eq__", "__lt__", "__gt__", "__ne__"):
            assert getattr(ours, op)(f).tolist() == getattr(theirs, op)(f).tolist(), (op, f)


@pytest.mark.clause("ENG-INT-002", "ENG-INT-003")
def test_integer_comparisons_fall_back_and_refuse_as_torchs() -> None:
    """Inputs: the int64 tensor [1, 2] compared with None, a string, a list, an int64
    NumPy array, and (method form) a float tensor [1.0, 2.5] and a string. Expected:
    torch's answers: ``== None``, ``== "a"`` and ``== [1, 2]`` False (Python's fallback),
    ``< "a"`` and ``.eq("a")`` TypeErrors, an integer array compared elementwise, and
    ``.lt(float tensor)`` the float tensor's mirrored comparison. Pass: equal outcomes."""
    ours, theirs = ampref.tensor([1, 2]), torch.tensor([1, 2])
    floats = {id(ours): ampref.tensor([1.0, 2.5]), id(theirs): torch.tensor([1.0, 2.5])}
    calls: list[Callable[[Any], Any]] = [
        lambda x: x == None,  # noqa: E711  # the fallback is the point
        lambda x: x == "a", lambda x: x != [1, 2], lambda x: x < "a", lambda x: x.eq("a"),
        lambda x: x == np.array([1, 3]), lambda x: x.lt(floats[id(x)]),
        lambda x: x.ge(floats[id(x)])]
    for call in calls:
        assert _outcome(call, ours) == _outcome(call, theirs)


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
