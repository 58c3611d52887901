"""Sum-reductions across ranks, rounded per addition in a stated order (``specs/distributed.md``
DPL-RED-*): the arithmetic of an all-reduce of gradients.

Every rank's contribution is one row of ``stack`` (shape ``(ranks, n)``). Orders:

* ``ring``: gloo's ring all-reduce (``gloo/allreduce.cc``). The buffer is cut into
  ``ranks`` chunks on gloo's segment grid; chunk ``k`` starts at rank ``k - 1`` and travels
  to decreasing ranks, each adding its own value to what it received, and ends at rank
  ``k``: ``acc = x[k-1]; acc = x[k-2] + acc; ...; acc = x[k] + acc`` (ranks mod N).
* ``rank``: ``((x0 + x1) + x2) + ...``, the naive reduce in rank order.
* ``tree``: pairwise, ``(x0 + x1) + (x2 + x3)``; an odd row is carried up unchanged.
* ``exact``: the exactly rounded sum (float32 and float16 only).

Arithmetic: float32 additions are IEEE float32 adds (round to nearest even). A float16 or
bfloat16 reduction adds two values in float32 and rounds the sum to the format (c10's
``Half``/``BFloat16`` ``operator+``); the two roundings equal one rounding of the exact
sum (float32 has at least 2p + 2 bits for both formats). Inf and NaN propagate as IEEE
addition says: ``inf + -inf`` and anything with NaN is NaN; a finite sum beyond the
format's range becomes ±inf; subnormal sums are kept.
"""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np
import numpy.typing as npt

from ampref.accumulation.certified import sum_f32
from ampref.common.checks import check_count, real_array

__all__ = ["ORDERS", "REDUCE_DTYPES", "all_reduce", "ring_chunks", "to_reduce_dtype"]

ORDERS = ("ring", "rank", "tree", "exact")
REDUCE_DTYPES = ("float32", "bfloat16", "float16")
_DTYPES: dict[str, Any] = {"float32": np.float32, "bfloat16": ml_dtypes.bfloat16,
                           "float16": np.float16}
#: gloo's default cap on one segment of the ring (``AllreduceOptions::maxSegmentSize``
#: is unbounded unless the caller sets it; ProcessGroupGloo does not)
_NO_CAP = 1 << 62


def _check(order: str, dtype: str) -> None:
    if order not in ORDERS:
        raise ValueError(f"unknown reduction order {order!r}; choose one of {', '.join(ORDERS)}")
    if dtype not in REDUCE_DTYPES:
        raise ValueError(f"unknown reduce dtype {dtype!r}; choose one of "
                         f"{', '.join(REDUCE_DTYPES)}")
    if order == "exact" and dtype == "bfloat16":
        raise ValueError("order='exact' is defined for float32 and float16 reductions; "
                         "a bfloat16 sum needs a wider exact accumulator (use ring, rank "
                         "or tree)")


def to_reduce_dtype(x: npt.ArrayLike, dtype: str) -> npt.NDArray[Any]:
    """``x`` rounded to the reduce dtype (round to nearest even; overflow to ±inf)."""
    if dtype not in REDUCE_DTYPES:
        raise ValueError(f"unknown reduce dtype {dtype!r}; choose one of "
                         f"{', '.join(REDUCE_DTYPES)}")
    with np.errstate(over="ignore"):
        return real_array("x", x).astype(np.float32).astype(_DTYPES[dtype])


def _add(a: npt.NDArray[Any], b: npt.NDArray[Any], dtype: str) -> npt.NDArray[Any]:
    # one addition: float32 add, then (low formats) one rounding to the format
    with np.errstate(over="ignore", invalid="ignore"):
        s = a.astype(np.float32) + b.astype(np.float32)
        return s.astype(_DTYPES[dtype])


