"""aten's statistics reductions on ampref's numerics (``specs/torch.md`` TRC-RED-001):
``logsumexp``, ``var`` / ``std`` (and ``var_mean`` / ``std_mean``) with any
``correction``, and ``cumsum``.

* ``logsumexp``: ``m + log(sum exp(x - m))`` over ``dim`` in float64 with ``m`` the
  maximum (``m`` replaced by 0 where it is infinite, as torch), rounded to float32:
  all ``-inf`` gives ``-inf``, a ``+inf`` gives ``+inf``, NaN propagates.
* ``var``: the two-pass ``sum (x - mean)^2 / max(0, n - correction)`` in float64 (mean
  in float64), rounded to float32; ``std`` its float64 square root, rounded.
  ``n - correction <= 0`` divides by zero (inf, or NaN for a zero sum), as torch. Bound:
  for float32 inputs the float64 value's relative error is below ``(n + 3) 2^-52``
  plus ``(n 2^-53 |mean| / std)^2``, so the float32 result is the exactly rounded
  variance except within that distance of a rounding boundary. ``*_mean`` return the
  engine's mean (the exact sum rounded to float32, divided by ``n`` in float32).
* ``cumsum``: each prefix's exact sum rounded once to float32 (the engine's sum over
  the prefix), then to the output dtype (``dtype=`` respected).
* ``nansum`` (since 2026-11-27): ``sum`` with every NaN replaced by +0 first (torch's
  rule; so a slice of NaNs sums to +0); ``nanmean`` is torch's composite of it.
* ``logcumsumexp`` (since 2026-11-27): each prefix's ``log(sum exp)`` as the float64
  running ``logaddexp``, rounded to float32: within ``2 n`` float64 ulps of the exact
  value (n the prefix length), not claimed exactly rounded; ``-inf`` prefixes stay
  ``-inf``, NaN propagates.
* ``prod``, ``cumprod`` (since 2026-11-27): the exact product (each prefix's) rounded
  once to float32 (float64 for float64 outputs; ACC-EXA-002), then to the output dtype;
  NaN, inf with 0, signed zeros as IEEE multiplication. ``dtype=`` casts the input to
  that dtype first (rounding once; integers through float64), as torch. Their backward
  formulas are torch's, issued as these and pointwise ops.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from ampref.accumulation import certified
from ampref.engine import functional as F
from ampref.formats.exactprod import products

from .convert import format_of, from_numpy, meta, to_numpy
from .replay import as_torch, forward

__all__ = ["STATS"]

Handler = Callable[[Any, Any, tuple[Any, ...], dict[str, Any]], Any]

#: elements per triangular block of the exact prefix sums (memory, not numerics)
_PREFIX_BLOCK = 1 << 22


def _dims(x: Any, dim: Any) -> tuple[int, ...]:
    if dim is None or (isinstance(dim, (list, tuple)) and len(dim) == 0):
        return tuple(range(x.ndim))
    dims = dim if isinstance(dim, (list, tuple)) else (dim,)
    # a 0-d tensor takes dim 0 or -1 (torch wraps it as one dim): nothing to reduce over
    return tuple(d % x.ndim for d in dims) if x.ndim else ()


def _logsumexp(ctx: Any, func: Any, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
    x, dim = args[0], args[1] if len(args) > 1 else kw["dim"]
    keep = bool(args[2] if len(args) > 2 else kw.get("keepdim", False))
    out = meta(func, args, kw)
    v = to_numpy(x).astype(np.float64)
    axes = _dims(v, dim)
    with np.errstate(all="ignore"):
        m = np.max(v, axis=axes, keepdims=True) if v.size else np.zeros(
            [1 if a in axes else n for a, n in enumerate(v.shape)])
        m = np.where(np.isinf(m), 0.0, m)
        r = m + np.log(np.sum(np.exp(v - m), axis=axes, keepdims=True))
    if not keep:
        r = r.reshape(tuple(out.shape))
    # float64 outputs keep the float64 evaluation (rounding it to float32 first lost
    # half its digits); the others are rounded to float32, then to their dtype
    return from_numpy(r if out.dtype == torch.float64 else r.astype(np.float32), out.dtype)


def _moments(x: torch.Tensor, dim: Any, correction: Any, keep: bool, root: bool) -> Any:
    """The float64 two-pass variance (or its square root) over ``dim``, as float32 (as
    float64 for a float64 tensor)."""
    v = to_numpy(x).astype(np.float64)
    axes = _dims(v, dim)
    n = math.prod(v.shape[a] for a in axes)
    c = 1.0 if correction is None else float(correction)
    with np.errstate(all="ignore"):
        mu = np.mean(v, axis=axes, keepdims=True)
        s = np.sum((v - mu) ** 2, axis=axes, keepdims=keep)
        var = s / max(0.0, n - c)
        r = np.sqrt(var) if root else var
        return r if x.dtype == torch.float64 else r.astype(np.float32)


def _var(root: bool, with_mean: bool) -> Handler:
    def handler(ctx: Any, func: Any, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
        x = args[0]
        dim = args[1] if len(args) > 1 else kw.get("dim")
        keep = bool(kw.get("keepdim", False))
        out = meta(func, args, kw)
        r = _moments(x, dim, kw.get("correction"), keep, root)
        first = out[0] if with_mean else out
        stat = from_numpy(r.reshape(tuple(first.shape)), first.dtype)
        if not with_mean:
            return stat
        v = to_numpy(x)
        axes = _dims(v, dim)
        n = math.prod(v.shape[a] for a in axes)
        with np.errstate(all="ignore"):
            mean = (np.sum(v, axes, keepdims=keep) / n if v.dtype == np.float64
                    else certified.sum_f32(v.astype(np.float32), axes, keep) / np.float32(n))
        return stat, from_numpy(np.asarray(mean).reshape(tuple(out[1].shape)), out[1].dtype)
    return handler


def _prefix_sums(rows: Any) -> Any:
    """Exact prefix sums of each row of (r, n) float32, rounded once to float32."""
    r, n = rows.shape
    tri = np.tril(np.ones((n, n), bool))
    out = np.empty((r, n), np.float32)
    step = max(1, _PREFIX_BLOCK // max(n * n, 1))
    for a in range(0, r, step):
        block = np.where(tri[None], rows[a:a + step, None, :], np.float32(0))
        out[a:a + step] = certified.sum_f32(block, -1)
    return out


def _cumsum(ctx: Any, func: Any, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
    x, dim = args[0], args[1] if len(args) > 1 else kw["dim"]
    out = meta(func, args, kw)
    if not out.dtype.is_floating_point:
        return func(*args, **kw)
    v = to_numpy(x).astype(np.float64 if out.dtype == torch.float64 else np.float32)
    if v.ndim == 0:
        return from_numpy(v, out.dtype)
    moved = np.moveaxis(v, dim, -1)
    flat = moved.reshape(-1, moved.shape[-1])
    if v.dtype == np.float64:
        sums = np.cumsum(flat, axis=-1)
    else:
        sums = _prefix_sums(flat)
    return from_numpy(np.moveaxis(sums.reshape(moved.shape), -1, dim), out.dtype)


def _product(cumulative: bool) -> Handler:
    def handler(ctx: Any, func: Any, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
        out = meta(func, args, kw)
        x = args[0]
        if x.dtype != out.dtype:  # dtype=: torch casts the input first, so do we
            x = from_numpy(to_numpy(x).astype(np.float64), out.dtype)
        v = to_numpy(x)
        target = np.float64 if out.dtype == torch.float64 else np.float32
        if cumulative or len(args) > 1 or "dim" in kw:
            dim = args[1] if len(args) > 1 else kw["dim"]
            r = products(v.reshape(v.shape or (1,)), int(dim) % max(v.ndim, 1),
                         cumulative=cumulative, out=target)
        else:
            r = products(v.reshape(-1), out=target)
        return from_numpy(np.asarray(r).reshape(tuple(out.shape)), out.dtype)
    return handler


def _nansum(ctx: Any, func: Any, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
    x = args[0]
    dim = args[1] if len(args) > 1 else kw.get("dim")
    keep = bool(args[2] if len(args) > 2 else kw.get("keepdim", False))
    out = meta(func, args, kw)
    v = to_numpy(x)
    clean = from_numpy(np.where(np.isnan(v), v.dtype.type(0), v), x.dtype)
    axes = _dims(v, dim)
    r = forward(lambda t: F.sum(t, axes, keep, dtype=format_of(out.dtype)), clean)
    return as_torch(r, out.dtype)


def _logcumsumexp(ctx: Any, func: Any, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
    x, dim = args[0], args[1] if len(args) > 1 else kw["dim"]
    out = meta(func, args, kw)
    v = to_numpy(x).astype(np.float64)
    if v.ndim == 0:
        return from_numpy(v, out.dtype)
    with np.errstate(all="ignore"):
        r = np.logaddexp.accumulate(v, axis=int(dim) % v.ndim)
    return from_numpy(r if out.dtype == torch.float64 else r.astype(np.float32), out.dtype)


#: aten op name (overload packet) -> handler
STATS: dict[str, Handler] = {
    "logsumexp": _logsumexp, "var": _var(False, False), "std": _var(True, False),
    "var_mean": _var(False, True), "std_mean": _var(True, True), "cumsum": _cumsum,
    "prod": _product(False), "cumprod": _product(True), "nansum": _nansum,
    "logcumsumexp": _logcumsumexp,
}
