"""Exactly rounded float32 matmuls and sums at BLAS speed (spec ENG-MM-001, ENG-RED-001).

The engine defines a dot product or a sum of float32-representable values as its
**exact** value rounded once to float32 (nearest-even). That result does not depend on
summation order, threads or SIMD width, so it is the same on every machine and every
backend. Computing it directly is slow; this module gets it from float64 BLAS:

1. Phase *approximate*: ``r = A @ B`` (or ``sum(x)``) in float64. Every product of two
   float32 values is exact in float64 (48 significant bits, no underflow: the smallest
   is 2^-298), so ``r`` differs from the exact value ``s`` only by the float64 additions:
   ``|r - s| <= gamma(K + 1) * sum_k |a_k b_k|`` for *any* order (Higham, Thm 3.1),
   with ``gamma(n) = n u / (1 - n u)``, ``u = 2^-53``.
2. Phase *bound*: ``S = |A| @ |B|`` (a second float64 GEMM); the bound ``e`` is
   inflated by 2 to cover its own rounding. Where ``S <= 2^52 qa_i qb_j`` (``qa_i``,
   ``qb_j`` lower bounds of the quanta of row i of A and column j of B: the smallest
   nonzero magnitude's power of two times 2^(1-p) for p-bit inputs) every
   partial sum is a multiple of the products' common quantum below 2^53 of it, so ``r``
   is exact and ``e = 0``: with fp16/bf16 inputs this decides almost every element,
   exact float32 ties included.
3. Phase *certify*: round-to-nearest is monotone, so if ``fl32(r - e) == fl32(r + e)``
   that value is ``fl32(s)``.
4. Phase *exact by range*: for the elements that fail, the terms are gathered. Every
   term is an integer multiple of its lowest set bit; if ``sum |terms| <= 2^52 q`` with
   ``q`` the smallest such bit in the row, every partial sum is a multiple of ``q``
   below 2^53 q, so float64 summation is exact in any order and one rounding to float32
   finishes. This decides exact float32 ties, which are common with fp16/bf16 inputs
   (16- or 22-bit products of similar magnitude).
5. Phase *refine*: the elements still open (wide dynamic range) are summed again,
   vectorised, with the compensated Sum2 of Ogita, Rump & Oishi (SIAM J. Sci. Comput.
   26(6), 2005, Prop. 4.5): ``|res - s| <= u |s| + gamma(K)^2 sum_k |a_k b_k|``, and
   certified again with that bound.
6. Phase *exact*: the few left (an exact sum at or next to a float32 tie) are computed
   with integer arithmetic (:func:`ampref.accumulation._round_odd_exact`, then one
   rounding).

NaN/inf: a non-finite input makes ``r`` non-finite through IEEE float64 arithmetic,
which is what the exact model gives (inf + -inf = NaN); such elements are taken as
``fl32(r)``. Overflow of the float32 result gives ±inf. A zero result is +0.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from .accumulation import _round_odd_exact

__all__ = ["STATS", "Stats", "matmul_f32", "sum_f32"]

_U = 2.0**-53


class Stats:
    """Counters of certified elements and exact fallbacks (for tests and reports)."""

    def __init__(self) -> None:
        self.elements = 0
        self.fallbacks = 0


STATS = Stats()


def _gamma(n: int) -> float:
    return 2.0 * (n * _U) / (1.0 - n * _U)


def _certify(r: npt.NDArray[np.float64], e: npt.NDArray[np.float64]) -> tuple[Any, Any]:
    """float32 results and the mask of elements that need the exact fallback."""
    with np.errstate(over="ignore", invalid="ignore"):
        out = r.astype(np.float32)
        lo = (r - e).astype(np.float32)
        hi = (r + e).astype(np.float32)
    bad = (lo != hi) & np.isfinite(r)
    STATS.elements += r.size
    return out, bad


def _quantum_log2(x: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """log2 of the lowest set bit's value of each element (+inf for zeros and non-finite)."""
    m, e = np.frexp(x)
    mi = (m * 2.0**53).astype(np.int64)
    low = (mi & -mi).astype(np.float64)  # a power of two (0 for zero)
    _, le = np.frexp(low)
    return np.where((low != 0) & np.isfinite(x), (le - 1 + e - 53).astype(np.float64), np.inf)


