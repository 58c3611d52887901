"""Batch norm in eval mode (running statistics) on ampref's numerics, as torch's CPU
kernel computes it (``specs/torch.md`` TRC-NRM-005), float32 inputs (float64: the same
steps in float64; fp16/bf16: float32 steps, then one rounding to the dtype).

Forward, per channel with running mean m and variance v:
``invstd = fl32(1 / fl32(sqrt(fl32(v + eps))))``, ``alpha = fl32(invstd w)``,
``beta = fl32(b - m alpha)`` (one rounding: torch's fused multiply-add), and per
element ``y = fl32(x alpha + beta)`` (one rounding). Backward (torch computes its invstd
there in double): ``invstd' = fl32(1 / sqrt(v + eps))`` with the sum in double,
``dx = fl32(fl32(g invstd') w)``, ``dw = fl32(fl32(exact sum fl32(x - m) g) invstd')``,
``db = fl32(exact sum g)``. NaN and inf follow IEEE arithmetic in each step; a
variance of -eps gives inf.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from ampref.accumulation import certified
from ampref.formats.exactsum import add_rounded, fma64
from ampref.formats.table import get_format

from .convert import from_numpy, meta, to_numpy

__all__ = ["batch_norm_eval", "batch_norm_eval_backward"]

F32 = get_format("float32")


def _per_channel(t: Any, C: int, ndim: int, cf: Any, default: float) -> Any:
    v = np.full(C, default, cf) if t is None else to_numpy(t).astype(cf)
    return v.reshape((1, C) + (1,) * (ndim - 2))


def _fused(a: Any, b: Any, c: Any, wide: bool) -> Any:
    """fl(a b + c) with one rounding in the compute format."""
    if wide:
        return fma64(a, b, c)
    return add_rounded(a.astype(np.float64) * b.astype(np.float64), c, F32,
                       "nearest_even").astype(np.float32)


def batch_norm_eval(x: torch.Tensor, w: Any, b: Any, rm: torch.Tensor, rv: torch.Tensor,
                    eps: float, func: Any, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
    """``native_batch_norm(..., training=False)``: (y, empty saved mean, empty invstd)."""
    out = meta(func, args, kw)
    wide = x.dtype == torch.float64
    cf = np.float64 if wide else np.float32
    C, nd = x.shape[1], x.ndim
    m, v = _per_channel(rm, C, nd, cf, 0.0), _per_channel(rv, C, nd, cf, 1.0)
    with np.errstate(all="ignore"):
        invstd = cf(1) / np.sqrt(v + cf(eps))
        alpha = invstd * _per_channel(w, C, nd, cf, 1.0)
        beta = _fused(-m, alpha, _per_channel(b, C, nd, cf, 0.0), wide)
        y = _fused(to_numpy(x).astype(cf), alpha, beta, wide)
    return (from_numpy(y, out[0].dtype), torch.empty(out[1].shape, dtype=out[1].dtype),
            torch.empty(out[2].shape, dtype=out[2].dtype))


def _channel_dots(a: Any, b: Any) -> Any:
    """Per channel fl32(exact sum over batch and positions of a b), float32 inputs."""
    C = a.shape[1]
    rows_a = np.moveaxis(a, 1, 0).reshape(C, -1)
    rows_b = np.moveaxis(b, 1, 0).reshape(C, -1)
    return certified.matmul_f32(rows_a[:, None, :], rows_b[:, :, None])[:, 0, 0]


def batch_norm_eval_backward(g: torch.Tensor, x: torch.Tensor, w: Any, rm: Any, rv: Any,
                             eps: float, mask: Any) -> tuple[Any, Any, Any]:
    """``native_batch_norm_backward(..., train=False)``: (dx, dw, db) as masked."""
    C, nd = x.shape[1], x.ndim
    G, X = to_numpy(g).astype(np.float32), to_numpy(x).astype(np.float32)
    m = _per_channel(rm, C, nd, np.float32, 0.0)
    v64 = _per_channel(rv, C, nd, np.float64, 1.0)
    with np.errstate(all="ignore"):
        invstd = (1.0 / np.sqrt(v64 + eps)).astype(np.float32)
        dx = (G * invstd) * _per_channel(w, C, nd, np.float32, 1.0)
        dw = _channel_dots(X - m, G) * invstd.ravel()
    db = _channel_dots(G, np.ones_like(G))
    pdt = w.dtype if w is not None else x.dtype
    return (from_numpy(dx, g.dtype) if mask[0] else None,
            from_numpy(dw, pdt) if mask[1] and w is not None else None,
            from_numpy(db, pdt) if mask[2] else None)
