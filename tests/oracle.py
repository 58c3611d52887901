"""A slow, independent scalar oracle for ``specs/formats.md``, on exact rationals.

Written from the spec, not from ``ampref.cast``: it enumerates the format's value grid
with ``fractions.Fraction``, picks the two neighbours of the exact input, chooses one
by the rounding rule and only then builds the code. It shares no code with the kernels
except the format *data* (field widths); the stochastic words are FMT-SR-002's recipe
composed here from MurmurHash3's published 32-bit finaliser (``murmur_fmix32``, pinned to
MurmurHash3's published test vectors in tests/formats/test_srhash.py).
"""

from __future__ import annotations

import math
from fractions import Fraction

from ampref.formats.table import Encoding, Format

NAN = "nan"


def _pow2(k: int) -> Fraction:
    return Fraction(2) ** k


def fmt_max(fmt: Format) -> Fraction:
    """Largest finite value, from the encoding rules alone."""
    e_top = (1 << fmt.exponent_bits) - 1
    m_top = (1 << fmt.mantissa_bits) - 1
    if fmt.encoding in (Encoding.IEEE, Encoding.FNU):
        e_top -= 1  # all-ones exponent is inf/NaN
    elif fmt.encoding is Encoding.FN:
        m_top -= 1  # all-ones magnitude is NaN
    return (1 + Fraction(m_top, 1 << fmt.mantissa_bits)) * _pow2(e_top - fmt.bias)


def emin(fmt: Format) -> int:
    return (0 if fmt.encoding is Encoding.FNU else 1) - fmt.bias


def floor_log2(a: Fraction) -> int:
    """Exact floor(log2(a)) for a > 0."""
    e = a.numerator.bit_length() - a.denominator.bit_length()
    while _pow2(e) > a:
        e -= 1
    while _pow2(e + 1) <= a:
        e += 1
    return e


def decode_scalar(code: int, fmt: Format) -> Fraction | float:
    """Exact value of one code (float('nan') / ±inf for specials)."""
    m_bits, e_bits = fmt.mantissa_bits, fmt.exponent_bits
    signed = fmt.encoding is not Encoding.FNU
    s = (code >> (e_bits + m_bits)) & 1 if signed else 0
    e = (code >> m_bits) & ((1 << e_bits) - 1)
    m = code & ((1 << m_bits) - 1)
    if fmt.encoding is Encoding.IEEE and e == (1 << e_bits) - 1:
        return math.nan if m else (-math.inf if s else math.inf)
    if fmt.encoding is Encoding.FN and e == (1 << e_bits) - 1 and m == (1 << m_bits) - 1:
        return math.nan
    if fmt.encoding is Encoding.FNUZ and s == 1 and e == 0 and m == 0:
        return math.nan
    if fmt.encoding is Encoding.FNU and code == (1 << e_bits) - 1:
        return math.nan
    if fmt.encoding is not Encoding.FNU and e == 0:
        v = Fraction(m, 1 << m_bits) * _pow2(emin(fmt))
    else:
        v = (1 + Fraction(m, 1 << m_bits)) * _pow2(e - fmt.bias)
    if v == 0 and s:
        return -0.0
    return -v if s else v


def _code_of(value: Fraction, neg: bool, fmt: Format) -> int:
    """Code of an exactly representable finite value (value >= 0) with a sign."""
    m_bits = fmt.mantissa_bits
    if value == 0:
        mag = 0
    else:
        e = floor_log2(value)
        if e < emin(fmt):  # subnormal
            mag = int(value / _pow2(emin(fmt) - m_bits))
        else:
            field = e + fmt.bias
            mant = (value / _pow2(e) - 1) * (1 << m_bits)
            assert mant.denominator == 1, "value not representable"
            mag = (field << m_bits) | int(mant)
    if fmt.encoding is Encoding.FNU:
        return mag
    if fmt.encoding is Encoding.FNUZ and mag == 0:
        return 0
    return mag | (int(neg) << (fmt.exponent_bits + m_bits))


