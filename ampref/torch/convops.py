"""aten's convolutions on ampref's engine (``specs/torch.md`` TRC-NN-001, TRC-NN-008):
1-d, 2-d and 3-d, grouped, depthwise and dilated, and transposed (any groups and
dilation), all through the engine's conv2d or linear over gathered taps and their
derivatives, so every rounding is one the engine defines.

A transposed convolution is the derivative of a convolution with respect to its input:
``conv_transpose(x, w) = d/dz <conv2d(z, w), x>``, so the engine's input-gradient rule
(the overlapping patch contributions added in float64 in kernel-offset order, rounded
once, ENG-CNV-001) is its forward, then ``fl32(. + b)`` for the bias; its input gradient
is the forward convolution ``conv2d(g, w)`` (one dot product per element) and its weight
gradient the convolution's weight gradient with ``g`` as input and ``x`` as upstream.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from ampref.engine import functional as F
from ampref.engine.tensor import Tensor as EngineTensor

from .convert import engine, meta
from .replay import as_torch, forward, replay

__all__ = ["CONVS"]

Handler = Callable[[Any, Any, tuple[Any, ...], dict[str, Any]], Any]


def _geometry(x: Any, stride: Any, padding: Any, dilation: Any) -> tuple[tuple[int, ...], ...]:
    """stride, padding and dilation with one entry per spatial dim of ``x`` (N, C, ...):
    aten repeats a one-entry list over every dim (``conv3d(padding="valid")`` passes
    padding [0])."""
    nd = x.ndim - 2
    if nd not in (1, 2, 3):
        raise NotImplementedError(f"ampref.torch: convolution is emulated for 1-d, 2-d and "
                                  f"3-d inputs, got {nd}-d")
    return tuple(tuple(p) * nd if len(p) == 1 else tuple(p) for p in (stride, padding, dilation))


def _dilated_fn(ctx: Any, stride: Any, padding: Any, dilation: Any) -> Callable[..., Any]:
    """A dilated convolution as the engine's linear over gathered taps (TRC-NN-001): the
    taps of each output position (input channel, then kernel row, then column, the order
    of conv2d's dot products) are gathered with an integer index (a padded position reads
    an appended zero), then ``linear`` rounds each output as conv2d does; the gather's
    gradient adds the taps' contributions in float64 and rounds once (ENG-IDX-001)."""
    def conv(x: Any, w: Any, b: Any) -> Any:
        sp, k = x.shape[2:], w.shape[2:]
        N, C, nd = x.shape[0], x.shape[1], len(sp)
        out = [(sp[a] + 2 * padding[a] - dilation[a] * (k[a] - 1) - 1) // stride[a] + 1
               for a in range(nd)]
        coords = []  # per axis: (outputs, kernel taps) input coordinate, -1 = padding
        for a in range(nd):
            c = (np.arange(out[a])[:, None] * stride[a] - padding[a]
                 + np.arange(k[a])[None, :] * dilation[a])
            coords.append(np.where((c >= 0) & (c < sp[a]), c, -1))
        flat = math.prod(sp)
        # (outputs..., taps...) flat input positions, axis by axis; -1 = padding
        idx = np.zeros([1] * (2 * nd), np.int64)
        pad = np.zeros([1] * (2 * nd), bool)
        for a in range(nd):
            shape = [out[a] if i == a else 1 for i in range(nd)] + \
                [k[a] if i == a else 1 for i in range(nd)]
            c = coords[a].reshape(shape)
            idx = idx * sp[a] + np.maximum(c, 0)
            pad = pad | (c < 0)
        idx = np.where(pad, flat, idx).reshape(math.prod(out), math.prod(k))  # pad: the zero
        xf = F.reshape(x, (N, C, flat))
        zero = EngineTensor(x.backend.xp.zeros((N, C, 1), dtype=x.data.dtype), x.format,
                            backend=x.backend)  # a constant +0 (x * 0 would carry NaN, -0)
        xz = F.concat([xf, zero], 2)
        cols = F.index(xz, (slice(None), slice(None), idx))  # (N, C, P, taps)
        P = idx.shape[0]
        cols = F.reshape(F.transpose(cols, 1, 2), (N * P, C * idx.shape[1]))
        y = F.linear(cols, F.reshape(w, (w.shape[0], -1)), b, accumulation=ctx.accumulation)
        return F.reshape(F.transpose(F.reshape(y, (N, P, w.shape[0])), 1, 2),
                         (N, w.shape[0], *out))
    return conv


