"""Correctly rounded sums of float64 values, vectorised (no double rounding).

``x + y`` in float64 is rounded once to 53 bits; rounding that again to a narrower
format can be wrong (double rounding). Here the exact sum is kept as the float64 pair
(s, e) of an error-free TwoSum (Knuth), s is moved to *round-to-odd* at 53 bits using
the sign of e, and only then rounded to the target: with 53 >= p + 2 the result is the
correctly rounded exact sum (Boldo & Melquiond, IEEE TC 2008). Spec: ACC-EXA-001.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np
import numpy.typing as npt

from .cast import quantize
from .table import Format

__all__ = ["two_sum", "round_odd_pair", "add_rounded", "fma_chain", "round_odd_exact", "fma64",
           "sum64"]


def two_sum(a: npt.NDArray[np.float64], b: npt.NDArray[np.float64]) -> tuple[Any, Any]:
    """s + e == a + b exactly, s = fl64(a + b) (finite inputs, no overflow)."""
    s = a + b
    bb = s - a
    e = (a - (s - bb)) + (b - bb)
    return s, e


def round_odd_pair(s: npt.NDArray[np.float64], e: npt.NDArray[np.float64]) -> Any:
    """float64 round-to-odd of the exact value s + e (|e| <= ulp(s)/2)."""
    bits = s.view(np.uint64)
    even = (bits & np.uint64(1)) == 0
    inexact = (e != 0) & np.isfinite(s)
    # s is the nearest float64; the odd neighbour on e's side is the truncation's odd fix
    toward = np.where(e > 0, np.inf, -np.inf)
    moved = np.nextafter(s, toward)
    # if s is even and inexact, the round-to-odd result is the odd neighbour bracketing
    # the exact value on the same side as e (that neighbour is odd since s is even)
    return np.where(inexact & even, moved, s)


def add_rounded(x: npt.ArrayLike, y: npt.ArrayLike, fmt: Format, rounding: str) -> Any:
    """Correctly rounded fmt(x + y) for float64-representable x, y; float64 result.

    NaN and inf follow IEEE addition (inf + -inf = NaN).
    """
    a = np.asarray(x, dtype=np.float64)
    b = np.asarray(y, dtype=np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        s, e = two_sum(a, b)
        e = np.where(np.isfinite(s), e, 0.0)
    return quantize(round_odd_pair(s, e), fmt, rounding)


def fma_chain(a: npt.NDArray[np.float64], b: npt.NDArray[np.float64], c: Any,
              fmt: Format) -> Any:
    """d = c; for k ascending: d = fmt(a_k * b_k + d), one correct rounding per step
    (an FMA in ``fmt``), over the last axis of ``a`` and ``b``; float64 result.

    Products of inputs with at most 26 significant bits are exact in float64, so each
    step is :func:`add_rounded`'s one rounding; NaN and inf follow IEEE, a step beyond
    ``fmt``'s range gives inf, subnormal results are kept, and an exact zero sum is +0
    (round to nearest) unless both terms are -0.
    """
    d = c
    for k in range(a.shape[-1]):
        with np.errstate(invalid="ignore"):  # inf * 0: NaN, as IEEE says
            d = add_rounded(a[..., k] * b[..., k], d, fmt, "nearest_even")
    return d


def round_odd_exact(row: npt.NDArray[np.float64]) -> float:
    """float64 round-to-odd of the exact sum of a row (Python integers)."""
    if not np.all(np.isfinite(row)):
        return float(np.sum(row))
    m, e = np.frexp(row)
    ints = (m * 2.0**53).astype(np.int64)
    base = int(e.min()) - 53
    total = sum(int(v) << int(k - 53 - base) for v, k in zip(ints, e, strict=True))
    if total == 0:
        return 0.0
    sign, mag = (-1 if total < 0 else 1), abs(total)
    drop = max(mag.bit_length() - 53, 0)
    kept = mag >> drop
    if drop and (mag & ((1 << drop) - 1)):
        kept |= 1  # sticky: round to odd
    return sign * math.ldexp(float(kept), base + drop)


def _two_product(a: npt.NDArray[np.float64],
                 b: npt.NDArray[np.float64]) -> tuple[Any, Any]:
    """p + e == a * b exactly (Dekker/Veltkamp; no overflow, no underflow of e)."""
    p = a * b
    split = 134217729.0  # 2^27 + 1
    ta, tb = a * split, b * split
    ah, bh = ta - (ta - a), tb - (tb - b)
    al, bl = a - ah, b - bh
    e = ((ah * bh - p) + ah * bl + al * bh) + al * bl
    return p, e


def _fma_exact(a: float, b: float, c: float) -> float:
    """fl64(a*b + c) from the exact rational value (any finite inputs)."""
    exact = Fraction(a) * Fraction(b) + Fraction(c)
    if exact == 0:  # IEEE: an exact zero sum is +0 unless both addends are -0
        return -0.0 if math.copysign(1.0, a * b) < 0 and math.copysign(1.0, c) < 0 else 0.0
    try:
        return float(exact)  # int/int true division: correctly rounded, nearest-even
    except OverflowError:
        return math.inf if exact > 0 else -math.inf


def fma64(a: npt.ArrayLike, b: npt.ArrayLike, c: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """Correctly rounded float64 a*b + c (nearest-even), elementwise; IEEE specials.

    Vectorised emulation of FMA (Boldo & Melquiond 2008, "Emulation of FMA and correctly
    rounded sums: proved algorithms using rounding to odd", Algorithm 5.4): an exact
    TwoProduct (uh, ul), an exact TwoSum (th, tl) = c + uh, v = round-to-odd(tl + ul),
    result fl(th + v). The proof assumes no underflow or overflow anywhere, so elements
    near either end of the exponent range (and zeros, whose signs IEEE fixes) are done
    from the exact rational value instead. NaN/inf follow IEEE (a*b + c in float64).
    """
    A, B, C = np.broadcast_arrays(*(np.asarray(x, np.float64) for x in (a, b, c)))
    shape = A.shape
    # flat views: the per-element fallback below indexes with np.nonzero (no 0-d arrays)
    A, B, C = A.reshape(-1), B.reshape(-1), C.reshape(-1)
    with np.errstate(all="ignore"):
        uh, ul = _two_product(A, B)
        th, tl = two_sum(C, uh)
        s, e = two_sum(tl, ul)
        out = th + round_odd_pair(s, e)
        ieee = A * B + C  # specials and signed zeros
        zero_product = (A == 0) | (B == 0)
    finite = np.isfinite(A) & np.isfinite(B) & np.isfinite(C)
    mag = [np.abs(x) for x in (A, B, C, uh, out)]
    safe = finite & (uh != 0) & (mag[0] < 2.0**995) & (mag[1] < 2.0**995) & \
        (mag[2] < 2.0**1000) & (mag[3] > 2.0**-900) & (mag[3] < 2.0**1000) & \
        ((mag[4] > 2.0**-960) | (mag[4] == 0) & (C != 0))
    res = np.where(finite, out, ieee)
    zero_product &= finite
    res = np.where(zero_product, ieee, res)  # exact: c plus a signed zero
    for i in np.flatnonzero(finite & ~safe & ~zero_product):
        res[i] = _fma_exact(float(A[i]), float(B[i]), float(C[i]))
    return np.asarray(res, np.float64).reshape(shape)


def sum64(values: npt.ArrayLike) -> float:
    """The exact sum of float64 ``values`` and +0, rounded once to float64 (nearest-even).

    Shewchuk's ``math.fsum``, or a Fraction sum where fsum's partial sums overflow
    although the total may not; a total beyond float64 is ±inf. IEEE specials: a NaN
    gives NaN, ``inf - inf`` the machine's default NaN, one sign of infinity that
    infinity. An empty or all-zero sum is +0 (-0 terms included)."""
    v = np.asarray(values, np.float64).reshape(-1)
    if not np.isfinite(v).all():
        with np.errstate(invalid="ignore"):
            return float(np.sum(v))
    try:
        return math.fsum([0.0, *v.tolist()])
    except OverflowError:
        total = sum((Fraction(x) for x in v.tolist()), Fraction(0))
        try:
            return float(total)
        except OverflowError:
            return math.copysign(math.inf, total)
