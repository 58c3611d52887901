"""aten's margin losses on ampref's numerics (``specs/torch.md`` TRC-NN-006):
``soft_margin_loss`` and ``multi_margin_loss`` with their backward ops, torch's CPU
kernels' float32 steps (function values evaluated in float64 and rounded, sums exact
and rounded once; the reductions the engine's exactly rounded mean and sum).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

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
    xv = to_numpy(x).astype(cf).reshape(-1, x.shape[-1])
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
    xv = to_numpy(x).astype(cf).reshape(-1, x.shape[-1])
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


#: aten op name (overload packet) -> handler
MARGINS: dict[str, Handler] = {
    "soft_margin_loss": _soft_margin, "soft_margin_loss_backward": _soft_margin_bwd,
    "multi_margin_loss": _multi_margin, "multi_margin_loss_backward": _multi_margin_bwd,
}
