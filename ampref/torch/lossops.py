"""aten's binary cross entropies and robust regression losses on ampref's numerics
(``specs/torch.md`` TRC-NN-006).

Each elementwise loss is torch's CPU formula in float32 steps (the function values in it,
log sigmoid, evaluated in float64 and rounded to float32, TRC-PWO-001), rounded to the
input's dtype after every step torch writes to a tensor; ``mean`` and ``sum`` are the
engine's exactly rounded reductions of that tensor (TRC-NN-001). Where torch's
vectorised and scalar paths round differently (``smooth_l1_loss_backward`` with beta
not a power of two), the vectorised path, which every element but a tensor's short tail
takes, is the definition. ``binary_cross_entropy`` is the engine's (ENG-LOS-001).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from ampref.engine import functional as F

from .convert import dtype_steps, from_numpy, meta, to_numpy
from .replay import as_torch, forward, replay

__all__ = ["LOSSES", "REDUCTIONS", "arg", "compute_format", "loss_norm", "reduced", "step",
           "values"]

Handler = Callable[[Any, Any, tuple[Any, ...], dict[str, Any]], Any]

#: aten's reduction codes
REDUCTIONS = {0: "none", 1: "mean", 2: "sum"}


def arg(args: tuple[Any, ...], kw: dict[str, Any], i: int, name: str, default: Any) -> Any:
    return args[i] if len(args) > i else kw.get(name, default)


def compute_format(t: torch.Tensor) -> Any:
    return np.float64 if t.dtype == torch.float64 else np.float32


def step(v: Any, dtype: torch.dtype) -> Any:
    """One of torch's intermediate tensors: the float32 value rounded to ``dtype``."""
    if dtype in (torch.float32, torch.float64):
        return v
    return to_numpy(from_numpy(v, dtype)).astype(np.float32)


def reduced(loss: Any, dtype: torch.dtype, reduction: int, out_dtype: torch.dtype) -> Any:
    """The elementwise loss in ``dtype``, then torch's apply_loss_reduction with the
    engine's mean or sum (exactly rounded)."""
    t = from_numpy(loss, dtype)
    red = REDUCTIONS[int(reduction)]
    if red == "none":
        return t
    return as_torch(forward(F.mean if red == "mean" else F.sum, t), out_dtype)


def values(cf: Any, *ts: Any) -> list[Any]:
    return [to_numpy(t).astype(cf) if isinstance(t, torch.Tensor) else t for t in ts]


