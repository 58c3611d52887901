"""aten's average pooling and the backward of nearest upsampling on ampref's numerics
(``specs/torch.md`` TRC-NN-007). Nearest upsampling itself, padding and pixel shuffles
move values without rounding and run in torch (TRC-EMU-001); nearest upsampling's
backward is :mod:`ampref.torch.indexops`'s scatter.

* ``avg_pool2d``: each window's exact sum (the engine's certified sum, zeros for the
  padding) rounded to float32, divided in float32 by torch's divisor
  (``divisor_override``, else the window's size with or without the padding, as
  ``count_include_pad`` says, windows clipped at the padded edge in ``ceil_mode``), then
  rounded to the output dtype: the engine's mean (ENG-RED-001) over the window.
* ``avg_pool2d_backward``: each input element gets the exact sum of the contributions
  ``fl32(g / divisor)`` of the outputs that read it, rounded once (TRC-IDX-001's
  scatter): a single contribution (windows that do not overlap, the default stride)
  is exact, so then the value is torch's.
* ``_adaptive_avg_pool2d``: torch's windows, the exact window sum rounded to float32,
  divided in float32 by the window's height and then by its width (torch's order); its
  backward sums ``g / kh / kw`` (float32 steps) exactly into each input.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

import ampref.engine.functional as F
from ampref.engine.creation import tensor as engine_tensor

from .convert import from_numpy, meta, to_numpy
from .indexops import scatter_sum

__all__ = ["POOLS"]

Handler = Callable[[Any, Any, tuple[Any, ...], dict[str, Any]], Any]


def _pool_args(args: tuple[Any, ...], kw: dict[str, Any], first: int) -> tuple[Any, ...]:
    names = ("kernel_size", "stride", "padding", "ceil_mode", "count_include_pad",
             "divisor_override")
    vals: dict[str, Any] = {"stride": [], "padding": 0, "ceil_mode": False,
                            "count_include_pad": True, "divisor_override": None}
    vals.update(dict(zip(names, args[first:], strict=False)))
    vals.update({k: v for k, v in kw.items() if k in names})

    def pair(v: Any) -> tuple[int, int]:
        v = list(v) if isinstance(v, (list, tuple)) else [v]
        return (int(v[0]), int(v[-1]))
    k = pair(vals["kernel_size"])
    s = pair(vals["stride"]) if vals["stride"] else k
    return k, s, pair(vals["padding"]), bool(vals["count_include_pad"]), \
        vals["divisor_override"]


def _windows(H: int, W: int, Ho: int, Wo: int, k: Any, s: Any, p: Any,
             include_pad: bool, override: Any) -> tuple[Any, Any, Any]:
    """Row and column starts in the padded image and torch's divisor per output."""
    hs = np.arange(Ho) * s[0] - p[0]
    ws = np.arange(Wo) * s[1] - p[1]
    he, we = np.minimum(hs + k[0], H + p[0]), np.minimum(ws + k[1], W + p[1])
    size = (he - hs)[:, None] * (we - ws)[None, :]
    clipped = (np.minimum(he, H) - np.maximum(hs, 0))[:, None] * \
        (np.minimum(we, W) - np.maximum(ws, 0))[None, :]
    div = np.full((Ho, Wo), override) if override else size if include_pad else clipped
    return hs + p[0], ws + p[1], div.astype(np.float32)


