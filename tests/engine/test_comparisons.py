"""Tensor comparisons (ENG-INT-002): ==, !=, <, <=, >, >= against torch's own answers on
the same values, special values and rounding boundaries included."""

from __future__ import annotations

import operator
from typing import Any

import numpy as np
import pytest

import ampref

OPS = {"==": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le,
       ">": operator.gt, ">=": operator.ge}
FORMATS = ("float16", "bfloat16", "float32", "float64")
# NaN, both zeros, both infinities, the fp16 maximum, a value that rounds to it, a fp16
# tie (1 + 2^-11 lies halfway between 1 and its successor), a bf16 tie (1 + 2^-8), a fp16
# subnormal, and ordinary values
SPECIAL = [float("nan"), 0.0, -0.0, float("inf"), -float("inf"), 65504.0, 65519.0,
           1.0 + 2.0 ** -11, 1.0 + 2.0 ** -8, 1.0, 2.0 ** -24, -3.5, 0.1]


def _values(seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.concatenate([SPECIAL, rng.standard_normal(19) * 3.0]).astype(np.float64)


def _pair(fmt: str, vals: np.ndarray) -> tuple[Any, Any]:
    torch = pytest.importorskip("torch")
    return ampref.tensor(vals, fmt), torch.tensor(vals, dtype=getattr(torch, fmt))


def _same(got: Any, want: Any, what: str) -> None:
    assert isinstance(got, ampref.engine.indices.IndexTensor), what
    g = got.numpy()
    w = want.numpy()
    assert g.dtype == np.bool_ and g.shape == w.shape, f"{what}: {g.dtype}{g.shape} vs {w.shape}"
    bad = np.flatnonzero(g != w)
    assert bad.size == 0, f"{what}: differs from torch at {bad.tolist()}: {g[bad]} vs {w[bad]}"


@pytest.mark.clause("ENG-INT-002")
@pytest.mark.parametrize("fa", FORMATS)
@pytest.mark.parametrize("fb", FORMATS)
def test_tensor_comparisons_match_torch_for_every_format_pair(fa: str, fb: str) -> None:
    """Inputs: 32 values (NaN, ±0, ±inf, fp16 max and a value rounding to it, fp16/bf16
    ties, a subnormal, 19 normal draws) in format ``fa`` against a shuffled copy in ``fb``,
    and a (32, 1) x (32,) broadcast. Expected: for each of the six operators the bool
    result torch gives for the same dtypes. Pass: same shape, every element equal."""
    a, ta = _pair(fa, _values(1))
    b, tb = _pair(fb, _values(1)[np.random.default_rng(2).permutation(32)])
    for sym, op in OPS.items():
        _same(op(a, b), op(ta, tb), f"{fa} {sym} {fb}")
        _same(op(a.view(32, 1), b), op(ta.view(32, 1), tb), f"{fa}[:,None] {sym} {fb}")


@pytest.mark.clause("ENG-INT-002")
@pytest.mark.parametrize("fmt", FORMATS)
def test_a_python_number_is_rounded_to_the_tensor_format_before_comparing(fmt: str) -> None:
    """Inputs: the 32 values in ``fmt`` against Python numbers that round differently per
    format (1 + 2^-12, 1 + 2^-9, 0.1, 65519, NaN, -0.0), a NumPy float32 and an int.
    Expected: torch's answers (torch rounds the scalar to the tensor's dtype, so fp16's
    ``1.0 == 1 + 2^-12`` is True). Pass: every element equal for all six operators."""
    a, ta = _pair(fmt, _values(3))
    for s in (1.0 + 2.0 ** -12, 1.0 + 2.0 ** -9, 0.1, 65519.0, float("nan"), -0.0,
              np.float32(0.1), 3, True):
        for sym, op in OPS.items():
            _same(op(a, s), op(ta, s), f"{fmt} {sym} {s!r}")
            _same(op(s, a), op(s, ta), f"{s!r} {sym} {fmt}")


@pytest.mark.clause("ENG-INT-002", "ENG-INT-001")
@pytest.mark.parametrize("fmt", FORMATS)
def test_an_integer_tensor_compares_in_the_float_tensors_format(fmt: str) -> None:
    """Inputs: int64 values 0, 1, 2049 (not a fp16 value: rounds to 2048), 65519 (rounds
    to fp16's 65504), -7, 257 (not a bf16 value) against float tensors holding 0, 1, 2048,
    65504, -7, 256, on either side of each operator, and a bool tensor. Expected: torch's
    answers. Pass: every element equal for all six operators."""
    torch = pytest.importorskip("torch")
    ints = [0, 1, 2049, 65519, -7, 257]
    floats = np.array([0.0, 1.0, 2048.0, 65504.0, -7.0, 256.0])
    a, ta = _pair(fmt, floats)
    i, ti = ampref.tensor(ints), torch.tensor(ints)
    bits, tbits = ampref.tensor([True, False] * 3), torch.tensor([True, False] * 3)
    for sym, op in OPS.items():
        _same(op(a, i), op(ta, ti), f"{fmt} {sym} int64")
        _same(op(i, a), op(ti, ta), f"int64 {sym} {fmt}")
        _same(op(a, bits), op(ta, tbits), f"{fmt} {sym} bool")


@pytest.mark.clause("ENG-INT-002")
def test_comparisons_carry_no_gradient_and_tensors_hash_by_identity() -> None:
    """Inputs: a requires-grad fp16 tensor compared with itself; the tensor as a dict key
    and set member; ``==``/``!=``/``<`` with a string. Expected: a bool IndexTensor (no
    gradient, [T, F, T] for [1, NaN, -0]: NaN unequal to itself); lookup by the same
    object succeeds and a second tensor with equal values is a different key; ``== "a"``
    is False, ``!= "a"`` True, ``< "a"`` a TypeError. Pass: each as stated."""
    t = ampref.tensor([1.0, float("nan"), -0.0], "fp16", requires_grad=True)
    eq = t == t
    assert isinstance(eq, ampref.engine.indices.IndexTensor)
    assert eq.numpy().tolist() == [True, False, True]
    assert (t != t).numpy().tolist() == [False, True, False]
    twin = ampref.tensor([1.0, float("nan"), -0.0], "fp16")
    table = {t: "t"}
    assert table[t] == "t" and twin not in table and len({t, twin}) == 2
    assert (t == "a") is False and (t != "a") is True
    with pytest.raises(TypeError, match="not supported"):
        t < "a"  # noqa: B015


@pytest.mark.clause("ENG-INT-002")
@pytest.mark.parametrize("dtype", ["float64", "float32", "float16", "int64", "bool"])
def test_a_numpy_array_compares_as_a_tensor_of_its_dtype(dtype: str) -> None:
    """Inputs: fp16 and bf16 tensors [1, 2, 2048, NaN, 256] against NumPy arrays
    [1, 3, 2049, NaN, 257] of ``dtype`` (bool: [1, 0, 1, 0, 1]), the array on either
    side. Expected: torch's answers for ``torch.as_tensor(array)`` (a float64 array
    compares exactly, an int64 one rounds 2049 to fp16's 2048). Pass: all six operators
    equal element for element."""
    torch = pytest.importorskip("torch")
    raw = [1.0, 3.0, 2049.0, float("nan"), 257.0]
    arr = (np.array([1, 0, 1, 0, 1], dtype=bool) if dtype == "bool"
           else np.array(raw if dtype.startswith("float") else [1, 3, 2049, 7, 257],
                         dtype=dtype))
    for fmt in ("float16", "bfloat16"):
        a, ta = _pair(fmt, np.array([1.0, 2.0, 2048.0, float("nan"), 256.0]))
        for sym, op in OPS.items():
            _same(op(a, arr), op(ta, torch.as_tensor(arr)), f"{fmt} {sym} {dtype} array")
            _same(op(arr, a), op(torch.as_tensor(arr), ta), f"{dtype} array {sym} {fmt}")


@pytest.mark.clause("ENG-INT-001")
@pytest.mark.parametrize("name", ["argmax", "argmin"])
def test_argmax_and_argmin_take_torchs_shapes_and_indices(name: str) -> None:
    """Inputs: a (3, 5) float tensor with ties, reduced over no dim, dim 0, dim 1, and dim
    1 with keepdim. Expected: torch's indices and shapes (keepdim False by default: the dim
    is dropped). Pass: equal shapes and values."""
    torch = pytest.importorskip("torch")
    vals = np.array([[1.0, 3.0, 3.0, -2.0, 0.5], [2.0, 2.0, -1.0, 4.0, 4.0],
                     [0.0, -5.0, 7.0, 7.0, 1.0]])
    a, ta = ampref.tensor(vals, "float32"), torch.tensor(vals, dtype=torch.float32)
    for kw in ({}, {"dim": 0}, {"dim": 1}, {"dim": 1, "keepdim": True}):
        got = getattr(a, name)(**kw)
        want = getattr(ta, name)(**kw)
        assert tuple(got.shape) == tuple(want.shape), (name, kw)
        assert got.numpy().tolist() == want.numpy().tolist(), (name, kw)


@pytest.mark.clause("ENG-MTH-001")
def test_shape_methods_give_torchs_shapes_for_every_dim() -> None:
    """Inputs: a (2, 1, 3, 1) tensor; squeeze() and squeeze(d), unsqueeze(d) and
    flatten(s, e) for every valid d, s <= e (negative ones included). Expected: torch's
    shapes and values for the same calls. Pass: equal shapes and values."""
    torch = pytest.importorskip("torch")
    vals = np.arange(6.0).reshape(2, 1, 3, 1)
    a, ta = ampref.tensor(vals, "float32"), torch.tensor(vals, dtype=torch.float32)
    calls = [("squeeze", ())] + [("squeeze", (d,)) for d in range(-4, 4)] + \
        [("unsqueeze", (d,)) for d in range(-5, 5)] + \
        [("flatten", (s, e)) for s in range(-4, 4) for e in range(-4, 4)
         if s % 4 <= e % 4]
    for name, args in calls:
        got, want = getattr(a, name)(*args), getattr(ta, name)(*args)
        assert tuple(got.shape) == tuple(want.shape), (name, args)
        assert got.numpy().tolist() == want.numpy().tolist(), (name, args)


@pytest.mark.clause("ENG-MTH-001")
def test_reshape_and_view_take_sizes_as_torch_takes_them() -> None:
    """Inputs: a 6-element tensor reshaped and viewed to (2, 3) given as separate ints, one
    tuple, one list, with -1, and to (6,) from a (2, 3) tensor by -1 and (-1,). Expected:
    torch's shapes and values for the same calls. Pass: equal shapes and values."""
    torch = pytest.importorskip("torch")
    vals = np.arange(6.0)
    a, ta = ampref.tensor(vals, "float32"), torch.tensor(vals, dtype=torch.float32)
    calls: list[tuple[Any, ...]] = [(2, 3), ((2, 3),), ([2, 3],), (-1, 3), ((2, -1),)]
    for name in ("reshape", "view"):
        if not hasattr(a, name):
            continue
        for args in calls:
            got, want = getattr(a, name)(*args), getattr(ta, name)(*args)
            assert tuple(got.shape) == tuple(want.shape), (name, args)
            assert got.numpy().tolist() == want.numpy().tolist(), (name, args)
            back = getattr(got, name)(-1)
            assert tuple(back.shape) == (6,) and getattr(got, name)((-1,)).shape == (6,)