def _conv_fn(ctx: Any, stride: Any, padding: Any, groups: int = 1,
             dilation: Any = (1,)) -> Callable[..., Any]:
    """The engine's convolution for aten's arguments: conv2d, for 1-d a conv2d of a
    height-1 image (N, C, 1, L) with (Cout, C, 1, k) weights, and with groups one such
    convolution per group on its channel slices, concatenated: every output element is
    one dot product over its group's (c, i, j) (TRC-NN-001)."""
    def conv2d(x: Any, w: Any, b: Any) -> Any:
        return F.conv2d(x, w, b, tuple(stride), tuple(padding), accumulation=ctx.accumulation)

    def conv1d(x: Any, w: Any, b: Any) -> Any:
        y = F.conv2d(F.reshape(x, (x.shape[0], x.shape[1], 1, x.shape[2])),
                     F.reshape(w, (w.shape[0], w.shape[1], 1, w.shape[2])), b,
                     (1, stride[0]), (0, padding[0]), accumulation=ctx.accumulation)
        return F.reshape(y, (y.shape[0], y.shape[1], y.shape[3]))
    one = conv2d if len(stride) == 2 else conv1d
    if any(d != 1 for d in dilation) or len(stride) == 3:
        one = _dilated_fn(ctx, stride, padding, tuple(dilation) * (
            len(stride) if len(dilation) == 1 else 1))
    if groups == 1:
        return one

    def grouped(x: Any, w: Any, b: Any) -> Any:
        ci, co = x.shape[1] // groups, w.shape[0] // groups
        outs = [one(F.index(x, (slice(None), slice(g * ci, (g + 1) * ci))),
                    F.index(w, slice(g * co, (g + 1) * co)),
                    None if b is None else F.index(b, slice(g * co, (g + 1) * co)))
                for g in range(groups)]
        return F.concat(outs, 1)
    return grouped


def _cropped(y: Any, shape: Any) -> Any:
    """``y`` cut to ``shape`` in its spatial dims: with an output padding of at least the
    stride (torch allows it below the dilation) the convolution of the transposed
    convolution's output is longer than its input; the extra positions take no part
    (their gradient is zero)."""
    if tuple(y.shape) == tuple(shape):
        return y
    return F.index(y, (slice(None), slice(None)) + tuple(slice(0, n) for n in shape[2:]))


def _transposed(ctx: Any, x: Any, w: Any, b: Any, geometry: tuple[Any, ...],
                out: Any) -> Any:
    """conv_transpose(x, w) + b: the engine's input gradient of the convolution conv(z, w)
    (same stride, padding, groups, dilation) with upstream x, z of the output's shape
    (TRC-NN-008)."""
    z = torch.zeros(tuple(out.shape), dtype=x.dtype)
    conv = _conv_fn(ctx, *geometry)
    (y,) = replay(lambda z_: _cropped(conv(z_, engine(w), None), x.shape), [z], [True], x)
    assert y is not None  # requested above
    if b is None:
        return as_torch(forward(lambda y_: y_, y), out.dtype)
    shape = (1, -1) + (1,) * (y.ndim - 2)
    return as_torch(forward(lambda y_, b_: F.add(y_, F.reshape(b_, shape)), y, b), out.dtype)


def _conv(ctx: Any, func: Any, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
    x, w, b, stride, padding, dilation, transposed, _, groups = args
    stride, padding, dilation = _geometry(x, stride, padding, dilation)
    out = meta(func, args, kw)
    if transposed:
        return _transposed(ctx, x, w, b, (stride, padding, groups, dilation), out)
    return as_torch(forward(_conv_fn(ctx, stride, padding, groups, dilation), x, w, b),
                    out.dtype)


def _conv_bwd(ctx: Any, func: Any, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
    g, x, w, bias_sizes, stride, padding, dilation, transposed, _, groups, mask = args
    stride, padding, dilation = _geometry(x, stride, padding, dilation)
    # torch passes bias_sizes [0] for a convolution without bias: no bias then
    has_b = bool(mask[2] and bias_sizes and math.prod(bias_sizes) > 0)
    if transposed:
        return _transposed_bwd(ctx, g, x, w, (stride, padding, groups, dilation), mask, has_b)
    b = torch.zeros(bias_sizes, dtype=w.dtype) if has_b else None
    grads = replay(_conv_fn(ctx, stride, padding, groups, dilation), [x, w, b],
                   [mask[0], mask[1], has_b], g)
    return tuple(grads)


def _transposed_bwd(ctx: Any, g: Any, x: Any, w: Any, geometry: tuple[Any, ...], mask: Any,
                    has_b: bool) -> tuple[Any, ...]:
    """(dx, dw, db) of conv_transpose: dx = conv(g, w); dw = the convolution's weight
    gradient with input g and upstream x; db = the engine's exact sum of g over all but
    channels."""
    conv = _conv_fn(ctx, *geometry)
    dx = as_torch(forward(lambda g_, w_: _cropped(conv(g_, w_, None), x.shape), g, w),
                  x.dtype) if mask[0] else None
    dw = replay(lambda w_: _cropped(conv(engine(g), w_, None), x.shape), [w], [True],
                x)[0] if mask[1] else None
    axes = (0,) + tuple(range(2, g.ndim))
    db = as_torch(forward(lambda g_: F.sum(g_, axes), g), w.dtype) if has_b else None
    return dx, dw, db


#: aten op name (overload packet) -> handler
CONVS: dict[str, Handler] = {"convolution": _conv, "convolution_backward": _conv_bwd}