def _exact_by_range(terms: npt.NDArray[np.float64]) -> tuple[Any, Any]:
    """Row sums that float64 computes exactly, and the mask of those rows."""
    qexp = _quantum_log2(terms).min(axis=1)
    total = np.sum(np.abs(terms), axis=1)
    return np.sum(terms, axis=1), _fits(total, qexp)


def _fits(total: Any, qexp: Any) -> Any:
    """sum |terms| <= 2^52 q (with margin for the rounding of ``total`` itself)."""
    with np.errstate(over="ignore", invalid="ignore"):
        lim = np.ldexp(1.0, np.clip(np.where(np.isfinite(qexp), qexp, 0), -1074, 1000).astype(np.int64) + 52)
        return (~np.isfinite(qexp)) | (total * (1 + 2.0**-40) <= lim)


def _resolve(out: Any, bad: Any, terms: npt.NDArray[np.float64]) -> None:
    """Fill ``out[bad]`` with fl32 of the exact row sums of ``terms`` (rows = bad elements)."""
    exact, ok = _exact_by_range(terms)
    with np.errstate(over="ignore"):
        r32 = exact.astype(np.float32)
    if not ok.all():
        rest = np.flatnonzero(~ok)
        r32[rest] = _refine(terms[rest])
    out[bad] = r32


def _refine(terms: npt.NDArray[np.float64]) -> npt.NDArray[np.float32]:
    """Compensated sum of each row, certified, with the integer fallback for the rest.

    The rows are reduced pairwise with TwoSum (log2 K vectorised levels): the tree of
    float64 sums ``s`` plus every TwoSum error equals the exact sum, and the errors are
    summed in float64. Whatever the order, the errors of a float64 summation satisfy
    ``sum |e| <= gamma(K-1) sum |p|``, so the result obeys Sum2's bound
    ``|res - s| <= u |s| + gamma(K-1)^2 sum |p|`` (Ogita, Rump & Oishi 2005, Prop. 4.5).
    """
    s = terms.copy()
    c = np.zeros(terms.shape[0])
    while s.shape[1] > 1:
        if s.shape[1] % 2:
            s = np.concatenate([s, np.zeros((s.shape[0], 1))], axis=1)
        a, b = s[:, 0::2], s[:, 1::2]
        t = a + b
        z = t - a
        c += np.sum((a - (t - z)) + (b - z), axis=1)
        s = t
    res = (s[:, 0] if s.shape[1] else np.zeros(terms.shape[0])) + c
    n = terms.shape[1]
    e = (2.0 * _U * np.abs(res) + _gamma(n + 2) ** 2 * np.sum(np.abs(terms), axis=1)) * 2.0
    r32, still = _certify(res, e)
    STATS.elements -= res.size  # the same elements, counted once
    for i in np.flatnonzero(still):
        r32[i] = np.float32(_round_odd_exact(terms[i]))
    STATS.fallbacks += int(still.sum())
    return r32


def _quantum_bound(x: npt.NDArray[Any], axis: int | tuple[int, ...], precision: int,
                   keepdims: bool = False) -> Any:
    """A lower bound of log2 of the products' quantum along ``axis``, per row/column:
    every nonzero value of a format with ``precision`` significant bits is a multiple of
    2^(floor(log2 |x|) - precision + 1), and never of less than float32's 2^-149."""
    if x.dtype == np.float32:
        # smallest nonzero magnitude on the bit patterns: |x| - 1 wraps zeros to the top
        u = x.view(np.uint32) & np.uint32(0x7FFFFFFF)
        m = (u - np.uint32(1)).min(axis=axis, keepdims=keepdims) + np.uint32(1)
        mn = np.where((m == 0) | (m >= 0x7F800000), np.inf, m.view(np.float32).astype(np.float64))
    else:
        ax = np.abs(x)
        mn = np.min(np.where(ax > 0, ax, np.inf), axis=axis, keepdims=keepdims)
    with np.errstate(invalid="ignore"):
        _, e = np.frexp(np.where(np.isfinite(mn), mn, 1.0))
    q = np.maximum(e.astype(np.float64) - precision, -149.0)
    return np.where(np.isfinite(mn), q, np.inf)


