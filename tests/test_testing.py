"""ampref.testing: strategies produce what they promise; assertions report in hex."""

from __future__ import annotations

import re

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given

import ampref
from ampref.testing import (arrays, assert_bitwise_equal, assert_within_ulps, hard_cases,
                            ordinal, representable)


@given(v=representable("e4m3"))
def test_representable_values_survive_quantize_unchanged(v: float) -> None:
    x = np.array([v], np.float32)
    assert_bitwise_equal(ampref.quantize(x, "e4m3"), x)


@given(a=arrays("bf16", (3, 4)))
def test_arrays_strategy_gives_float32_arrays_of_the_format(a: np.ndarray) -> None:
    assert a.dtype == np.float32 and a.shape == (3, 4)
    assert_bitwise_equal(ampref.quantize(a, "bf16"), a)


@given(x=hard_cases("fp16", dtype=np.float64))
def test_hard_cases_are_floats_of_the_requested_dtype(x: np.float64) -> None:
    assert isinstance(x, np.float64)


def test_hard_cases_reach_midpoints_specials_and_nan_payloads() -> None:
    seen = {"nan": False, "inf": False, "tiny": False}

    @given(x=hard_cases("fp16"))
    def collect(x: np.float32) -> None:
        if np.isnan(x):
            seen["nan"] = True
        elif np.isinf(x):
            seen["inf"] = True
        elif 0 < abs(x) < 2.0**-14:
            seen["tiny"] = True

    collect()
    assert all(seen.values()), seen


def test_bitwise_assertion_reports_hex_of_first_difference() -> None:
    a = np.array([1.0, 0.0, 2.0], np.float32)
    b = np.array([1.0, -0.0, 2.0], np.float32)
    want = (r"1 of 3 elements differ bitwise:\n  at \(1,\): actual 0x00000000 \(0x0.0p\+0\) "
            r"desired 0x80000000 \(-0x0.0p\+0\)")
    with pytest.raises(AssertionError, match=want):
        assert_bitwise_equal(a, b)
    with pytest.raises(AssertionError, match="dtype/shape differ"):
        assert_bitwise_equal(a, b.astype(np.float64))
    nan1 = np.array([0x7FC00000], np.uint32).view(np.float32)
    nan2 = np.array([0x7FC00001], np.uint32).view(np.float32)
    with pytest.raises(AssertionError):
        assert_bitwise_equal(nan1, nan2)
    assert_bitwise_equal(nan1, nan2, nan="any")
    with pytest.raises(ValueError, match="nan must be 'bitwise' or 'any'"):
        assert_bitwise_equal(a, a, nan="close")


@pytest.mark.clause("FMT-ORD-001")
def test_ulp_distance_counts_steps_on_the_format_grid() -> None:
    """Inputs: bf16 values around 1 and ±0; bf16's smallest subnormal, largest subnormal
    and smallest normal; its largest finite value and +inf; E8M0 scales 2^-127 and 2^0;
    float32 1 and its successor without a format. Expected (hand-derived from the bit
    patterns): ±(127·128 [+1]) around 1, 0 for both zeros; 1, 127, 128 at the subnormal
    boundary; inf one past the largest finite; E8M0 positions 0 and 127 (unsigned: the
    code); float32 one step. A value off the grid is a ValueError. Pass: equal."""
    one, nxt = 1.0, 1.0 + 2.0**-7
    tiny, big_sub, min_normal = 2.0**-133, 127 * 2.0**-133, 2.0**-126
    assert list(ordinal(np.array([tiny, big_sub, min_normal], np.float32), "bf16")) == \
        [1, 127, 128]
    fmax = float(np.float32(ml_dtypes.finfo(ml_dtypes.bfloat16).max))
    assert list(ordinal(np.array([fmax, np.inf, -np.inf], np.float32), "bf16")) == \
        [0x7F7F, 0x7F80, -0x7F80]
    assert list(ordinal(np.array([2.0**-127, 1.0], np.float32), "float8_e8m0fnu")) == [0, 127]
    f = np.array([1.0, np.nextafter(np.float32(1), np.float32(2))], np.float32)
    assert list(np.diff(ordinal(f))) == [1]
    assert list(ordinal(np.array([-nxt, -0.0, 0.0, one, nxt], np.float32), "bf16")) == \
        [-(127 * 128 + 1), 0, 0, 127 * 128, 127 * 128 + 1]
    assert_within_ulps(np.array([nxt], np.float32), np.array([one], np.float32), 1, "bf16")
    with pytest.raises(AssertionError, match="distance 2 ulps"):
        assert_within_ulps(np.array([1.0 + 2**-6], np.float32), np.array([one], np.float32), 1,
                           "bf16")
    with pytest.raises(ValueError, match="not representable in bfloat16"):
        ordinal(np.array([1.0 + 2**-10], np.float32), "bf16")
    x = np.array([1.0], np.float64)
    assert_within_ulps(np.nextafter(x, 2), x, 1)


@pytest.mark.clause("FMT-IDN-002")
def test_assert_matches_passes_a_correct_cast_and_explains_a_half_away_bug_in_hex() -> None:
    """Inputs: NumPy's fp16 cast (40 examples); an e4m3 quantizer rounding ties away.
    Expected: the first passes; the second fails shrunk to one element with input, actual
    and desired in hex and the variant it implements. Pass: both."""
    from ampref.testing import assert_matches

    assert_matches(lambda x: x.astype(np.float16), "fp16", max_examples=40)

    def half_away(x: np.ndarray) -> np.ndarray:  # a quantizer with the classic tie bug
        return ampref.quantize(x, "e4m3", "nearest_away")

    with pytest.raises(AssertionError) as err:
        assert_matches(half_away, "e4m3")
    text = str(err.value)
    assert "1 of 1 elements differ bitwise" in text  # shrunk to one element
    assert re.search(r"at \(0,\): input 0x[0-9a-f]{16} \(-?0x1\.[0-9a-f]+p-?\d+\); actual 0x", text)
    assert "rounding=nearest_away, saturate=False, subnormals=True, via=none" in text


@pytest.mark.clause("FMT-IDN-002")
def test_failure_messages_show_position_block_and_exact_values() -> None:
    """Inputs: two 2x4 arrays differing at (1, 3), block 2; inputs of another shape.
    Expected: the exact message with position, block and element, hex and float.hex values;
    ValueError for the shape. Pass: both."""
    x = np.array([[1, 2, 3, 4], [5, 6, 7, 2.0**-119 * (1 + 2.0**-23)]], dtype=np.float32)
    y = x.copy()
    y[1, 3] *= 2
    with pytest.raises(AssertionError, match=(
            r"^mine: 1 of 8 elements differ bitwise:\n  at \(1, 3\) \[block 1, element 1\]: "
            r"input 0x04000001 \(0x1\.0000020000000p-119\); actual 0x04000001 .* desired "
            r"0x04800001 \(0x1\.0000020000000p-118\)$")):
        assert_bitwise_equal(x, y, inputs=x, block=2, msg="mine")
    with pytest.raises(ValueError, match="inputs has shape"):
        assert_bitwise_equal(x, y, inputs=x[0])