# -- binary cross entropy ---------------------------------------------------------------
def _bce(ctx: Any, func: Any, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
    """The engine's ``binary_cross_entropy`` (torch's: logs clamped at -100); with a
    weight, torch's order: the elementwise loss, times the weight, then the reduction."""
    x, t = args[:2]
    weight = arg(args, kw, 2, "weight", None)
    reduction = int(arg(args, kw, 3, "reduction", 1))
    out = meta(func, args, kw)
    if weight is None:
        return as_torch(forward(F.binary_cross_entropy, x, t, reduction=REDUCTIONS[reduction]),
                        out.dtype)
    cf, dt = compute_format(x), x.dtype
    loss = to_numpy(as_torch(forward(F.binary_cross_entropy, x, t, reduction="none"),
                             dt)).astype(cf)
    (w,) = values(cf, weight)
    with np.errstate(all="ignore"):
        loss = step(loss * w, dt)
    return reduced(loss, dt, reduction, out.dtype)


def _bce_bwd(ctx: Any, func: Any, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
    """The engine's backward; with a weight torch's order: ``g (x - t) / max((1 - x) x,
    1e-12)``, times the weight, then ``/ n`` for the mean, each step rounded."""
    g, x, t = args[:3]
    weight = arg(args, kw, 3, "weight", None)
    reduction = int(arg(args, kw, 4, "reduction", 1))
    red = REDUCTIONS[reduction]
    if weight is None:
        return replay(F.binary_cross_entropy, [x, t], [True, False], g, reduction=red)[0]
    cf, dt = compute_format(x), x.dtype
    spread = torch.broadcast_to(g, tuple(x.shape))
    (gx,) = values(cf, replay(F.binary_cross_entropy, [x, t], [True, False], spread,
                              reduction="none")[0])
    (w,) = values(cf, weight)
    with np.errstate(all="ignore"):
        gx = step(gx * w, dt)
        if red == "mean":
            gx = step(gx / cf(max(x.numel(), 1)), dt)
    return from_numpy(np.broadcast_to(gx, tuple(x.shape)), dt)


def _bce_logits(ctx: Any, func: Any, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
    """torch's composite: ls = log_sigmoid(x); with pos_weight, ls *= (pw - 1) t + 1;
    loss = (1 - t) x - ls; with weight, loss *= w; then the reduction. Every step is a
    tensor of x's dtype in torch, so each is rounded to it."""
    x, t = args[:2]
    weight, pos_weight = arg(args, kw, 2, "weight", None), arg(args, kw, 3, "pos_weight", None)
    reduction = arg(args, kw, 4, "reduction", 1)
    dt, cf = x.dtype, compute_format(x)
    xv, tv = values(cf, x, t)
    one = cf(1)
    with np.errstate(all="ignore"):
        ls = step((np.minimum(xv.astype(np.float64), 0.0) - np.log1p(np.exp(
            -np.abs(xv.astype(np.float64))))).astype(cf), dt)
        if pos_weight is not None:
            (pw,) = values(cf, pos_weight)
            lw = step(step(step(pw - one, dt) * tv, dt) + one, dt)
            ls = step(ls * lw, dt)
        loss = step(step(step(one - tv, dt) * xv, dt) - ls, dt)
        if weight is not None:
            (w,) = values(cf, weight)
            loss = step(loss * w, dt)
    return reduced(loss, dt, reduction, meta(func, args, kw).dtype)


# -- smooth L1 and Huber ---------------------------------------------------------------
def _robust(func: Any, args: tuple[Any, ...], kw: dict[str, Any], name: str,
            loss: Callable[..., Any], in_dtype: frozenset[torch.dtype]) -> Any:
    """The elementwise ``loss(z, param, 0.5, r)`` of z = |x - y| in the compute format,
    then the reduction (smooth L1's beta, Huber's delta as ``param``); for an input dtype
    in ``in_dtype`` every step (``param`` too) is rounded to it by ``r``, as torch's
    16-bit kernel for that loss computes (TRC-NN-006)."""
    x, y = args[:2]
    reduction, param = arg(args, kw, 2, "reduction", 1), arg(args, kw, 3, name, 1.0)
    cf = compute_format(x)
    xv, yv = values(cf, x, y)
    r = dtype_steps(x.dtype) if x.dtype in in_dtype else (lambda v: v)
    with np.errstate(all="ignore"):
        out = loss(r(np.abs(xv - yv)), r(cf(param)), cf(0.5), r)
    return reduced(out, x.dtype, reduction, meta(func, args, kw).dtype)


def _smooth_l1(ctx: Any, func: Any, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
    """z = |x - y|; z < beta ? 0.5 z z / beta : z - 0.5 beta (float32 steps; float16's
    kernel rounds every step to float16)."""
    return _robust(func, args, kw, "beta", lambda z, b, half, r: np.where(
        z < b, r(r(r(half * z) * z) / b), r(z - r(half * b))), frozenset({torch.float16}))


def loss_norm(x: torch.Tensor, reduction: int, cf: Any) -> Any:
    """torch's norm: 1 / numel (double, then the compute format) for mean, else 1."""
    return cf(1.0 / x.numel()) if int(reduction) == 1 else cf(1)


def _smooth_l1_bwd(ctx: Any, func: Any, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
    """norm * (|d| >= beta ? sign(d) : d / beta) * g with d = x - y (torch's vectorised
    path); beta = 0 is L1's gradient norm * sgn(d) * g (torch runs l1_loss there)."""
    g, x, y, reduction, beta = args[:5]
    out = meta(func, args, kw)
    cf = compute_format(x)
    gv, xv, yv = values(cf, g, x, y)
    b, norm = cf(beta), loss_norm(x, reduction, cf)
    with np.errstate(all="ignore"):
        d = xv - yv
        if b == 0:
            r = norm * np.sign(d) * gv
        else:
            r = norm * np.where(np.abs(d) >= b, np.where(d > 0, cf(1), cf(-1)), d / b) * gv
    return from_numpy(np.broadcast_to(r, tuple(out.shape)), out.dtype)


def _huber(ctx: Any, func: Any, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
    """z = |x - y|; z < delta ? 0.5 z z : delta (z - 0.5 delta) (float32 steps;
    bfloat16's kernel rounds every step to bfloat16)."""
    return _robust(func, args, kw, "delta", lambda z, d, half, r: np.where(
        z < d, r(r(half * z) * z), r(d * r(z - r(half * d)))), frozenset({torch.bfloat16}))


def _huber_bwd(ctx: Any, func: Any, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
    """norm * clamp(x - y, -delta, delta) * g (torch's vectorised path; its 16-bit
    kernels round every step, norm and delta too, to the dtype)."""
    g, x, y, reduction, delta = args[:5]
    out = meta(func, args, kw)
    cf = compute_format(x)
    gv, xv, yv = values(cf, g, x, y)
    r = dtype_steps(x.dtype)  # torch's 16-bit kernel rounds each step to the dtype
    dl, norm = r(cf(delta)), r(loss_norm(x, reduction, cf))
    with np.errstate(all="ignore"):
        d = r(xv - yv)
        grad = r(r(norm * np.where(d < -dl, -dl, np.where(d > dl, dl, d))) * gv)
    return from_numpy(np.broadcast_to(grad, tuple(out.shape)), out.dtype)


#: aten op name (overload packet) -> handler
LOSSES: dict[str, Handler] = {
    "binary_cross_entropy": _bce, "binary_cross_entropy_backward": _bce_bwd,
    "binary_cross_entropy_with_logits": _bce_logits,
    "smooth_l1_loss": _smooth_l1, "smooth_l1_loss_backward": _smooth_l1_bwd,
    "huber_loss": _huber, "huber_loss_backward": _huber_bwd,
}
