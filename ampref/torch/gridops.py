"""aten's spatial-transformer ops on ampref's numerics (``specs/torch.md`` TRC-NN-012):
``affine_grid_generator`` and ``grid_sampler_2d`` (bilinear and nearest; zeros, border
and reflection padding; either ``align_corners``) with their backward ops.

* ``affine_grid``: torch's base grid (``linspace(-1, 1, n)`` as TRC-PWO-003, times
  ``(n - 1) / n`` in two float32 steps without ``align_corners``, a column of ones),
  then each point's exact dot with ``theta``'s row, rounded once; the backward the
  exact sums over all points.
* ``grid_sample`` source positions are torch's float32 steps: ``fl(fl(g + 1) s)`` with
  ``s = (size - 1) / 2`` under ``align_corners``, else ``fl(fl(fl(g + 1) s) - 1/2)``
  with ``s = size / 2``; border padding clips to ``[0, size - 1]`` (NaN to 0),
  reflection reflects as torch's kernel, then clips. Bilinear weights are torch's:
  ``w = x - floor(x)``, ``e = 1 - w`` (and ``n``, ``s`` for y), ``nw = fl(s e)``,
  ``ne = fl(s w)``, ``sw = fl(n e)``, ``se = fl(n w)``; corners outside the input read 0.
  Each output is the exact four-term dot of corner values and weights, rounded once.
  Nearest takes the value at ``round(x)`` (ties to even), 0 outside.
* backward: each input element gets the exact sum of the contributions ``fl32(weight
  g)`` of the outputs reading it, rounded once (TRC-IDX-001's scatter); the grid's
  gradient is ``fl32(fl32(exact sum over channels of g ((ne - nw) s + (se - sw) n)) m)``
  for x (``g ((sw - nw) e + (se - ne) w)`` for y; ACC-EXA-003's exact triple products)
  with ``m`` torch's multiplier (the scale, its sign flipped by a reflection, 0 where
  border or reflection padding clipped); 0 for nearest. Bicubic is refused.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from ampref.accumulation import certified
from ampref.accumulation.tripledot import triple_dot_f32
from ampref.formats.exactsum import add_rounded
from ampref.formats.table import get_format

from .convert import from_numpy, meta, to_numpy
from .indexops import scatter_sum
from .rangeops import linspace_values

__all__ = ["GRIDS"]

Handler = Callable[[Any, Any, tuple[Any, ...], dict[str, Any]], Any]

_ZEROS, _BORDER, _REFLECTION = 0, 1, 2
_BILINEAR, _NEAREST = 0, 1
_F = np.float32
_F32 = get_format("float32")


# -- affine_grid --------------------------------------------------------------------------
def _axis(n: int, align: bool) -> Any:
    """torch's linspace_from_neg_one: linspace(-1, 1, n), times (n - 1) / n in float32
    steps without align_corners; a single point is 0."""
    if n <= 1:
        return np.zeros(1, _F)
    r = linspace_values(-1.0, 1.0, n, _F)
    return r if align else (r * _F(n - 1)) / _F(n)


def _base(size: Any, align: bool) -> Any:
    """The (points, nd + 1) base grid: x fastest, then y (then z), and a one."""
    spatial = [int(s) for s in size[2:]][::-1]  # W, H (, D)
    axes = np.meshgrid(*[_axis(n, align) for n in spatial], indexing="ij")
    cols = [np.moveaxis(a, range(a.ndim), range(a.ndim)[::-1]).reshape(-1) for a in axes]
    return np.stack(cols + [np.ones_like(cols[0])], axis=1)


def _affine(ctx: Any, func: Any, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
    theta, size, align = args[0], args[1], bool(args[2] if len(args) > 2 else
                                                kw.get("align_corners", False))
    out = meta(func, args, kw)
    base = _base(size, align)  # (P, k)
    th = to_numpy(theta).astype(_F)  # (N, nd, k)
    r = certified.matmul_f32(np.broadcast_to(base, (th.shape[0],) + base.shape),
                             np.ascontiguousarray(np.swapaxes(th, 1, 2)))
    return from_numpy(r.reshape(tuple(out.shape)), out.dtype)


def _affine_bwd(ctx: Any, func: Any, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
    g, size, align = args[0], args[1], bool(args[2] if len(args) > 2 else
                                            kw.get("align_corners", False))
    base = _base(size, align)
    gv = to_numpy(g).astype(_F).reshape(int(size[0]), base.shape[0], -1)  # (N, P, nd)
    r = certified.matmul_f32(np.ascontiguousarray(np.swapaxes(gv, 1, 2)),
                             np.broadcast_to(base, (gv.shape[0],) + base.shape))
    return from_numpy(r, g.dtype)  # (N, nd, k)


# -- grid_sample: source positions ---------------------------------------------------------
def _reflect(x: Any, size: int, align: bool) -> tuple[Any, Any]:
    """torch's reflect_coordinates_get_grad: the reflected position and the sign."""
    low, twice = (_F(0), _F(2 * (size - 1))) if align else (_F(-0.5), _F(2 * size))
    if align and size <= 1:
        return np.zeros_like(x), np.zeros_like(x)
    shifted = x - low
    flips = np.trunc(np.abs(shifted) / twice)
    extra = np.abs(shifted) - flips * twice
    back = twice - extra
    more = extra > back
    sign = np.where(more ^ (shifted < 0), _F(-1), _F(1))
    return np.where(more, back, extra) + low, sign


