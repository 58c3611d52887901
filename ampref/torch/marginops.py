"""aten's margin losses on ampref's numerics (``specs/torch.md`` TRC-NN-006):
``soft_margin_loss``, ``multi_margin_loss`` and ``multilabel_margin_loss`` with their
backward ops, torch's CPU kernels' float32 steps (function values evaluated in float64
and rounded, sums exact and rounded once; the reductions the engine's exactly rounded
mean and sum).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from ampref.accumulation import certified

from .convert import from_numpy, meta, to_numpy
from .lossops import arg, compute_format, loss_norm, reduced, step, values
from .pointwise import wide

__all__ = ["MARGINS"]

Handler = Callable[[Any, Any, tuple[Any, ...], dict[str, Any]], Any]


def _soft_margin(ctx: Any, func: Any, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
    """torch's in-place chain neg(x) * y -> exp -> log1p, each step a tensor of x's dtype
    (exp and log1p their float64 values rounded), then the reduction."""
    x, y = args[:2]
    reduction = arg(args, kw, 2, "reduction", 1)
    cf, dt = compute_format(x), x.dtype
    xv, yv = values(cf, x, y)
    with np.errstate(all="ignore"):
        u = step(-xv * yv, dt)
        e = step(wide(np.exp)(u), dt)
        r = step(wide(np.log1p)(e), dt)
    return reduced(r, dt, reduction, meta(func, args, kw).dtype)


def _soft_margin_bwd(ctx: Any, func: Any, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
    """torch's steps: z = exp(-y x); ((y z) (-norm)) / (z + 1) * g."""
    g, x, y = args[:3]
    reduction = arg(args, kw, 3, "reduction", 1)
    out = meta(func, args, kw)
    cf = compute_format(x)
    gv, xv, yv = values(cf, g, x, y)
    with np.errstate(all="ignore"):
        z = wide(np.exp)(-yv * xv)
        r = (yv * z) * -loss_norm(x, reduction, cf) / (z + cf(1)) * gv
    return from_numpy(np.broadcast_to(r, tuple(out.shape)), out.dtype)


def _margin_terms(x: Any, t: Any, margin: Any) -> tuple[Any, Any]:
    """Per row and class: z = fl(fl(margin - x_t) + x_d) and whether it counts (z > 0,
    d not the target)."""
    rows = np.arange(x.shape[0])
    xt = x[rows, t][:, None]
    with np.errstate(all="ignore"):
        z = (margin - xt) + x
    live = z > 0
    live[rows, t] = False
    return z, live


