"""aten's 3-d average pooling on ampref's numerics (``specs/torch.md`` TRC-NN-007):
``avg_pool3d`` (``nn.AvgPool3d``, and ``nn.LocalResponseNorm``, which pools the squared
input over channels with it) and its backward, the rule of ``avg_pool2d`` in three
axes: per output the exact sum of its window (padding reads +0) rounded to float32 and
divided in float32 by torch's divisor (``divisor_override``, else the window's size
with or without the padding as ``count_include_pad`` says, windows clipped at the
padded edge in ``ceil_mode``); the backward gives each input the exact sum of
``fl32(g / divisor)`` over the windows holding it, rounded once (TRC-IDX-001).

``_adaptive_avg_pool3d`` (since 2026-11-27): torch's adaptive windows, ``floor(o n /
n_out)`` up to ``ceil((o + 1) n / n_out)`` per axis; the exact window sum rounded to
float32, divided in float32 by the window's depth, then height, then width (torch's
order); its backward sums ``fl32(fl32(fl32(g / kd) / kh) / kw)`` exactly into each input.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from .convert import from_numpy, meta, to_numpy
from .indexops import scatter_sum
from .poolops import adaptive_windows

__all__ = ["POOLS3D"]

Handler = Callable[[Any, Any, tuple[Any, ...], dict[str, Any]], Any]


def _triple(v: Any) -> tuple[int, ...]:
    """aten's int[3] argument (one value stands for all three axes)."""
    v = list(v) if isinstance(v, (list, tuple)) else [v]
    return tuple(int(e) for e in (v * 3 if len(v) == 1 else v))


def _args(args: tuple[Any, ...], kw: dict[str, Any], first: int) -> tuple[Any, ...]:
    names = ("kernel_size", "stride", "padding", "ceil_mode", "count_include_pad",
             "divisor_override")
    vals: dict[str, Any] = {"stride": [], "padding": 0, "count_include_pad": True,
                            "divisor_override": None}
    vals.update(dict(zip(names, args[first:], strict=False)))
    vals.update({k: v for k, v in kw.items() if k in names})
    k = _triple(vals["kernel_size"])
    s = _triple(vals["stride"]) if vals["stride"] else k
    return k, s, _triple(vals["padding"]), bool(vals["count_include_pad"]), \
        vals["divisor_override"]


def _geometry(in_sp: Any, out_sp: Any, k: Any, s: Any, p: Any, include: bool,
              override: Any) -> tuple[Any, Any, Any]:
    """(input positions, output positions) of every (output, window member) pair within
    a volume, and the divisor of every output (float32, the output's shape)."""
    idx = np.zeros([1] * 6, np.int64)
    pos = np.zeros([1] * 6, np.int64)
    valid = np.ones([1] * 6, bool)
    div = np.ones([1] * 3, np.float64)
    for a in range(3):
        start = np.arange(out_sp[a]) * s[a] - p[a]
        c = start[:, None] + np.arange(k[a])[None, :]
        end = np.minimum(start + k[a], in_sp[a] + p[a])
        size = end - start if include else np.minimum(end, in_sp[a]) - np.maximum(start, 0)
        shape = [out_sp[a] if i == a else 1 for i in range(3)] + \
            [k[a] if i == a else 1 for i in range(3)]
        c = c.reshape(shape)
        valid = valid & (c >= 0) & (c < in_sp[a])  # padding reads +0: left out
        idx = idx * in_sp[a] + np.clip(c, 0, in_sp[a] - 1)
        pos = pos * out_sp[a] + np.arange(out_sp[a]).reshape(shape[:3] + [1, 1, 1])
        div = div * size.reshape([out_sp[a] if i == a else 1 for i in range(3)])
    full = np.broadcast_shapes(idx.shape, pos.shape, valid.shape)
    valid = np.broadcast_to(valid, full)
    inp, outp = np.broadcast_to(idx, full)[valid], np.broadcast_to(pos, full)[valid]
    divisor = np.full(tuple(out_sp), float(override)) if override else div
    return inp, outp, divisor.astype(np.float32)