def ring_chunks(n: int, ranks: int, itemsize: int, max_segment_bytes: int = _NO_CAP
                ) -> list[tuple[int, int]]:
    """Element bounds ``[lo, hi)`` of the ``ranks`` chunks of gloo's ring all-reduce.

    gloo: segment bytes = roundUp(min(ceil(total / 2N), cap), itemsize); segments =
    roundUp(max(ceil(total / segment), 2N), N); chunk ``k`` holds segments
    ``k*s .. (k+1)*s - 1`` with ``s`` = segments / N. Trailing chunks may be short or empty.

    Raises:
        TypeError / ValueError: a count that is not an int, ``n`` < 0, ``ranks`` or
            ``itemsize`` < 1 (named).
    """
    n, ranks = check_count("n", n, lo=0), check_count("ranks", ranks)
    itemsize = check_count("itemsize", itemsize)
    max_segment_bytes = check_count("max_segment_bytes", max_segment_bytes)
    total = n * itemsize
    cap = itemsize * (max_segment_bytes // itemsize)
    seg = -(-min(-(-total // (2 * ranks)), cap) // itemsize) * itemsize
    seg = max(seg, itemsize)
    count = max(-(-total // seg), 2 * ranks)
    count = -(-count // ranks) * ranks
    per = count // ranks
    return [(min(n, k * per * seg // itemsize), min(n, (k + 1) * per * seg // itemsize))
            for k in range(ranks)]


def _fold(rows: list[npt.NDArray[Any]], dtype: str) -> npt.NDArray[Any]:
    acc = rows[0]
    for r in rows[1:]:
        acc = _add(r, acc, dtype)
    return acc


def _tree(rows: list[npt.NDArray[Any]], dtype: str) -> npt.NDArray[Any]:
    while len(rows) > 1:
        pairs = [_add(rows[i], rows[i + 1], dtype) for i in range(0, len(rows) - 1, 2)]
        rows = pairs + ([rows[-1]] if len(rows) % 2 else [])
    return rows[0]


def _ring(stack: npt.NDArray[Any], dtype: str) -> npt.NDArray[Any]:
    ranks, n = stack.shape
    out = np.empty(n, dtype=stack.dtype)
    for k, (lo, hi) in enumerate(ring_chunks(n, ranks, stack.dtype.itemsize)):
        if lo < hi:
            seq = [(k - 1 - i) % ranks for i in range(ranks)]
            out[lo:hi] = _fold([stack[r, lo:hi] for r in seq], dtype)
    return out


def _exact(stack: npt.NDArray[Any], dtype: str) -> npt.NDArray[Any]:
    if dtype == "float16":
        # float16 values are multiples of 2^-24 below 2^16: any sum of fewer than 2^13 of
        # them is exact in float64, so one rounding to float16 is the exactly rounded sum
        with np.errstate(over="ignore", invalid="ignore"):
            return np.asarray(stack.astype(np.float64).sum(axis=0).astype(np.float16))
    with np.errstate(over="ignore", invalid="ignore"):
        return np.asarray(sum_f32(stack.astype(np.float32), axis=0), dtype=np.float32)


def all_reduce(stack: npt.ArrayLike, *, order: str = "ring", dtype: str = "float32"
               ) -> npt.NDArray[Any]:
    """The sum over ranks (axis 0) of ``stack``, each row first rounded to ``dtype``,
    added in ``order``; the result is in ``dtype`` (a NumPy/ml_dtypes array).

    Raises:
        ValueError: unknown order or dtype, ``exact`` with bfloat16, fewer than one rank
            or a stack that is not two-dimensional.
    """
    _check(order, dtype)
    arr = real_array("stack", stack)
    if arr.ndim != 2 or arr.shape[0] < 1:
        raise ValueError(f"all_reduce takes a (ranks, n) stack with ranks >= 1, got shape "
                         f"{arr.shape}")
    low = to_reduce_dtype(arr, dtype) if arr.dtype != _DTYPES[dtype] else arr
    if order == "ring":
        return _ring(low, dtype)
    if order == "exact":
        return _exact(low, dtype)
    rows = [low[r] for r in range(low.shape[0])]
    return _fold(rows, dtype) if order == "rank" else _tree(rows, dtype)
