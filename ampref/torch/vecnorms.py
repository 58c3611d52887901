"""aten's vector norms on ampref's numerics (``specs/torch.md`` TRC-NN-001):
``linalg_vector_norm``, ``norm`` and ``_foreach_norm`` (gradient clipping) of any
order, over ``dim``.

Each order is a row of :data:`ORDERS`; every result is rounded to float32, then to the
output dtype (float64 tensors, or a float64 ``dtype``: the same rows in float64 instead,
:data:`ORDERS64`: exact sums rounded once to float64 by Shewchuk's ``fsum``, the squares
split exactly by an FMA; before 2026-11-27 a float64 input was first rounded to float32):

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
from ampref.formats.exactsum import fma64, sum64

from .convert import from_numpy, meta, to_numpy
from .indexops import scatter_sum

__all__ = ["ORDERS", "ORDERS64", "VECTOR_NORMS", "pair_distance", "vector_norm"]

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


def _fsum_rows(rows: Any) -> Any:
    """The exact sum of each float64 row rounded once (IEEE specials)."""
    return np.array([sum64(row) for row in rows], np.float64)


def _two64(rows: Any) -> Any:
    with np.errstate(all="ignore"):
        hi = rows * rows
        lo = fma64(rows, rows, -hi)  # hi + lo is x^2 exactly (no underflow below 2^-969)
        return np.sqrt(_fsum_rows(np.concatenate([hi, np.where(np.isfinite(hi), lo, 0.0)],
                                                 axis=-1)))


def _general64(p: float) -> Callable[[Any], Any]:
    def norm(rows: Any) -> Any:
        with np.errstate(all="ignore"):
            return np.sum(np.abs(rows) ** p, axis=-1) ** (1.0 / p)
    return norm


#: order -> the norm of each row of a (rows, n) float64 array, as float64
ORDERS64: dict[float, Callable[[Any], Any]] = {
    2.0: _two64,
    1.0: lambda rows: _fsum_rows(np.abs(rows)),
    math.inf: lambda rows: np.max(np.abs(rows), axis=-1),
    -math.inf: lambda rows: np.min(np.abs(rows), axis=-1),
    0.0: lambda rows: np.count_nonzero(rows, axis=-1).astype(np.float64),
}


def vector_norm(t: torch.Tensor, order: Any, out_dtype: torch.dtype, dim: Any = None,
                keep: bool = False) -> Any:
    """The ``order``-norm of ``t`` over ``dim`` (all axes when None or empty)."""
    wide = torch.float64 in (t.dtype, out_dtype)
    x = to_numpy(t).astype(np.float64 if wide else np.float32)
    # a 0-d tensor takes dim 0 or -1 (torch wraps it as one dim): its one element
    axes = tuple(range(x.ndim)) if (not dim and dim != 0) or x.ndim == 0 else tuple(
        d % x.ndim for d in (dim if isinstance(dim, (list, tuple)) else (dim,)))
    rest = [a for a in range(x.ndim) if a not in axes]
    rows = np.moveaxis(x, axes, tuple(range(len(rest), x.ndim))).reshape(
        (-1, math.prod(x.shape[a] for a in axes)))
    p = float(order)
    r = (ORDERS64.get(p, _general64(p)) if wide else ORDERS.get(p, _general(p)))(rows)
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


def _pairs(x1: Any, x2: Any) -> tuple[Any, Any, tuple[int, ...]]:
    """Every (row of x1, row of x2) pair of each batch as two (pairs, M) float32 arrays."""
    a, b = to_numpy(x1).astype(np.float32), to_numpy(x2).astype(np.float32)
    lead = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    a = np.broadcast_to(a, lead + a.shape[-2:])
    b = np.broadcast_to(b, lead + b.shape[-2:])
    shape = lead + (a.shape[-2], b.shape[-2])
    u = np.broadcast_to(a[..., :, None, :], shape + (a.shape[-1],)).reshape(-1, a.shape[-1])
    v = np.broadcast_to(b[..., None, :, :], shape + (b.shape[-1],)).reshape(-1, b.shape[-1])
    return u, v, shape


def _exact_dots(u: Any, v: Any) -> Any:
    """fl32(exact sum_k u_k v_k) per row of two float32-representable arrays."""
    return certified.matmul_f32(u[:, None, :], v[:, :, None])[:, 0, 0]


def pair_distance(u: Any, v: Any, p: float) -> Any:
    """The p-distance of each row pair, float32: p = 2 fl32(sqrt(fl32(exact sum (u -
    v)^2))) (one exact dot of [u, v, u] with [u, v, -2v]); p = 1 fl32(exact sum |u - v|)
    (the dot of [u, v] with [s, -s], s the sign of u - v); inf the largest |u - v| and 0
    the count of unequal entries; other p (sum |u - v|^p)^(1/p) in float64."""
    if p == 2.0:
        ss = _exact_dots(np.concatenate([u, v, u], 1), np.concatenate([u, v, -2 * v], 1))
        return np.sqrt(np.maximum(ss, 0).astype(np.float64)).astype(np.float32)
    if p == 1.0:
        sgn = np.sign(u.astype(np.float64) - v).astype(np.float32)
        return _exact_dots(np.concatenate([u, v], 1), np.concatenate([sgn, -sgn], 1))
    if p == 0.0:
        return np.count_nonzero(u != v, axis=-1).astype(np.float32)
    d = np.abs(u.astype(np.float64) - v.astype(np.float64))
    if math.isinf(p):
        return (np.max(d, -1) if p > 0 else np.min(d, -1)).astype(np.float32)
    with np.errstate(all="ignore"):
        return (np.sum(d**p, -1) ** (1.0 / p)).astype(np.float32)


def _cdist(ctx: Any, func: Any, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
    """``_cdist_forward``: the p-distance of every pair of rows (TRC-NN-001)."""
    x1, x2, p = args[:3]
    out = meta(func, args, kw)
    u, v, shape = _pairs(x1, x2)
    return from_numpy(pair_distance(u, v, float(p)).reshape(shape), out.dtype)


def _pair_terms(op: str, g: Any, dist: Any, u: Any, v: Any, p: Any) -> Any:
    """Per pair and feature torch's float32 gradient term, ``fl(fl(g d) / dist)`` (p = 2)
    or ``fl(g sign(d))`` (p = 1) with ``d = fl32(u - v)``, 0 where the distance is 0;
    other p are refused (``op`` names the caller)."""
    if float(p) not in (1.0, 2.0):
        raise NotImplementedError(f"ampref.torch: {op} backward for p={p!r} (1 and 2)")
    gv = to_numpy(g).astype(np.float32).reshape(-1, 1)
    dv = to_numpy(dist).astype(np.float32).reshape(-1, 1)
    with np.errstate(all="ignore"):
        d = u - v
        t = (gv * d) / dv if float(p) == 2.0 else gv * np.sign(d)
        return np.where(dv == 0, np.float32(0), t)


def _cdist_bwd(ctx: Any, func: Any, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
    """``_cdist_backward`` (x1's gradient; autograd calls it swapped for x2's): per pair
    and feature torch's float32 term, ``fl(fl(g d) / dist)`` (p = 2), ``fl(g sign(d))``
    (p = 1), with ``d = fl32(x1 - x2)`` and 0 where the distance is 0, summed exactly
    over the second set's rows; the result has the operands' broadcast batch dims, as
    torch's kernel's. Other p are refused."""
    g, x1, x2, p, dist = args[:5]
    u, v, shape = _pairs(x1, x2)
    t = _pair_terms("cdist", g, dist, u, v, p)
    terms = t.reshape(shape + (u.shape[-1],))  # (..., P, R, M): sum over R
    # torch's kernel returns the broadcast batch, not x1's (autograd sums it down to x1)
    r = certified.sum_f32(np.ascontiguousarray(terms), -2)
    return from_numpy(r, x1.dtype)


def _pair_rows(x: torch.Tensor) -> tuple[Any, Any, Any, Any]:
    """``pdist``'s pairs: rows i < j of x (n, M) in torch's order (i major), float32."""
    a = to_numpy(x).astype(np.float32)
    iu, ju = np.triu_indices(a.shape[0], 1)
    return a[iu], a[ju], iu, ju


def _pdist(ctx: Any, func: Any, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
    """``_pdist_forward``: the p-distance of each pair of rows i < j (TRC-NN-001)."""
    x, p = args[0], args[1] if len(args) > 1 else kw.get("p", 2.0)
    u, v, _, _ = _pair_rows(x)
    out = meta(func, args, kw)
    return from_numpy(pair_distance(u, v, float(p)).reshape(tuple(out.shape)), out.dtype)


def _pdist_bwd(ctx: Any, func: Any, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
    """``_pdist_backward``: each pair's float32 term as ``_cdist_backward``'s, added to
    row i and subtracted from row j; each row's terms summed exactly and rounded once.
    Other p than 1 and 2 are refused."""
    g, x, p, dist = args[:4]
    u, v, iu, ju = _pair_rows(x)
    t = _pair_terms("pdist", g, dist, u, v, p)
    n, m = x.shape
    cols = np.arange(m)
    dst = np.concatenate([iu[:, None] * m + cols, ju[:, None] * m + cols])
    r = scatter_sum(np.zeros(n * m, np.float32), dst, np.concatenate([t, -t]))
    return from_numpy(r.reshape(n, m), x.dtype)


#: aten op name (overload packet) -> handler
VECTOR_NORMS: dict[str, Handler] = {
    "_cdist_forward": _cdist, "_cdist_backward": _cdist_bwd,
    "linalg_vector_norm": _vector_norm, "norm": _norm, "_foreach_norm": _foreach_norm,
    "dist": _dist, "_pdist_forward": _pdist, "_pdist_backward": _pdist_bwd,
}