def nan_code(fmt: Format, neg: bool) -> int | None:
    m, e = fmt.mantissa_bits, fmt.exponent_bits
    sign = int(neg) << (e + m)
    if fmt.encoding is Encoding.IEEE:
        return sign | (((1 << e) - 1) << m) | (1 << (m - 1))
    if fmt.encoding is Encoding.FN:
        return sign | ((1 << (e + m)) - 1)
    if fmt.encoding is Encoding.FNUZ:
        return 1 << (e + m)
    if fmt.encoding is Encoding.FNU:
        return (1 << e) - 1
    return None


def inf_code(fmt: Format, neg: bool) -> int:
    m, e = fmt.mantissa_bits, fmt.exponent_bits
    return (int(neg) << (e + m)) | (((1 << e) - 1) << m)


def neighbours(a: Fraction, fmt: Format) -> tuple[Fraction, Fraction]:
    """(lo, hi): the grid points with lo <= a < hi (hi may exceed max)."""
    has_sub = fmt.encoding is not Encoding.FNU
    if a < _pow2(emin(fmt)):
        quantum = _pow2(emin(fmt) - fmt.mantissa_bits) if has_sub else _pow2(emin(fmt))
    else:
        quantum = _pow2(floor_log2(a) - fmt.mantissa_bits)
    lo = (a // quantum) * quantum
    return lo, lo + quantum


def round_scalar(x: float | Fraction, fmt: Format, rnd: str, *, saturate: bool = False,
                 subnormals: bool = True, rbits: int | None = None) -> int | None:
    """Code of x rounded to fmt (None: NaN into a format without NaN)."""
    if isinstance(x, float) and math.isnan(x):
        return nan_code(fmt, math.copysign(1.0, x) < 0)
    neg = (x < 0) if not isinstance(x, float) or x != 0 else math.copysign(1.0, x) < 0
    mx = fmt_max(fmt)
    if fmt.encoding is Encoding.FNU and (neg or x == 0):
        return nan_code(fmt, False)
    if isinstance(x, float) and math.isinf(x):
        if saturate or fmt.encoding is Encoding.FINITE:
            return _code_of(mx, neg, fmt)
        return inf_code(fmt, neg) if fmt.encoding is Encoding.IEEE else nan_code(fmt, neg)
    a = abs(Fraction(x))
    lo, hi = neighbours(a, fmt)
    up = _round_up(a, lo, hi, fmt, rnd, neg, rbits)
    v = hi if up else lo
    if v > mx:
        down = rnd in ("toward_zero", "odd") or (rnd == "toward_positive" and neg) or (
            rnd == "toward_negative" and not neg)
        if down or saturate or fmt.encoding is Encoding.FINITE:
            return _code_of(mx, neg, fmt)
        return inf_code(fmt, neg) if fmt.encoding is Encoding.IEEE else nan_code(fmt, neg)
    if v == 0 and fmt.encoding is Encoding.FNU:
        v = _pow2(emin(fmt))  # no zero in E8M0: underflow stops at the smallest value
    if not subnormals and 0 < v < _pow2(emin(fmt)):
        v = Fraction(0)
    return _code_of(v, neg, fmt)


def _round_up(a: Fraction, lo: Fraction, hi: Fraction, fmt: Format, rnd: str, neg: bool,
              rbits: int | None) -> bool:
    if a == lo:
        return False
    mid = (lo + hi) / 2
    if rnd == "nearest_even":
        if a != mid:
            return a > mid
        return _last_bit(lo, fmt) == 1  # tie: to the even significand
    if rnd == "nearest_away":
        return a >= mid
    if rnd == "toward_zero":
        return False
    if rnd == "toward_positive":
        return not neg
    if rnd == "toward_negative":
        return neg
    if rnd == "odd":
        return _last_bit(lo, fmt) == 0
    if rnd == "stochastic":
        assert rbits is not None
        frac32 = math.floor((a - lo) / (hi - lo) * (1 << 32))
        return frac32 > rbits
    raise ValueError(rnd)


def _last_bit(v: Fraction, fmt: Format) -> int:
    """Last significand bit; with no stored mantissa bits it is the implicit 1, so
    ties of nearest_even go away from zero and odd truncates (ml_dtypes' E8M0 rule)."""
    if v == 0:
        return 0
    if fmt.mantissa_bits == 0:
        return 1
    return _code_of(v, False, fmt) & 1


def murmur_fmix32(h: int) -> int:
    """MurmurHash3's 32-bit finaliser (Appleby, SMHasher ``MurmurHash3.cpp``, ``fmix32``),
    written from its published shifts and multipliers on Python ints."""
    for shift, mul in ((16, 0x85EBCA6B), (13, 0xC2B2AE35)):
        h = ((h ^ (h >> shift)) * mul) & 0xFFFFFFFF
    return h ^ (h >> 16)


def sr_bits(seed: int, index: int) -> int:
    """FMT-SR-002's word for element ``index`` under ``seed`` (two 64-bit ints), built from
    the spec's recipe: keys from the seed's halves, then two finaliser rounds over the
    index's halves."""
    lo32 = 0xFFFFFFFF
    k1 = murmur_fmix32((seed & lo32) ^ 0x9E3779B9)
    k2 = murmur_fmix32((seed >> 32) ^ 0x7F4A7C15 ^ k1)
    return murmur_fmix32(murmur_fmix32((index & lo32) ^ k1) ^ (index >> 32) ^ k2)


def round_value(x: Fraction, fmt: Format, rnd: str = "nearest_even") -> Fraction | float:
    """The value (not the code) of x rounded to fmt: the recipe tests' fl32(...)."""
    code = round_scalar(x, fmt, rnd)
    assert code is not None
    return decode_scalar(code, fmt)


def trunc_to(x: Fraction, q: Fraction) -> Fraction:
    """x truncated toward zero to a multiple of q (> 0)."""
    n = abs(x) // q
    return n * q if x >= 0 else -n * q


def block_fma_value(a: list[Fraction], b: list[Fraction], c: Fraction, *, ea_min: int,
                    eb_min: int, frac_bits: int, floor: int | None, out: Format,
                    out_rnd: str) -> Fraction | float:
    """One tensor-core block as specs/accumulation.md ACC-TC-001 writes it: exponents
    e(x) = max(floor(log2|x|), emin), E the largest over nonzero products, c (fp32
    floor -126) and the floor L, every term truncated to 2^(E - f), the exact sum rounded
    once to ``out`` with ``out_rnd``."""
    exps = [max(floor_log2(abs(x)), ea_min) + max(floor_log2(abs(y)), eb_min)
            for x, y in zip(a, b, strict=True) if x != 0 and y != 0]
    if c != 0:
        exps.append(max(floor_log2(abs(c)), -126))
    if floor is not None:
        exps.append(floor)
    if not exps:
        return Fraction(0)
    q = _pow2(max(exps) - frac_bits)
    s = sum((trunc_to(x * y, q) for x, y in zip(a, b, strict=True)), Fraction(0))
    return round_value(s + trunc_to(c, q), out, out_rnd)


def same_bits(got: object, want: Fraction | float, wide: bool = False) -> tuple[bool, str]:
    """(bitwise equal, message) for a model result against an oracle value. The oracle's
    rationals carry no signed zero, so a zero oracle value accepts either zero's bits and
    nothing else."""
    import numpy as np

    dt, it = (np.float64, np.uint64) if wide else (np.float32, np.uint32)
    g = np.array(got, dt).view(it)
    w = np.array(float(want), dt).view(it)
    sign = it(1) << it(63 if wide else 31)
    ok = bool(g == w) or (float(want) == 0 and bool((g & ~sign) == 0))
    width = 16 if wide else 8
    return ok, f"got 0x{int(g):0{width}x}, want 0x{int(w):0{width}x}"
