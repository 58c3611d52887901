"""``ampref.formats.exactprod.products`` against an exact-rational oracle (ACC-EXA-002).

Oracle: the factors' exact values multiplied as ``fractions.Fraction`` and rounded by
the scalar grid oracle of ``tests/oracle.py`` (written from the format spec, sharing no
code with the kernel); specials by IEEE's multiplication rules written out below.
Results are compared as bit patterns (hex in failures).
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import ampref
from ampref.formats.exactprod import products
from ampref.testing import assert_bitwise_equal

import oracle

F32, F64 = ampref.get_format("float32"), ampref.get_format("float64")


def _oracle(row: list[float], out: type) -> float:
    """IEEE's special rules, else the exact product rounded once by the grid oracle."""
    sign = -1.0 if sum(math.copysign(1.0, v) < 0 for v in row) % 2 else 1.0
    if any(math.isnan(v) for v in row):
        return math.nan
    has_inf, has_zero = any(math.isinf(v) for v in row), any(v == 0 for v in row)
    if has_inf and has_zero:
        return math.nan
    if has_inf:
        return sign * math.inf
    if has_zero:
        return sign * 0.0
    exact = math.prod((Fraction(v) for v in row), start=Fraction(1))
    r = oracle.round_value(abs(exact), F32 if out is np.float32 else F64)
    return sign * float(r)


def _check(rows: np.ndarray, out: type = np.float32) -> None:
    got = products(rows, -1, out=out)
    want: np.ndarray = np.array([_oracle([float(v) for v in row], out) for row in rows], out)
    assert_bitwise_equal(got, want)
    prefixes = products(rows, -1, cumulative=True, out=out)
    want_p: np.ndarray = np.array([[_oracle([float(v) for v in row[:k + 1]], out)
                        for k in range(rows.shape[1])] for row in rows], out)
    assert_bitwise_equal(prefixes, want_p)


_F32S = st.floats(width=32, allow_nan=True, allow_infinity=True)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.lists(_F32S, min_size=5, max_size=5), min_size=1, max_size=4))
@example([[3.0, 1.0 / 3.0, 3.0, 1.0, 1.0]])
def test_products_of_float32_rows_equal_the_exact_product_rounded_once(rows: list) -> None:
    """ACC-EXA-002. Inputs: hypothesis rows of 5 float32 (NaN, ±inf, ±0, subnormals
    included). Expected: every product and prefix product equals the oracle. Pass:
    bitwise."""
    _check(np.array(rows, np.float32))


def test_products_round_ties_to_even_and_keep_the_last_binade() -> None:
    """ACC-EXA-002 boundaries. Inputs: (1 + 2^-12)^2 = 1 + 2^-11 + 2^-24 (a tie between
    1 + 2^-11 and its successor, even down), (1 + 3 2^-12)(1 + 2^-12) (a tie, even up),
    factors whose product is float32's largest finite value, its rounding threshold
    2^128 (1 - 2^-25) (overflows), half the smallest subnormal (a tie to +0) and just
    above it; in float64 two factors whose exact product is the threshold 2^1024 - 2^970
    (overflows) and one just below it (a tie that stays finite). Expected: the oracle.
    Pass: bitwise."""
    h = 2.0 ** -12
    big = float(np.float32(3.4028234663852886e38))
    rows = np.array([
        [1 + h, 1 + h, 1.0],
        [1 + 3 * h, 1 + h, 1.0],
        [big / 2, 2.0, 1.0],
        [2.0 ** 127, 2 - 2.0 ** -24, 1.0],
        [2.0 ** -75, 2.0 ** -75, 1.0],
        [2.0 ** -75, 2.0 ** -75, 1 + 2.0 ** -23],
        [-(2.0 ** -149), 3.0, 0.5],
    ], np.float32)
    _check(rows)
    assert products(rows[3:4])[0] == np.inf  # the rounding threshold itself overflows
    assert np.signbit(products(np.array([[-(2.0 ** -100), 2.0 ** -100]], np.float32))[0])
    # float64's threshold 2^1024 - 2^970 = (2^27 - 1)(2^27 + 1) 2^970 exactly (a tie, even
    # up to overflow; 2 - 2^-53 itself is not a float64), (2^27 - 1)^2 2^970 just below
    # it (a tie inside the range), 2^1024 exactly, the largest finite, subnormals
    lo, hi = (2.0 ** 27 - 1) * 2.0 ** 485, (2.0 ** 27 + 1) * 2.0 ** 485
    wide = np.array([[lo, hi], [lo, lo], [2.0 ** 1023, 2.0], [2.0 ** 1023, 2 - 2.0 ** -52],
                     [2.0 ** -537, 2.0 ** -538], [2.0 ** -537, -(2.0 ** -537) * 1.5],
                     [2.0 ** -537, 2.0 ** -538 * (1 + 2.0 ** -52)]])
    _check(wide, np.float64)
    got = products(wide[:2], out=np.float64)  # the threshold overflows; below, a tie
    want = np.array([np.inf, math.ldexp(2.0 ** 53 - 2.0 ** 27, 971)])
    assert_bitwise_equal(got, want, msg="float64 products at the overflow threshold")


