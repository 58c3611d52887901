"""Float tensors' view methods (``permute``, ``expand``, ``t``, ``T``, ``mT``,
``view_as``, ``squeeze`` with a tuple) and the comparison methods (``eq``...``ge``)
against torch's: values, shapes and gradients bit for bit (views never round), and the
same refusals (specs/engine.md ENG-VEW-001, ENG-INT-002)."""

from __future__ import annotations

import math
import warnings
from fractions import Fraction
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import ampref
from ampref.testing import assert_bitwise_equal

torch = pytest.importorskip("torch")

#: name -> the call, written once for both libraries
VIEWS: dict[str, Callable[[Any], Any]] = {
    "permute(2, 0, 1)": lambda x: x.permute(2, 0, 1),
    "permute((1, 0, 2))": lambda x: x.permute((1, 0, 2)),
    "permute(-1, 0, 1)": lambda x: x.permute(-1, 0, 1),
    "expand(-1, 3, 4) of a (2, 1, 4) slice": lambda x: x[:, :1].expand(-1, 3, 4),
    "expand(5, 2, 3, 4)": lambda x: x.expand(5, 2, 3, 4),
    "expand((2, 3, 4)) of a (1, 4) slice": lambda x: x[0, :1].expand((2, 3, 4)),
    "expand_as": lambda x: x[:1].expand_as(x),
    "mT": lambda x: x.mT,
    "t() of a matrix": lambda x: x[0].t(),
    "t() of a vector": lambda x: x[0, 0].t(),
    "T of a matrix": lambda x: x[1].T,
    "view_as": lambda x: x.reshape(4, 6).view_as(x),
    "squeeze((0, 2)) of (1, 2, 1, 12)": lambda x: x.reshape(1, 2, 1, 12).squeeze((0, 2)),
    "squeeze(1) of size 3 stays": lambda x: x.squeeze(1),
    "permute then reshape": lambda x: x.permute(1, 2, 0).reshape(3, 8),
}

#: calls torch refuses -> the error ampref raises and words of its message
REFUSED: dict[str, tuple[Callable[[Any], Any], type[Exception], str]] = {
    "permute(0, 0, 1)": (lambda x: x.permute(0, 0, 1), ValueError, "each of the 3 dims"),
    "permute(0, 1)": (lambda x: x.permute(0, 1), ValueError, "each of the 3 dims"),
    "permute(0, 1, 3)": (lambda x: x.permute(0, 1, 3), ValueError, "dim 3 is out of range"),
    "permute(0, 1, 2.0)": (lambda x: x.permute(0, 1, 2.0), TypeError, "must be an int"),
    "expand(3, 4)": (lambda x: x.expand(3, 4), ValueError, "fewer than the dims"),
    "expand(2, 5, 4)": (lambda x: x.expand(2, 5, 4), ValueError, "cannot expand"),
    "expand(-1, 2, 3, 4)": (lambda x: x.expand(-1, 2, 3, 4), ValueError, "cannot expand"),
    "expand(2, 3, 4.0)": (lambda x: x.expand(2, 3, 4.0), TypeError, "must be an int"),
    "t() of 3 dims": (lambda x: x.t(), ValueError, "at most 2 dims"),
    "mT of a vector": (lambda x: x[0, 0].mT, ValueError, "at least 2 dims"),
    "eq('a')": (lambda x: x.eq("a"), TypeError, "eq: compares with a number"),
    "ge(None)": (lambda x: x.ge(None), TypeError, "ge: compares with a number"),
}


def _data() -> np.ndarray:
    return np.random.default_rng(5).standard_normal((2, 3, 4)).astype(np.float32)


def _weights(shape: tuple[int, ...]) -> np.ndarray:
    return np.random.default_rng(9).standard_normal(shape).astype(np.float32)


def _run(lib: Any, call: Callable[[Any], Any]) -> tuple[np.ndarray, np.ndarray]:
    """The call's output and the gradient of sum(out * W) (W fixed, float32)."""
    if lib is torch:
        x = torch.tensor(_data(), requires_grad=True)
    else:
        x = ampref.tensor(_data(), "float32", requires_grad=True)
    out = call(x)
    w = _weights(tuple(out.shape))
    wt = torch.tensor(w) if lib is torch else ampref.tensor(w, "float32")
    (out * wt).sum().backward()
    grad = x.grad.numpy() if lib is torch else x.grad  # ampref's .grad is an array
    return np.ascontiguousarray(out.detach().numpy()), np.ascontiguousarray(grad)


