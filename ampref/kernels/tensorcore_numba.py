"""The tensor-core block-FMA GEMM model, compiled: D = A @ B + C, each output element a
chain of k-blocks, with the same bits as the NumPy specification's fast GEMM
(``gemm`` and ``_gemm_block`` in :mod:`ampref.accumulation.tensorcore`).

Per output element and block (``specs/accumulation.md`` ACC-TC-001..004): the block
exponent ``E`` is the largest product exponent ``ea + eb`` (zeros do not take part), the
addend's exponent (floor -126), the GPU's alignment floor ``L`` and a floor that keeps an
all-zero block finite; every product is truncated toward zero to a multiple of
``2^(E - frac_bits)`` and the integers are summed (exactly: they stay below 2^53), then
rounded to the output format by the encode kernel's general phase. All values are exact
in float64: products of inputs with at most 24-bit significands, power-of-two scales and
integers below 2^53. For a row of A the block exponents of all N columns are formed
first, then each product row is scaled and truncated across the columns, so the inner
loops run over contiguous columns and vectorise.
"""

from __future__ import annotations

from typing import Any

import numba as nb
import numpy as np
import numpy.typing as npt

from .jitcache import CACHE
from .general_numba import encode_one, unpack
from .bits import as_bits, as_float, as_float32
from .threads import run_blocks

__all__ = ["gemm_rows"]


@nb.njit(inline="always", cache=CACHE)
def _pow2(k: Any) -> float:
    """2^k as float64 for -1022 <= k <= 1023 (exact, from the exponent field)."""
    return as_float(np.uint64(k + 1023) << np.uint64(52))


@nb.njit(inline="always", cache=CACHE)
def _exponent(x: float, floor: int) -> int:
    """max(floor(log2 |x|), floor) for nonzero finite x; -16000 for zero."""
    if x == 0.0:
        return -16000
    e = int((as_bits(x) >> np.uint64(52)) & np.uint64(0x7FF)) - 1023
    if e == -1023:  # a float64 subnormal: below every floor used here
        return floor
    return max(e, floor)


@nb.njit(cache=CACHE)
def _fast_round(u: Any, f: Any) -> int:
    """The float32 word of the float64 ``s`` (bits ``u``) rounded to the float32-layout
    output format, for ``s`` zero or inside its normal range: the encode kernel's first
    tier (one rebias and one shift, toward zero or to nearest-even); -1 elsewhere, where
    the general phase decides (overflow, float32 subnormals)."""
    nearest, d0, maxc, shift = f[0] == 2, f[1], f[2], f[3]
    one = np.uint64(1)
    sign = u >> np.uint64(63)
    mag = u & np.uint64(0x7FFFFFFFFFFFFFFF)
    if mag == 0:
        return np.int64(sign << np.uint64(31))
    if mag < np.uint64(897 << 52):  # below float32's smallest normal
        return -1
    m2 = mag - np.uint64(896 << 52)
    code = ((m2 + ((m2 >> d0) & one) + (one << (d0 - one)) - one) >> d0 if nearest
            else m2 >> d0)
    if code > maxc:
        return -1
    return np.int64((code << shift) | (sign << np.uint64(31)))


@nb.njit(inline="always", cache=CACHE)
def _round_out(s: float, cr: Any, fast: Any, table: Any, shift: int) -> float:
    """``s`` rounded by the encode row ``cr`` (first tier for float32-layout outputs)."""
    u = as_bits(s)
    if table.size == 0 and fast[0] != 0:
        word = _fast_round(u, fast)
        if word >= 0:
            return np.float64(as_float32(np.uint32(word)))
    code, _ = encode_one(u, cr, np.uint64(0))
    if table.size:
        return np.float64(table[code])
    return np.float64(as_float32(np.uint32(code) << np.uint32(shift)))


@nb.njit(inline="always", cache=CACHE)
def _round_odd_sum(x: float, y: float) -> float:
    """float64 round-to-odd of the exact x + y (TwoSum, then the odd neighbour on the
    error's side): rounding it once more to float32 is the correctly rounded sum
    (``exactsum.add_rounded``; 53 >= 24 + 2 bits)."""
    s = x + y
    bb = s - x
    e = (x - (s - bb)) + (y - bb)
    u = as_bits(s)
    if e != 0.0 and s - s == 0.0 and (u & np.uint64(1)) == 0:
        up = (e > 0.0) == (s > 0.0)  # away from zero on the error's side
        u = u + np.uint64(1) if up else u - np.uint64(1)
        s = as_float(u)
    return s