def _multi_margin(ctx: Any, func: Any, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
    """Per row fl32(exact sum over live classes of h) / dim with h = z (p = 1) or
    fl(z z), times the target's weight in float32; then the reduction."""
    x, target = args[:2]
    p, margin = int(arg(args, kw, 2, "p", 1)), arg(args, kw, 3, "margin", 1.0)
    weight, reduction = arg(args, kw, 4, "weight", None), arg(args, kw, 5, "reduction", 1)
    cf = compute_format(x)
    # a 0-d input is one sample of one class, as torch reads it
    xv = to_numpy(x).astype(cf).reshape(-1, x.shape[-1] if x.ndim else 1)
    t = to_numpy(target).reshape(-1)
    z, live = _margin_terms(xv, t, cf(margin))
    with np.errstate(all="ignore"):
        h = z if p == 1 else z * z
        if weight is not None:
            h = h * to_numpy(weight).astype(cf)[t][:, None]
        rows = certified.sum_f32(np.where(live, h, cf(0)).astype(np.float32), -1)
        rows = rows.astype(cf) / cf(xv.shape[1])
    out = meta(func, args, kw)
    if int(reduction) == 0:
        return from_numpy(rows.reshape(tuple(out.shape)), out.dtype)
    return reduced(rows, x.dtype, reduction, out.dtype)


def _multi_margin_bwd(ctx: Any, func: Any, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
    """torch's kernel: g = fl32(1 / (n dim)) (mean) or fl32(1 / dim); each live class
    gets h = g (p = 1) or fl(2g z), times the target's weight; the target gets -(exact
    sum of the h) rounded once; then each row times the upstream gradient."""
    go, x, target = args[:3]
    p, margin = int(arg(args, kw, 3, "p", 1)), arg(args, kw, 4, "margin", 1.0)
    weight, reduction = arg(args, kw, 5, "weight", None), arg(args, kw, 6, "reduction", 1)
    cf = compute_format(x)
    xv = to_numpy(x).astype(cf).reshape(-1, x.shape[-1] if x.ndim else 1)
    n, dim = xv.shape
    t = to_numpy(target).reshape(-1)
    z, live = _margin_terms(xv, t, cf(margin))
    g = cf(1.0 / (n * dim)) if int(reduction) == 1 else cf(1.0 / dim)
    with np.errstate(all="ignore"):
        h = np.broadcast_to(g, z.shape) if p == 1 else (cf(2) * g) * z
        if weight is not None:
            h = h * to_numpy(weight).astype(cf)[t][:, None]
        grad = np.where(live, h, cf(0))
        # torch subtracts from +0: a target without live classes gets +0, not -0
        grad[np.arange(n), t] = cf(0) - certified.sum_f32(grad.astype(np.float32),
                                                          -1).astype(cf)
        up = to_numpy(go).astype(cf)
        grad = grad * (up.reshape(-1, 1) if up.size == n and up.ndim else up.reshape(()))
    return from_numpy(grad.reshape(tuple(x.shape)), x.dtype)


def _label_pairs(x: Any, target: Any) -> tuple[Any, Any, Any, Any]:
    """Each row's target list (entries before its first -1) against every class that is
    not a target: z = fl(fl(1 - x_t) + x_d), live where z > 0. Returns z and live as
    (n, dim, dim) (target entry, class), the valid entries (n, dim), and is_target."""
    n, dim = x.shape
    bad = (target < -1) | (target >= dim)
    if np.any(bad):
        raise ValueError(f"multilabel_margin_loss: target {int(target[bad][0])} is out of "
                         f"range: entries must be class indices in [0, {dim}) or -1 "
                         f"(which ends a row's list)")
    valid = np.logical_and.accumulate(target >= 0, axis=-1)
    tgt = np.where(valid, target, 0)
    rows = np.arange(n)[:, None]
    is_target = np.zeros((n, dim), bool)
    is_target[np.broadcast_to(rows, tgt.shape)[valid], tgt[valid]] = True
    one = x.dtype.type(1)
    with np.errstate(all="ignore"):
        z = (one - x[rows, tgt])[:, :, None] + x[:, None, :]
    live = valid[:, :, None] & ~is_target[:, None, :] & (z > 0)
    return z, live, tgt, is_target


def _label_rows(x: torch.Tensor, target: torch.Tensor) -> tuple[Any, Any, Any]:
    """x and target as (n, dim) rows (a 1-d input is one row), x in its compute format."""
    cf = compute_format(x)
    dim = x.shape[-1] if x.ndim else 1
    return to_numpy(x).astype(cf).reshape(-1, dim), to_numpy(target).reshape(-1, dim), cf


def _multilabel(ctx: Any, func: Any, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
    """Per row fl32(exact sum of the live z) / dim in float32 (a target listed twice
    counts twice, as torch's loop); then the reduction; and is_target (1 at each row's
    targets, else 0)."""
    x, target = args[:2]
    reduction = int(arg(args, kw, 2, "reduction", 1))
    xv, t, cf = _label_rows(x, target)
    z, live, _, is_target = _label_pairs(xv, t)
    with np.errstate(all="ignore"):
        sums = certified.sum_f32(np.where(live, z, cf(0)).astype(np.float32), (1, 2))
        rows = sums.astype(cf) / cf(xv.shape[1])
    out, marks = meta(func, args, kw)
    flags = from_numpy(is_target.astype(cf).reshape(tuple(marks.shape)), marks.dtype)
    if reduction == 0 and target.ndim > 1:
        return from_numpy(rows.reshape(tuple(out.shape)), out.dtype), flags
    return reduced(rows, x.dtype, reduction or 2, out.dtype), flags


def _multilabel_bwd(ctx: Any, func: Any, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
    """torch's kernel: g = fl(1 / (n dim)) (mean) or fl(1 / dim); a class gets + g for
    each live pair it is the non-target of, a target - g for each of its live pairs:
    the exact sum rounded once (+0 where none); then times the upstream gradient."""
    go, x, target = args[:3]
    reduction = int(arg(args, kw, 3, "reduction", 1))
    xv, t, cf = _label_rows(x, target)
    n, dim = xv.shape
    _, live, tgt, is_target = _label_pairs(xv, t)
    g = float(cf(1.0 / (n * dim)) if reduction == 1 else cf(1.0 / dim))
    gains = live.sum(axis=1).astype(np.float64)  # live pairs per non-target class
    losses = np.zeros((n, dim))
    np.add.at(losses, (np.arange(n)[:, None], tgt), live.sum(axis=2))
    with np.errstate(all="ignore"):
        # counts times g are exact in float64; one rounding each; 0 - v keeps +0
        grad = np.where(is_target, 0.0 - losses * g, gains * g).astype(cf)
        up = to_numpy(go).astype(cf)
        grad = grad * (up.reshape(-1, 1) if up.ndim and up.size == n else up.reshape(()))
    return from_numpy(grad.reshape(tuple(x.shape)), x.dtype)


#: aten op name (overload packet) -> handler
MARGINS: dict[str, Handler] = {
    "soft_margin_loss": _soft_margin, "soft_margin_loss_backward": _soft_margin_bwd,
    "multi_margin_loss": _multi_margin, "multi_margin_loss_backward": _multi_margin_bwd,
    "multilabel_margin_loss_forward": _multilabel,
    "multilabel_margin_loss_backward": _multilabel_bwd,
}
