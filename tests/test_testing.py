"""ampref.testing: strategies produce what they promise; assertions report in hex."""

from __future__ import annotations

import math
import re
from typing import Any

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

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


@pytest.mark.clause("FMT-IDN-004")
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_hard_cases_draw_quiet_and_signalling_nans_of_both_signs(dtype: type) -> None:
    """Inputs: 400 derandomized draws of ``hard_cases('fp16', dtype)``. Expected: among
    the NaNs, every (sign bit, quiet bit) pair, read from the drawn bit patterns (a float32
    signalling NaN taken through a Python float comes back quiet). Pass: all four."""
    ubits = np.uint32 if dtype == np.float32 else np.uint64
    width, mant = 8 * np.dtype(dtype).itemsize, np.finfo(dtype).nmant
    seen: set[tuple[int, int]] = set()

    @settings(max_examples=400, database=None, derandomize=True)
    @given(x=hard_cases("fp16", dtype=dtype))
    def collect(x: np.floating) -> None:
        assert type(x) is dtype
        if np.isnan(x):
            b = int(np.array([x]).view(ubits)[0])
            seen.add((b >> (width - 1), (b >> (mant - 1)) & 1))

    collect()
    assert seen == {(0, 0), (0, 1), (1, 0), (1, 1)}


@pytest.mark.clause("FMT-IDN-004")
def test_a_cast_truncating_signalling_nans_to_infinity_is_caught_on_float32_inputs() -> None:
    """Inputs: a float32 -> fp16 cast that is NumPy's for numbers but builds NaN results by
    dropping the low 13 payload bits (what a shift-based kernel does), checked bitwise
    against ``ampref.quantize`` on arrays of ``hard_cases('fp16')`` (float32, derandomized).
    Expected: hypothesis finds a counterexample whose input is a NaN with no payload in its
    top 10 bits, and the cast's result there is infinity (0x7c00 or 0xfc00 widened). Pass:
    the AssertionError with such an input."""
    from hypothesis.extra import numpy as hnp

    def truncating(x: np.ndarray) -> np.ndarray:
        bits = x.view(np.uint32)
        nan_half = (((bits >> 16) & 0x8000) | 0x7C00 | ((bits >> 13) & 0x3FF)).astype(np.uint16)
        with np.errstate(over="ignore"):
            out = x.astype(np.float16)
        return np.where(np.isnan(x), nan_half.view(np.float16), out)

    @settings(max_examples=300, database=None, derandomize=True)
    @given(x=hnp.arrays(np.float32, st.integers(1, 8), elements=hard_cases("fp16")))
    def check(x: np.ndarray) -> None:
        assert_bitwise_equal(truncating(x).astype(np.float32), ampref.quantize(x, "fp16"),
                             nan="any", inputs=x)

    with pytest.raises(AssertionError) as err:
        check()
    m = re.search(r"input 0x([0-9a-f]{8}) .*actual 0x([0-9a-f]{8})", str(err.value))
    assert m is not None, str(err.value)
    inp, act = int(m.group(1), 16), int(m.group(2), 16)
    assert inp & 0x7F800000 == 0x7F800000 and inp & 0x7FE000 == 0 and inp & 0x1FFF != 0
    assert act & 0x7FFFFFFF == 0x7F800000  # the NaN came out as infinity


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


@pytest.mark.clause("FMT-IDN-004")
def test_representable_without_subnormals_never_draws_one() -> None:
    """Inputs: 400 derandomized draws of representable('e4m3') with allow_subnormal False,
    then True. Expected: no value with 0 < |v| < 2^-6 (E4M3's smallest normal, from
    ml_dtypes) in the first; at least one in the second (14 of E4M3's 254 finite codes
    are subnormal). Pass: both."""
    tiny = float(ml_dtypes.finfo(ml_dtypes.float8_e4m3fn).smallest_normal)

    def draws(allow: bool) -> list[float]:
        out: list[float] = []

        @settings(max_examples=400, deadline=None, database=None, derandomize=True)
        @given(ampref.testing.representable("e4m3", allow_subnormal=allow))
        def draw(v: float) -> None:
            out.append(v)

        draw()
        return out

    assert not [v for v in draws(False) if 0 < abs(v) < tiny]
    assert [v for v in draws(True) if 0 < abs(v) < tiny]


@pytest.mark.clause("FMT-IDN-004")
def test_representable_draws_nan_and_infinity_only_when_asked() -> None:
    """Inputs: 600 derandomized draws of representable('e5m2') (6 NaN codes and 2
    infinities of 256, from ml_dtypes' decoding), with the defaults, then with
    allow_nan and allow_infinity. Expected: the defaults draw only finite values (a
    property test of finite arithmetic must not see NaN unless it asks); asked, NaN and
    ±inf appear. Pass: both."""
    def draws(**flags: bool) -> list[float]:
        out: list[float] = []

        @settings(max_examples=600, deadline=None, database=None, derandomize=True)
        @given(ampref.testing.representable("e5m2", **flags))
        def draw(v: float) -> None:
            out.append(v)

        draw()
        return out

    assert all(math.isfinite(v) for v in draws())
    asked = draws(allow_nan=True, allow_infinity=True)
    assert any(math.isnan(v) for v in asked) and any(math.isinf(v) for v in asked)


def _wrong(v: Any) -> Any:
    """A deliberately mistyped argument, hidden from mypy."""
    return v


@pytest.mark.clause("FMT-IDN-004")
@pytest.mark.parametrize("build,error,words", [
    (lambda: ampref.testing.representable("bf16", allow_nan=_wrong("yes")), TypeError,
     "allow_nan must be a bool"),
    (lambda: arrays("bf16", (2, -1)), ValueError, r"shape entries must be >= 0, got \(2, -1\)"),
    (lambda: arrays("bf16", _wrong(2.5)), TypeError, "shape must be an int or a tuple of ints"),
    (lambda: arrays("bf16", 3, dtype=np.float16), ValueError,
     "dtype must be float32 or float64 and hold every bfloat16 value, got float16"),
    (lambda: arrays("float64", 3), ValueError, "hold every float64 value, got float32"),
    (lambda: ampref.testing.block_cases("mxfp8_e4m3", rows=(0, 3)), ValueError,
     r"rows must be a pair \(lo, hi\) with 1 <= lo <= hi, got \(0, 3\)"),
    (lambda: ampref.testing.block_cases("mxfp8_e4m3", blocks=_wrong(2)), ValueError,
     "blocks must be a pair"),
    (lambda: ampref.testing.operands("bf16", _wrong((4,))), ValueError,
     r"operands: shape must be a pair \(M, N\), got \(4,\)"),
])
def test_a_strategy_names_a_bad_argument_when_built_not_when_drawn(
        build: Any, error: type[Exception], words: str) -> None:
    """Inputs: each strategy of the kit built with one bad argument (a non-bool flag, a
    negative or float shape, a dtype that cannot hold the format, an empty row range, a
    block count that is not a pair, a 1-D operand shape). Expected: the listed error at
    build time, naming the value (these were accepted and failed inside hypothesis, if
    ever). Pass: each raised and matched."""
    with pytest.raises(error, match=words):
        build()
