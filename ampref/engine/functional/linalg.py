"""Matrix products: matmul, linear and conv2d (ENG-MM-001, ENG-CNV-001).

Every dot product is the backend's matmul under an accumulation model (``exact`` by
default: the exact sum rounded once to float32), then rounded to the output format; a
bias is added in float32 in the epilogue, before that last rounding.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..tensor import Tensor, round_to
from .core import (autocast_args, autocast_inputs, backend_of, check_tensor, make, promote, sum_to,
                   to_format)
from .shapes import reshape

__all__ = ["conv2d", "conv_pair", "linear", "matmul"]


def matmul(input: Tensor, other: Tensor, *, accumulation: str = "exact") -> Tensor:
    """input @ other for 2-D or batched (..., M, K) @ (..., K, N) operands; 1-D operands
    as torch.

    Rounding (ENG-MM-001): fl_out(fl32(sum_k a_k b_k)) with the exact sum under the
    default model; ``accumulation`` names any model of :mod:`ampref.accumulation.models`
    (``sequential``, ``tensorcore:a100``, ...). Autocast name ``matmul``.
    """
    a, b = check_tensor(input, "matmul"), check_tensor(other, "matmul")
    be = backend_of(a, b)
    (a, b), _, _ = autocast_inputs("matmul", [a, b])
    fmt = promote([a.format, b.format])
    a, b = to_format(a, fmt), to_format(b, fmt)
    if a.ndim == 0 or b.ndim == 0:
        raise ValueError(f"matmul needs operands of at least 1 dimension, got {a.shape} and "
                         f"{b.shape}")
    if a.shape[-1] != b.shape[-2 if b.ndim > 1 else 0]:
        raise ValueError(f"matmul shapes do not chain: {a.shape} @ {b.shape}")
    if a.ndim == 1:  # (K,) @ (..., K, N): a row vector, the row axis dropped
        r = matmul(reshape(a, (1, -1)), b, accumulation=accumulation)
        return reshape(r, r.shape[:-2] + r.shape[-1:])
    if b.ndim == 1:  # (..., M, K) @ (K,): a column vector, the column axis dropped
        r = matmul(a, reshape(b, (-1, 1)), accumulation=accumulation)
        return reshape(r, r.shape[:-1])
    A, B = a.data, b.data
    out = round_to(be, be.matmul(A, B, accumulation, fmt), fmt)

    def bwd(g: Any) -> tuple[Any, Any]:
        # a gradient nobody receives is not computed (the engine skips None, ENG-BWD-001)
        ga = gb = None
        if a.requires_grad:
            ga = sum_to(be, be.matmul(g, be.xp.swapaxes(B, -1, -2), accumulation, fmt), A.shape)
        if b.requires_grad:
            gb = sum_to(be, be.matmul(be.xp.swapaxes(A, -1, -2), g, accumulation, fmt), B.shape)
        return ga, gb
    return make(be, out, fmt, "matmul", [a, b], bwd)


def _weighted_inputs(op: str, x: Tensor, weight: Tensor,
                     bias: Tensor | None) -> tuple[Any, ...]:
    """Check, autocast and promote the (input, weight, optional bias) of linear/conv2d."""
    x, weight = check_tensor(x, op), check_tensor(weight, op)
    if bias is not None:
        bias = check_tensor(bias, op)
    be = backend_of(x, weight, bias)
    (x, weight, bias), _, _ = autocast_args(op, x, weight, bias)
    ins = [t for t in (x, weight, bias) if t is not None]
    fmt = promote([t.format for t in ins])
    ins = [to_format(t, fmt) for t in ins]
    return be, fmt, ins, ins[0], ins[1], (ins[2] if bias is not None else None)


def linear(input: Tensor, weight: Tensor, bias: Tensor | None = None, *,
           accumulation: str = "exact") -> Tensor:
    """x @ weight.T + bias; y = fl_out(fl32(fl32(exact x.w) + b)) (bias in the epilogue).

    Autocast name ``linear`` (lower precision under both torch policies).
    """
    be, fmt, ins, x, weight, bias = _weighted_inputs("linear", input, weight, bias)
    if weight.ndim != 2 or x.shape[-1] != weight.shape[1]:
        raise ValueError(f"linear: input {x.shape} does not match weight {weight.shape} (out, in)")
    X = x.data.reshape(-1, x.shape[-1])
    W = weight.data
    acc = be.matmul(X, W.T, accumulation, fmt)
    if bias is not None:
        with np.errstate(all="ignore"):
            acc = acc + bias.data
    out = round_to(be, acc, fmt).reshape(x.shape[:-1] + (W.shape[0],))

    def bwd(g: Any) -> tuple[Any, ...]:
        G = g.reshape(-1, W.shape[0])
        # a gradient nobody receives is not computed (the engine skips None, ENG-BWD-001)
        gx = be.matmul(G, W, accumulation, fmt).reshape(x.shape) if x.requires_grad else None
        gw = be.matmul(G.T, X, accumulation, fmt) if weight.requires_grad else None
        if bias is None:
            return gx, gw
        return gx, gw, be.sum(G, axis=0)
    return make(be, out, fmt, "linear", ins, bwd)


def conv_pair(v: Any, name: str, lo: int) -> tuple[int, int]:
    """A conv2d stride (``lo`` 1) or padding (``lo`` 0): an int or a pair of ints, each at
    least ``lo`` (bools and floats refused, not truncated).

    Raises:
        TypeError: not an int or a pair of ints.
        ValueError: an entry below ``lo``.
    """
    def is_int(k: Any) -> bool:
        return isinstance(k, (int, np.integer)) and not isinstance(k, (bool, np.bool_))

    t = (v, v) if is_int(v) else v
    if not isinstance(t, (tuple, list)) or len(t) != 2 or not all(is_int(k) for k in t):
        raise TypeError(f"conv2d {name} must be an int or a pair of ints, got {v!r}")
    if min(t) < lo:
        raise ValueError(f"conv2d {name} must be >= {lo}, got {v!r}")
    return int(t[0]), int(t[1])


def conv2d(input: Tensor, weight: Tensor, bias: Tensor | None = None,
           stride: int | tuple[int, int] = 1, padding: int | tuple[int, int] = 0, *,
           accumulation: str = "exact") -> Tensor:
    """2-D cross-correlation of (N, C, H, W) input with (Cout, C, kh, kw) weights (ENG-CNV-001).

    Computed as an im2col matmul: every output element is one dot product over
    (c, i, j) in C order, so it rounds like :func:`linear`:
    ``fl_out(fl32(fl32(exact sum) + b))``. The input gradient adds the overlapping
    patch contributions in float64 in kernel-offset order (i, then j) and rounds once.
    Zero padding. Autocast name ``conv2d`` (lower precision under both torch policies).
    """
    # why long: argument checks, im2col forward and the fixed-order col2im backward of one op
    be, fmt, ins, x, weight, bias = _weighted_inputs("conv2d", input, weight, bias)
    (sh, sw), (ph, pw) = conv_pair(stride, "stride", 1), conv_pair(padding, "padding", 0)
    if x.ndim != 4 or weight.ndim != 4 or x.shape[1] != weight.shape[1]:
        raise ValueError("conv2d needs input (N, C, H, W) and weight (Cout, C, kh, kw) with "
                         "equal C, "
                         f"got {x.shape} and {weight.shape}")
    xp = be.xp
    N, C, H, W = x.shape
    Cout, _, kh, kw = weight.shape
    Ho, Wo = (H + 2 * ph - kh) // sh + 1, (W + 2 * pw - kw) // sw + 1
    if Ho < 1 or Wo < 1:
        raise ValueError(f"conv2d kernel {(kh, kw)} does not fit input {(H, W)} with padding "
                         f"{(ph, pw)}")
    xpad = xp.pad(x.data, ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    win = xp.lib.stride_tricks.sliding_window_view(xpad, (kh, kw), axis=(2, 3))[:, :, ::sh, ::sw]
    cols = xp.ascontiguousarray(win.transpose(0, 2, 3, 1, 4, 5)).reshape(N * Ho * Wo, C * kh * kw)
    Wm = weight.data.reshape(Cout, -1)
    acc = be.matmul(cols, Wm.T, accumulation, fmt)
    if bias is not None:
        with np.errstate(all="ignore"):
            acc = acc + bias.data
    out = round_to(be, acc, fmt).reshape(N, Ho, Wo, Cout).transpose(0, 3, 1, 2)
    out = xp.ascontiguousarray(out)

    def bwd(g: Any) -> tuple[Any, ...]:
        G = xp.ascontiguousarray(g.transpose(0, 2, 3, 1)).reshape(-1, Cout)
        # a gradient nobody receives is not computed (the engine skips None, ENG-BWD-001)
        gw = be.matmul(G.T, cols, accumulation, fmt).reshape(weight.shape) \
            if weight.requires_grad else None
        gx = None
        if x.requires_grad:
            gcols = be.matmul(G, Wm, accumulation, fmt).reshape(N, Ho, Wo, C, kh, kw)
            gpad = xp.zeros(xpad.shape, dtype=xp.float64)
            for i in range(kh):  # fixed order: kernel row, then column
                for j in range(kw):
                    part = gcols[:, :, :, :, i, j].transpose(0, 3, 1, 2)
                    gpad[:, :, i:i + sh * Ho:sh, j:j + sw * Wo:sw] += part
            gx = gpad[:, :, ph:ph + H, pw:pw + W]
        res: list[Any] = [gx, gw]
        if bias is not None:
            res.append(be.sum(G, 0))
        return tuple(res)
    return make(be, out, fmt, "conv2d", ins, bwd)
