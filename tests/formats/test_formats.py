"""Format table: derived limits against NumPy/ml_dtypes finfo, names, errors."""

from __future__ import annotations

import dataclasses

import ml_dtypes
from typing import Any

import numpy as np
import pytest

import ampref
from ampref.formats.table import FORMATS, Encoding, Format, get_format

from oracle import fmt_max

ML_FORMATS = [f for f in FORMATS.values() if f.dtype_name is not None]


def _finfo(fmt: Format) -> Any:
    name = str(fmt.dtype_name)
    dtype = getattr(np, name, None) or getattr(ml_dtypes, name)
    return ml_dtypes.finfo(dtype)


@pytest.mark.clause("FMT-DEF-002")
@pytest.mark.parametrize("fmt", ML_FORMATS, ids=lambda f: f.name)
def test_derived_limits_equal_finfo_of_the_reference_dtype(fmt: Format) -> None:
    """Inputs: each format ml_dtypes/NumPy implement. Expected: bits, max, tiny, smallest
    subnormal, eps and mantissa bits equal the peer's finfo. Pass: each equal."""
    fi = _finfo(fmt)
    assert fmt.bits == fi.bits
    assert fmt.max == float(fi.max)
    assert fmt.tiny == float(fi.smallest_normal)
    assert fmt.smallest_subnormal == float(fi.smallest_subnormal)
    assert fmt.eps == float(fi.eps)
    assert fmt.nmant == fi.nmant


@pytest.mark.clause("FMT-DEF-002")
@pytest.mark.parametrize("fmt", FORMATS.values(), ids=lambda f: f.name)
def test_max_agrees_with_an_independent_encoding_rule_and_invariants_hold(fmt: Format) -> None:
    """Inputs: every format. Expected: max equals the rational oracle's max for its
    encoding; bits = sign + exponent + mantissa; eps = 2^machep; smallest subnormal <= tiny
    <= 1 < max. Pass: all."""
    assert fmt.max_exact == fmt_max(fmt)
    assert fmt.bits == int(fmt.is_signed) + fmt.nexp + fmt.nmant
    assert fmt.eps == 2.0 ** fmt.machep
    assert fmt.smallest_subnormal <= fmt.tiny <= 1 < fmt.max


@pytest.mark.clause("FMT-DEF-001")
def test_tf32_has_float32_range_and_ten_mantissa_bits() -> None:
    """Inputs: the tf32 row. Expected: max fp32(2^128 - 2^117), tiny 2^-126, smallest
    subnormal 2^-136, uint32 codes. Pass: each."""
    assert ampref.tf32.max == float(np.float32(2.0**128 - 2.0**(128 - 11)))
    assert ampref.tf32.tiny == 2.0**-126 and ampref.tf32.smallest_subnormal == 2.0**-136
    assert ampref.tf32.code_dtype == "uint32"


@pytest.mark.clause("FMT-DEF-001")
@pytest.mark.parametrize("e,m,container", [(4, 3, "uint8"), (5, 3, "uint16"), (5, 10, "uint16"),
                                           (6, 10, "uint32"), (8, 7, "uint16")])
def test_codes_live_in_the_smallest_unsigned_container_of_the_formats_width(
        e: int, m: int, container: str) -> None:
    """Inputs: IEEE-style formats of 1 + e + m bits: 8 (e4m3), 9, 16 (float16), 17 and
    bfloat16's 16, built as user rows. Expected: uint8 up to 8 bits, uint16 up to 16,
    uint32 above (a 9-bit format's codes in uint8 would wrap). Pass: the container, and
    the largest code fits it."""
    fmt = ampref.Format(name=f"user-e{e}m{m}", exponent_bits=e, mantissa_bits=m,
                        bias=2 ** (e - 1) - 1, encoding=ampref.Encoding.IEEE)
    assert fmt.code_dtype == container
    assert (1 << fmt.bits) - 1 <= np.iinfo(container).max