def _avg_pool(ctx: Any, func: Any, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
    x = args[0]
    k, s, p, include_pad, override = _pool_args(args, kw, 1)
    out = meta(func, args, kw)
    Ho, Wo = out.shape[-2:]
    v = to_numpy(x).astype(np.float32)
    H, W = v.shape[-2:]
    r0, c0, div = _windows(H, W, Ho, Wo, k, s, p, include_pad, override)
    # zeros for the padding, and past it for ceil_mode windows (never counted there)
    extra_h = max(0, int(r0[-1]) + k[0] - (H + 2 * p[0]))
    extra_w = max(0, int(c0[-1]) + k[1] - (W + 2 * p[1]))
    pad = [(0, 0)] * (v.ndim - 2) + [(p[0], p[0] + extra_h), (p[1], p[1] + extra_w)]
    win = np.lib.stride_tricks.sliding_window_view(np.pad(v, pad), k, axis=(-2, -1))
    win = win[..., r0, :, :, :][..., c0, :, :]
    sums = F.sum(engine_tensor(np.ascontiguousarray(win).reshape(*win.shape[:-2], -1)), -1)
    with np.errstate(all="ignore"):
        r = np.asarray(sums.numpy(), np.float32) / div
    return from_numpy(r, out.dtype)


def _pairs(rows: Any, cols: Any, in_w: int, out_w: int) -> tuple[Any, Any]:
    """(input position, output position) within a plane for every input element of
    every output window; ``rows[i]`` / ``cols[j]`` list output (i, j)'s input indices."""
    pairs = [(r * in_w + c, i * out_w + j) for i, rs in enumerate(rows)
             for j, cs in enumerate(cols) for r in rs for c in cs]
    inp, outp = (np.array(v, np.int64) for v in zip(*pairs, strict=True))
    return inp, outp


def _move(v: Any, src: Any, dst: Any, shape: tuple[int, int]) -> Any:
    """Plane by plane, the exact sum of ``v``'s elements at ``src`` into positions
    ``dst`` of a fresh +0 plane of ``shape``, rounded once (TRC-IDX-001)."""
    planes = int(np.prod(v.shape[:-2]))
    size = shape[0] * shape[1]
    vals = v.reshape(planes, -1)[:, src]
    d = np.arange(planes)[:, None] * size + dst[None, :]
    out = scatter_sum(np.zeros(planes * size, v.dtype), d, vals)
    return out.reshape(v.shape[:-2] + shape)


def _gather_sum(x: Any, rows: Any, cols: Any, out_hw: tuple[int, int]) -> Any:
    """Per output (i, j) the exact sum of its window's inputs, rounded once."""
    inp, outp = _pairs(rows, cols, x.shape[-1], out_hw[1])
    return _move(x, inp, outp, out_hw)


def _spread_back(g: Any, rows: Any, cols: Any, in_hw: tuple[int, int]) -> Any:
    """The transpose of :func:`_gather_sum`: each input the exact sum of the values of
    the outputs whose window holds it, rounded once."""
    inp, outp = _pairs(rows, cols, in_hw[1], g.shape[-1])
    return _move(g, outp, inp, in_hw)


def _padded_axis(n: int, n_out: int, k: int, s: int, p: int) -> list[list[int]]:
    """Input indices of each output window along one axis (padding positions left out:
    they read +0, which adds nothing)."""
    return [[i for i in range(o * s - p, o * s - p + k) if 0 <= i < n] for o in range(n_out)]


def _avg_pool_bwd(ctx: Any, func: Any, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
    g, x = args[:2]
    k, s, p, include_pad, override = _pool_args(args, kw, 2)
    H, W = x.shape[-2:]
    gv = to_numpy(g).astype(np.float32)
    Ho, Wo = gv.shape[-2:]
    _, _, div = _windows(H, W, Ho, Wo, k, s, p, include_pad, override)
    with np.errstate(all="ignore"):
        delta = gv / div
    rows, cols = _padded_axis(H, Ho, k[0], s[0], p[0]), _padded_axis(W, Wo, k[1], s[1], p[1])
    return from_numpy(_spread_back(delta, rows, cols, (H, W)), x.dtype)


def adaptive_windows(n: int, n_out: int) -> list[list[int]]:
    """torch's adaptive windows along one axis of ``n`` inputs: output ``o`` reads
    ``floor(o n / n_out)`` up to ``ceil((o + 1) n / n_out)`` (exclusive); shared by the
    2-d and 3-d adaptive pools."""
    return [list(range(o * n // n_out, -(-(o + 1) * n // n_out))) for o in range(n_out)]


def _by_window(v: Any, rows: Any, cols: Any) -> Any:
    """``v`` divided in float32 by each window's height, then by its width (torch's
    CPU kernel divides twice, ``sum / kh / kw``)."""
    kh = np.array([len(r) for r in rows], np.float32)[:, None]
    kw = np.array([len(c) for c in cols], np.float32)[None, :]
    with np.errstate(all="ignore"):
        return v / kh / kw


def _adaptive_avg(ctx: Any, func: Any, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
    """Each output: its window's exact sum rounded to float32, then divided in float32
    by the window's height and then its width."""
    x, size = args[:2]
    out = meta(func, args, kw)
    v = to_numpy(x).astype(np.float32)
    rows, cols = adaptive_windows(v.shape[-2], size[0]), adaptive_windows(v.shape[-1], size[1])
    return from_numpy(_by_window(_gather_sum(v, rows, cols, (size[0], size[1])), rows, cols),
                      out.dtype)


def _adaptive_avg_bwd(ctx: Any, func: Any, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
    """Each input: the exact sum of ``g / kh / kw`` (float32 steps) over the windows
    holding it, rounded once."""
    g, x = args[:2]
    gv = to_numpy(g).astype(np.float32)
    H, W = x.shape[-2:]
    rows, cols = adaptive_windows(H, gv.shape[-2]), adaptive_windows(W, gv.shape[-1])
    return from_numpy(_spread_back(_by_window(gv, rows, cols), rows, cols, (H, W)), x.dtype)


#: aten op name (overload packet) -> handler
POOLS: dict[str, Handler] = {
    "avg_pool2d": _avg_pool, "avg_pool2d_backward": _avg_pool_bwd,
    "_adaptive_avg_pool2d": _adaptive_avg, "_adaptive_avg_pool2d_backward": _adaptive_avg_bwd,
}
