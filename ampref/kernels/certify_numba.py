"""The certify phase of the exactly rounded GEMM and sums, compiled: one pass over the
operands for the bounds and one over the float64 result, where the NumPy specification
(:mod:`ampref.accumulation.certified`, phases 2 and 3) makes about fifteen.

Inputs: the float64 result ``r`` of BLAS (any summation order) and the operands. Per row
of ``a`` and column of ``b``: ``na``/``nb``, bounds of the 2-norms with the factor
``1 + gamma(K + 4)`` that covers every rounding of their own float64 evaluation in any
order (Cauchy-Schwarz gives ``sum_k |a_k b_k| <= na nb``), and the log2 lower bound of
the products' quantum. Per element: exact by range where ``na nb <= 2^(52 + qa + qb)``
(every partial sum is then a float64 value, so ``r`` is exact), else certified when
``fl32(r - e) == fl32(r + e)`` with ``e = 2 gamma(K + 2) na nb``. The rest is flagged;
the specification resolves those exactly. A non-finite ``r`` is its own answer (IEEE
propagation is the model's), as in the specification. The outputs are therefore
``fl32(exact)`` like the specification's, bit for bit: any sound certificate gives the
same unique value.
"""

from __future__ import annotations

import math
from typing import Any

import numba as nb
import numpy as np
import numpy.typing as npt

from .jitcache import CACHE
from .arrays import frozen
from .threads import run_blocks

__all__ = ["certify_gemm", "certify_rows"]

_U = 2.0**-53


@nb.njit(inline="always", cache=CACHE)
def _gamma(n: int) -> float:
    return 2.0 * (n * _U) / (1.0 - n * _U)


@nb.njit(inline="always", cache=CACHE)
def _quantum(mn: float, precision: int) -> float:
    """log2 lower bound of the quantum of values whose smallest nonzero magnitude is
    ``mn`` (inf: none, all zero or non-finite)."""
    if not mn < np.inf:
        return np.inf
    e = math.frexp(mn)[1]
    return max(float(e - precision), -149.0)


@nb.njit(cache=CACHE)
def _row_bound(row: Any, precision: int, grow: float) -> tuple[float, float]:
    """Norm bound (times ``grow``) and quantum bound of one row."""
    s, mn = 0.0, np.inf
    for k in range(row.size):
        v = np.float64(row[k])
        s += v * v
        av = abs(v)
        if av > 0.0 and av < mn:
            mn = av
    return math.sqrt(s) * grow, _quantum(mn, precision)


@nb.njit(cache=CACHE, nogil=True)
def _bounds(a: Any, b: Any, precision: int, na: Any, qa: Any, nb_: Any, qb: Any) -> None:
    """Rows of every ``a[p]`` (M, K) and columns of every ``b[p]`` (K, N); the columns
    are walked row by row for the cache."""
    P, M, K = a.shape
    N = b.shape[2]
    grow = 1.0 + _gamma(K + 4)
    s = np.empty(N)
    mn = np.empty(N)
    for p in range(P):
        for i in range(M):
            na[p, i], qa[p, i] = _row_bound(a[p, i], precision, grow)
        s[:] = 0.0
        mn[:] = np.inf
        for k in range(K):
            row = b[p, k]
            for j in range(N):  # branch-free, so it vectorises
                v = np.float64(row[j])
                s[j] += v * v
                av = abs(v)
                mn[j] = min(mn[j], av if av > 0.0 else np.inf)
        for j in range(N):
            nb_[p, j] = math.sqrt(s[j])
            qb[p, j] = _quantum(mn[j], precision)