@nb.njit(cache=CACHE, nogil=True)
def _rows(a: Any, b: Any, ea: Any, eb: Any, d0: Any, block: int, frac_bits: int, lim: int,
          e_min: int, c: Any, shift: int, table: Any, fast: Any, late: bool, c_late: Any,
          fast_late: Any, out: Any, lo: int, hi: int) -> None:
    """Rows lo..hi-1 of the GEMM: ``a`` (M, K), ``b`` (K, N) float64 values, ``ea``
    (M, K) / ``eb`` (K, N) their exponents, ``d0`` (M, N) the addend already in the
    output format; ``c`` the encode row of the output rounding, ``table`` its value
    table (empty: float32-layout codes shifted by ``shift``)."""
    # why long: the block loop with its exponent pass, the truncating product pass and
    # the rounding of each block's sum share the per-row scratch
    K, N = b.shape
    cr = unpack(c)
    cl = unpack(c_late)
    no_table = table[:0]
    use_fast = table.size == 0 and fast[0] != 0
    E = np.empty(N, np.int16)  # int16, as the specification: 16 lanes per vector max
    scale = np.empty(N)
    units = np.empty(N)
    d = np.empty(N)
    for i in range(lo, hi):
        d[:] = d0[i]
        for k0 in range(0, K, block):
            k1 = min(k0 + block, K)
            # the block exponent per column: products, addend, GPU floor, zero-block floor
            floor = max(lim, e_min)
            if late:  # a late addend (B200 FP8) joins after the block
                E[:] = floor
            else:
                for j in range(N):
                    E[j] = max(_exponent(d[j], -126), floor)
            for k in range(k0, k1):
                eak = ea[i, k]
                ebk = eb[k]
                for j in range(N):
                    E[j] = max(E[j], np.int16(eak + ebk[j]))
            for j in range(N):
                scale[j] = _pow2(frac_bits - np.int64(E[j]))
            if late:
                units[:] = 0.0
            else:
                for j in range(N):
                    units[j] = np.trunc(d[j] * scale[j])
            # products truncated to the block's quantum, summed exactly
            for k in range(k0, k1):
                aik = a[i, k]
                bk = b[k]
                for j in range(N):
                    units[j] += np.trunc(aik * bk[j] * scale[j])
            for j in range(N):
                sj = units[j] / scale[j]
                word = _fast_round(as_bits(sj), fast) if use_fast else -1
                res = (np.float64(as_float32(np.uint32(word))) if word >= 0
                       else _round_out(sj, cr, fast, table, shift))
                if late:  # one correctly rounded float32 addition of c (ACC-TC-006)
                    res = _round_out(_round_odd_sum(res, d[j]), cl, fast_late, no_table, 0)
                d[j] = res
        for j in range(N):
            out[i, j] = np.float32(d[j])


def gemm_rows(a: npt.NDArray[np.float64], b: npt.NDArray[np.float64], ea: npt.NDArray[Any],
              eb: npt.NDArray[Any], d0: npt.NDArray[np.float64], *, block: int,
              frac_bits: int, lim: int, e_min: int, constants: npt.NDArray[np.uint64],
              shift: int, table: npt.NDArray[Any], mantissa_bits: int, nearest: bool,
              late_constants: npt.NDArray[np.uint64] | None = None,
              late_nearest: bool = True) -> npt.NDArray[np.float32]:
    """The GEMM of :func:`_rows` over all rows, rows split across threads. The output
    rounding takes the first-tier shortcut of :func:`_fast_round` for float32-layout
    output formats (``mantissa_bits`` of them, toward zero or ``nearest``)."""
    M = a.shape[0]
    out = np.empty((M, b.shape[1]), np.float32)
    late = late_constants is not None
    run_blocks(_rows, M, a, b, ea, eb, d0, block, frac_bits, lim, e_min, constants, shift,
               table, _fast_row(mantissa_bits, nearest), late,
               late_constants if late else constants, _fast_row(23, late_nearest), out,
               min_parallel=2)
    return out


def _fast_row(mantissa_bits: int, nearest: bool) -> npt.NDArray[np.uint64]:
    """The constants of :func:`_fast_round` for a float32-layout format."""
    maxc = (254 << mantissa_bits) | ((1 << mantissa_bits) - 1)
    return np.array([2 if nearest else 1, 52 - mantissa_bits, maxc, 23 - mantissa_bits],
                    np.uint64)