def _move(v: Any, src: Any, dst: Any, size: int) -> Any:
    """Volume by volume, the exact sum of v's elements at ``src`` into ``dst``."""
    planes = math.prod(v.shape[:-3])
    vals = v.reshape(planes, -1)[:, src]
    d = np.arange(planes)[:, None] * size + dst[None, :]
    return scatter_sum(np.zeros(planes * size, np.float32), d, vals).reshape(planes, size)


def _avg_pool3d(ctx: Any, func: Any, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
    x = args[0]
    out = meta(func, args, kw)
    v = to_numpy(x).astype(np.float32)
    out_sp = tuple(out.shape[-3:])
    inp, outp, div = _geometry(v.shape[-3:], out_sp, *_args(args, kw, 1))
    sums = _move(v, inp, outp, math.prod(out_sp)).reshape(tuple(out.shape))
    with np.errstate(all="ignore"):
        return from_numpy(sums / div, out.dtype)


def _avg_pool3d_bwd(ctx: Any, func: Any, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
    g, x = args[:2]
    gv = to_numpy(g).astype(np.float32)
    in_sp = tuple(x.shape[-3:])
    inp, outp, div = _geometry(in_sp, gv.shape[-3:], *_args(args, kw, 2))
    with np.errstate(all="ignore"):
        delta = gv / div
    r = _move(delta, outp, inp, math.prod(in_sp)).reshape(tuple(x.shape))
    return from_numpy(r, x.dtype)


def _adaptive_pairs(n: int, n_out: int) -> tuple[Any, Any, Any]:
    """Along one axis: (output, input) index pairs of torch's adaptive windows, and each
    output's window size."""
    wins = adaptive_windows(n, n_out)
    outs = np.concatenate([np.full(len(w), o, np.int64) for o, w in enumerate(wins)])
    ins = np.concatenate([np.asarray(w, np.int64) for w in wins])
    return outs, ins, np.array([len(w) for w in wins])


def _adaptive_geometry(in_sp: Any, out_sp: Any) -> tuple[Any, Any, list[Any]]:
    """Flat (input, output) positions of every window member within a volume, and the
    window sizes per axis shaped to broadcast against the output volume."""
    inp, outp = np.zeros(1, np.int64), np.zeros(1, np.int64)
    sizes = []
    for a in range(3):
        o, i, k = _adaptive_pairs(int(in_sp[a]), int(out_sp[a]))
        inp = (inp[:, None] * in_sp[a] + i[None, :]).reshape(-1)
        outp = (outp[:, None] * out_sp[a] + o[None, :]).reshape(-1)
        sizes.append(k.astype(np.float32).reshape([-1 if j == a else 1 for j in range(3)]))
    return inp, outp, sizes


def _by_window(v: Any, sizes: list[Any]) -> Any:
    with np.errstate(all="ignore"):
        return v / sizes[0] / sizes[1] / sizes[2]


def _adaptive_avg3d(ctx: Any, func: Any, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
    x = args[0]
    out = meta(func, args, kw)
    v = to_numpy(x).astype(np.float32)
    out_sp = tuple(out.shape[-3:])
    inp, outp, sizes = _adaptive_geometry(v.shape[-3:], out_sp)
    sums = _move(v, inp, outp, math.prod(out_sp)).reshape(tuple(out.shape))
    return from_numpy(_by_window(sums, sizes), out.dtype)


def _adaptive_avg3d_bwd(ctx: Any, func: Any, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
    g, x = args[:2]
    gv = to_numpy(g).astype(np.float32)
    in_sp = tuple(x.shape[-3:])
    inp, outp, sizes = _adaptive_geometry(in_sp, gv.shape[-3:])
    r = _move(_by_window(gv, sizes), outp, inp, math.prod(in_sp)).reshape(tuple(x.shape))
    return from_numpy(r, x.dtype)


#: aten op name (overload packet) -> handler
POOLS3D: dict[str, Handler] = {"avg_pool3d": _avg_pool3d,
                               "avg_pool3d_backward": _avg_pool3d_bwd,
                               "_adaptive_avg_pool3d": _adaptive_avg3d,
                               "_adaptive_avg_pool3d_backward": _adaptive_avg3d_bwd}