@nb.njit(cache=CACHE, nogil=True)
def _certify_rows(r: Any, a: Any, b: Any, na: Any, qa: Any, nb_: Any, qb: Any, M: int, K: int,
                  out: Any, lo: int, hi: int) -> None:
    """Rows lo..hi-1 of ``r`` (P*M, N): row t belongs to batch t // M, whose column
    bounds are ``nb_[t // M]``. An element the bound cannot certify is summed exactly
    on the spot (:func:`_exact_dot`)."""
    N = r.shape[1]
    acc = np.zeros(_LIMBS, np.int64)
    flag = np.empty(N, np.bool_)
    g2 = _gamma(K + 2) * 2.0
    v = np.empty(N)
    last = -1
    for t in range(lo, hi):
        p, i = t // M, t % M
        if p != last:  # the batch's column factors
            for j in range(N):
                v[j] = math.ldexp(nb_[p, j], -int(qb[p, j])) if qb[p, j] < np.inf else 0.0
            last = p
        ui = math.ldexp(na[p, i], -int(qa[p, i] + 52.0)) if qa[p, i] < np.inf else 0.0
        ri, oi = r[t], out[t]
        e_i = na[p, i] * g2
        nbp = nb_[p]
        flagged = False
        for j in range(N):  # branch-free, so it vectorises; the rare rest below
            x = ri[j]
            e = e_i * nbp[j]
            oi[j] = np.float32(x)
            # certified: exact by range (every partial sum a float64 value), the interval
            # rounds to one float32, or inf/NaN (IEEE propagation is the answer)
            # (the interval's ends compared with their signs: -0 and +0 are two results,
            # except for a zero-width interval, where x is exact)
            lo32, hi32 = np.float32(x - e), np.float32(x + e)
            ok = ((ui * v[j] * (1.0 + 2.0**-40) <= 1.0) | (e == 0.0)
                  | ((lo32 == hi32) & (math.copysign(1.0, lo32) == math.copysign(1.0, hi32)))
                  | (x - x != 0.0))
            flag[j] = not ok
            flagged |= not ok
        if flagged:
            for j in range(N):
                if flag[j]:
                    oi[j] = _exact_dot(a[p, i], b[p], j, acc)


