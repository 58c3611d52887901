"""gather, one_hot and pad (ENG-GTH-001) against torch: values, dtypes, gradients and
refusals."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import ampref
from ampref.engine import functional as F
from ampref.testing import assert_bitwise_equal

X = np.array([[1.5, -0.0, np.inf, 2**-20], [7.0, np.nan, -3.25, 0.1]], np.float32)


@pytest.mark.clause("ENG-GTH-001", "ENG-IDX-001")
@pytest.mark.parametrize("dim, index", [(1, [[0, 3, 3], [1, 1, 2]]), (0, [[1, 0, 0, 1]]),
                                        (-1, [[2], [0]]), (0, [[0, 1], [1, 0]])])
def test_gather_picks_and_scatters_back_as_torch(dim: int, index: list[list[int]]) -> None:
    """Inputs: X (±0, inf, NaN, a subnormal) in float32 requiring grad; indices with
    repeats and smaller other dims; output gradient with values whose float32 sum rounds
    (1, 2^-24, 3). Expected: torch.gather's values (bits, NaN any) and the input
    gradient torch computes (repeated positions summed). Pass: equal."""
    torch = pytest.importorskip("torch")
    ours = ampref.tensor(X, requires_grad=True)
    theirs = torch.tensor(X, requires_grad=True)
    a = ours.gather(dim, ampref.tensor(index))
    b = theirs.gather(dim, torch.tensor(index))
    assert_bitwise_equal(a.numpy(), b.detach().numpy(), nan="any")
    g = np.resize(np.array([1.0, 2**-24, 3.0], np.float32), b.shape)
    a.backward(ampref.tensor(g))
    b.backward(torch.tensor(g))
    assert_bitwise_equal(np.asarray(ours.grad), theirs.grad.numpy())


@pytest.mark.clause("ENG-GTH-001", "API-ERR-001")
@pytest.mark.parametrize("index, error, match", [
    ([[-1]], ValueError, r"must lie in \[0, 4\)"),
    ([[4]], ValueError, r"got \[4, 4\]"),
    ([0, 1], ValueError, "must have the input's 2 dims"),
    ([[0], [1], [0]], ValueError, "exceeds the input's"),
    (np.array([[0.5]]), TypeError, "integers"),
])
def test_bad_gather_indices_are_refused_as_torch_refuses_them(index: Any, error: Any,
                                                              match: str) -> None:
    """Inputs: negative and too large values, wrong dims, a too large other dim, float
    indices (torch raises RuntimeError for each). Expected: the error naming it. Pass:
    raises."""
    with pytest.raises(error, match=match):
        ampref.gather(ampref.tensor(X), 1, index)


@pytest.mark.clause("ENG-GTH-001")
@pytest.mark.parametrize("labels, n", [([0, 2, 1], -1), ([[3], [0]], 5), ([], 3)])
def test_one_hot_equals_torchs(labels: Any, n: int) -> None:
    """Inputs: 1-D and 2-D labels, num_classes inferred or given, no labels. Expected:
    torch's int64 values and shape. Pass: equal lists and shapes."""
    torch = pytest.importorskip("torch")
    ours = F.one_hot(ampref.tensor(labels, "int64"), n)
    theirs = torch.nn.functional.one_hot(torch.tensor(labels, dtype=torch.int64), n)
    assert ours.dtype == "int64" and ours.shape == tuple(theirs.shape)
    assert ours.tolist() == theirs.tolist()


@pytest.mark.clause("ENG-GTH-001", "API-ERR-001")
@pytest.mark.parametrize("call, error, match", [
    (lambda: F.one_hot(ampref.tensor([0, 4]), 4), ValueError, "smaller than num_classes"),
    (lambda: F.one_hot(ampref.tensor([-1, 0]), 3), ValueError, "non-negative"),
    (lambda: F.one_hot(ampref.tensor([0.0, 1.0]), 3), TypeError, "int64 tensor"),
    (lambda: F.pad(ampref.ones(2, 2), (1,)), ValueError, "pair"),
    (lambda: F.pad(ampref.ones(2, 2), (1, 1, 1, 1, 1, 1)), ValueError, "at most 2"),
    (lambda: F.pad(ampref.ones(2, 2), (-1, 0)), ValueError, "cropping"),
    (lambda: F.pad(ampref.ones(2, 2), (1, 1), mode="reflect"), ValueError, "constant"),
    (lambda: F.pad(ampref.ones(2, 2), (1.0, 1)), TypeError, "ints"),  # type: ignore[arg-type]
    (lambda: F.pad(ampref.ones(2, 2), (1, 1), value="x"),  # type: ignore[arg-type]
     TypeError, "real number"),
])
def test_bad_one_hot_and_pad_calls_are_refused(call: Any, error: Any, match: str) -> None:
    """Inputs: labels out of range or negative or float; pads of odd length, too many
    dims, negative, other modes, non-int amounts, a non-numeric value. Expected: the
    error naming it. Pass: raises."""
    with pytest.raises(error, match=match):
        call()


@pytest.mark.clause("ENG-GTH-001", "ENG-PRM-001")
@pytest.mark.parametrize("fmt", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("amounts, value", [((1, 0, 0, 2), 0.1), ((2, 1), None),
                                            ((0, 0, 1, 1), -np.inf), ((3, 0), 1 + 2**-11 + 2**-40)])
def test_constant_padding_equals_torchs_and_its_gradient_is_the_inner_region(
        fmt: str, amounts: tuple[int, ...], value: Any) -> None:
    """Inputs: X[:, :2] (finite values) in ``fmt``; pads on one or two trailing dims with
    a value that rounds (0.1; 1 + 2^-11 + 2^-40, which rounds through float32 as torch
    does), none, -inf. Expected: torch's values and dtype bit for bit; the gradient of a
    sum is ones on the input. Pass: equal."""
    torch = pytest.importorskip("torch")
    from torch_compare import assert_same_result
    x = X[:, :1].repeat(3, axis=1)
    ours = ampref.tensor(x, fmt, requires_grad=True)
    got = F.pad(ours, amounts, value=value)
    want = torch.nn.functional.pad(torch.tensor(x).to(getattr(torch, fmt)), amounts,
                                   value=value)
    assert_same_result(got, want, f"pad {amounts} {value}")
    got.sum().backward()
    assert np.asarray(ours.grad).tolist() == np.ones_like(x).tolist()
