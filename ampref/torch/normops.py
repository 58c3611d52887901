"""aten's softmax and normalisation ops on ampref's engine (``specs/torch.md``
TRC-NRM-*): softmax/log_softmax and layer norm are the engine's ops; batch and group
norm are the engine's layer norm over the channel's (batch norm) or the group's (group
norm) elements, followed by the per-channel affine as engine ``mul`` and ``add``; max
pooling moves values without rounding (its backward only where windows do not overlap).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from ampref.engine import functional as F
from ampref.engine.functional.norms import layer_norm_stats, log_softmax_grad, softmax_grad
from ampref.formats.table import get_format

from .convert import format_of, from_numpy, meta, to_numpy
from .evalnorm import batch_norm_eval, batch_norm_eval_backward
from .replay import NP, as_torch, forward, replay

__all__ = ["NORMS"]

Handler = Callable[[Any, Any, tuple[Any, ...], dict[str, Any]], Any]


def _softmax(log: bool) -> Handler:
    def handler(ctx: Any, func: Any, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
        x, dim, half_to_float = args
        out = meta(func, args, kw)
        op = F.log_softmax if log else F.softmax
        r = forward(lambda v: op(v, dim, dtype="float32" if half_to_float else None), x)
        return as_torch(r, out.dtype)
    return handler


def _safe_softmax(ctx: Any, func: Any, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
    """``_safe_softmax`` (attention with a boolean or -inf mask): the engine's softmax,
    and 0 on rows whose inputs are all -inf, where softmax gives NaN (TRC-NRM-004;
    torch's definition: ``where(all(x == -inf, dim), 0, softmax(x, dim, dtype))``)."""
    x, dim = args[:2]
    dtype = args[2] if len(args) > 2 else kw.get("dtype")
    out = meta(func, args, kw)
    r = forward(lambda v: F.softmax(v, dim, dtype=None if dtype is None else format_of(dtype)),
                x)
    vals = to_numpy(as_torch(r, out.dtype))
    X = to_numpy(x).reshape(x.shape or (1,))  # a 0-d operand: one element along dim 0 / -1
    dead = np.all(X == -np.inf, axis=dim, keepdims=True)
    dead = dead.reshape(()) if x.ndim == 0 else dead
    return from_numpy(np.where(dead, np.zeros_like(vals), vals), out.dtype)


def _softmax_bwd(log: bool) -> Handler:
    def handler(ctx: Any, func: Any, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
        g, y, dim, input_dtype = args
        cf = get_format("float64" if y.dtype == torch.float64 else "float32")
        # a 0-d operand is one element along torch's dim 0 / -1
        G, Y = to_numpy(g).reshape(y.shape or (1,)), to_numpy(y).reshape(y.shape or (1,))
        grad = (log_softmax_grad if log else softmax_grad)(NP, cf, G, Y, dim % Y.ndim)
        return from_numpy(grad.reshape(y.shape), input_dtype)
    return handler


def _stats(ctx: Any, x: Any, axes: tuple[int, ...], eps: float, out: Any) -> tuple[Any, Any]:
    """The engine's layer-norm mean and rstd of ``x`` over ``axes``, as torch returns them
    (rstd remembers eps for the backward op, which receives rstd but not eps)."""
    wide = x.dtype == torch.float64
    X = to_numpy(x).astype(np.float64 if wide else np.float32)
    mu, r = layer_norm_stats(NP, get_format("float64" if wide else "float32"), X, axes, eps)
    mean, rstd = from_numpy(mu.reshape(out[1].shape), out[1].dtype), \
        from_numpy(r.reshape(out[2].shape), out[2].dtype)
    ctx.saved_eps[rstd.data_ptr()] = eps
    return mean, rstd


def _defined_eps(eps: float, op: str) -> float:
    """``eps`` where ampref's engine defines the normalisation (a finite eps >= 0); torch
    takes any, so another is not an input error here but an op without a reference."""
    if not (math.isfinite(eps) and eps >= 0):
        raise NotImplementedError(f"{op} with eps={eps!r}: ampref's normalisations are "
                                  "defined for a finite eps >= 0")
    return eps


def _eps_of(ctx: Any, rstd: torch.Tensor) -> float:
    eps = ctx.saved_eps.get(rstd.data_ptr())
    if eps is None:
        raise NotImplementedError("a normalisation backward whose forward ran outside the "
                                  "emulation (its eps is unknown)")
    return float(eps)


def _layer_norm(ctx: Any, func: Any, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
    x, shape, w, b, eps = args
    eps = _defined_eps(eps, "layer norm")
    out = meta(func, args, kw)
    y = forward(lambda x_, w_, b_: F.layer_norm(x_, list(shape), w_, b_, eps), x, w, b)
    mean, rstd = _stats(ctx, x, tuple(range(x.ndim - len(shape), x.ndim)), eps, out)
    return as_torch(y, out[0].dtype), mean, rstd


def _layer_norm_bwd(ctx: Any, func: Any, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
    g, x, shape, _mean, rstd, w, b, mask = args
    eps = _eps_of(ctx, rstd)
    return tuple(replay(lambda x_, w_, b_: F.layer_norm(x_, list(shape), w_, b_, eps),
                        [x, w, b], [mask[0], mask[1] and w is not None,
                                    mask[2] and b is not None], g))


def _grouped(x: Any, w: Any, b: Any, groups: int, eps: float, channel_major: bool) -> Any:
    """Engine composite: layer norm over each channel's elements across the batch
    (``channel_major``, batch norm) or each sample's group (group norm), then x w + b
    per channel."""
    N, C = x.shape[0], x.shape[1]
    if channel_major:
        t = F.transpose(x, 0, 1)
        xhat = F.reshape(F.layer_norm(F.reshape(t, (C, -1)), [t.numel() // C], eps=eps), t.shape)
        xhat = F.transpose(xhat, 0, 1)
    else:
        flat = F.reshape(x, (N, groups, -1))
        xhat = F.reshape(F.layer_norm(flat, [flat.shape[-1]], eps=eps), x.shape)
    shape = (1, C) + (1,) * (x.ndim - 2)
    y = F.mul(xhat, F.reshape(w, shape)) if w is not None else xhat
    return F.add(y, F.reshape(b, shape)) if b is not None else y


def _batch_norm(ctx: Any, func: Any, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
    x, w, b, rm, rv, training, momentum, eps = args
    if not training:  # running statistics: torch's fused per-channel transform
        return batch_norm_eval(x, w, b, rm, rv, eps, func, args, kw)
    eps = _defined_eps(eps, "batch norm")
    out = meta(func, args, kw)
    y = forward(lambda x_, w_, b_: _grouped(x_, w_, b_, 1, eps, True), x, w, b)
    axes = (0,) + tuple(range(2, x.ndim))
    mean, rstd = _stats(ctx, x, axes, eps, out)
    if rm is not None and rv is not None:  # float32 updates, torch's formula order
        n = x.numel() // x.shape[1]
        m = np.float32(momentum)
        X = to_numpy(x).astype(np.float32)
        var = (np.sum((X - to_numpy(mean).reshape((1, -1) + (1,) * (x.ndim - 2))) ** 2,
                      axis=axes, dtype=np.float64) / max(n - 1, 1)).astype(np.float32)
        rm.copy_(torch.from_numpy(m * to_numpy(mean) + (np.float32(1) - m) * to_numpy(rm)))
        rv.copy_(torch.from_numpy(m * var + (np.float32(1) - m) * to_numpy(rv)))
    return as_torch(y, out[0].dtype), mean, rstd


def _batch_norm_bwd(ctx: Any, func: Any, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
    g, x, w, _rm, _rv, _sm, _sv, train, eps, mask = args
    if not train:
        return batch_norm_eval_backward(g, x, w, _rm, _rv, eps, mask)
    # its gradient is the engine's bias gradient, in the parameters' dtype as torch's
    # (float32 for a bf16/fp16 input under autocast)
    b0 = torch.zeros(x.shape[1], dtype=w.dtype if w is not None else x.dtype)
    return tuple(replay(lambda x_, w_, b_: _grouped(x_, w_, b_, 1, eps, True), [x, w, b0],
                        [mask[0], mask[1] and w is not None, mask[2]], g))


def _group_norm(ctx: Any, func: Any, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
    x, w, b, N, C, HxW, groups, eps = args
    eps = _defined_eps(eps, "group norm")
    out = meta(func, args, kw)
    y = forward(lambda x_, w_, b_: _grouped(x_, w_, b_, groups, eps, False), x, w, b)
    mean, rstd = _stats(ctx, x.reshape(N, groups, -1), (2,), eps, out)
    return as_torch(y, out[0].dtype), mean, rstd


def _group_norm_bwd(ctx: Any, func: Any, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
    g, x, _mean, rstd, w, N, C, HxW, groups, mask = args
    eps = _eps_of(ctx, rstd)
    b0 = torch.zeros(C, dtype=w.dtype if w is not None else x.dtype)  # the bias gradient
    return tuple(replay(lambda x_, w_, b_: _grouped(x_, w_, b_, groups, eps, False),
                        [x, w, b0], [mask[0], mask[1] and w is not None, mask[2]], g))


#: aten op name (overload packet) -> handler
NORMS: dict[str, Handler] = {
    "_softmax": _softmax(False), "_log_softmax": _softmax(True), "_safe_softmax": _safe_softmax,
    "_softmax_backward_data": _softmax_bwd(False),
    "_log_softmax_backward_data": _softmax_bwd(True),
    "native_layer_norm": _layer_norm, "native_layer_norm_backward": _layer_norm_bwd,
    "native_batch_norm": _batch_norm, "native_batch_norm_backward": _batch_norm_bwd,
    "native_group_norm": _group_norm, "native_group_norm_backward": _group_norm_bwd,
}
