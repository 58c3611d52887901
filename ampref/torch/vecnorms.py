"""aten's vector norms on ampref's numerics (``specs/torch.md`` TRC-NN-001):
``linalg_vector_norm``, ``norm`` and ``_foreach_norm`` (gradient clipping) of any
order, over ``dim``.

Each order is a row of :data:`ORDERS`; every result is rounded to float32, then to the
output dtype:

* 2: ``fl32(sqrt(fl32(exact sum x^2)))``, the square root in float64;
* 1: the exact sum of ``|x|`` rounded once;
* inf / -inf: the largest / smallest ``|x|`` (exact); 0: the count of nonzeros;
* any other p: ``(sum |x|^p)^(1/p)`` evaluated in float64 (``|x|^p`` and the root by
  ``pow``), rounded once: within float64's error of the exact value, not claimed
  exactly rounded.

NaN propagates in every order (``max``/``min`` included); an empty reduction is 0 for
the sums and the count, as torch (torch refuses inf / -inf norms of empty inputs).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from ampref.accumulation import certified

from .convert import from_numpy, meta, to_numpy

__all__ = ["ORDERS", "VECTOR_NORMS"]

Handler = Callable[[Any, Any, tuple[Any, ...], dict[str, Any]], Any]


def _two(rows: Any) -> Any:
    ss = certified.matmul_f32(rows[:, None, :], rows[:, :, None])[:, 0, 0]
    return np.sqrt(ss.astype(np.float64)).astype(np.float32)


def _general(p: float) -> Callable[[Any], Any]:
    def norm(rows: Any) -> Any:
        with np.errstate(all="ignore"):
            s = np.sum(np.abs(rows.astype(np.float64)) ** p, axis=-1)
            return (s ** (1.0 / p)).astype(np.float32)
    return norm


def _extreme(fn: Callable[..., Any]) -> Callable[[Any], Any]:
    # fmax would skip NaN: torch's max-norm of a NaN is NaN
    return lambda rows: fn(np.abs(rows), axis=-1).astype(np.float32)


#: order -> the norm of each row of a (rows, n) float32 array, as float32
ORDERS: dict[float, Callable[[Any], Any]] = {
    2.0: _two,
    1.0: lambda rows: certified.sum_f32(np.abs(rows), -1),
    math.inf: _extreme(np.max), -math.inf: _extreme(np.min),
    0.0: lambda rows: np.count_nonzero(rows, axis=-1).astype(np.float32),
}


def vector_norm(t: torch.Tensor, order: Any, out_dtype: torch.dtype, dim: Any = None,
                keep: bool = False) -> Any:
    """The ``order``-norm of ``t`` over ``dim`` (all axes when None or empty)."""
    x = to_numpy(t).astype(np.float32)
    axes = tuple(range(x.ndim)) if not dim and dim != 0 else tuple(d % x.ndim for d in (
        dim if isinstance(dim, (list, tuple)) else (dim,)))
    rest = [a for a in range(x.ndim) if a not in axes]
    rows = np.moveaxis(x, axes, tuple(range(len(rest), x.ndim))).reshape(
        (-1, math.prod(x.shape[a] for a in axes)))
    p = float(order)
    r = ORDERS.get(p, _general(p))(rows)
    shape = [1 if (keep and a in axes) else x.shape[a] for a in range(x.ndim)
             if keep or a not in axes]
    return from_numpy(np.asarray(r).reshape(shape), out_dtype)


def _vector_norm(ctx: Any, func: Any, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
    order = args[1] if len(args) > 1 else kw.get("ord", 2)
    out = meta(func, args, kw)
    return vector_norm(args[0], order, out.dtype, args[2] if len(args) > 2 else kw.get("dim"),
                       bool(args[3] if len(args) > 3 else kw.get("keepdim", False)))


def _norm(ctx: Any, func: Any, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
    """``torch.norm`` / ``aten.norm`` (PairwiseDistance, TripletMarginLoss): the
    vector norm of order ``p`` (None: 2) over ``dim``."""
    p = args[1] if len(args) > 1 else kw.get("p", 2)
    out = meta(func, args, kw)
    return vector_norm(args[0], 2 if p is None else p, out.dtype,
                       args[2] if len(args) > 2 else kw.get("dim"),
                       bool(args[3] if len(args) > 3 else kw.get("keepdim", False)))


def _foreach_norm(ctx: Any, func: Any, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
    order = args[1] if len(args) > 1 else kw.get("ord", 2)
    return [vector_norm(t, order, t.dtype) for t in args[0]]


def _dist(ctx: Any, func: Any, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
    """``torch.dist(x, y, p)``: the p-norm of the difference, which is first rounded to
    the compute format (torch's ``norm(x - y, p)``)."""
    x, y = args[:2]
    p = args[2] if len(args) > 2 else kw.get("p", 2)
    out = meta(func, args, kw)
    with np.errstate(all="ignore"):
        d = to_numpy(x).astype(np.float32) - to_numpy(y).astype(np.float32)
    return vector_norm(from_numpy(d, out.dtype), p, out.dtype)


#: aten op name (overload packet) -> handler
VECTOR_NORMS: dict[str, Handler] = {
    "linalg_vector_norm": _vector_norm, "norm": _norm, "_foreach_norm": _foreach_norm,
    "dist": _dist,
}