def _clip(x: Any, size: int) -> tuple[Any, Any]:
    """torch's clip_coordinates_get_grad: clipped position, 1 strictly inside else 0
    (NaN clips to 0)."""
    lo = np.where(np.isnan(x) | (x < 0), _F(0), x)
    res = np.minimum(lo, _F(size - 1))
    inside = (lo != 0) & (res != _F(size - 1))
    return res, inside.astype(_F)


def _position(g: Any, size: int, align: bool, padding: int) -> tuple[Any, Any]:
    """Source coordinate along one axis and torch's gradient multiplier."""
    scale = _F(size - 1) / _F(2) if align else _F(size) / _F(2)
    if align:
        x = (g + _F(1)) * scale
    else:  # one rounding: torch's compiled kernel fuses the multiply-subtract
        x = add_rounded(np.float64(g + _F(1)) * np.float64(scale), -0.5, _F32,
                        "nearest_even").astype(_F)
    mult = np.full_like(x, scale)
    if padding == _BORDER:
        x, inside = _clip(x, size)
        mult = mult * inside
    elif padding == _REFLECTION:
        x, sign = _reflect(x, size, align)
        x, inside = _clip(x, size)
        mult = mult * sign * inside
    return x, mult


def _grid_args(args: tuple[Any, ...], first: int) -> tuple[Any, Any, int, int, bool]:
    inp, grid = args[first], args[first + 1]
    mode, padding, align = int(args[first + 2]), int(args[first + 3]), bool(args[first + 4])
    if mode not in (_BILINEAR, _NEAREST):
        raise NotImplementedError("ampref.torch: grid_sample with mode='bicubic'")
    return inp, grid, mode, padding, align


def _corners(inp: Any, grid: Any, padding: int, align: bool) -> dict[str, Any]:
    """Per output point its four corners' flat indices, in-bounds masks and weights,
    with the distances n, s, w, e and the multipliers (torch's compute_interp_params)."""
    H, W = inp.shape[-2:]
    gv = to_numpy(grid).astype(_F)
    with np.errstate(all="ignore"):
        x, mx = _position(gv[..., 0], W, align, padding)
        y, my = _position(gv[..., 1], H, align, padding)
        xw, yn = np.floor(x), np.floor(y)
        w, n = x - xw, y - yn
        e, s = _F(1) - w, _F(1) - n
    ix, iy = np.nan_to_num(xw, nan=-2).astype(np.int64), np.nan_to_num(yn, nan=-2).astype(np.int64)
    out = {"n": n, "s": s, "w": w, "e": e, "mx": mx, "my": my}
    for name, dy, dx, weight in (("nw", 0, 0, s * e), ("ne", 0, 1, s * w),
                                 ("sw", 1, 0, n * e), ("se", 1, 1, n * w)):
        cx, cy = ix + dx, iy + dy
        ok = (cx >= 0) & (cx < W) & (cy >= 0) & (cy < H)
        out[name] = (np.where(ok, cy * W + cx, 0), ok, weight.astype(_F))
    return out


def _values(v: Any, idx: Any, ok: Any) -> Any:
    """(N, C, P) values at the corners (0 outside) of (N, C, H W) planes."""
    n = v.shape[0]
    picked = np.take_along_axis(v, idx.reshape(n, 1, -1), axis=2)
    return np.where(ok.reshape(n, 1, -1), picked, _F(0))


