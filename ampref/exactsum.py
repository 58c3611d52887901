"""Correctly rounded sums of float64 values, vectorised (no double rounding).

``x + y`` in float64 is rounded once to 53 bits; rounding that again to a narrower
format can be wrong (double rounding). Here the exact sum is kept as the float64 pair
(s, e) of an error-free TwoSum (Knuth), s is moved to *round-to-odd* at 53 bits using
the sign of e, and only then rounded to the target: with 53 >= p + 2 the result is the
correctly rounded exact sum (Boldo & Melquiond, IEEE TC 2008). Spec: ACC-EXA-001.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import numpy.typing as npt

from .cast import quantize
from .formats import Format

__all__ = ["two_sum", "round_odd_pair", "add_rounded", "round_odd_exact"]


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