def test_products_do_not_depend_on_the_order_of_the_factors() -> None:
    """ACC-EXA-002. Inputs: 64 random float32 rows of 40 factors near 1 and their
    reversals. Expected: equal products (a sequential float32 product differs between
    the two orders on some row, showing the check can see order). Pass: bitwise."""
    rng = np.random.default_rng(7)
    rows = (1 + rng.standard_normal((64, 40)) * 0.1).astype(np.float32)
    assert_bitwise_equal(products(rows), products(rows[:, ::-1]))
    seq = np.multiply.reduce(rows, axis=-1, dtype=np.float32)
    back = np.multiply.reduce(rows[:, ::-1], axis=-1, dtype=np.float32)
    assert np.any(seq.view(np.uint32) != back.view(np.uint32))
    _check(rows[:4].astype(np.float32))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.floats(width=64, allow_nan=False), min_size=3, max_size=3),
                min_size=1, max_size=3))
def test_products_of_float64_rows_round_once_into_float64(rows: list) -> None:
    """ACC-EXA-002. Inputs: hypothesis float64 rows of 3 (subnormals, ±0, ±inf).
    Expected: the oracle in float64. Pass: bitwise."""
    _check(np.array(rows, np.float64), np.float64)


def test_products_along_an_axis_keep_the_other_axes_and_an_empty_product_is_one() -> None:
    """ACC-EXA-002. Inputs: a (3, 4, 2) float32 array reduced along axis 1 and along the
    default axis, and a (2, 0) array. Expected: shape (3, 2) equal to reducing the moved
    rows; the default is the last axis (shape (3, 4)); prefix shape kept; the empty
    product +1. Pass: bitwise."""
    x = np.random.default_rng(1).standard_normal((3, 4, 2)).astype(np.float32)
    moved = np.moveaxis(x, 1, -1).reshape(-1, 4)
    assert_bitwise_equal(products(x, 1), products(moved).reshape(3, 2))
    assert_bitwise_equal(products(x), products(x.reshape(-1, 2), 1).reshape(3, 4))
    assert products(x, 1, cumulative=True).shape == x.shape
    assert_bitwise_equal(products(np.zeros((2, 0), np.float32)), np.ones(2, np.float32))


def test_products_refuse_other_dtypes_naming_them() -> None:
    """ACC-EXA-002 arguments. Inputs: float16 values; out=float16. Expected: TypeError
    naming float16; ValueError naming the allowed outputs. Pass: the messages."""
    with pytest.raises(TypeError, match="float16"):
        products(np.ones(3, np.float16))
    with pytest.raises(ValueError, match="float32 or numpy.float64"):
        products(np.ones(3, np.float32), out=np.float16)