def _grid_sampler(ctx: Any, func: Any, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
    inp, grid, mode, padding, align = _grid_args(args, 0)
    out = meta(func, args, kw)
    N, C, H, W = inp.shape
    v = to_numpy(inp).astype(_F).reshape(N, C, H * W)
    if mode == _NEAREST:
        idx, ok = _nearest(inp, grid, padding, align)
        return from_numpy(_values(v, idx, ok).reshape(tuple(out.shape)), out.dtype)
    cs = _corners(inp, grid, padding, align)
    names = ("nw", "ne", "sw", "se")
    vals = np.stack([_values(v, cs[k][0], cs[k][1]) for k in names], -1)  # (N, C, P, 4)
    wts = np.stack([cs[k][2].reshape(N, 1, -1) for k in names], -1)  # (N, 1, P, 4)
    r = certified.matmul_f32(np.ascontiguousarray(vals[..., None, :]),
                             np.ascontiguousarray(np.broadcast_to(wts, vals.shape)[..., None]))
    return from_numpy(r.reshape(tuple(out.shape)), out.dtype)


def _nearest(inp: Any, grid: Any, padding: int, align: bool) -> tuple[Any, Any]:
    H, W = inp.shape[-2:]
    gv = to_numpy(grid).astype(_F)
    with np.errstate(all="ignore"):
        x = np.rint(_position(gv[..., 0], W, align, padding)[0])
        y = np.rint(_position(gv[..., 1], H, align, padding)[0])
    ix, iy = np.nan_to_num(x, nan=-1).astype(np.int64), np.nan_to_num(y, nan=-1).astype(np.int64)
    ok = (ix >= 0) & (ix < W) & (iy >= 0) & (iy < H)
    return np.where(ok, iy * W + ix, 0), ok


def _scatter_into(v_shape: tuple[int, ...], parts: list[tuple[Any, Any, Any]]) -> Any:
    """Input gradient: the exact sum of every (flat index, mask, (N, C, P) values) part
    into (N, C, H W) planes, rounded once."""
    N, C, HW = v_shape
    dst, vals = [], []
    for idx, ok, contrib in parts:
        planes = (np.arange(N)[:, None, None] * C + np.arange(C)[None, :, None]) * HW
        d = planes + idx.reshape(N, 1, -1)
        keep = np.broadcast_to(ok.reshape(N, 1, -1), d.shape)
        dst.append(d[keep])
        vals.append(np.broadcast_to(contrib, d.shape)[keep])
    flat = scatter_sum(np.zeros(N * C * HW, _F), np.concatenate(dst), np.concatenate(vals))
    return flat.reshape(N, C, HW)


def _grid_sampler_bwd(ctx: Any, func: Any, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
    g = args[0]
    inp, grid, mode, padding, align = _grid_args(args, 1)
    N, C, H, W = inp.shape
    gv = to_numpy(g).astype(_F).reshape(N, C, -1)
    if mode == _NEAREST:
        idx, ok = _nearest(inp, grid, padding, align)
        gi = _scatter_into((N, C, H * W), [(idx, ok, gv)])
        return (from_numpy(gi.reshape(tuple(inp.shape)), inp.dtype),
                torch.zeros_like(grid))
    cs = _corners(inp, grid, padding, align)
    names = ("nw", "ne", "sw", "se")
    with np.errstate(all="ignore"):
        parts = [(cs[k][0], cs[k][1], cs[k][2].reshape(N, 1, -1) * gv) for k in names]
    gi = _scatter_into((N, C, H * W), parts)
    v = to_numpy(inp).astype(_F).reshape(N, C, H * W)
    val = {k: _values(v, cs[k][0], cs[k][1]) for k in names}  # (N, C, P)
    gx = _grid_axis(gv, [val["ne"], val["nw"], val["se"], val["sw"]],
                    [cs["s"], -cs["s"], cs["n"], -cs["n"]], cs["mx"])
    gy = _grid_axis(gv, [val["sw"], val["nw"], val["se"], val["ne"]],
                    [cs["e"], -cs["e"], cs["w"], -cs["w"]], cs["my"])
    gg = np.stack([gx, gy], -1).reshape(tuple(grid.shape))
    return from_numpy(gi.reshape(tuple(inp.shape)), inp.dtype), from_numpy(gg, grid.dtype)


def _grid_axis(g: Any, vals: list[Any], dists: list[Any], mult: Any) -> Any:
    """fl32(fl32(exact sum over channels and the four terms of g val dist) mult)."""
    N, C, P = g.shape
    a = np.concatenate([np.broadcast_to(g, (N, C, P))] * 4, axis=1)  # (N, 4C, P)
    b = np.concatenate(vals, axis=1)
    c = np.concatenate([np.broadcast_to(d.reshape(N, 1, P), (N, C, P)) for d in dists], 1)
    s = triple_dot_f32(*(np.moveaxis(t, 1, -1) for t in (a, b, c)))  # (N, P)
    with np.errstate(all="ignore"):
        return s * mult.reshape(N, P)


#: aten op name (overload packet) -> handler
GRIDS: dict[str, Handler] = {
    "affine_grid_generator": _affine, "affine_grid_generator_backward": _affine_bwd,
    "grid_sampler_2d": _grid_sampler, "grid_sampler_2d_backward": _grid_sampler_bwd,
}
