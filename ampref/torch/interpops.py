"""aten's linear and bilinear interpolation on ampref's numerics (``specs/torch.md``
TRC-NN-009): ``upsample_linear1d``, ``upsample_bilinear2d`` and their backward ops.

Weights are torch's, float32 step for step (checked word for word against torch's CPU
kernel on one-hot inputs): the scale ``(n_in - 1) / (n_out - 1)`` with
``align_corners``, else ``1 / scale_factor`` (given) or ``n_in / n_out``, in float32;
the source position ``fl32(scale o)`` with ``align_corners``, else ``fl32(scale (o +
0.5) - 0.5)`` with one rounding (torch's compiled kernel fuses it) clamped at 0; the
index its floor (at most ``n_in - 1``), ``l1 = min(max(pos - index, 0), 1)``, ``l0 =
fl32(1 - l1)``; sizes equal: the identity.

The interpolation is separable, width first: each pass is a matrix of those weights
applied as exact dot products rounded once to float32 (``certified.matmul_f32``), so a
bilinear output is ``fl32(a0 fl32(x00 b0 + x01 b1) + a1 fl32(x10 b0 + x11 b1))`` with
each inner sum exact. torch's CPU kernel takes its own float32 steps in an order this
module does not reproduce: the two differ by a few ulps of the inputs' magnitude
(measured in the tests). The backward ops apply the transposed passes in reverse
order, each an exact dot product rounded once. NaN and inf propagate through any
nonzero weight; a zero weight times inf is NaN, as in any weighted sum.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ampref.accumulation import certified

from .convert import from_numpy, meta, to_numpy

__all__ = ["INTERPOLATION"]

Handler = Callable[[Any, Any, tuple[Any, ...], dict[str, Any]], Any]


def _fused_position(scale: np.float32, o: int) -> np.float32:
    """fl32(scale (o + 1/2) - 1/2) with one rounding: scale (2o + 1) - 1 is exact in
    float64 (a 24-bit significand times an integer below 2^28, minus 1), halving is
    exact, and the float32 conversion rounds once."""
    exact = float(scale) * (2 * o + 1) - 1.0  # an integer times a float32: exact
    return np.float32(exact / 2.0)


def weights(n_in: int, n_out: int, align_corners: bool, scale: Any) -> Any:
    """The (n_out, n_in) float32 matrix of torch's linear-interpolation weights."""
    m = np.zeros((n_out, n_in), np.float32)
    if n_in == n_out:
        m[np.arange(n_out), np.arange(n_out)] = 1
        return m
    if align_corners:
        s = np.float32((n_in - 1) / (n_out - 1)) if n_out > 1 else np.float32(0)
    else:
        s = np.float32(1.0 / scale) if scale else np.float32(n_in) / np.float32(n_out)
    for o in range(n_out):
        pos = s * np.float32(o) if align_corners else max(_fused_position(s, o),
                                                          np.float32(0))
        i0 = min(int(np.floor(pos)), n_in - 1)
        l1 = min(max(pos - np.float32(i0), np.float32(0)), np.float32(1))
        m[o, i0] += np.float32(1) - l1
        m[o, i0 + (1 if i0 < n_in - 1 else 0)] += l1
    return m


def _pass(v: Any, w: Any, axis: int) -> Any:
    """Apply the (n_out, n_in) weights along ``axis``: exact dots rounded once."""
    moved = np.moveaxis(v, axis, -1)
    out = certified.matmul_f32(np.ascontiguousarray(moved), np.ascontiguousarray(w.T))
    return np.moveaxis(out, -1, axis)


def _geometry(args: tuple[Any, ...], kw: dict[str, Any], first: int, nd: int,
              in_shape: Any, out_shape: Any) -> list[Any]:
    """Per interpolated axis (outermost first) its weight matrix."""
    align = bool(args[first] if len(args) > first else kw.get("align_corners", False))
    scales = list(args[first + 1:first + 1 + nd]) + [None] * nd
    names = ("scales_h", "scales_w") if nd == 2 else ("scales",)
    for i, name in enumerate(names):
        scales[i] = kw.get(name, scales[i])
    return [weights(int(in_shape[-nd + i]), int(out_shape[-nd + i]), align, scales[i])
            for i in range(nd)]


def _upsample(nd: int) -> Handler:
    def handler(ctx: Any, func: Any, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
        x = args[0]
        out = meta(func, args, kw)
        mats = _geometry(args, kw, 2, nd, x.shape, out.shape)
        v = to_numpy(x).astype(np.float32)
        for i in reversed(range(nd)):  # width first
            v = _pass(v, mats[i], v.ndim - nd + i)
        return from_numpy(v, out.dtype)
    return handler


def _upsample_bwd(nd: int) -> Handler:
    def handler(ctx: Any, func: Any, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
        g, out_size, in_size = args[:3]
        mats = _geometry(args, kw, 3, nd, in_size, tuple(in_size[:-nd]) + tuple(out_size))
        v = to_numpy(g).astype(np.float32)
        for i in range(nd):  # the forward's passes transposed, in reverse order
            v = _pass(v, mats[i].T, v.ndim - nd + i)
        return from_numpy(v, g.dtype)
    return handler


#: aten op name (overload packet) -> handler
INTERPOLATION: dict[str, Handler] = {
    "upsample_linear1d": _upsample(1), "upsample_linear1d_backward": _upsample_bwd(1),
    "upsample_bilinear2d": _upsample(2), "upsample_bilinear2d_backward": _upsample_bwd(2),
}
