"""identify names the rule a black-box cast follows (FMT-IDN-001): a planted cast of
every variant is named as exactly that variant (and the variants that agree with it on
every input, which the spec lists); NumPy's and ml_dtypes' own casts are named as the
variants they implement; casts no variant explains get the closest variant and the first
unexplained input in hex."""

from __future__ import annotations

from collections.abc import Callable

import dataclasses

import ml_dtypes
import numpy as np
import pytest

import ampref
from ampref.formats.identify import Variant, battery, variants
from ampref.formats.peers import peer_cast
from ampref.testing import identify

NEAREST = ("nearest_even", "nearest_away")


def _planted(v: Variant, fmt: str):  # type: ignore[no-untyped-def]
    def cast(x: np.ndarray) -> np.ndarray:
        with np.errstate(all="ignore"):
            return ampref.quantize(x, fmt, v.rounding, saturate=v.saturate,
                                   subnormals=v.subnormals,
                                   via="float32" if v.via_float32 else None)
    return cast


def _equivalent(v: Variant) -> set[Variant]:
    """v and, for saturating directed modes and round-to-odd, v via float32 or not
    (FMT-IDN-001)."""
    if v.rounding in NEAREST or not v.saturate:
        return {v}
    return {v, dataclasses.replace(v, via_float32=not v.via_float32)}


@pytest.mark.clause("FMT-IDN-001")
@pytest.mark.parametrize("fmt", ["float8_e4m3fn", "float8_e5m2"])
def test_a_planted_cast_of_every_variant_is_named_as_that_variant_and_no_other(
        fmt: str) -> None:
    """Inputs: every cast variant (rounding, saturation, subnormals, via float32) planted
    for e4m3 and e5m2. Expected: identify names exactly that variant and its equivalents,
    with no mismatch. Pass: equal sets."""
    for v in variants():
        got = identify(_planted(v, fmt), fmt)
        assert set(got.matches) == _equivalent(v), (str(v), str(got))
        assert got.mismatches == 0 and got.first is None


@pytest.mark.clause("FMT-IDN-001")
def test_numpy_and_ml_dtypes_casts_are_named_as_the_variants_they_implement() -> None:
    """Inputs: NumPy's float16 cast and ml_dtypes' bf16 and e4m3 casts. Expected: direct
    nearest-even for NumPy, via-float32 for ml_dtypes. Pass: equal."""
    direct = Variant(rounding="nearest_even", saturate=False, subnormals=True,
                     via_float32=False)
    via = dataclasses.replace(direct, via_float32=True)
    with np.errstate(all="ignore"):
        assert identify(lambda x: x.astype(np.float16), "fp16").matches == (direct,)
        assert identify(lambda x: x.astype(ml_dtypes.bfloat16), "bf16").matches == (via,)
        assert identify(lambda x: x.astype(ml_dtypes.float8_e4m3fn), "e4m3").matches == (via,)


@pytest.mark.clause("FMT-IDN-001", "FMT-PEER-001")
def test_torchs_cpu_casts_are_named_as_the_variants_they_implement() -> None:
    """Input: torch's CPU float64 casts to fp16, bf16, e4m3fn, e5m2 through identify's
    battery. Expected: fp16/bf16/e5m2 nearest_even via float32; e4m3fn the variant the
    installed release's PEER_CASTS row states. Pass: identify names exactly that variant."""
    torch = pytest.importorskip("torch")
    via = Variant(rounding="nearest_even", saturate=False, subnormals=True, via_float32=True)
    sat = dataclasses.replace(via, saturate=True)

    def cast(dtype: object) -> Callable[[np.ndarray], np.ndarray]:
        def fn(x: np.ndarray) -> np.ndarray:
            t = torch.from_numpy(np.asarray(x, np.float64))
            return t.to(dtype).to(torch.float64).numpy()
        return fn

    # float64 -> float16/bfloat16/FP8 go through float32 on the CPU; E4M3FN saturates
    # (even inf becomes 448) from torch 2.12 on (FMT-PEER-001), E5M2 overflows to inf
    assert identify(cast(torch.float16), "fp16").matches == (via,)
    assert identify(cast(torch.bfloat16), "bf16").matches == (via,)
    row = peer_cast("torch", "cpu", "float8_e4m3fn", torch.__version__)
    assert row is not None, f"torch {torch.__version__}'s CPU E4M3FN cast is unrecorded"
    assert identify(cast(torch.float8_e4m3fn), "e4m3").matches == (sat if row.saturate else via,)
    assert identify(cast(torch.float8_e5m2), "e5m2").matches == (via,)


