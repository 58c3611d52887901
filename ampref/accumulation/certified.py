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
2. Phase *bound*: ``S`` bounds ``sum_k |a_k b_k|`` per element: for matmuls
   ``||a_i||_2 ||b_j||_2`` from row and column norms (Cauchy-Schwarz; two passes over
   the operands instead of a second GEMM), and the GEMM ``|A| @ |B|`` only where that
   leaves more than 1/32 of the elements undecided; for sums ``sum |x|``. Where
   ``S <= 2^52 qa_i qb_j`` (``qa_i``,
   ``qb_j`` lower bounds of the quanta of row i of A and column j of B: the smallest
   nonzero magnitude's power of two times 2^(1-p) for p-bit inputs) every
   partial sum is a multiple of the products' common quantum below 2^53 of it, so ``r``
   is exact and ``e = 0``: with fp16/bf16 inputs this decides almost every element,
   exact float32 ties included. Otherwise ``e = 2 gamma(K + 2) S``.
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
   with integer arithmetic (:func:`ampref.formats.exactsum.round_odd_exact`, then one
   rounding).

Size (about 320 lines): the phases share the bound and certificate helpers; matmuls,
sums and segment sums are three front ends of one algorithm and stay beside it.

NaN/inf: a non-finite input makes ``r`` non-finite through IEEE float64 arithmetic,
which is what the exact model gives (inf + -inf = NaN); such elements are taken as
``fl32(r)``. Overflow of the float32 result gives ±inf. A zero result is +0.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import numpy.typing as npt

from ampref import kernels
from ampref.kernels.arrays import frozen
from .certify import (STATS, Stats, certify, column_norm_bounds, fits, gamma2, norm_bounds,
                      quantum_bound, range_factors, resolve, row_norm_bounds, tight_bound,
                      to_host)

__all__ = ["STATS", "Stats", "matmul_f32", "reduced_axes", "segment_sum_f32", "sum_f32"]


def matmul_f32(a: npt.NDArray[Any], b: npt.NDArray[Any], precision: int = 24,
               xp: Any = np) -> npt.NDArray[np.float32]:
    """``fl32(exact(a @ b))`` for float32-representable 2-D (or batched) operands.

    Batched operands (..., M, K) @ (..., K, N) broadcast like ``numpy.matmul``.
    ``precision`` (significant bits of the inputs' format: 24 for float32, 11 for
    float16, 8 for bfloat16) only sharpens the exact-by-range test; any value at least
    the true precision gives the same, exact, result.

    The bound on ``sum_k |a_k b_k|`` comes from row and column norms (Cauchy-Schwarz)
    rather than the GEMM ``|A| @ |B|``; where that leaves more than 1/32 of the
    elements undecided the GEMM bound is computed after all. Either way the result is
    the exactly rounded value: the bounds only decide how much work certifying takes.
    """
    if (xp is np and kernels.compiled() and np.ndim(a) >= 2 and np.ndim(b) >= 2
            and np.asarray(a).dtype == np.float32 and np.asarray(b).dtype == np.float32):
        return _matmul_compiled(a, b, precision)
    a_arr, b_arr = xp.asarray(a), xp.asarray(b)
    M, K = a_arr.shape[-2:]
    N = b_arr.shape[-1]
    lead = tuple(np.broadcast_shapes(tuple(a_arr.shape[:-2]), tuple(b_arr.shape[:-2])))
    if K == 0 or M * N * math.prod(lead) == 0:
        return xp.zeros(lead + (M, N), dtype=xp.float32)
    b64 = xp.asarray(b_arr, dtype=xp.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        nb = column_norm_bounds(b64, xp)
    qb = quantum_bound(b_arr, -2, precision, xp=xp)
    out = xp.empty(lead + (M, N), dtype=xp.float32)
    # row tiles and batches of undecided elements: each float64 working array holds at
    # most 1/TILE_SHARE of the operands' and output's elements (or MIN_TILE), so the
    # working memory stays a fixed multiple of operands + output (ENG-MM-003)
    budget = max(MIN_TILE if xp is np else DEVICE_MIN_TILE,
                 math.prod(lead) * (M * K + K * N + M * N) // TILE_SHARE)
    rows = max(1, budget // max(1, math.prod(lead) * (N + K)))
    for i in range(0, M, rows):
        out[..., i:i + rows, :] = _gemm_rows(a_arr[..., i:i + rows, :], b64, nb, qb,
                                             precision, budget, xp)
    return out


#: a working array of the generic exact GEMM holds at most 1/TILE_SHARE of the
#: operands' and output's elements (a row tile's products and bounds, a batch of
#: undecided elements' terms), but never needs to be smaller than MIN_TILE elements
TILE_SHARE = 8
MIN_TILE = 1 << 12
#: the floor on a GPU (128 MiB of float64): each tile and batch costs kernel launches and
#: host synchronisations: with the host's floor a training step's small GEMMs were cut
#: into several tiles each, and on the H100 (run 2) the exact 1024^3 GEMM fell from 0.57
#: to 0.08 TFLOP/s and GPU training took 3x longer; the memory bound stays a fixed
#: multiple of operands + output plus this constant
DEVICE_MIN_TILE = 1 << 24


def _gemm_rows(a_t: Any, b64: Any, nb: Any, qb: Any, precision: int, budget: int,
               xp: Any) -> npt.NDArray[np.float32]:
    """Phases 1-6 for a tile of rows of A against all of B (column bounds given)."""
    a64 = xp.asarray(a_t, dtype=xp.float64)
    K = a64.shape[-1]
    with np.errstate(over="ignore", invalid="ignore"):
        r = xp.matmul(a64, b64)
        na = row_norm_bounds(a64, xp)
        qa = quantum_bound(a_t, -1, precision, xp=xp)
        u, v = range_factors(na, nb, qa, qb, xp)
        # both range tests' products in one transfer (on a device each read of a value is
        # a host synchronisation); the same float64 products, compared on the host
        widest, narrowest = to_host(xp, xp.stack([xp.max(u) * xp.max(v),
                                                  xp.min(u) * xp.min(v)])).tolist()
        if widest * (1 + 2.0**-40) <= 1.0:
            # every partial sum of every element is exact in float64 (the common case
            # for fp16/bf16 operands): rounding r once is the answer, NaN/inf included
            STATS.elements += r.size
            return r.astype(xp.float32)
        e = (na * gamma2(K + 2) * 2.0)[..., :, None] * nb[..., None, :]
        if narrowest <= 1.0:
            exact = (u[..., :, None] * v[..., None, :]) * (1 + 2.0**-40) <= 1.0
            e = xp.where(exact, 0.0, e)
    out, bad = certify(r, e, xp)
    del e
    undecided = int(bad.sum())
    if undecided * 32 > max(r.size, 2048):
        STATS.elements -= r.size  # the same elements, certified again with the GEMM bound
        with np.errstate(over="ignore", invalid="ignore"):
            out, bad = certify(r, tight_bound(a64, b64, qa, qb, xp), xp)
    elif not undecided:  # known without a second read of ``bad``
        return out
    _resolve_gemm(out, bad, a64, b64, budget, xp)
    return out


def _resolve_gemm(out: Any, bad: Any, a64: Any, b64: Any, budget: int,
                  xp: Any = np) -> None:
    """Phases 4-6 for the elements ``bad`` of a GEMM: their own terms, summed exactly, in
    batches of at most ``budget`` terms (all of them at once could take K times the
    output's memory: 8.6 GB more at 4096^3 on the GPU)."""
    idx = xp.nonzero(bad)  # one read of the data-sized result, no separate test
    if not idx[0].size:
        return
    K = a64.shape[-1]
    ab = xp.broadcast_to(a64, out.shape[:-1] + (K,))
    bt = xp.broadcast_to(xp.swapaxes(b64, -1, -2), out.shape[:-2] + (out.shape[-1], K))
    step = max(1, budget // K)
    for s in range(0, int(idx[0].size), step):
        part = tuple(ix[s:s + step] for ix in idx)
        terms = ab[part[:-2] + (part[-2],)] * bt[part[:-2] + (part[-1],)]
        got = xp.empty(int(part[0].size), dtype=xp.float32)
        resolve(got, None, terms, xp)
        out[part] = got


def _matmul_compiled(a: Any, b: Any, precision: int) -> npt.NDArray[np.float32]:
    """:func:`matmul_f32` for float32 operands with phases 2-6 compiled
    (:mod:`ampref.kernels.certify_numba`): the same float64 GEMM, then one fused pass
    that certifies each element or sums it exactly in a fixed-point accumulator."""
    from ampref.kernels import certify_numba

    a_arr, b_arr = np.asarray(a), np.asarray(b)
    a64 = np.asarray(a_arr, dtype=np.float64)
    b64 = np.asarray(b_arr, dtype=np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        r = np.matmul(a64, b64)
    K = a64.shape[-1]
    if K == 0 or r.size == 0:
        return r.astype(np.float32)
    if _gemm_exact_by_range(a_arr, b_arr, a64, b64, precision):
        # every partial sum of every element is exact in float64 (the common case for
        # fp16/bf16 operands): r rounded once is the answer, as in matmul_f32's phase 2
        # (a sum past float32's range rounds to ±inf, without NumPy's warning)
        STATS.elements += r.size
        with np.errstate(over="ignore"):
            return r.astype(np.float32)
    M, N = r.shape[-2:]
    lead = r.shape[:-2]
    A = frozen(np.broadcast_to(a_arr, lead + (M, K))).reshape(-1, M, K)
    B = frozen(np.broadcast_to(b_arr, lead + (K, N))).reshape(-1, K, N)
    with np.errstate(over="ignore", invalid="ignore"):
        out = certify_numba.certify_gemm(A, B, frozen(r).reshape(-1, M, N), precision)
    STATS.elements += r.size
    return out.reshape(r.shape)


def _gemm_exact_by_range(a: Any, b: Any, a64: Any, b64: Any, precision: int) -> bool:
    """Phase 2's whole-GEMM test: every row-column pair passes the exact-by-range test
    (``u_i v_j <= 1`` for the largest ``u`` and ``v``), so no element needs certifying."""
    with np.errstate(over="ignore", invalid="ignore"):
        na, nb = norm_bounds(a64, b64)
        u, v = range_factors(na, nb, quantum_bound(a, -1, precision),
                              quantum_bound(b, -2, precision))
        top = float(np.max(u, initial=0.0)) * float(np.max(v, initial=0.0))
    return math.isfinite(top) and top * (1 + 2.0**-40) <= 1.0


def sum_f32(x: npt.NDArray[Any], axis: int | tuple[int, ...] | None = None,
            keepdims: bool = False, xp: Any = np) -> npt.NDArray[np.float32]:
    """``fl32(exact sum)`` of float32-representable values over ``axis``."""
    if xp is np and kernels.compiled() and np.asarray(x).dtype == np.float32:
        return _sum_compiled(np.asarray(x), axis, keepdims)
    x64 = xp.asarray(x, dtype=xp.float64)
    axes = reduced_axes(x64.ndim, axis)
    n = math.prod(x64.shape[ax] for ax in axes) if axes else 1
    with np.errstate(over="ignore", invalid="ignore"):
        r = xp.sum(x64, axis=axes, keepdims=True)
        S = xp.sum(xp.abs(x64), axis=axes, keepdims=True)
        e = gamma2(n + 2) * S * 2.0
        q = (quantum_bound(xp.asarray(x), axes, 24, keepdims=True, xp=xp) if x64.size
             else xp.zeros_like(r))
        e = xp.where(fits(S, q, xp), 0.0, e)
    out, bad = certify(r, e, xp)
    if bad.any():
        # rows of the reduced elements: move the reduced axes last and flatten them
        tail = tuple(range(x64.ndim - len(axes), x64.ndim))
        flat = xp.moveaxis(x64, axes, tail).reshape(-1, n)
        out_flat = xp.moveaxis(out, axes, tail).reshape(-1).copy()
        bad_flat = xp.moveaxis(bad, axes, tail).reshape(-1)
        resolve(out_flat, bad_flat, flat[bad_flat], xp)
        out = xp.moveaxis(out_flat.reshape(xp.moveaxis(out, axes, tail).shape), tail, axes)
    if not keepdims:
        out = out.reshape([s for i, s in enumerate(out.shape) if i not in axes])
    return xp.asarray(out, dtype=xp.float32)


def reduced_axes(ndim: int, axis: int | tuple[int, ...] | None) -> tuple[int, ...]:
    """The axes a sum over ``axis`` reduces, as non-negative ints (None: all of them)."""
    axes = tuple(range(ndim)) if axis is None else (
        (axis,) if isinstance(axis, int) else tuple(axis))
    return tuple(ax % ndim for ax in axes) if ndim else ()


def _sum_compiled(x: npt.NDArray[np.float32], axis: int | tuple[int, ...] | None,
                  keepdims: bool) -> npt.NDArray[np.float32]:
    """:func:`sum_f32` with the certify phase and the exact fallback compiled: the
    reduced axes moved last, one float64 sum per row, then :mod:`ampref.kernels.
    certify_numba` on the rows."""
    from ampref.kernels import certify_numba

    axes = reduced_axes(x.ndim, axis)
    tail = tuple(range(x.ndim - len(axes), x.ndim))
    moved = np.moveaxis(x, axes, tail)
    kept = moved.shape[:x.ndim - len(axes)]
    n = math.prod(moved.shape[len(kept):])
    # explicit row count: with n = 0 (a sum over an empty axis, 0) -1 is ambiguous
    rows = frozen(moved).reshape(math.prod(kept), n)
    with np.errstate(over="ignore", invalid="ignore"):
        # the specification's own float64 sum (same order, so the same NaN payloads)
        r = np.sum(x.astype(np.float64), axis=axes, keepdims=True)
        r = frozen(np.moveaxis(r, axes, tail)).reshape(-1)
        out = certify_numba.certify_rows(rows, r)
    STATS.elements += out.size
    out = out.reshape(kept)
    if keepdims:
        out = out.reshape([1 if i in axes else s for i, s in enumerate(x.shape)])
    return out


def segment_sum_f32(x: npt.NDArray[Any], starts: Any, xp: Any = np) -> npt.NDArray[np.float32]:
    """``fl32(exact sum)`` of each segment of rows of ``x`` (n, D): segment ``i`` is rows
    ``starts[i]`` up to the next start (``starts`` strictly increasing from 0, every
    segment non-empty). Row order inside a segment does not matter.

    Phases as :func:`sum_f32`, on ``add.reduceat`` sums (float64, sequential per
    segment): the bound ``gamma(m + 2) * 2 * sum |x|`` with ``m`` the longest segment,
    certify, and the exact fallback on the undecided elements' own terms. A zero result
    keeps the float64 sum's sign (-0 only when every term is -0); NaN and inf stay in
    their own segment.
    """
    x64 = xp.asarray(x, dtype=xp.float64)
    starts = xp.asarray(starts)
    n = x64.shape[0] if x64.ndim else 0
    if starts.ndim != 1 or starts.dtype.kind not in "iu" or not 0 < starts.size <= n:
        raise ValueError(f"segment starts must be a non-empty 1-D integer array of at most "
                         f"{n} row indices (x has shape {tuple(x64.shape)}), got "
                         f"{starts.dtype} array of shape {tuple(starts.shape)}")
    counts = xp.diff(xp.concatenate([starts, xp.asarray([n])]))
    if int(starts[0]) != 0 or int(counts.min()) < 1:
        raise ValueError(f"segment starts must begin at 0 and increase strictly below {n} "
                         f"(every segment non-empty), got {to_host(xp, starts).tolist()[:8]}")
    m = int(counts.max())
    with np.errstate(over="ignore", invalid="ignore"):
        r = xp.add.reduceat(x64, starts, axis=0)
        e = gamma2(m + 2) * xp.add.reduceat(xp.abs(x64), starts, axis=0) * 2.0
    out, bad = certify(r, e, xp)
    if bad.any():
        seg, col = xp.nonzero(bad)
        j = xp.arange(m)
        rows = xp.minimum(starts[seg][:, None] + j[None, :], n - 1)
        terms = xp.where(j[None, :] < counts[seg][:, None], x64[rows, col[:, None]], 0.0)
        resolve(out, bad, terms, xp)
    return out
