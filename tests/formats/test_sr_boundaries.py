"""Stochastic rounding exactly at its decision point (FMT-SR-001): the random word equal
to the discarded fraction, one below it, the words 0 and 2^32 - 1, fractions of exactly
k/2^32 and ones with more than 32 bits, in the normal range, the lowest subnormal step
and the last binade. Expected results come from exact rational arithmetic on inputs built
from the words (tests/sr_cases.py), never from the code under test; every kernel
implementation (the NumPy specification, the compiled twin, the verifier's float64
oracle) must give them bit for bit."""

from __future__ import annotations

import numpy as np
import pytest
import oracle
import sr_cases

import ampref
from ampref.certify.verify import reference_quantize
from ampref.formats.cast import quantize_with_words
from ampref.formats.rounding import RoundingMode
from ampref.kernels import compiled_available, use_kernels

SIGNED = ["float16", "bfloat16", "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz",
          "float6_e3m2fn", "float6_e2m3fn", "float4_e2m1fn"]
KERNELS = ["numpy"] + (["compiled"] if compiled_available() else [])


def _bits_equal(got: np.ndarray, want: np.ndarray, fmt: ampref.Format, what: str,
                x: np.ndarray, words: np.ndarray | None = None) -> None:
    """Compare float32 bit patterns; a zero result of a format without -0 is +0."""
    w32 = want.astype(np.float32)
    if not fmt.has_negative_zero:
        w32 = np.where(w32 == 0, np.float32(0), w32)
    g, w = got.astype(np.float32).view(np.uint32), w32.view(np.uint32)
    bad = np.flatnonzero(g != w)
    if bad.size:
        i = int(bad[0])
        word = "" if words is None else f" word {int(words[i]):#010x}"
        raise AssertionError(f"{what} {fmt.name}: {bad.size} of {g.size} differ; first x = "
                             f"{float(x[i])!r}{word}: got {int(g[i]):#010x}, want "
                             f"{int(w[i]):#010x}")


@pytest.mark.clause("FMT-SR-001", "FMT-IMP-002")
@pytest.mark.parametrize("kernels", KERNELS)
@pytest.mark.parametrize("name", SIGNED)
@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["f64", "f32"])
def test_the_word_equal_to_the_fraction_rounds_down_and_one_below_rounds_up(
        name: str, dtype: type, kernels: str) -> None:
    """Inputs: for each neighbour pair (around 1, the lowest subnormal step, the top of
    the last binade) and each fraction (k/2^32 for k = 1, 2^31, 2^32 - 1, those plus 1/2,
    and d/2^D grids a float32 source can hold) the value lo + frac (hi - lo) of both signs,
    with words floor(frac 2^32), one below, 0, 1, 2, 2^31, 2^32 - 2 and 2^32 - 1, through
    ``quantize_with_words``. Expected: hi iff floor(frac 2^32) > word, else lo (exact
    rational arithmetic). Pass: every float32 bit pattern equal."""
    fmt = ampref.get_format(name)
    x, words, want = sr_cases.word_cases(fmt, dtype)
    with use_kernels(kernels):
        got = quantize_with_words(x, fmt, words)
    _bits_equal(got, want, fmt, f"{kernels} kernels", x, words)


@pytest.mark.clause("FMT-SR-001", "FMT-SR-002")
@pytest.mark.parametrize("kernels", KERNELS)
@pytest.mark.parametrize("name", ["float16", "bfloat16", "float8_e4m3fn", "float4_e2m1fn"])
def test_seeded_rounding_flips_exactly_at_each_elements_own_word(name: str,
                                                                 kernels: str) -> None:
    """Inputs: seed 2024; 300 elements whose fraction is built from the element's own word
    (FMT-SR-002's recipe on MurmurHash3's finaliser, ``oracle.sr_bits``): w/2^32, (w + 1)/2^32 and
    (w + 1/2)/2^32 in turn, between the neighbour pairs in turn, through ``quantize(...,
    "stochastic", seed=2024)``. Expected: lo, hi, lo (exact). Pass: bitwise equal."""
    fmt = ampref.get_format(name)
    words = [oracle.sr_bits(2024, i) for i in range(300)]
    x, want = sr_cases.seeded_cases(fmt, words)
    with use_kernels(kernels):
        got = ampref.quantize(x, fmt, "stochastic", seed=2024)
    _bits_equal(got, want, fmt, f"{kernels} kernels, seeded", x)


@pytest.mark.clause("FMT-SR-001", "FMT-VER-001")
@pytest.mark.parametrize("kernels", KERNELS)
@pytest.mark.parametrize("name", SIGNED)
def test_the_verifiers_float64_oracle_decides_the_boundary_the_same_way(
        name: str, kernels: str) -> None:
    """Inputs: the float32 boundary cases above. Expected: the exact results, from the
    oracle the verifier compares the kernels with (``reference_quantize``, NumPy or its
    compiled twin). Pass: every float32 bit pattern equal."""
    fmt = ampref.get_format(name)
    x, words, want = sr_cases.word_cases(fmt, np.float32)
    if kernels == "numpy":
        got = reference_quantize(x, fmt, RoundingMode.STOCHASTIC, rbits=words)
    else:
        from ampref.kernels import oracle_numba

        of = oracle_numba.OracleFormat(
            minexp=fmt.minexp, mantissa_bits=fmt.mantissa_bits, max=fmt.max,
            has_subnormals=fmt.has_subnormals, has_inf=fmt.has_inf, has_nan=fmt.has_nan,
            has_zero=fmt.has_zero, is_signed=fmt.is_signed,
            has_negative_zero=fmt.has_negative_zero)
        got = oracle_numba.reference_quantize(x, of, RoundingMode.STOCHASTIC.code, rbits=words)
    _bits_equal(got, want, fmt, f"oracle ({kernels})", x, words)