def certify_gemm(a: npt.NDArray[np.float32], b: npt.NDArray[np.float32],
                 r: npt.NDArray[np.float64], precision: int) -> npt.NDArray[np.float32]:
    """``fl32(exact(a @ b))`` from the float64 GEMM ``r``: certified by the bound, else
    summed exactly. ``a`` (P, M, K), ``b`` (P, K, N), ``r`` (P, M, N), C-contiguous
    float32 operands (the exact accumulator spans their products' range)."""
    P, M, K = a.shape
    N = b.shape[2]
    na, qa = np.empty((P, M)), np.empty((P, M))
    nb_, qb = np.empty((P, N)), np.empty((P, N))
    _bounds(a, b, precision, na, qa, nb_, qb)
    out = np.empty((P * M, N), np.float32)
    run_blocks(_certify_rows, P * M, r.reshape(P * M, N), a, b, na, qa, nb_, qb, M, K, out,
               min_parallel=max(1, (1 << 17) // max(N, 1)))
    return out.reshape(r.shape)


def certify_rows(x: npt.NDArray[np.float32], r: npt.NDArray[np.float64],
                 precision: int = 24) -> npt.NDArray[np.float32]:
    """The same for sums: ``x`` (R, n) C-contiguous float32, ``r`` (R,) its float64 row
    sums; the bound is ``sum |x|`` itself (a column of ones as the other operand)."""
    R, n = x.shape
    out = np.empty((R, 1), np.float32)
    s1, q = np.empty((1, R)), np.empty((1, R))
    _abs_bounds(x, precision, s1[0], q[0])
    ones = np.ones((1, n, 1), np.float32)
    _certify_rows(frozen(r.reshape(R, 1)), x.reshape(1, R, n), frozen(ones), s1, q,
                  np.ones((1, 1)), np.zeros((1, 1)), R, n, out, 0, R)
    return out.reshape(R)


@nb.njit(cache=CACHE, nogil=True)
def _abs_bounds(x: Any, precision: int, s1: Any, q: Any) -> None:
    """Per row: ``sum |x|`` with the factor covering its own float64 rounding (the sum
    of |x| loses at most gamma(n) relative in any order), and the quantum bound."""
    R, n = x.shape
    grow = 1.0 + _gamma(n + 4)
    for i in range(R):
        s, mn = 0.0, np.inf
        row = x[i]
        for k in range(n):
            av = abs(np.float64(row[k]))
            s += av
            if av > 0.0 and av < mn:
                mn = av
        s1[i] = s * grow
        q[i] = _quantum(mn, precision)


# -- exact fallback: a fixed-point accumulator of the products ------------------------
#: bit 0 of the accumulator is 2^-_BASE: below the lowest bit of any product of two
#: float32 values (2^-298, whose significand frexp scales by 2^-53 more)
_BASE = 352
_LIMBS = 21  # 32-bit limbs in int64 words: 672 bits, past |K * 2^256| for K < 2^40


@nb.njit(cache=CACHE)
def _add_term(acc: Any, p: float) -> None:
    """acc += p exactly: p = m 2^(e-53) with |m| < 2^53 an integer (p is a product of two
    float32 values, exact in float64), added as 32-bit pieces into three limbs."""
    if p == 0.0:
        return
    m, e = math.frexp(p)
    mi = np.int64(m * 9007199254740992.0)  # m * 2^53, an integer
    off = e - 53 + _BASE
    limb, sh = off // 32, off % 32
    neg = mi < 0
    mag = -mi if neg else mi
    lo = (mag & ((np.int64(1) << (32 - sh)) - 1)) << sh
    rest = mag >> (32 - sh)
    mid = rest & 0xFFFFFFFF
    hi = rest >> 32
    if neg:
        lo, mid, hi = -lo, -mid, -hi
    acc[limb] += lo
    acc[limb + 1] += mid
    acc[limb + 2] += hi


@nb.njit(cache=CACHE)
def _round_acc(acc: Any) -> np.float32:
    """fl32 (nearest-even) of the accumulator's exact value; an exact zero gives +0."""
    # why long: carry propagation, sign, the top bit and one correctly rounded extraction
    # are one computation on the same limbs
    for i in range(_LIMBS - 1):  # carries: every limb into [0, 2^32), the sign on top
        acc[i + 1] += acc[i] >> 32
        acc[i] &= 0xFFFFFFFF
    neg = acc[_LIMBS - 1] < 0
    if neg:  # two's complement over the limbs
        carry = np.int64(1)
        for i in range(_LIMBS):
            v = (~acc[i] & 0xFFFFFFFF) + carry
            acc[i] = v & 0xFFFFFFFF
            carry = v >> 32
    top = -1
    for i in range(_LIMBS - 1, -1, -1):
        if acc[i] != 0:
            top = i * 32 + 63 - _clz64(acc[i])
            break
    if top < 0:
        return np.float32(0.0)
    # keep 24 bits, or down to 2^-149 below float32's normal range
    shift = max(top - 23, -149 + _BASE)
    q = _bits(acc, shift, 25)  # the kept bits and the round bit
    sticky = _any_below(acc, shift - 1)
    rb = q & 1
    q >>= 1
    if rb == 1 and (sticky or (q & 1) == 1):
        q += 1
    v = math.ldexp(np.float64(q), shift - _BASE)
    return np.float32(-v if neg else v)


@nb.njit(inline="always", cache=CACHE)
def _clz64(x: np.int64) -> int:
    n = 0
    while n < 64 and ((x >> (63 - n)) & 1) == 0:
        n += 1
    return n


@nb.njit(cache=CACHE)
def _bits(acc: Any, lo: int, count: int) -> np.int64:
    """Bits lo-1 .. lo+count-2 of the accumulator (``count`` bits from one below ``lo``)."""
    out = np.int64(0)
    for k in range(count):
        b = lo - 1 + k
        if b >= 0 and (acc[b // 32] >> (b % 32)) & 1:
            out |= np.int64(1) << k
    return out


@nb.njit(cache=CACHE)
def _any_below(acc: Any, b: int) -> bool:
    """True if any bit below bit ``b`` is set."""
    if b <= 0:
        return False
    limb, sh = b // 32, b % 32
    if acc[limb] & ((np.int64(1) << sh) - 1):
        return True
    for i in range(limb):
        if acc[i] != 0:
            return True
    return False


@nb.njit(cache=CACHE)
def _exact_dot(arow: Any, b: Any, j: int, acc: Any) -> np.float32:
    """fl32 of the exact sum of arow[k] * b[k, j] (float32 values: every product is exact
    in float64 and lies in the accumulator's span)."""
    acc[:] = 0
    for k in range(arow.size):
        _add_term(acc, np.float64(arow[k]) * np.float64(b[k, j]))
    return _round_acc(acc)
