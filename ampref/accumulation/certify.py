"""The phases of ampref's exactly rounded float32 sums and GEMMs (``specs/engine.md``
ENG-MM-001, ENG-RED-001), shared by their front ends in :mod:`ampref.accumulation.certified`
(whose docstring gives the algorithm): error bounds from norms and quanta, the
certificate ``fl32(r - e) == fl32(r + e)``, and the exact fallbacks (exact by range,
compensated Sum2, integers). Every function takes the array module ``xp`` (NumPy or
CuPy) and never leaves it except for the integer fallback's handful of elements.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from ampref.formats.exactsum import round_odd_exact

__all__ = ["STATS", "Stats", "certify", "exact_by_range", "fits", "gamma2", "norm_bounds",
           "quantum_bound", "quantum_log2", "range_factors", "refine", "resolve",
           "column_norm_bounds", "row_norm_bounds", "tight_bound", "to_host"]

_U = 2.0**-53


class Stats:
    """Counters of certified elements and exact fallbacks (for tests and reports)."""

    def __init__(self) -> None:
        self.elements = 0
        self.fallbacks = 0


STATS = Stats()


def to_host(xp: Any, a: Any) -> Any:
    """A NumPy copy of a backend array (``cupy.asnumpy``; NumPy arrays pass through)."""
    return xp.asnumpy(a) if hasattr(xp, "asnumpy") else np.asarray(a)


def gamma2(n: int) -> float:
    """2 gamma(n) of the float64 unit roundoff: twice Higham's gamma_n, u = 2^-53."""
    return 2.0 * (n * _U) / (1.0 - n * _U)


def certify(r: npt.NDArray[np.float64], e: npt.NDArray[np.float64],
             xp: Any = np) -> tuple[Any, Any]:
    """float32 results and the mask of elements that need the exact fallback.

    The interval's two float32 ends are compared as bit patterns: an interval that
    straddles zero below the smallest subnormal has ends -0 and +0, which compare equal
    as floats, yet the exact value's sign decides the result's (a product sum can be
    nonzero below 2^-150). A zero-width interval (e = 0: r is exact) is decided whatever
    its ends' bits (-0 - 0 = -0 but -0 + 0 = +0)."""
    with np.errstate(over="ignore", invalid="ignore"):
        out = r.astype(xp.float32)
        lo = (r - e).astype(xp.float32)
        hi = (r + e).astype(xp.float32)
    bad = (lo.view(xp.uint32) != hi.view(xp.uint32)) & (e != 0) & xp.isfinite(r)
    STATS.elements += r.size
    return out, bad


def quantum_log2(x: npt.NDArray[np.float64], xp: Any = np) -> npt.NDArray[np.float64]:
    """log2 of the lowest set bit's value of each element (+inf for zeros and non-finite)."""
    m, e = xp.frexp(x)
    mi = (m * 2.0**53).astype(xp.int64)
    low = (mi & -mi).astype(xp.float64)  # a power of two (0 for zero)
    _, le = xp.frexp(low)
    return xp.where((low != 0) & xp.isfinite(x), (le - 1 + e - 53).astype(xp.float64), xp.inf)


def exact_by_range(terms: npt.NDArray[np.float64], xp: Any = np) -> tuple[Any, Any]:
    """Row sums that float64 computes exactly, and the mask of those rows."""
    qexp = quantum_log2(terms, xp).min(axis=1)
    total = xp.sum(xp.abs(terms), axis=1)
    return xp.sum(terms, axis=1), fits(total, qexp, xp)


def fits(total: Any, qexp: Any, xp: Any = np) -> Any:
    """sum |terms| <= 2^52 q (with margin for the rounding of ``total`` itself)."""
    with np.errstate(over="ignore", invalid="ignore"):
        e = xp.clip(xp.where(xp.isfinite(qexp), qexp, 0), -1074, 1000).astype(xp.int64)
        lim = xp.ldexp(1.0, e + 52)
        return (~xp.isfinite(qexp)) | (total * (1 + 2.0**-40) <= lim)


def resolve(out: Any, bad: Any, terms: npt.NDArray[np.float64], xp: Any = np) -> None:
    """Fill ``out[bad]`` with fl32 of the exact row sums of ``terms`` (rows = bad elements;
    ``bad`` None: every element of ``out``, without a mask to read back on a device)."""
    exact, ok = exact_by_range(terms, xp)
    with np.errstate(over="ignore"):
        r32 = exact.astype(xp.float32)
    rest = xp.flatnonzero(~ok)  # one read of the data-sized result, no separate test
    if rest.size:
        r32[rest] = refine(terms[rest], xp)
    if bad is None:
        out[...] = r32
    else:
        out[bad] = r32