@pytest.mark.clause("FMT-IDN-001")
def test_a_cast_no_variant_explains_gets_the_closest_variant_and_the_first_input_in_hex() -> None:
    """Inputs: an e5m2 cast with 1.0 replaced by 1.25. Expected: no match, closest nearest-
    even direct, the first wrong input in 18-character hex with output 1.25, and the
    message. Pass: all."""
    def off_by_one_code(x: np.ndarray) -> np.ndarray:
        q = ampref.quantize(x, "e5m2")
        q[np.abs(q) == 1.0] = 1.25  # one wrong code, as a table typo would give
        return q

    got = identify(off_by_one_code, "e5m2")
    assert got.matches == ()
    assert got.closest == Variant(rounding="nearest_even", saturate=False, subnormals=True,
                                  via_float32=False)
    assert got.first is not None and got.first[2] == 1.25 and abs(got.first[1]) >= 0.875
    assert got.first[0].startswith("0x") and len(got.first[0]) == 18
    assert "no variant explains every result" in str(got) and got.first[0] in str(got)


@pytest.mark.clause("FMT-IDN-001")
@pytest.mark.parametrize(("fmt", "top", "ulp"), [("float16", 65504.0, 32.0),
                                                 ("bfloat16", 2.0**127 * (2 - 2.0**-7),
                                                  2.0**120),
                                                 ("float8_e5m2", 57344.0, 8192.0)])
def test_a_cast_whose_overflow_threshold_is_off_by_the_tie_is_not_nearest_even(
        fmt: str, top: float, ulp: float) -> None:
    """Inputs: nearest-even non-saturating casts into fp16, bf16, e5m2, changed only at
    exactly +-(max + ulp/2), the overflow threshold, which they round down to +-max (the
    tie goes to the even neighbour 2^(emax+1): infinity). Expected: no variant matches;
    the closest is nearest-even, non-saturating; the first unexplained input is the
    threshold. Pass: all three."""
    threshold = top + ulp / 2

    def late_overflow(x: np.ndarray) -> np.ndarray:
        with np.errstate(all="ignore"):
            q = ampref.quantize(x, fmt)
        at = np.abs(x) == threshold
        q[at] = np.copysign(top, x[at])
        return q

    got = identify(late_overflow, fmt)
    assert got.matches == (), str(got)
    assert got.closest == Variant(rounding="nearest_even", saturate=False, subnormals=True,
                                  via_float32=False)
    assert got.first is not None and abs(got.first[1]) == threshold


@pytest.mark.clause("FMT-IDN-001")
def test_the_battery_is_fixed_for_a_seed_and_holds_both_signs_and_the_specials() -> None:
    """Inputs: bf16 batteries for seeds 3, 3, 4. Expected: equal for equal seeds, different
    otherwise; two infs, two NaNs, +0 and -0. Pass: all."""
    a, b = battery("bf16", seed=3), battery("bf16", seed=3)
    assert a.tobytes() == b.tobytes() and battery("bf16", seed=4).tobytes() != a.tobytes()
    assert np.isinf(a).sum() == 2 and np.isnan(a).sum() == 2
    assert np.signbit(a[a == 0]).tolist() == [False, True]


@pytest.mark.clause("FMT-IDN-001", "API-ERR-001")
def test_identify_refuses_a_non_callable_and_a_result_of_another_shape() -> None:
    """Inputs: 3 instead of a function; a function returning 3 elements. Expected:
    TypeError and ValueError. Pass: both."""
    with pytest.raises(TypeError, match="needs a callable"):
        identify(3, "e4m3")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="returned shape"):
        identify(lambda x: x[:3], "e4m3")


@pytest.mark.clause("FMT-IDN-003")
def test_a_conversion_through_float16_is_named_as_three_roundings() -> None:
    """Input: float64 -> float32 -> float16 -> float8_e4m3fn (NumPy's casts, then
    ml_dtypes'), a path real conversion code takes. Expected: identify names a variant
    via float16 (nearest_even, no saturation), and not the direct or via-float32-only
    casts, which the battery's points a quarter of a float16 ulp from e4m3 midpoints
    separate. Pass: every match goes through float16."""
    def three_steps(x: np.ndarray) -> np.ndarray:
        with np.errstate(over="ignore"):
            h = x.astype(np.float32).astype(np.float16).astype(np.float32)
        return h.astype(ml_dtypes.float8_e4m3fn)

    got = identify(three_steps, "e4m3")
    assert got.matches and all(v.via_format == "float16" for v in got.matches), str(got)
    assert all(v.rounding == "nearest_even" and not v.saturate for v in got.matches)
    assert "via=float32 -> float16" in str(got)


@pytest.mark.clause("FMT-IDN-003")
def test_formats_without_a_wider_16bit_format_get_no_intermediate_variants() -> None:
    """Input: variants for float16, bfloat16 and e4m3. Expected: 48 for the two 16-bit
    formats (bfloat16's range exceeds float16's, float16's precision exceeds
    bfloat16's), 48 x 3 for e4m3 (through float16 and bfloat16). Pass: the counts."""
    assert len(variants("float16")) == len(variants("bfloat16")) == 48
    assert len(variants("e4m3")) == 144
