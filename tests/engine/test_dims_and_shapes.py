"""Reductions over an empty dim list and reshape's shape entries, against torch's own
calls (ENG-RED-001, ENG-MTH-001)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import ampref
from ampref.engine import functional as F
from ampref.testing import assert_bitwise_equal

torch = pytest.importorskip("torch")


@pytest.mark.clause("ENG-RED-001")
@pytest.mark.parametrize("dim", [[], ()])
@pytest.mark.parametrize("op", ["sum", "mean"])
def test_an_empty_dim_list_reduces_every_dim_as_torch_does(op: str, dim: object) -> None:
    """Inputs: a 2 x 3 x 4 float32 tensor of small integers (sums exact in float32);
    sum and mean with dim=[] and dim=(), keepdim False and True. Expected: torch's shape
    (() or (1, 1, 1)) and value bit for bit (float32). Pass: shapes and bit patterns."""
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4) - 7
    for keep in (False, True):
        got = getattr(F, op)(ampref.tensor(x), dim, keep)
        want = getattr(torch.from_numpy(x), op)(dim=dim, keepdim=keep).numpy()
        assert got.shape == want.shape, (op, dim, keep, got.shape, want.shape)
        assert_bitwise_equal(got.numpy(), want, msg=f"{op} dim={dim} keepdim={keep}")


@pytest.mark.clause("ENG-RED-001")
@pytest.mark.parametrize("dim", [None, [], ()])
def test_the_mean_of_a_0_d_tensor_is_its_value_as_torch(dim: object) -> None:
    """Inputs: 0-d float32 tensors 3, -0.0 and 2^-149 (the smallest subnormal), mean with
    dim None, [] and (). Expected: torch's 0-d result, the value itself (one element:
    divided by 1), -0.0 keeping its sign. Pass: bit patterns."""
    for v in (3.0, -0.0, 2.0**-149):
        x = np.float32(v)
        got = F.mean(ampref.tensor(x), dim)
        t = torch.tensor(x)
        want = (t.mean() if dim is None else t.mean(dim=dim)).numpy()
        assert_bitwise_equal(got.numpy(), want, msg=f"mean of 0-d {v} dim={dim}")


@pytest.mark.clause("ENG-RED-001")
@pytest.mark.parametrize("dim", [0, -1, [0], [-1]])
@pytest.mark.parametrize("op", ["sum", "mean"])
def test_a_0_d_tensor_takes_dim_0_and_minus_1_as_torch(op: str, dim: object) -> None:
    """Inputs: the 0-d float32 tensor 2.5; sum and mean with dim 0, -1, [0], [-1],
    keepdim False and True (torch wraps a 0-d tensor's dims as if it had one). Expected:
    torch's 0-d result, 2.5. Dim 1 and -2 are refused by both, naming the dim. Pass: shape
    and bits; the errors."""
    x = np.float32(2.5)
    for keep in (False, True):
        got = getattr(F, op)(ampref.tensor(x), dim, keep)
        want = getattr(torch.tensor(x), op)(dim, keepdim=keep).numpy()
        assert got.shape == want.shape == ()
        assert_bitwise_equal(got.numpy(), want, msg=f"{op} of 0-d dim={dim} keepdim={keep}")
    for bad in (1, -2):
        with pytest.raises(IndexError):
            getattr(torch.tensor(x), op)(bad)
        with pytest.raises(ValueError, match=f"dim {bad} is out of range"):
            getattr(F, op)(ampref.tensor(x), bad)


@pytest.mark.clause("ENG-MTH-001", "API-ERR-001")
@pytest.mark.parametrize("shape", [(2, 3, -2), (-3, 4), (2, -1, -1)])
def test_reshape_refuses_what_torch_refuses_naming_the_shape(shape: tuple[int, ...]) -> None:
    """Inputs: a 2 x 6 tensor reshaped to (2, 3, -2), (-3, 4) (NumPy reads any negative
    entry as -1 and would answer (2, 3, 2) and (3, 4)) and (2, -1, -1). Expected: torch
    raises RuntimeError for each; ampref raises ValueError naming the shape. Pass: both."""
    with pytest.raises(RuntimeError):
        torch.zeros(2, 6).reshape(shape)
    with pytest.raises(ValueError, match=str(shape).replace("(", r"\(").replace(")", r"\)")):
        F.reshape(ampref.tensor(np.zeros((2, 6), np.float32)), shape)


@pytest.mark.clause("ENG-MTH-001")
def test_reshape_infers_one_minus_one_entry_and_refuses_a_non_int() -> None:
    """Inputs: a 2 x 6 tensor to (3, -1) and (4, -1, 1); to (2, 6.0) and (2, True, 6).
    Expected: shapes (3, 4) and (4, 3, 1) as torch; TypeError naming 6.0 and True. Pass:
    all."""
    t = ampref.tensor(np.arange(12, dtype=np.float32).reshape(2, 6))
    assert F.reshape(t, (3, -1)).shape == tuple(torch.zeros(2, 6).reshape(3, -1).shape)
    assert F.reshape(t, (4, -1, 1)).shape == (4, 3, 1)
    cases: list[tuple[Any, str]] = [((2, 6.0), "6.0"), ((2, True, 6), "True")]
    for bad, name in cases:
        with pytest.raises(TypeError, match=name):
            F.reshape(t, bad)


@pytest.mark.clause("ENG-MTH-001")
def test_split_without_dim_splits_the_first_dim_as_torch() -> None:
    """Inputs: a 4 x 6 tensor split(3) and split([1, 3]) without dim. Expected: torch's
    pieces, along dim 0: shapes and values. Pass: equal shapes and bit patterns."""
    x = np.arange(24, dtype=np.float32).reshape(4, 6)
    for arg in (3, [1, 3]):
        _same_pieces(x, "split", (arg,))


@pytest.mark.clause("ENG-MTH-001")
def test_split_into_pieces_of_one_is_allowed_and_zero_is_refused() -> None:
    """Inputs: a 3 x 2 tensor split(1) and split(1, dim=1); split(0). Expected: torch's
    pieces (three 1 x 2 rows; two 3 x 1 columns) with equal values; ValueError naming 0
    where torch raises. Pass: shapes, bit patterns, the errors."""
    x = np.arange(6, dtype=np.float32).reshape(3, 2)
    for args in ((1,), (1, 1)):
        _same_pieces(x, "split", args)
    _both_refuse_zero(x, "split")


@pytest.mark.clause("ENG-MTH-001")
def test_chunk_into_one_piece_is_the_whole_tensor_and_zero_chunks_are_refused() -> None:
    """Inputs: a 4 x 6 tensor chunk(1), chunk(4, dim=1), chunk(0). Expected: torch's
    pieces (one 4 x 6 piece; four of widths 2, 2, 2) with equal values; ValueError
    naming 0 where torch raises. Pass: shapes, bit patterns, the errors."""
    x = np.arange(24, dtype=np.float32).reshape(4, 6)
    for args in ((1,), (4, 1)):
        _same_pieces(x, "chunk", args)
    _both_refuse_zero(x, "chunk")


def _same_pieces(x: np.ndarray, method: str, args: tuple[Any, ...]) -> None:
    """ampref's and torch's ``x.<method>(*args)``: the same shapes and bit patterns."""
    got = getattr(ampref.tensor(x), method)(*args)
    want = getattr(torch.from_numpy(x), method)(*args)
    assert [p.shape for p in got] == [tuple(p.shape) for p in want]
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        assert_bitwise_equal(g.numpy(), w.numpy(), msg=f"piece {i} of {method}{args}")


def _both_refuse_zero(x: np.ndarray, method: str) -> None:
    with pytest.raises(RuntimeError):
        getattr(torch.from_numpy(x), method)(0)
    with pytest.raises(ValueError, match="got 0"):
        getattr(ampref.tensor(x), method)(0)