def _exact_grad(call: Callable[[Any], Any]) -> np.ndarray:
    """The gradient of sum(out * W) for a view, from an independent route: torch moves
    the element numbers 0..23 through the same call, and each input element's gradient
    is the sum of the float32 weights at the places its number went to, rounded once to
    float32 (the float64 sum of these few weights is exact: checked with Fractions)."""
    where = call(torch.arange(24).reshape(2, 3, 4)).numpy()
    w = _weights(where.shape)
    sums = []
    for i in range(24):
        picked = w[where == i].tolist()
        total = math.fsum(picked)
        assert Fraction(total) == sum(map(Fraction, picked)), "oracle data not exact"
        sums.append(total)
    return np.array(sums, dtype=np.float64).astype(np.float32).reshape(2, 3, 4)


@pytest.mark.clause("ENG-VEW-001")
@pytest.mark.parametrize("name", list(VIEWS))
def test_a_view_method_gives_torchs_values_and_the_exact_gradient_bitwise(name: str) -> None:
    """Inputs: a float64 2 x 3 x 4 tensor through the view ``name`` (permutes with
    negative and tuple dims, expand with -1, new leading dims and from a size-1 slice,
    mT, t and T of a matrix and a vector, view_as, squeeze of a tuple of dims, a permute
    then a reshape), then sum(out * W) backward. Expected: torch's output values and
    shape; as input gradient the exactly rounded sum of the weights each element went to
    (where expand copies an element; torch's float32 sum may differ in the last bit
    there, ampref's is exactly rounded: ENG-RND-001). Pass: equal bit patterns."""
    (out, grad), (t_out, _) = _run(ampref, VIEWS[name]), _run(torch, VIEWS[name])
    assert_bitwise_equal(out, t_out, msg=f"{name} values")
    assert_bitwise_equal(grad, _exact_grad(VIEWS[name]), msg=f"{name} gradient")


@pytest.mark.clause("ENG-VEW-001", "API-ERR-001")
@pytest.mark.parametrize("name", list(REFUSED))
def test_a_view_or_comparison_torch_refuses_is_refused_by_name(name: str) -> None:
    """Inputs: the 2 x 3 x 4 tensor and a call torch refuses (a dim named twice or left
    out or past the shape, a float dim or size, expand to fewer dims, of a size-3 dim, or
    with -1 for a new dim, t() of 3 dims, mT of a vector, a comparison method with a
    string or None). Expected: torch raises; ampref raises the named error. Pass: both."""
    call, error, words = REFUSED[name]
    with pytest.raises((RuntimeError, TypeError, ValueError, IndexError)):
        call(torch.tensor(_data()))
    with pytest.raises(error, match=words):
        call(ampref.tensor(_data(), "float32"))


@pytest.mark.clause("ENG-VEW-001")
def test_T_of_more_than_two_dims_reverses_them_with_torchs_warning() -> None:
    """Inputs: the 2 x 3 x 4 tensor's ``.T``. Expected: torch and ampref both give the
    dims reversed (4, 3, 2) with equal values and both warn (torch deprecates it).
    Pass: equal shape and bits, a UserWarning from each."""
    with pytest.warns(UserWarning):
        theirs = np.ascontiguousarray(torch.tensor(_data()).T.numpy())
    with pytest.warns(UserWarning, match="reverses all"):
        ours = np.ascontiguousarray(ampref.tensor(_data(), "float32").T.numpy())
    assert ours.shape == (4, 3, 2)
    assert_bitwise_equal(ours, theirs, msg="T of 3 dims")


@pytest.mark.clause("ENG-INT-002")
@pytest.mark.parametrize("name", ["eq", "ne", "lt", "le", "gt", "ge"])
def test_the_comparison_methods_equal_the_operators_and_torchs(name: str) -> None:
    """Inputs: the 2 x 3 x 4 tensor compared by method ``name`` with 0.25, with a tensor
    of its own values rounded to one decimal, and with an int64 tensor of its signs.
    Expected: torch's bools for each. Pass: equal lists, and equal to the operator form."""
    x, tx = ampref.tensor(_data(), "float32"), torch.tensor(_data())
    others = [(0.25, 0.25),
              (ampref.tensor(np.round(_data(), 1), "float32"), torch.tensor(np.round(_data(), 1))),
              (ampref.tensor(np.sign(_data()).astype(np.int64)),
               torch.tensor(np.sign(_data()).astype(np.int64)))]
    op = {"eq": "__eq__", "ne": "__ne__", "lt": "__lt__", "le": "__le__", "gt": "__gt__",
          "ge": "__ge__"}[name]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for ours, theirs in others:
            got = getattr(x, name)(ours).tolist()
            assert got == getattr(tx, name)(theirs).tolist()
            assert got == getattr(x, op)(ours).tolist()
