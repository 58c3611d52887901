"""The exhaustive verifier's float64 oracle and its comparison, compiled: the NumPy
specification is :func:`ampref.certify.verify.reference_quantize`, whose formula this
module repeats step for step on one element at a time (frexp, ldexp, floor and the
divisions by powers of two are exact in float64, so both give the same value). Like
the specification, it shares no code with the integer encode kernels it checks.

The format arrives as :class:`OracleFormat`, the handful of numbers the formula reads.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numba as nb
import numpy as np
import numpy.typing as npt

from .jitcache import CACHE
from .params import NEAREST_AWAY, NEAREST_EVEN, ODD, STOCHASTIC, TOWARD_NEGATIVE, TOWARD_POSITIVE
from .params import TOWARD_ZERO
from .arrays import frozen
from .bits import as_bits, as_float
from .threads import run_blocks

__all__ = ["OracleFormat", "count_mismatches", "reference_quantize"]


class OracleFormat(NamedTuple):
    """What the oracle reads of a format (``Format`` attributes of the same names)."""

    minexp: int
    mantissa_bits: int
    max: float
    has_subnormals: bool
    has_inf: bool
    has_nan: bool
    has_zero: bool
    is_signed: bool
    has_negative_zero: bool


@nb.njit(inline="always", cache=CACHE)
def _frexp_exponent(x: float) -> int:
    """``math.frexp(x)[1]`` for a positive normal float64 (every float32 magnitude is one),
    read off the exponent field instead of a libm call: the same integer."""
    return int((as_bits(x) >> np.uint64(52)) & np.uint64(0x7FF)) - 1022


@nb.njit(inline="always", cache=CACHE)
def _pow2(k: int) -> float:
    """``math.ldexp(1.0, k)`` for -1022 <= k <= 1023, assembled from the exponent field."""
    return as_float(np.uint64(k + 1023) << np.uint64(52))


@nb.njit(cache=CACHE)
def _oracle_one(x: np.float32, f: Any, rnd: int, saturate: bool, subnormals: bool,
                rbits: float) -> np.float32:
    """The specification's formula on one element, in its order."""
    # why long: the oracle is one straight formula, kept whole so it reads against the
    # specification it repeats
    minexp, mant, fmax, has_sub, has_inf, has_nan, has_zero, signed, neg_zero = f
    neg = np.signbit(x)
    a = abs(np.float64(x))
    finite_pos = (a - a == 0.0) and a > 0.0
    safe = a if finite_pos else 1.0
    e = _frexp_exponent(safe)  # safe = m * 2^e, m in [0.5, 1): floor(log2) = e - 1
    tiny = _pow2(minexp)
    qexp = max(e - 1, minexp) - mant
    if not has_sub and safe < tiny:
        qexp = minexp
    q = _pow2(qexp)
    t = safe * _pow2(-qexp)  # = safe / q, exactly (q is a power of two)
    n = math.floor(t)
    lo, hi = n * q, (n + 1.0) * q
    frac = t - n
    inexact = frac > 0.0
    half = n * 0.5
    lo_odd = (half != math.floor(half)) or (mant == 0 and n > 0.0)
    if rnd == NEAREST_EVEN:
        up = frac > 0.5 or (frac == 0.5 and lo_odd)
    elif rnd == NEAREST_AWAY:
        up = frac >= 0.5
    elif rnd == TOWARD_ZERO:
        up = False
    elif rnd == TOWARD_POSITIVE:
        up = inexact and not neg
    elif rnd == TOWARD_NEGATIVE:
        up = inexact and neg
    elif rnd == ODD:
        up = inexact and not lo_odd
    else:
        up = math.floor(frac * 2.0**32) > rbits
    v = hi if up else lo
    # the modes that round an overflow toward the largest finite value
    down = (rnd == TOWARD_ZERO or rnd == ODD or (rnd == TOWARD_POSITIVE and neg)
            or (rnd == TOWARD_NEGATIVE and not neg))
    over_val = np.inf if has_inf else (np.nan if has_nan else fmax)
    clamp = (down or saturate) if has_nan else True
    if v > fmax:
        v = fmax if clamp else over_val
    if not has_zero and v == 0.0:
        v = tiny
    if not subnormals and v > 0.0 and v < tiny:
        v = 0.0
    if a == np.inf:
        v = fmax if (saturate or not has_nan) else (np.inf if has_inf else np.nan)
    if a == 0.0:
        v = 0.0
    if a != a:
        v = np.nan
    if not signed and (neg or a == 0.0):
        v = np.nan
    out = -v if neg else v
    if not neg_zero and out == 0.0:
        out = 0.0
    return np.float32(out)


@nb.njit(cache=CACHE, nogil=True)
def _oracle_blocks(x: Any, f: Any, rnd: int, saturate: bool, subnormals: bool, rbits: Any,
                   out: Any, lo: int, hi: int) -> None:
    x, out = x[lo:hi], out[lo:hi]
    words = rbits[lo:hi] if rbits.size else rbits
    for i in range(x.size):
        rb = np.float64(words[i]) if words.size else 0.0
        out[i] = _oracle_one(x[i], f, rnd, saturate, subnormals, rb)


def reference_quantize(x: npt.NDArray[np.float32], fmt: OracleFormat, rnd: int, *,
                       saturate: bool = False, subnormals: bool = True,
                       rbits: Any = None) -> npt.NDArray[np.float32]:
    """Same contract and values as :func:`ampref.certify.verify.reference_quantize`
    (the format as :class:`OracleFormat`, the mode as its int code)."""
    x = frozen(x, np.float32)
    flat = x.reshape(-1)
    words = (frozen(np.broadcast_to(np.asarray(rbits), x.shape), np.uint32).reshape(-1)
             if rnd == STOCHASTIC else frozen(np.empty(0, np.uint32)))
    out = np.empty(flat.shape, np.float32)
    run_blocks(_oracle_blocks, flat.size, flat, tuple(fmt), rnd, saturate, subnormals, words, out)
    return out.reshape(x.shape)


@nb.njit(cache=CACHE)
def _mismatches(ours: Any, ref: Any, float_words: bool, first: Any) -> int:
    n = 0
    for i in range(ours.size):
        a, b = ours[i], ref[i]
        if a == b:
            continue
        if float_words and (a & 0x7FFFFFFF) > 0x7F800000 and (b & 0x7FFFFFFF) > 0x7F800000:
            continue  # two NaNs agree, whatever their payloads
        if n < first.size:
            first[n] = i
        n += 1
    return n


def count_mismatches(ours: npt.NDArray[Any], ref: npt.NDArray[Any], *, float_words: bool,
                     first: int = 5) -> tuple[int, npt.NDArray[np.int64]]:
    """Elements whose bits differ (as float32 words, two NaNs agree; else as codes) and
    the indices of the first few: one pass where the specification makes four."""
    idx = np.empty(first, np.int64)
    n = _mismatches(frozen(ours).reshape(-1), frozen(ref).reshape(-1), float_words, idx)
    return n, idx[:min(n, first)]
