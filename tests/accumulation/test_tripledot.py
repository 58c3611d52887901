"""``triple_dot_f32`` (ACC-EXA-003) against exact rationals rounded by the scalar grid
oracle: hypothesis rows over the whole float32 exponent range (products of 72 bits),
cancellation, specials, and broadcasting. Bitwise, hex in failures."""

from __future__ import annotations

import math
from fractions import Fraction as Q

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import ampref
from ampref.accumulation.tripledot import triple_dot_f32
from ampref.testing import assert_bitwise_equal

import oracle

F32 = ampref.get_format("float32")


def _want(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.float32:
    """fl32 of the exact sum (IEEE's float64 sum where a term is not finite)."""
    vals = [(float(x), float(y), float(z)) for x, y, z in zip(a, b, c, strict=True)]
    if not all(math.isfinite(x * y * z) or (math.isfinite(x) and math.isfinite(y)
                                            and math.isfinite(z)) for x, y, z in vals):
        return np.float32(sum(x * y * z for x, y, z in vals))
    exact = sum((Q(x) * Q(y) * Q(z) for x, y, z in vals), Q(0))
    r = oracle.round_value(abs(exact), F32)
    return np.float32(math.copysign(float(r), exact) if exact else 0.0)


_F = st.floats(width=32, allow_nan=False, allow_infinity=False)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(_F, _F, _F), min_size=1, max_size=7))
@example([(1.0 + 2.0**-23, 1.0 + 2.0**-23, 1.0 + 2.0**-23), (-1.0, 1.0, 1.0)])
def test_triple_dots_are_the_exact_sum_of_triple_products_rounded_once(rows: list) -> None:
    """ACC-EXA-003. Inputs: hypothesis triples of finite float32 (subnormals and the
    largest values included); the pinned example cancels 1 and leaves (1 + 2^-23)^3 - 1,
    whose 2^-69 term a float64 product drops. Expected: fl32(exact sum of a b c). Pass:
    bitwise."""
    a, b, c = (np.array([t[i] for t in rows], np.float32) for i in range(3))
    assert_bitwise_equal(triple_dot_f32(a, b, c), _want(a, b, c))


def test_triple_dots_keep_a_term_a_float64_product_would_round_away() -> None:
    """ACC-EXA-003. Inputs: (1 + 2^-23)^3 = 1 + 3 2^-23 + 3 2^-46 + 2^-69 as one triple,
    then -1, -3 2^-23 and -3 2^-46 as triples with unit factors, leaving 2^-69; float64
    evaluation of the same terms gives 0. Expected: 2^-69 exactly. Pass: bitwise."""
    e = np.float32(1 + 2.0**-23)
    a = np.array([e, -1.0, -3 * 2.0**-23, -3 * 2.0**-46], np.float32)
    b = np.array([e, 1.0, 1.0, 1.0], np.float32)
    c = np.array([e, 1.0, 1.0, 1.0], np.float32)
    assert np.sum(a.astype(np.float64) * b * c) == 0.0  # float64 loses it
    assert_bitwise_equal(triple_dot_f32(a, b, c), np.float32(2.0**-69))


def test_triple_dots_propagate_nan_and_inf_and_broadcast() -> None:
    """ACC-EXA-003. Inputs: rows with inf * 0, inf - inf, a lone inf, a NaN; then a (2,
    1, 3) by (4, 3) by (3,) broadcast. Expected: NaN, NaN, inf, NaN; the broadcast
    result of shape (2, 4) equal to the oracle per element. Pass: bitwise (NaN any)."""
    inf, nan = np.inf, np.nan
    a = np.array([[inf, 1.0], [inf, -inf], [inf, 1.0], [nan, 1.0]], np.float32)
    b = np.array([[0.0, 1.0], [1.0, 1.0], [2.0, 1.0], [1.0, 1.0]], np.float32)
    c = np.ones((4, 2), np.float32)
    assert_bitwise_equal(triple_dot_f32(a, b, c),
                         np.array([nan, nan, inf, nan], np.float32), nan="any")
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 1, 3)).astype(np.float32)
    y = rng.standard_normal((4, 3)).astype(np.float32)
    z = rng.standard_normal(3).astype(np.float32)
    got = triple_dot_f32(x, y, z)
    want = np.array([[_want(x[i, 0], y[j], z) for j in range(4)] for i in range(2)])
    assert_bitwise_equal(got, want.astype(np.float32))


def test_triple_dots_refuse_values_float32_cannot_hold_naming_them() -> None:
    """ACC-EXA-003 arguments. Inputs: b = [1, 1 + 2^-40] (float64). Expected:
    ValueError naming b and the value, since its halves would not be exact. Pass: the
    message."""
    with pytest.raises(ValueError, match=r"b must hold float32 values.*1\.0000000000009"):
        triple_dot_f32(np.ones(2), np.array([1.0, 1 + 2.0**-40]), np.ones(2))
