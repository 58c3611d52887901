"""quantize / encode / decode against independent oracles, bit for bit.

Oracles: the exact-rational scalar oracle in ``tests/oracle.py``; NumPy's float16 cast
(direct and correctly rounded from float64); ml_dtypes' casts from float32; torch when
installed. Comparisons are on bit patterns (hex in failures), never allclose.
"""

from __future__ import annotations

import warnings
from fractions import Fraction

import ml_dtypes
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import ampref
from ampref.formats.peers import peer_cast
from ampref.formats.table import FORMATS, Encoding, Format
from ampref.formats.rounding import RoundingMode
from ampref.kernels.srhash import random_bits
from ampref.testing import assert_bitwise_equal, hard_cases

import oracle

ALL = list(FORMATS.values())
SMALL = [f for f in ALL if f.bits <= 16]
ML = [f for f in SMALL if f.dtype_name is not None]
MODES = [m.value for m in RoundingMode]
DIRECT = [m for m in MODES if m != "stochastic"]


def ref_dtype(fmt: Format) -> Any:
    return np.float16 if fmt.name == "float16" else getattr(ml_dtypes, str(fmt.dtype_name))


def peer_codes(x: np.ndarray, fmt: Format) -> np.ndarray:
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        return x.astype(ref_dtype(fmt)).view(fmt.code_dtype)


def comparable(x: np.ndarray, fmt: Format) -> np.ndarray:
    """Drop inputs where the peer library documentedly differs (FMT-SPC-001/004/005)."""
    keep = ~np.isnan(x)
    if fmt.encoding is Encoding.FNU:
        keep &= ~((np.abs(x) > 0) & (np.abs(x) < 2.0**-126))
    return x[keep]


def all_values(fmt: Format) -> np.ndarray:
    return ampref.decode(np.arange(1 << fmt.bits, dtype=np.uint32), fmt)


def midpoint_inputs(fmt: Format, dtype: type) -> np.ndarray:
    """Every midpoint between adjacent finite values, and one ulp (of dtype) either side."""
    v = np.unique(all_values(fmt)[np.isfinite(all_values(fmt))].astype(np.float64))
    with np.errstate(over="ignore"):  # fp32/tf32-sized grids overflow float32 here
        return _midpoints(v, fmt, dtype)


def _midpoints(v: np.ndarray, fmt: Format, dtype: type) -> np.ndarray:
    mids = ((v[:-1] + v[1:]) / 2).astype(dtype)  # exact: midpoints need one more bit
    up = np.nextafter(mids, dtype(np.inf))
    dn = np.nextafter(mids, dtype(-np.inf))
    above_max: np.ndarray = np.array([fmt.max * (1 + fmt.eps / 2)], dtype=dtype)
    return np.concatenate([mids, up, dn, above_max, np.nextafter(above_max, dtype(0)),
                           np.nextafter(above_max, dtype(np.inf))])


def oracle_codes(x: np.ndarray, fmt: Format, rnd: str, **kw: object) -> np.ndarray:
    out = []
    for i, v in enumerate(x.reshape(-1)):
        seed = int(kw["seed"]) if rnd == "stochastic" else 0  # type: ignore[call-overload]
        rb = oracle.sr_bits(seed, i) if rnd == "stochastic" else None
        c = oracle.round_scalar(float(v), fmt, rnd, saturate=bool(kw.get("saturate", False)),
                                subnormals=bool(kw.get("subnormals", True)), rbits=rb)
        out.append(0 if c is None else c)  # None: NaN into a NaN-less format
    return np.array(out, dtype=np.uint64).astype(fmt.code_dtype).reshape(x.shape)