def matmul_f32(a: npt.NDArray[Any], b: npt.NDArray[Any], precision: int = 24) -> npt.NDArray[np.float32]:
    """``fl32(exact(a @ b))`` for float32-representable 2-D (or batched) operands.

    Batched operands (..., M, K) @ (..., K, N) broadcast like ``numpy.matmul``.
    ``precision`` (significant bits of the inputs' format: 24 for float32, 11 for
    float16, 8 for bfloat16) only sharpens the exact-by-range test; any value at least
    the true precision gives the same, exact, result.
    """
    a64 = np.asarray(a, dtype=np.float64)
    b64 = np.asarray(b, dtype=np.float64)
    K = a64.shape[-1]
    with np.errstate(over="ignore", invalid="ignore"):
        r = np.matmul(a64, b64)
        # sum_k |a_k b_k| in float64: a float32 GEMM would be cheaper but hits the
        # denormal slow path on small gradients (measured 0.24 vs 0.17 s per fp16 step)
        S = np.matmul(np.abs(a64), np.abs(b64))
        e = _gamma(K + 2) * S * 2.0
        # exact by range: products are multiples of qa_i * qb_j; if S <= 2^52 q every
        # partial sum is exact in float64, whatever the BLAS order
        a_, b_ = np.asarray(a), np.asarray(b)
        qa = _quantum_bound(a_, -1, precision)[..., :, None] if K else np.zeros(a64.shape[:-1] + (1,))
        qb = _quantum_bound(b_, -2, precision)[..., None, :] if K else np.zeros(b64.shape[:-2] + (1, b64.shape[-1]))
        # S <= 2^(52 + qa + qb) as an outer product of two power-of-two vectors
        lim = np.ldexp(1.0, np.clip(np.nan_to_num(qa + 52, posinf=1000), -1074, 1000).astype(np.int64)) \
            * np.ldexp(1.0, np.clip(np.nan_to_num(qb, posinf=1000), -1074, 1000).astype(np.int64))
        exact = (S * (1 + 2.0**-40) <= lim) | ~np.isfinite(qa + qb)
        e = np.where(exact, 0.0, e)
    out, bad = _certify(r, e)
    if bad.any():
        idx = np.nonzero(bad)
        ab = np.broadcast_to(a64, r.shape[:-1] + (K,))
        bt = np.broadcast_to(np.swapaxes(b64, -1, -2), r.shape[:-2] + (r.shape[-1], K))
        rows = ab[idx[:-2] + (idx[-2],)]
        cols = bt[idx[:-2] + (idx[-1],)]
        _resolve(out, bad, rows * cols)
    return out


def sum_f32(x: npt.NDArray[Any], axis: int | tuple[int, ...] | None = None,
            keepdims: bool = False) -> npt.NDArray[np.float32]:
    """``fl32(exact sum)`` of float32-representable values over ``axis``."""
    x64 = np.asarray(x, dtype=np.float64)
    axes = tuple(range(x64.ndim)) if axis is None else (
        (axis,) if isinstance(axis, int) else tuple(axis))
    axes = tuple(ax % x64.ndim for ax in axes) if x64.ndim else ()
    n = int(np.prod([x64.shape[ax] for ax in axes])) if axes else 1
    with np.errstate(over="ignore", invalid="ignore"):
        r = np.sum(x64, axis=axes, keepdims=True)
        S = np.sum(np.abs(x64), axis=axes, keepdims=True)
        e = _gamma(n + 2) * S * 2.0
        q = _quantum_bound(np.asarray(x), axes, 24, keepdims=True) if x64.size else np.zeros_like(r)
        e = np.where(_fits(S, q), 0.0, e)
    out, bad = _certify(r, e)
    if bad.any():
        # rows of the reduced elements: move the reduced axes last and flatten them
        tail = tuple(range(x64.ndim - len(axes), x64.ndim))
        flat = np.moveaxis(x64, axes, tail).reshape(-1, n)
        out_flat = np.moveaxis(out, axes, tail).reshape(-1).copy()
        bad_flat = np.moveaxis(bad, axes, tail).reshape(-1)
        _resolve(out_flat, bad_flat, flat[bad_flat])
        out = np.moveaxis(out_flat.reshape(np.moveaxis(out, axes, tail).shape), tail, axes)
    if not keepdims:
        out = out.reshape([s for i, s in enumerate(out.shape) if i not in axes])
    return np.asarray(out, dtype=np.float32)
