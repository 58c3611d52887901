"""aten's linear, bilinear, trilinear and bicubic interpolation on ampref's numerics
(``specs/torch.md`` TRC-NN-009): ``upsample_linear1d``, ``upsample_bilinear2d``,
``upsample_trilinear3d``, ``upsample_bicubic2d`` and their backward ops.

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

Bicubic (since 2026-11-27): torch's four taps per output, ``index - 1 .. index + 2``
clamped to the input, the source position as above but not clamped at 0, and Keys'
cubic-convolution weights with ``A = -0.75`` in torch's float32 steps, including the
multiply-adds its compiled kernel fuses (checked word for word on one-hot inputs):
``c1(x) = fl(fl(fl(fma(A + 2, x, -(A + 3)) x) x) + 1)`` for the inner taps at ``t``
and ``1 - t``, ``c2(x) = fl(fl(fma(fma(A, x, -5A), x, 8A) x) - 4A)`` for the outer ones
at ``t + 1`` and ``2 - t``. Each pass is the exact four-term dot product rounded once
(the taps kept apart, so a clamped border tap counts each weight exactly).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ampref.accumulation import certified
from ampref.formats.exactsum import add_rounded
from ampref.formats.table import get_format

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


_F32 = get_format("float32")
_A = np.float32(-0.75)  # Keys' cubic-convolution parameter, torch's choice


def _fma(a: Any, b: Any, c: Any) -> np.float32:
    """float32 fl(a b + c) with one rounding (a b is exact in float64)."""
    return np.float32(add_rounded(np.float64(a) * np.float64(b), np.float64(c), _F32,
                                  "nearest_even"))


def _inner(x: np.float32) -> np.float32:
    """Keys' weight for |distance| <= 1, torch's float32 steps."""
    return np.float32(np.float32(_fma(_A + 2, x, -(_A + 3)) * x) * x) + np.float32(1)


def _outer(x: np.float32) -> np.float32:
    """Keys' weight for 1 <= |distance| <= 2, torch's float32 steps."""
    return np.float32(_fma(_fma(_A, x, -5 * _A), x, 8 * _A) * x) - 4 * _A


def cubic_taps(n_in: int, n_out: int, align_corners: bool, scale: Any) -> tuple[Any, Any]:
    """torch's bicubic taps: (n_out, 4) input indices (clamped) and float32 weights."""
    one = np.float32(1)
    if align_corners:
        s = np.float32((n_in - 1) / (n_out - 1)) if n_out > 1 else np.float32(0)
    else:
        s = np.float32(1.0 / scale) if scale else np.float32(n_in) / np.float32(n_out)
    idx = np.zeros((n_out, 4), np.int64)
    w = np.zeros((n_out, 4), np.float32)
    for o in range(n_out):
        pos = s * np.float32(o) if align_corners else _fused_position(s, o)
        i0 = min(int(np.floor(pos)), n_in - 1)
        t = min(max(pos - np.float32(i0), np.float32(0)), one)
        w[o] = [_outer(t + one), _inner(t), _inner(one - t), _outer((one - t) + one)]
        idx[o] = np.clip(np.arange(i0 - 1, i0 + 3), 0, n_in - 1)
    return idx, w


def _taps_pass(v: Any, taps: tuple[Any, Any], axis: int) -> Any:
    """Each output along ``axis`` as the exact dot of its four taps, rounded once."""
    idx, w = taps
    moved = np.moveaxis(v, axis, -1)
    gathered = np.ascontiguousarray(moved[..., idx][..., None, :])  # (..., n_out, 1, 4)
    out = certified.matmul_f32(gathered, w[:, :, None])[..., 0, 0]
    return np.moveaxis(out, -1, axis)


def _taps_pass_t(g: Any, taps: tuple[Any, Any], n_in: int, axis: int) -> Any:
    """The transposed pass: each input gets the exact sum of g[o] w[o, k] over the taps
    naming it (one product per term), rounded once."""
    idx, w = taps
    n_out = idx.shape[0]
    spread = np.zeros((n_out * 4, n_in), np.float32)
    spread[np.arange(n_out * 4), idx.reshape(-1)] = w.reshape(-1)
    moved = np.repeat(np.moveaxis(g, axis, -1), 4, axis=-1)
    out = certified.matmul_f32(np.ascontiguousarray(moved), spread)
    return np.moveaxis(out, -1, axis)


def _pass(v: Any, w: Any, axis: int) -> Any:
    """Apply the (n_out, n_in) weights along ``axis``: exact dots rounded once."""
    moved = np.moveaxis(v, axis, -1)
    out = certified.matmul_f32(np.ascontiguousarray(moved), np.ascontiguousarray(w.T))
    return np.moveaxis(out, -1, axis)


_SCALE_NAMES = {1: ("scales",), 2: ("scales_h", "scales_w"),
                3: ("scales_d", "scales_h", "scales_w")}


def _geometry(args: tuple[Any, ...], kw: dict[str, Any], first: int, nd: int,
              in_shape: Any, out_shape: Any, build: Callable[..., Any]) -> list[Any]:
    """Per interpolated axis (outermost first) what ``build`` makes of its sizes,
    ``align_corners`` and scale (a weight matrix, or bicubic taps)."""
    align = bool(args[first] if len(args) > first else kw.get("align_corners", False))
    scales = list(args[first + 1:first + 1 + nd]) + [None] * nd
    for i, name in enumerate(_SCALE_NAMES[nd]):
        scales[i] = kw.get(name, scales[i])
    return [build(int(in_shape[-nd + i]), int(out_shape[-nd + i]), align, scales[i])
            for i in range(nd)]


def _upsample(nd: int, cubic: bool = False) -> Handler:
    def handler(ctx: Any, func: Any, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
        x = args[0]
        out = meta(func, args, kw)
        geo = _geometry(args, kw, 2, nd, x.shape, out.shape, cubic_taps if cubic else weights)
        v = to_numpy(x).astype(np.float32)
        for i in reversed(range(nd)):  # width first
            axis = v.ndim - nd + i
            v = _taps_pass(v, geo[i], axis) if cubic else _pass(v, geo[i], axis)
        return from_numpy(v, out.dtype)
    return handler


def _upsample_bwd(nd: int, cubic: bool = False) -> Handler:
    def handler(ctx: Any, func: Any, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
        g, out_size, in_size = args[:3]
        geo = _geometry(args, kw, 3, nd, in_size, tuple(in_size[:-nd]) + tuple(out_size),
                        cubic_taps if cubic else weights)
        v = to_numpy(g).astype(np.float32)
        for i in range(nd):  # the forward's passes transposed, in reverse order
            axis = v.ndim - nd + i
            v = (_taps_pass_t(v, geo[i], int(in_size[-nd + i]), axis) if cubic
                 else _pass(v, geo[i].T, axis))
        return from_numpy(v, g.dtype)
    return handler


#: aten op name (overload packet) -> handler
INTERPOLATION: dict[str, Handler] = {
    "upsample_linear1d": _upsample(1), "upsample_linear1d_backward": _upsample_bwd(1),
    "upsample_bilinear2d": _upsample(2), "upsample_bilinear2d_backward": _upsample_bwd(2),
    "upsample_trilinear3d": _upsample(3),
    "upsample_trilinear3d_backward": _upsample_bwd(3),
    "upsample_bicubic2d": _upsample(2, cubic=True),
    "upsample_bicubic2d_backward": _upsample_bwd(2, cubic=True),
}