# ---------------------------------------------------------------------------- decode
@pytest.mark.clause("FMT-DEC-001")
@pytest.mark.parametrize("fmt", SMALL, ids=lambda f: f.name)
def test_every_code_decodes_to_its_exact_value(fmt: Format) -> None:
    """Inputs: every code of each format of at most 16 bits. Expected: the exact value of
    the code by the rational oracle (tests/oracle.py), NaN where it says NaN. Pass: NaN
    positions equal, every other value bitwise equal (sign of zero included)."""
    codes = np.arange(1 << fmt.bits, dtype=np.uint32)
    got = ampref.decode(codes, fmt)
    expected = []
    for c in codes:
        v = oracle.decode_scalar(int(c), fmt)
        expected.append(float(v) if isinstance(v, Fraction) else v)
    want = np.array(expected, dtype=np.float64)
    assert np.array_equal(np.isnan(got), np.isnan(want))
    ok = ~np.isnan(want)
    assert_bitwise_equal(got[ok].astype(np.float64), want[ok])  # exact and sign of zero
    fin = np.flatnonzero(np.isfinite(want))
    step = max(1, fin.size // 4096)
    assert all(Fraction(float(got[i])) == oracle.decode_scalar(int(codes[i]), fmt)
               for i in fin[::step])


@pytest.mark.clause("FMT-DEC-001")
@pytest.mark.parametrize("fmt", ML, ids=lambda f: f.name)
def test_decode_equals_the_reference_dtypes_widening(fmt: Format) -> None:
    """Inputs: every code of each format ml_dtypes/NumPy implement. Expected: the peer
    dtype's value widened to float32. Pass: bitwise equal (any NaN equals any NaN)."""
    codes = np.arange(1 << fmt.bits, dtype=np.uint32)
    theirs = ampref.as_ml_dtype(codes, fmt).astype(np.float32)
    assert_bitwise_equal(ampref.decode(codes, fmt), theirs, nan="any")


@pytest.mark.clause("FMT-DEC-001", "FMT-API-002")
def test_decode_rejects_codes_wider_than_the_format() -> None:
    """Inputs: code 256 for e4m3; a float array as codes. Expected: ValueError naming the
    code, its index and the format; TypeError asking for integer codes. Pass: both raised
    with those messages."""
    with pytest.raises(ValueError, match=r"code 256 at flat index 1 does not fit in float8_e4m3fn"):
        ampref.decode(np.array([3, 256]), "e4m3")
    with pytest.raises(TypeError, match="integer codes"):
        ampref.decode(np.array([1.0]), "e4m3")


def test_tf32_and_float32_decode_by_field_formula() -> None:
    x = np.array([1.0, -2.5, 2.0**-130, np.inf], np.float32)
    assert_bitwise_equal(ampref.decode(ampref.encode(x, "float32"), "float32"), x)
    assert_bitwise_equal(ampref.decode(ampref.encode(x, "tf32"), "tf32"), x)


# ----------------------------------------------- conformance with NumPy and ml_dtypes
@pytest.mark.clause("FMT-RND-001", "FMT-RND-002", "FMT-OVF-001", "FMT-SPC-002", "FMT-SPC-003")
@pytest.mark.parametrize("fmt", ML, ids=lambda f: f.name)
def test_float32_encode_matches_numpy_and_ml_dtypes_on_midpoints_and_wide_data(fmt: Format) -> None:
    """Inputs: every midpoint of adjacent values +-1 ulp (both signs), 300,000 values over
    e^-105..e^88, +-0, +-inf (float32). Expected: the peer cast's codes (NumPy float16,
    ml_dtypes others). Pass: bitwise equal."""
    rng = np.random.default_rng(7)
    wide = np.exp(rng.uniform(-105, 88, 300_000)) * rng.choice([-1, 1], 300_000)
    mids = midpoint_inputs(fmt, np.float32)
    specials = np.array([0, -0.0, np.inf, -np.inf], np.float32)
    x = comparable(np.concatenate([mids, -mids, wide.astype(np.float32), specials]), fmt)
    assert_bitwise_equal(ampref.encode(x, fmt), peer_codes(x, fmt))


@pytest.mark.clause("FMT-RND-001", "FMT-DBL-001")
def test_float64_to_fp16_matches_numpy_direct_correct_rounding_on_every_midpoint() -> None:
    """Inputs: every fp16 midpoint and its float64 neighbours, both signs. Expected:
    NumPy's direct float64 -> float16 cast (one rounding). Pass: bitwise equal codes."""
    x = midpoint_inputs(ampref.float16, np.float64)
    x = np.concatenate([x, -x])
    with np.errstate(over="ignore"):
        theirs = x.astype(np.float16).view(np.uint16)
    assert_bitwise_equal(ampref.encode(x, "fp16"), theirs)


@pytest.mark.clause("FMT-DBL-002")
@pytest.mark.parametrize("fmt", ML, ids=lambda f: f.name)
def test_via_float32_reproduces_ml_dtypes_float64_array_casts(fmt: Format) -> None:
    """Inputs: the float64 midpoints of each ml_dtypes format, both signs, with
    via='float32'. Expected: ml_dtypes' float64 array cast (which goes through float32).
    Pass: bitwise equal codes."""
    x = comparable(np.concatenate([midpoint_inputs(fmt, np.float64),
                                   -midpoint_inputs(fmt, np.float64)]), fmt)
    if fmt.name == "float16":
        pytest.skip("NumPy's float16 cast is direct from float64 (tested above)")
    assert_bitwise_equal(ampref.encode(x, fmt, via="float32"), peer_codes(x, fmt))


@pytest.mark.clause("FMT-DBL-001", "FMT-DBL-002")
@pytest.mark.parametrize("value,fmt,direct,via32", [
    (1 + 2.0**-8 + 2.0**-24, "bfloat16", 1.0078125, 1.0),
    (1 + 2.0**-8 + 2.0**-40, "bfloat16", 1.0078125, 1.0),
    (1 + 2.0**-11 + 2.0**-24, "float16", 1.0009765625, 1.0),
    (1 + 2.0**-4 + 2.0**-30, "e4m3", 1.125, 1.0),
])
def test_double_rounding_examples_from_the_spec(value: float, fmt: str, direct: float,
                                                via32: float) -> None:
    """Inputs: the four float64 values of FMT-DBL-001/002's examples. Expected: the direct
    rounding and the via-float32 rounding the spec lists, float64 output. Pass: both values
    and the dtype."""
    x = np.array([value])
    assert ampref.quantize(x, fmt)[0] == direct
    assert ampref.quantize(x, fmt, via="float32")[0] == via32
    assert ampref.quantize(x, fmt).dtype == np.float64


# ----------------------------------------------------- every mode against the oracle
def _check_against_oracle(x: np.ndarray, fmt: Format, rnd: str, **kw: object) -> None:
    if not fmt.has_nan:
        x = x[~np.isnan(x)]  # FMT-SPC-005: not encodable; filtered before indices are fixed
    want = oracle_codes(x, fmt, rnd, **kw)
    got = ampref.encode(x, fmt, rnd, **kw)  # type: ignore[arg-type]
    assert_bitwise_equal(got, want, msg=f"{fmt.name} {rnd} {kw}: ")


def _grid_inputs(fmt: Format, dtype: type, count: int = 600) -> np.ndarray:
    """Midpoints ±1 ulp, exact values, boundary landmarks and specials, subsampled."""
    mids = midpoint_inputs(fmt, dtype)
    vals = all_values(fmt)
    vals = vals[np.isfinite(vals)].astype(dtype)
    rng = np.random.default_rng(fmt.bits)
    pick = np.concatenate([rng.choice(mids, min(count, mids.size), replace=False),
                           rng.choice(vals, min(count // 3, vals.size), replace=False)])
    with np.errstate(over="ignore"):
        return _with_landmarks(pick, fmt, dtype)


def _with_landmarks(pick: np.ndarray, fmt: Format, dtype: type) -> np.ndarray:
    tiniest = 1e-45 if dtype is np.float32 else 1e-300
    land: np.ndarray = np.array([0.0, fmt.tiny, fmt.smallest_subnormal / 2,
                                 fmt.smallest_subnormal * 0.75, fmt.max, fmt.max * 2, np.inf,
                                 np.nan, tiniest], dtype=dtype)
    base = np.concatenate([pick, land])
    return np.concatenate([base, -base])


@pytest.mark.clause("FMT-RND-001", "FMT-RND-002", "FMT-RND-003", "FMT-RND-004", "FMT-RND-005",
                    "FMT-RND-006", "FMT-OVF-001", "FMT-OVF-002", "FMT-SPC-001", "FMT-SPC-002",
                    "FMT-SPC-003", "FMT-SPC-004")
@pytest.mark.parametrize("rnd", DIRECT)
@pytest.mark.parametrize("fmt", ALL, ids=lambda f: f.name)
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
def test_every_directed_and_nearest_mode_matches_the_exact_oracle(fmt: Format, rnd: str,
                                                                  dtype: type) -> None:
    """Inputs: per format, midpoints +-1 ulp, exact values, landmarks (0, tiny, half the
    smallest subnormal, max, 2 max, inf, NaN) in float32 and float64; hand-picked values
    for the 19+-bit formats; every deterministic mode. Expected: the rational oracle's
    codes. Pass: bitwise equal."""
    if fmt.bits > 16:
        vals = [1 + 2.0**-11, 1 + 3 * 2.0**-11, 1 + 2.0**-11 + 2.0**-40, 3.4e38, -2.0**-140,
                2.0**-149, np.nan, np.inf, 0.0, -0.0, 1e-300, 1 + 2.0**-24, 1 + 3 * 2.0**-24]
        with np.errstate(under="ignore"):
            x: np.ndarray = np.array(vals, dtype=dtype)
    else:
        x = _grid_inputs(fmt, dtype, 300)
    _check_against_oracle(x, fmt, rnd)


@pytest.mark.clause("FMT-OVF-003", "FMT-SUB-001")
@pytest.mark.parametrize("rnd", ["nearest_even", "toward_positive", "odd"])
@pytest.mark.parametrize("fmt", SMALL, ids=lambda f: f.name)
def test_saturate_and_flush_flags_match_the_oracle(fmt: Format, rnd: str) -> None:
    """Inputs: the grid inputs of each small format with saturate=True and with
    subnormals=False, in three modes. Expected: the oracle's codes with the same flags.
    Pass: bitwise equal."""
    x = _grid_inputs(fmt, np.float32, 150)
    _check_against_oracle(x, fmt, rnd, saturate=True)
    _check_against_oracle(x, fmt, rnd, subnormals=False)


@pytest.mark.clause("FMT-RND-001", "FMT-RND-007")
@given(data=st.data())
def test_hypothesis_hard_cases_match_the_oracle_in_all_modes(data: st.DataObject) -> None:
    """Inputs: hypothesis hard cases (ties, boundaries, subnormals, specials) for a drawn
    format, source dtype and mode (stochastic with a drawn seed). Expected: the oracle's
    codes. Pass: bitwise equal."""
    fmt = data.draw(st.sampled_from(SMALL), label="fmt")
    dtype = data.draw(st.sampled_from([np.float32, np.float64]), label="dtype")
    xs = np.array(data.draw(st.lists(hard_cases(fmt, dtype=dtype), min_size=1, max_size=8)),
                  dtype=dtype)
    rnd = data.draw(st.sampled_from(MODES), label="rnd")
    kw = {"seed": data.draw(st.integers(0, 2**64 - 1))} if rnd == "stochastic" else {}
    _check_against_oracle(xs, fmt, rnd, **kw)


# -------------------------------------------------------------------- properties
float32s = st.floats(width=32, allow_nan=False, allow_infinity=False)


@pytest.mark.clause("FMT-RND-007")
@given(x=st.lists(float32s, min_size=1, max_size=20), fmt=st.sampled_from(SMALL),
       rnd=st.sampled_from(DIRECT))
def test_result_is_one_of_the_two_neighbours_and_quantize_is_idempotent(
        x: list[float], fmt: Format, rnd: str) -> None:
    """Inputs: drawn float32 lists, a small format, a deterministic mode, saturating.
    Expected: quantizing twice changes nothing; each result is one of the input's two
    neighbours (or max, or tiny for zero-less formats). Pass: both."""
    a = np.array(x, dtype=np.float32)
    q = ampref.quantize(a, fmt, rnd, saturate=True)
    assert_bitwise_equal(ampref.quantize(q, fmt, rnd, saturate=True), q)
    for xi, qi in zip(a, q, strict=True):
        if not fmt.has_zero and xi <= 0:
            continue
        lo, hi = oracle.neighbours(abs(Fraction(float(xi))), fmt)
        mag = Fraction(abs(float(qi)))
        assert mag in (lo, hi) or mag == oracle.fmt_max(fmt) or (
            not fmt.has_zero and mag == Fraction(fmt.tiny)), (xi, qi)


@pytest.mark.clause("FMT-RND-002", "FMT-RND-005")
@given(x=st.lists(float32s, min_size=2, max_size=30), fmt=st.sampled_from(SMALL),
       rnd=st.sampled_from(["nearest_even", "nearest_away", "toward_positive", "toward_negative"]))
def test_rounding_is_monotonic(x: list[float], fmt: Format, rnd: str) -> None:
    """Inputs: sorted drawn float32 lists, a small format, a nearest or directed mode.
    Expected: the quantized sequence never decreases. Pass: all differences >= 0."""
    a = np.sort(np.array(x, dtype=np.float32))
    if not fmt.is_signed:
        a = a[a > 0]
    q = ampref.quantize(a, fmt, rnd, saturate=True)
    assert np.all(np.diff(q.astype(np.float64)) >= 0)


@pytest.mark.clause("FMT-RND-002", "FMT-RND-003", "FMT-RND-004", "FMT-RND-006")
@given(x=st.lists(float32s, min_size=1, max_size=30),
       fmt=st.sampled_from([f for f in SMALL if f.is_signed]),
       rnd=st.sampled_from(["nearest_even", "nearest_away", "toward_zero", "odd"]))
def test_symmetric_modes_commute_with_negation(x: list[float], fmt: Format, rnd: str) -> None:
    """Inputs: drawn float32 lists, a signed format, a sign-symmetric mode. Expected: q(-x)
    = -q(x) (zeros of FNUZ formats left out: they have no -0). Pass: bitwise equal, any NaN
    equal."""
    a = np.array(x, dtype=np.float32)
    q = ampref.quantize(a, fmt, rnd)
    qn = ampref.quantize(-a, fmt, rnd)
    # FNUZ formats have no -0: a zero result negates to +0, so zeros are left out there
    keep = ~((q == 0) & (fmt.encoding is Encoding.FNUZ))
    assert_bitwise_equal((-q)[keep], qn[keep], nan="any")


@pytest.mark.clause("FMT-RND-005")
@given(x=st.lists(float32s, min_size=1, max_size=30),
       fmt=st.sampled_from([f for f in SMALL if f.has_inf]))
def test_directed_modes_bracket_the_input(x: list[float], fmt: Format) -> None:
    """Inputs: drawn float32 lists, a format with inf. Expected: toward_negative <= x <=
    toward_positive, equal exactly where x is representable. Pass: both."""
    a = np.array(x, dtype=np.float32)
    lo = ampref.quantize(a, fmt, "toward_negative").astype(np.float64)
    hi = ampref.quantize(a, fmt, "toward_positive").astype(np.float64)
    assert np.all(lo <= a) and np.all(a <= hi)
    assert np.all((lo == hi) == (ampref.quantize(a, fmt) == a))


# ------------------------------------------------------------------ stochastic
@pytest.mark.clause("FMT-SR-001", "FMT-SR-002")
def test_stochastic_rounding_is_a_pure_function_of_seed_and_index() -> None:
    """Inputs: 100,000 float32 values, seed 42 twice and 43; the tail alone; words at index
    50,000. Expected: same seed same bits, other seed other bits, the tail differs (indices
    restart) while the word stream is offset-consistent. Pass: all."""
    rng = np.random.default_rng(3)
    x = (rng.standard_normal(100_000) * 10).astype(np.float32)
    a = ampref.quantize(x, "bf16", "stochastic", seed=42)
    assert_bitwise_equal(a, ampref.quantize(x, "bf16", "stochastic", seed=42))
    # chunking-independent: the tail alone is not the same (indices restart at 0) ...
    assert not np.array_equal(ampref.quantize(x[50_000:], "bf16", "stochastic", seed=42),
                              a[50_000:])
    # ... but the words for indices 50000.. equal the tail's words
    assert_bitwise_equal(random_bits(42, 50_000, 10), random_bits(42, 0, 50_010)[50_000:])
    assert not np.array_equal(a, ampref.quantize(x, "bf16", "stochastic", seed=43))


@pytest.mark.clause("FMT-SR-001")
@pytest.mark.parametrize("fmt", ["float16", "bfloat16", "e4m3", "e2m1"])
@pytest.mark.parametrize("frac", [0.25, 0.5, 0.875])
def test_stochastic_rounding_probability_is_the_fraction_within_a_binomial_bound(
        fmt: str, frac: float) -> None:
    """Inputs: 200,000 copies of lo + frac * ulp (frac 0.25, 0.5, 0.875) in the normal and
    subnormal range of fp16, bf16, e4m3, e2m1. Expected: only the two neighbours; the share
    rounded up within 6 binomial standard deviations of frac. Pass: both."""
    f = ampref.get_format(fmt)
    for base in (1.0, f.tiny / 2 if f.has_subnormals else 1.0):  # normal and subnormal ranges
        q = (base * f.eps) if base == 1.0 else f.smallest_subnormal
        lo = base if base == 1.0 else 0.0
        n = 200_000
        x = np.full(n, lo + frac * q, dtype=np.float64)
        r = ampref.quantize(x, f, "stochastic", seed=11)
        assert set(np.unique(r)) <= {lo, lo + q}
        p = float(np.mean(r == lo + q))
        sd = np.sqrt(frac * (1 - frac) / n)
        assert abs(p - frac) < 6 * sd, (fmt, base, frac, p)


@pytest.mark.clause("FMT-SR-001")
def test_stochastic_rounding_leaves_exact_values_and_specials_alone() -> None:
    """Inputs: every fp16 value (NaN and inf included), stochastic with seed 5. Expected:
    unchanged. Pass: bitwise equal (any NaN)."""
    v = all_values(ampref.float16)
    out = ampref.quantize(v, "fp16", "stochastic", seed=5)
    assert_bitwise_equal(out, v, nan="any")


@pytest.mark.clause("FMT-API-002", "FMT-SR-002")
def test_stochastic_without_a_seed_is_refused() -> None:
    """Inputs: stochastic quantize without a seed, with seed -1, with seed 1.5. Expected:
    ValueError (needs seed), ValueError (range), TypeError (int). Pass: each raised with
    its message."""
    with pytest.raises(ValueError, match="needs seed"):
        ampref.quantize(np.ones(3, np.float32), "bf16", "stochastic")
    with pytest.raises(ValueError, match=r"\[0, 2\*\*64\)"):
        ampref.quantize(np.ones(3, np.float32), "bf16", "stochastic", seed=-1)
    with pytest.raises(TypeError, match="seed must be an int"):
        ampref.quantize(np.ones(3, np.float32), "bf16", "stochastic",
                        seed=1.5)  # type: ignore[arg-type]


# ------------------------------------------------------------------ specials
@pytest.mark.clause("FMT-SPC-001", "FMT-SPC-002", "FMT-SPC-003", "FMT-SPC-004", "FMT-OVF-001")
@pytest.mark.parametrize("fmt,inputs,codes", [
    ("float16", [np.nan, -np.nan, np.inf, -0.0, 65520.0, 65519.99],
     [0x7E00, 0xFE00, 0x7C00, 0x8000, 0x7C00, 0x7BFF]),
    ("bfloat16", [np.nan, -np.inf, 3.4e38, -0.0], [0x7FC0, 0xFF80, 0x7F80, 0x8000]),
    ("e4m3", [np.nan, -np.nan, np.inf, 448.0, 464.0, 465.0, -0.0],
     [0x7F, 0xFF, 0x7F, 0x7E, 0x7E, 0x7F, 0x80]),
    ("e5m2", [np.nan, np.inf, 57344.0, 61440.0], [0x7E, 0x7C, 0x7B, 0x7C]),
    ("e4m3fnuz", [np.nan, -np.nan, np.inf, -0.0, -1e-9, 240.0, 248.0],
     [0x80, 0x80, 0x80, 0x00, 0x00, 0x7F, 0x80]),
    ("e2m1", [7.0, -np.inf, -0.0, 0.25, 0.2], [0x7, 0xF, 0x8, 0x0, 0x0]),
    ("e8m0", [0.0, -1.0, np.inf, np.nan, 2.0**-140, 1.5, 3.0, 5.0, 2.0**127 * 1.5],
     [0xFF, 0xFF, 0xFF, 0xFF, 0x00, 0x80, 0x81, 0x81, 0xFF]),
])
@pytest.mark.parametrize("method", ["array", "scalar"])
def test_special_values_follow_the_spec_table(fmt: str, inputs: list[float], codes: list[int],
                                              method: str) -> None:
    """Inputs: the spec table's special inputs per format, through the vectorised kernel
    and the scalar oracle. Expected: the tabled codes. Pass: bitwise equal for both
    methods."""
    # the same table is asserted against the vectorised kernel and the scalar oracle
    x = np.array(inputs, dtype=np.float32)
    if method == "array":
        got = ampref.encode(x, fmt)
    else:
        got = oracle_codes(x, ampref.get_format(fmt), "nearest_even")
    assert_bitwise_equal(got, np.array(codes, dtype=got.dtype))


@pytest.mark.clause("FMT-OVF-002", "FMT-OVF-003")
@pytest.mark.parametrize("method", ["array", "scalar"])
def test_overflow_in_directed_modes_and_under_saturation(method: str) -> None:
    """Inputs: [1e6, -1e6, inf, -inf] to fp16 toward_zero, toward_positive, saturating; to
    e4m3 saturating; by kernel and oracle. Expected: the listed results (max, inf or
    clamped). Pass: equal."""
    x = np.array([1e6, -1e6, np.inf, -np.inf], np.float32)

    def q(fmt: str, rnd: str = "nearest_even", **kw: Any) -> list[float]:
        if method == "array":
            return list(ampref.quantize(x, fmt, rnd, **kw))
        f = ampref.get_format(fmt)
        return list(ampref.decode(oracle_codes(x, f, rnd, **kw), f))

    assert q("fp16", "toward_zero") == [65504, -65504, np.inf, -np.inf]
    assert q("fp16", "toward_positive") == [np.inf, -65504, np.inf, -np.inf]
    assert q("fp16", saturate=True) == [65504, -65504, 65504, -65504]
    assert q("e4m3", saturate=True) == [448, -448, 448, -448]


@pytest.mark.clause("FMT-SPC-005")
def test_nan_cannot_be_encoded_in_fp4_but_quantize_keeps_it() -> None:
    """Inputs: [1, NaN] to e2m1. Expected: encode raises ValueError naming the format and
    element 1; quantize returns NaN there. Pass: both."""
    x = np.array([1.0, np.nan], np.float32)
    with pytest.raises(ValueError, match="float4_e2m1fn has no NaN encoding.*element 1"):
        ampref.encode(x, "fp4")
    assert np.isnan(ampref.quantize(x, "fp4")[1])


@pytest.mark.clause("FMT-SUB-001")
def test_flush_to_zero_keeps_sign_and_does_not_flush_values_rounding_up_to_tiny() -> None:
    """Inputs: +-2^-20, tiny(1 - 2^-12) and tiny to fp16 with subnormals=False. Expected:
    +0, -0, tiny, tiny. Pass: bitwise equal."""
    tiny = 2.0**-14
    x = np.array([2.0**-20, -2.0**-20, tiny * (1 - 2.0**-12), tiny], np.float32)
    out = ampref.quantize(x, "fp16", subnormals=False)
    assert_bitwise_equal(out, np.array([0.0, -0.0, tiny, tiny], np.float32))


# ------------------------------------------------------------------ API and errors
@pytest.mark.clause("FMT-API-001")
def test_return_dtypes() -> None:
    """Inputs: float32, float64 and float16 arrays and a scalar. Expected: quantize keeps
    float32/float64 (float16 gives float32), encode gives uint8/16/32 by width, as_ml_dtype
    bfloat16, a scalar gives shape (). Pass: each."""
    x32, x64 = np.ones(2, np.float32), np.ones(2, np.float64)
    assert ampref.quantize(x32, "bf16").dtype == np.float32
    assert ampref.quantize(x64, "bf16").dtype == np.float64
    assert ampref.quantize(x32.astype(np.float16), "e4m3").dtype == np.float32
    assert ampref.encode(x32, "e4m3").dtype == np.uint8
    assert ampref.encode(x32, "fp16").dtype == np.uint16
    assert ampref.encode(x32, "tf32").dtype == np.uint32
    assert ampref.as_ml_dtype(ampref.encode(x32, "bf16"), "bf16").dtype == ml_dtypes.bfloat16
    assert ampref.quantize(np.float32(3.0), "fp16").shape == ()


@pytest.mark.clause("FMT-API-002")
def test_bad_inputs_name_the_value_and_the_choices() -> None:
    """Inputs: an int array, mode 'up', via 'float16', tf32 to an ml_dtype. Expected:
    TypeError/ValueError naming the value and listing the choices. Pass: each message
    matches."""
    with pytest.raises(TypeError, match="floating array.*int64"):
        ampref.quantize(np.arange(3), "fp16")
    with pytest.raises(ValueError, match="unknown rounding mode 'up'.*nearest_even.*stochastic"):
        ampref.quantize(np.ones(1), "fp16", "up")
    with pytest.raises(ValueError, match="via must be one of.*'float32'.*got 'float16'"):
        ampref.quantize(np.ones(1), "fp16", via="float16")
    with pytest.raises(ValueError, match="no ml_dtypes/NumPy dtype"):
        ampref.as_ml_dtype(np.zeros(1, np.uint32), "tf32")


@pytest.mark.clause("FMT-IMP-001")
@pytest.mark.parametrize("fmt", ["float16", "bfloat16", "e4m3", "e5m2fnuz", "e3m2"])
def test_fast_tiers_agree_with_the_general_kernel(fmt: str,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Inputs: 50,000 float32 values over e^-110..e^88 in each mode, NumPy kernels, with
    the fast tiers on and forced off. Expected: identical codes. Pass: bitwise equal."""
    from ampref.kernels import encode as spec

    rng = np.random.default_rng(9)
    x = (np.exp(rng.uniform(-110, 88, 50_000)) * rng.choice([-1, 1], 50_000)).astype(np.float32)
    with ampref.kernels.use_kernels("numpy"):  # the tiers of the NumPy specification
        for rnd in MODES:
            kw: dict[str, Any] = {"seed": 3} if rnd == "stochastic" else {}
            fast = ampref.encode(x, fmt, rnd, **kw)
            monkeypatch.setattr(spec, "_fast_path_ok", lambda src, f: False)
            slow = ampref.encode(x, fmt, rnd, **kw)
            monkeypatch.undo()
            assert_bitwise_equal(fast, slow, msg=f"{fmt} {rnd}: ")


@pytest.mark.clause("FMT-DBL-002")
def test_via_float32_matches_torch_float64_casts_when_torch_is_installed() -> None:
    """Inputs: 20,000 float64 midpoints each of bf16 and fp16. Expected: torch's float64 ->
    bf16/fp16 casts equal ampref's via='float32'. Pass: bitwise equal codes."""
    torch = pytest.importorskip("torch")
    x = np.concatenate([midpoint_inputs(ampref.bfloat16, np.float64)[:20000],
                        midpoint_inputs(ampref.float16, np.float64)[:20000]])
    for fmt, tdt in (("bfloat16", torch.bfloat16), ("float16", torch.float16)):
        theirs = torch.from_numpy(x).to(tdt).view(torch.int16).numpy().view(np.uint16)
        assert_bitwise_equal(ampref.encode(x, fmt, via="float32"), theirs, msg=f"{fmt}: ")


@pytest.mark.clause("FMT-DBL-002", "FMT-PEER-001")
def test_via_float32_matches_torch_fp8_casts_exactly_as_the_spec_states() -> None:
    """Inputs: 4,000 float64 values over 1e-12..1e7 and specials; FP8 formats; E8M0 special
    values. Expected: torch's codes for the FNUZ formats; e5m2 equal but the NaN payload
    (0x7e vs 0x7f); e4m3fn per the installed release's PEER_CASTS row; E8M0 the listed
    differences. Pass: each."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(5)
    x = np.concatenate([rng.standard_normal(4000) * 10.0 ** rng.integers(-12, 8, 4000),
                        [0.0, -0.0, 1e6, -1e6, 500.0, np.inf, -np.inf, np.nan]])

    def torch_codes(tdt: object) -> np.ndarray:
        return torch.from_numpy(x).to(tdt).view(torch.uint8).numpy()

    nan = np.isnan(x)
    for fmt in ("float8_e4m3fnuz", "float8_e5m2fnuz"):
        assert_bitwise_equal(ampref.encode(x, fmt, via="float32"), torch_codes(getattr(torch, fmt)))
    e5 = ampref.encode(x, "e5m2", via="float32")
    theirs = torch_codes(torch.float8_e5m2)
    assert_bitwise_equal(e5[~nan], theirs[~nan])  # NaN: payload only (0x7e vs 0x7f)
    assert list(e5[nan]) == [0x7E] and list(theirs[nan]) == [0x7F]
    # E4M3FN overflow is version-dependent (FMT-PEER-001): the installed release's row
    row = peer_cast("torch", "cpu", "float8_e4m3fn", torch.__version__)
    if row is None:
        pytest.fail(f"torch {torch.__version__}'s CPU E4M3FN cast is unrecorded: measure it "
                    "and add a row to ampref.formats.peers.PEER_CASTS")
    assert_bitwise_equal(ampref.encode(x, "e4m3", via=row.via, saturate=row.saturate),
                         torch_codes(torch.float8_e4m3fn), msg=f"row {row.source}")
    e8 = np.array([0.0, -0.0, -4.0, 4.0, 2.0**-127, 1.2 * 2**-127, 1.49 * 2**-127,
                   1.5 * 2**-127, 3.0])
    ours = ampref.encode(e8, "e8m0", via="float32")
    t8 = torch.from_numpy(e8).to(torch.float8_e8m0fnu).view(torch.uint8).numpy()
    assert list(ours) == [0xFF, 0xFF, 0xFF, 129, 0, 0, 0, 1, 129]
    assert list(t8) == [0, 0, 129, 129, 0, 1, 1, 1, 129]  # sign ignored, 0 -> 2^-127, rounds up


@pytest.mark.clause("FMT-SPC-004", "FMT-OVF-003")
def test_e8m0_saturation_sends_plus_inf_to_max_and_minus_inf_to_nan() -> None:
    """Inputs: [inf, -inf, 1e300, -1, 0] to e8m0 with and without saturation. Expected:
    [0xFE, 0xFF, 0xFE, 0xFF, 0xFF] and all 0xFF. Pass: equal."""
    x = np.array([np.inf, -np.inf, 1e300, -1.0, 0.0])
    assert list(ampref.encode(x, "e8m0", saturate=True)) == [0xFE, 0xFF, 0xFE, 0xFF, 0xFF]
    assert list(ampref.encode(x, "e8m0")) == [0xFF, 0xFF, 0xFF, 0xFF, 0xFF]


@pytest.mark.clause("FMT-SPC-001")
@pytest.mark.parametrize("fmt", ["bfloat16", "tf32", "float16", "e4m3"])
def test_nan_payloads_never_carry_into_the_sign_or_become_numbers(fmt: str) -> None:
    """Inputs: six float32 NaN bit patterns (payloads that an add-and-shift rounding would
    carry). Expected: NaN out, the input's sign bit kept. Pass: all NaN, signs [+, -, +, +,
    -, +]."""
    # regression: the add-and-shift rounding of 0x7fffffff would give 0x8000 (-0.0) in
    # bf16 without a NaN mask (style-anchors §8, hazard 1); found by the strided verify
    pats = np.array([0x7FFFFFFF, 0xFFFFFFFF, 0x7FFFB4E6, 0x7F800001, 0xFF8FFFFF, 0x7FC00000],
                    dtype=np.uint32)
    x = pats.view(np.float32)
    out = ampref.quantize(x, fmt)
    assert np.isnan(out).all()
    assert list(np.signbit(out)) == [False, True, False, False, True, False]