def refine(terms: npt.NDArray[np.float64], xp: Any = np) -> npt.NDArray[np.float32]:
    """Compensated sum of each row, certified, with the integer fallback for the rest.

    The rows are reduced pairwise with TwoSum (log2 K vectorised levels): the tree of
    float64 sums ``s`` plus every TwoSum error equals the exact sum, and the errors are
    summed in float64. Whatever the order, the errors of a float64 summation satisfy
    ``sum |e| <= gamma(K-1) sum |p|``, so the result obeys Sum2's bound
    ``|res - s| <= u |s| + gamma(K-1)^2 sum |p|`` (Ogita, Rump & Oishi 2005, Prop. 4.5).
    """
    s = terms.copy()
    c = xp.zeros(terms.shape[0])
    while s.shape[1] > 1:
        if s.shape[1] % 2:
            s = xp.concatenate([s, xp.zeros((s.shape[0], 1))], axis=1)
        a, b = s[:, 0::2], s[:, 1::2]
        t = a + b
        z = t - a
        c += xp.sum((a - (t - z)) + (b - z), axis=1)
        s = t
    res = (s[:, 0] if s.shape[1] else xp.zeros(terms.shape[0])) + c
    n = terms.shape[1]
    e = (2.0 * _U * xp.abs(res) + gamma2(n + 2) ** 2 * xp.sum(xp.abs(terms), axis=1)) * 2.0
    r32, still = certify(res, e, xp)
    STATS.elements -= res.size  # the same elements, counted once
    # the integer fallback runs on the host (a handful of elements per thousands): their
    # rows come over in one transfer and their results go back in one
    idx = to_host(xp, xp.flatnonzero(still))
    if idx.size:
        rows = to_host(xp, terms[xp.asarray(idx)])
        r32[xp.asarray(idx)] = xp.asarray(
            np.array([round_odd_exact(row) for row in rows], dtype=np.float32))
    STATS.fallbacks += int(idx.size)
    return r32


def quantum_bound(x: npt.NDArray[Any], axis: int | tuple[int, ...], precision: int,
                   keepdims: bool = False, xp: Any = np) -> Any:
    """A lower bound of log2 of the products' quantum along ``axis``, per row/column:
    every nonzero value of a format with ``precision`` significant bits is a multiple of
    2^(floor(log2 |x|) - precision + 1), and never of less than float32's 2^-149."""
    if x.dtype == xp.float32:
        # smallest nonzero magnitude on the bit patterns: |x| - 1 wraps zeros to the top
        u = x.view(xp.uint32) & xp.uint32(0x7FFFFFFF)
        m = (u - xp.uint32(1)).min(axis=axis, keepdims=keepdims) + xp.uint32(1)
        mn = xp.where((m == 0) | (m >= 0x7F800000), xp.inf, m.view(xp.float32).astype(xp.float64))
    else:
        ax = xp.abs(x)
        mn = xp.min(xp.where(ax > 0, ax, xp.inf), axis=axis, keepdims=keepdims)
    with np.errstate(invalid="ignore"):
        _, e = xp.frexp(xp.where(xp.isfinite(mn), mn, 1.0))
    q = xp.maximum(e.astype(xp.float64) - precision, -149.0)
    return xp.where(xp.isfinite(mn), q, xp.inf)


def norm_bounds(a64: Any, b64: Any, xp: Any = np) -> tuple[Any, Any]:
    """Per row of ``a`` and column of ``b``: ``na``, ``nb`` with ``na_i nb_j`` at least
    ``sum_k |a_ik b_kj|`` (Cauchy-Schwarz), at the cost of two passes over the operands
    instead of a second GEMM.

    Squares of float32 values are exact in float64 (2^-298 .. 2^256, no underflow or
    overflow); the float64 sum of K squares, the square roots and the final product
    each lose at most a relative ``gamma``, which the factor ``1 + 2 gamma(K + 4)`` on
    ``na`` covers. NaN or inf in a row/column makes its bound NaN or inf.
    """
    return row_norm_bounds(a64, xp), column_norm_bounds(b64, xp)


def column_norm_bounds(b64: Any, xp: Any = np) -> Any:
    """``nb`` of :func:`norm_bounds` alone (computed once for every row tile)."""
    return xp.sqrt(xp.sum(b64 * b64, axis=-2))


def row_norm_bounds(a64: Any, xp: Any = np) -> Any:
    """``na`` of :func:`norm_bounds` alone: a row tile's share, the columns' computed
    once for all tiles (:func:`norm_bounds` with ``b`` gives them)."""
    return xp.sqrt(xp.sum(a64 * a64, axis=-1)) * (1.0 + gamma2(a64.shape[-1] + 4))


def range_factors(na: Any, nb: Any, qa: Any, qb: Any, xp: Any = np) -> tuple[Any, Any]:
    """``u_i``, ``v_j`` with ``u_i v_j <= 1`` exactly where ``na_i nb_j <= 2^(52 + qa_i +
    qb_j)``: the exact-by-range test of phase 2 as an outer product of two vectors. An
    all-zero row or column (quantum +inf) gets 0: its dot products are exactly 0."""
    ea = xp.where(xp.isfinite(qa), qa + 52, 0).astype(xp.int64)
    eb = xp.where(xp.isfinite(qb), qb, 0).astype(xp.int64)
    u = xp.where(xp.isfinite(qa), xp.ldexp(na, -ea), 0.0)
    v = xp.where(xp.isfinite(qb), xp.ldexp(nb, -eb), 0.0)
    return u, v


def tight_bound(a64: Any, b64: Any, qa: Any, qb: Any, xp: Any = np) -> Any:
    """The error bound from ``S = |A| @ |B|`` (a second float64 GEMM), zero where the
    exact-by-range test passes on S itself. Used when the norm bound leaves too many
    elements undecided (sparse or spiky operands, where Cauchy-Schwarz is loose)."""
    K = a64.shape[-1]
    S = xp.matmul(xp.abs(a64), xp.abs(b64))
    exact = fits(S, qa[..., :, None] + qb[..., None, :], xp)
    return xp.where(exact, 0.0, gamma2(K + 2) * S * 2.0)