@pytest.mark.clause("FMT-DEF-001")
def test_formats_are_frozen_keyword_only_data() -> None:
    """Inputs: an assignment to float16.bias; a positional Format(...). Expected:
    FrozenInstanceError and TypeError. Pass: both."""
    with pytest.raises(dataclasses.FrozenInstanceError):
        ampref.float16.bias = 3  # type: ignore[misc]
    with pytest.raises(TypeError):
        Format("x", 5, 10, 15, Encoding.IEEE)  # type: ignore[misc]


@pytest.mark.clause("FMT-DEF-001")
def test_a_new_format_is_only_a_new_row_of_data() -> None:
    """Inputs: an IEEE-like E4M3 row built as data; 20,001 float32 values over [-300, 300].
    Expected: max 240 as ml_dtypes' float8_e4m3, and encode's codes equal ml_dtypes' cast.
    Pass: both."""
    # IEEE-like E4M3 (ml_dtypes float8_e4m3): max 240, inf/NaN, no kernel changes
    e4m3_ieee = Format(name="float8_e4m3", exponent_bits=4, mantissa_bits=3, bias=7,
                       encoding=Encoding.IEEE)
    assert e4m3_ieee.max == float(ml_dtypes.finfo(ml_dtypes.float8_e4m3).max) == 240
    x = np.linspace(-300, 300, 20001, dtype=np.float32)
    ours = ampref.encode(x, e4m3_ieee)
    theirs = x.astype(ml_dtypes.float8_e4m3).view(np.uint8)
    assert np.array_equal(ours, theirs)


@pytest.mark.clause("FMT-DEF-003")
@pytest.mark.parametrize("alias,name", [("fp16", "float16"), ("half", "float16"),
                                        ("BF16", "bfloat16"), ("e4m3", "float8_e4m3fn"),
                                        ("e5m2", "float8_e5m2"), ("e8m0", "float8_e8m0fnu"),
                                        ("fp4", "float4_e2m1fn"), ("tf32", "tf32"),
                                        ("fp32", "float32")])
def test_aliases_resolve_case_insensitively(alias: str, name: str) -> None:
    """Inputs: aliases fp16, half, BF16, e4m3, e5m2, e8m0, fp4, tf32, fp32. Expected: the
    canonical row, also as an ampref attribute. Pass: identical objects."""
    assert get_format(alias) is FORMATS[name]
    assert getattr(ampref, name) is FORMATS[name]


@pytest.mark.clause("FMT-DEF-003", "FMT-API-002")
def test_unknown_format_name_lists_the_known_ones() -> None:
    """Inputs: 'fp12' and 16. Expected: ValueError listing known formats; TypeError asking
    for a str. Pass: both."""
    with pytest.raises(ValueError, match=r"unknown format 'fp12'.*float16.*bfloat16"):
        get_format("fp12")
    with pytest.raises(TypeError, match="format must be a str"):
        get_format(16)  # type: ignore[arg-type]


def test_invalid_field_widths_are_rejected_with_the_values() -> None:
    with pytest.raises(ValueError, match="mantissa_bits <= 23.*30"):
        Format(name="wide", exponent_bits=8, mantissa_bits=30, bias=127, encoding=Encoding.IEEE)


@pytest.mark.clause("FMT-DEF-001")
def test_every_format_is_public_by_its_canonical_name() -> None:
    """Inputs: every row of FORMATS. Expected: ampref.<name> is the row and the name is in
    ampref.__all__. Pass: each."""
    for name, fmt in FORMATS.items():
        assert getattr(ampref, name) is fmt, name
        assert name in ampref.__all__


@pytest.mark.clause("FMT-DEF-001")
def test_engine_storage_properties_follow_from_the_fields() -> None:
    """Inputs: every format and float64. Expected: only float64 is wide; float32 and
    float64 cover float32. Pass: equal lists."""
    every = [*FORMATS.values(), get_format("float64")]
    assert [f.name for f in every if f.wide] == ["float64"]
    assert [f.name for f in every if f.covers_float32] == ["float32", "float64"]
