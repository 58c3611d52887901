"""Correctly rounded products of float32 or float64 values, along one axis.

A product of n binary floats is exact as an integer times a power of two: the factors'
integer significands multiplied (Python integers, any size) and their exponents added.
That exact value is rounded once, nearest-even, into float32 or float64, so a product is
independent of the order of its factors (IEEE's sequential ``x1 * x2 * ...`` rounds n - 1
times and depends on the order). Spec: ACC-EXA-002.

Specials follow IEEE multiplication of the exact factors: a NaN factor, or an infinity
together with a zero, gives NaN (always the positive quiet NaN, no payload); otherwise
an infinity gives ±inf and a zero gives ±0; the sign of every other result (zeros and
infinities included) is the exclusive or of the factors' signs. Finite results are
rounded with IEEE's gradual underflow (subnormals, and ±0 at or below half the smallest
subnormal) and overflow to ±inf from the format's rounding threshold (``2^128 (1 - 2^-25)``
for float32). An empty product is +1.

Cost: the exact significand of n factors has about 24 n (float32) bits. Products are
multiplied as a balanced tree (Python's Karatsuba multiplication on similar sizes);
prefix products (``cumulative=True``) are inherently sequential, O(n^2) bits per row.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = ["products"]

#: target dtype -> (significand bits, exponent of the smallest subnormal's quantum,
#: exponent one past the largest finite binade)
_TARGETS: dict[type, tuple[int, int, int]] = {
    np.float32: (24, -149, 128),
    np.float64: (53, -1074, 1024),
}


def products(values: npt.NDArray[Any], axis: int = -1, *, cumulative: bool = False,
             out: type = np.float32) -> npt.NDArray[Any]:
    """The exact product of ``values`` along ``axis`` (or every prefix product, when
    ``cumulative``), each rounded once nearest-even to ``out`` (float32 or float64).

    ``values`` must be float32 or float64 (both hold every value of the narrower
    formats exactly). Specials, signed zeros, subnormals and overflow: module docstring.
    """
    if out not in _TARGETS:
        raise ValueError(f"products: out must be numpy.float32 or numpy.float64, got {out!r}")
    v = np.asarray(values)
    if v.dtype not in (np.float32, np.float64):
        raise TypeError(f"products: values must be float32 or float64, got {v.dtype}")
    moved = np.moveaxis(v, axis, -1)
    rows = moved.reshape(math.prod(moved.shape[:-1]), moved.shape[-1]).astype(np.float64)
    flat = _rows(rows, cumulative, out, 24 if v.dtype == np.float32 else 53)
    if cumulative:
        return np.moveaxis(flat.reshape(moved.shape), -1, axis)
    return flat.reshape(moved.shape[:-1])


def _rows(rows: npt.NDArray[np.float64], cumulative: bool, out: type,
          bits: int) -> npt.NDArray[Any]:
    """Products (or prefix products) of each row of a (r, n) float64 array."""
    r, n = rows.shape
    if n == 0:
        return np.ones((r, 0) if cumulative else (r,), out)
    # phase 1: specials and signs, as flags that accumulate along the row
    fold = (np.logical_or.accumulate if cumulative else np.logical_or.reduce)
    nan, inf = fold(np.isnan(rows), axis=-1), fold(np.isinf(rows), axis=-1)
    zero = fold(rows == 0, axis=-1)
    negs = np.signbit(rows).astype(np.int64)
    odd = (np.cumsum(negs, axis=-1) if cumulative else negs.sum(axis=-1)) % 2 == 1
    # phase 2: finite nonzero factors as integer significand * 2^exponent (exact)
    finite = np.where(np.isfinite(rows) & (rows != 0), np.abs(rows), 1.0)
    frac, exp = np.frexp(finite)
    sig = (frac * float(1 << bits)).astype(np.int64).astype(object)
    shift = exp.astype(np.int64) - bits
    if cumulative:
        mags, exps = np.multiply.accumulate(sig, axis=-1), np.cumsum(shift, axis=-1)
    else:
        mags, exps = _tree_product(sig), shift.sum(axis=-1)
    # phase 3: one rounding per result, then the specials override
    p, qmin, top = _TARGETS[out]
    mag = np.array([_round(int(m), int(e), p, qmin, top)
                    for m, e in zip(mags.ravel(), exps.ravel(), strict=True)],
                   np.float64).reshape(mags.shape)
    mag = np.where(zero, 0.0, mag)
    mag = np.where(inf, np.inf, mag)
    signed = np.where(odd, -mag, mag)
    return np.where(nan | (inf & zero), np.nan, signed).astype(out)  # NaN: the positive quiet code


def _tree_product(sig: npt.NDArray[Any]) -> npt.NDArray[Any]:
    """Row products of an object array of integers, multiplied pairwise (balanced
    operand sizes keep big-integer multiplication fast)."""
    while sig.shape[-1] > 1:
        if sig.shape[-1] % 2:
            sig = np.concatenate([sig, np.ones(sig.shape[:-1] + (1,), object)], axis=-1)
        sig = sig[..., 0::2] * sig[..., 1::2]
    return sig[..., 0]


def _round(m: int, e: int, p: int, qmin: int, top: int) -> float:
    """The positive value m * 2^e rounded nearest-even to p significand bits, quantum at
    least 2^qmin (gradual underflow); inf at 2^top or above after rounding."""
    t = e + m.bit_length()  # m * 2^e lies in [2^(t-1), 2^t)
    q = max(t - p, qmin)
    drop = q - e
    if drop <= 0:
        kept = m  # already a multiple of the quantum: exact
        q = e
    else:
        kept = m >> drop
        rest = m - (kept << drop)
        half = 1 << (drop - 1)
        if rest > half or (rest == half and kept & 1):
            kept += 1  # nearest, ties to the even significand
    if kept == 0:
        return 0.0
    if kept.bit_length() + q > top:
        return math.inf
    return math.ldexp(float(kept), q)
