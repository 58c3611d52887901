"""aten's accumulating scatters on ampref's numerics (``specs/torch.md`` TRC-IDX-001):
``scatter_add``, ``index_add``, ``index_put`` with ``accumulate=True``, ``col2im``
(``nn.Fold``), and the backward ops of gathers: ``gather`` and ``index_select`` (their
backward is ``scatter_add`` / ``index_add``), advanced indexing (``index_put``), max
pooling 2-d / 3-d and adaptive max pooling, reflection and replication padding, nearest
upsampling (plain and ``nearest-exact``, 1-d to 3-d).

One rule serves them all: each destination element becomes the **exact** sum of its
old value (``+0`` for a backward's fresh gradient) and every value scattered to it,
rounded once to float32 and then to the output dtype. Where at most one value meets an
old ``+0`` (distinct indices, windows that do not overlap) that is torch's value, since
one IEEE addition to zero is exact; where several meet, torch adds them one by one in
its loop order (float32 on the CPU, atomics in any order on CUDA), and the exact sum is
the order-free reference. Zeros: the sum's sign, ``-0`` only when every term is ``-0``
(a fresh gradient's ``+0`` makes every empty or all-zero sum ``+0``, as torch's
``0 + g``). NaN and inf stay with their destination.

Where the values go is asked of torch itself, on integer position tensors: the same op
(``gather``, ``index_select``, ``index``, ``im2col``, the padding) applied to the
positions of the destination gives each value's destination, so every indexing rule
torch has (negative indices, boolean masks, broadcasting, dilation) is torch's own.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from .convert import from_numpy, to_numpy
from .replay import NP

__all__ = ["INDEXING", "scatter_sum"]

Handler = Callable[[Any, Any, tuple[Any, ...], dict[str, Any]], Any]


def scatter_sum(base: Any, dst: Any, vals: Any) -> Any:
    """``out[j] = fl32(base[j] + sum of vals[i] with dst[i] == j)``, the sum exact.

    ``base`` (any shape, flattened) holds every destination; ``dst`` are flat positions
    in it, one per value of ``vals`` (same size). Returns float32 of ``base``'s size.
    Zeros, NaN and inf as the module says; float64 operands are summed in float64.
    """
    wide = np.float64 if np.asarray(base).dtype == np.float64 else np.float32
    b = np.asarray(base, wide).reshape(-1)
    if b.size == 0:  # no destination, so no value either (torch checks the indices)
        return b
    pos = np.concatenate([np.arange(b.size), np.asarray(dst, np.int64).reshape(-1)])
    v = np.concatenate([b, np.asarray(vals, wide).reshape(-1)])
    order = np.argsort(pos, kind="stable")  # every destination present: segments 0..n-1
    pos, v = pos[order], v[order]
    starts = np.flatnonzero(np.r_[True, pos[1:] != pos[:-1]])
    return NP.segment_sum(v[:, None], starts)[:, 0]


def _positions(shape: Any) -> torch.Tensor:
    """Each element's flat position, as an int64 tensor of ``shape``."""
    return torch.arange(math.prod(shape), dtype=torch.int64).reshape(tuple(shape))


def _finish(result: Any, target: torch.Tensor, inplace: bool) -> Any:
    out = from_numpy(np.asarray(result).reshape(target.shape), target.dtype)
    return target.copy_(out) if inplace else out


def _scatter_add(inplace: bool) -> Handler:
    def handler(ctx: Any, func: Any, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
        """self[index[i][j]][j] += src[i][j] (dim 0): destinations are gather's sources."""
        x, dim, index, src = args[:4]
        dst = torch.gather(_positions(x.shape), dim, index)
        vals = src[tuple(slice(0, n) for n in index.shape)]
        return _finish(scatter_sum(to_numpy(x), to_numpy(dst), to_numpy(vals)), x, inplace)
    return handler


def _index_add(inplace: bool) -> Handler:
    def handler(ctx: Any, func: Any, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
        """self.index_select(dim, index) += source, ``alpha != 1`` as ``fl(alpha s)``."""
        x, dim, index, source = args[:4]
        alpha = args[4] if len(args) > 4 else kw.get("alpha", 1)
        dst = torch.index_select(_positions(x.shape), dim, index)
        vals = to_numpy(source)
        if alpha != 1:
            with np.errstate(all="ignore"):
                vals = vals * vals.dtype.type(alpha)
        return _finish(scatter_sum(to_numpy(x), to_numpy(dst), vals), x, inplace)
    return handler


def _index_put(inplace: bool) -> Handler:
    def handler(ctx: Any, func: Any, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
        """``accumulate=True``: self[indices] += values; without it the values are
        copied (no rounding, torch's choice among repeated indices): torch runs it."""
        x, indices, values = args[:3]
        if not (args[3] if len(args) > 3 else kw.get("accumulate", False)):
            return func(*args, **kw)
        dst = torch.ops.aten.index.Tensor(_positions(x.shape), list(indices))
        vals = values.expand(dst.shape) if values.shape != dst.shape else values
        return _finish(scatter_sum(to_numpy(x), to_numpy(dst), to_numpy(vals)), x, inplace)
    return handler


def _put(inplace: bool) -> Handler:
    def handler(ctx: Any, func: Any, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
        """``put`` with ``accumulate=True`` (``take``'s backward): flat positions."""
        x, index, source = args[:3]
        if not (args[3] if len(args) > 3 else kw.get("accumulate", False)):
            return func(*args, **kw)
        dst = torch.take(_positions(x.shape), index)
        return _finish(scatter_sum(to_numpy(x), to_numpy(dst), to_numpy(source)), x, inplace)
    return handler


def _reduced(x: Any, dst: Any, vals: Any, reduce: str, include: bool) -> Any:
    """``sum``: the scatter above (without ``include`` the old value of a destination
    that receives values is left out); ``mean``: that sum divided in float32 by the
    number of terms (a destination that receives nothing keeps its value)."""
    dst = to_numpy(dst).reshape(-1)
    base = to_numpy(x).reshape(-1)
    hit = np.bincount(dst, minlength=base.size)
    if not include:
        base = np.where(hit > 0, base.dtype.type(0), base)
    r = scatter_sum(base, dst, to_numpy(vals))
    if reduce == "mean":
        count = (hit + (1 if include else 0)).astype(r.dtype)
        with np.errstate(all="ignore"):
            r = np.where(hit > 0, r / np.maximum(count, 1), r)
    return r


def _selects_or_refuses(op: str, reduce: Any, summed: tuple[str, ...]) -> bool:
    """True where torch itself runs the op: ``amax``/``amin`` select (no rounding), and
    a name torch does not know raises torch's own error. ``prod`` rounds in torch's
    loop order, which ampref does not model: refused, naming what is emulated."""
    if reduce == "prod":
        raise NotImplementedError(f"ampref.torch: {op} reduce='prod' (emulated: "
                                  f"{', '.join(summed)}, amax, amin)")
    return reduce not in summed


def _scatter_reduce(inplace: bool) -> Handler:
    def handler(ctx: Any, func: Any, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
        """self[index[i][j]][j] (dim 0) reduced with src[i][j] (:func:`_reduced`)."""
        x, dim, index, src, reduce = args[:5]
        if _selects_or_refuses("scatter_reduce", reduce, ("sum", "mean")):
            return func(*args, **kw)
        include = bool(args[5] if len(args) > 5 else kw.get("include_self", True))
        dst = torch.gather(_positions(x.shape), dim, index)
        vals = src[tuple(slice(0, n) for n in index.shape)]
        return _finish(_reduced(x, dst, vals, reduce, include), x, inplace)
    return handler


def _index_reduce(inplace: bool) -> Handler:
    def handler(ctx: Any, func: Any, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
        """self.index_select(dim, index) reduced with source (:func:`_reduced`; torch
        names the reductions ``mean``, ``amax``, ``amin``, ``prod``)."""
        x, dim, index, source, reduce = args[:5]
        if _selects_or_refuses("index_reduce", reduce, ("mean",)):
            return func(*args, **kw)
        include = bool(args[5] if len(args) > 5 else kw.get("include_self", True))
        dst = torch.index_select(_positions(x.shape), dim, index)
        return _finish(_reduced(x, dst, source, reduce, include), x, inplace)
    return handler


def _planes(x: torch.Tensor, nd: int) -> tuple[int, int]:
    """(number of planes, elements per plane) of ``x``'s last ``nd`` dimensions."""
    return math.prod(x.shape[:-nd]), math.prod(x.shape[-nd:])


def _per_plane(g: torch.Tensor, x: torch.Tensor, nd: int, within: Any) -> Any:
    """Scatter ``g`` plane by plane to the positions ``within`` (plane-relative, one row
    per plane or one shared row) into a fresh +0 gradient of ``x``'s shape."""
    planes, size = _planes(x, nd)
    within = np.asarray(within, np.int64)
    within = within[None, :] if within.ndim == 1 else within.reshape(planes, -1)
    dst = np.arange(planes)[:, None] * size + within
    vals = to_numpy(g).reshape(planes, -1)
    base = np.zeros(planes * size, vals.dtype)
    return from_numpy(scatter_sum(base, dst, vals).reshape(x.shape), g.dtype)


def _max_pool_bwd(nd: int) -> Handler:
    def handler(ctx: Any, func: Any, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
        """Each output gradient goes to its window's argmax (``indices``, the last
        argument, plane-relative as torch returns them)."""
        g, x, idx = args[0], args[1], args[-1]
        return _per_plane(g, x, nd, to_numpy(idx).reshape(_planes(x, nd)[0], -1))
    return handler


def _pad_bwd(forward: Any, nd: int) -> Handler:
    def handler(ctx: Any, func: Any, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
        """Reflection / replication padding's backward: the forward applied to one
        plane's positions tells where each padded element came from."""
        g, x, padding = args[:3]
        plane = torch.arange(math.prod(x.shape[-nd:]), dtype=torch.float64)
        src = forward(plane.reshape((1, 1) + tuple(x.shape[-nd:])), padding)
        return _per_plane(g, x, nd, src.numpy().astype(np.int64).reshape(-1))
    return handler


def _nearest_bwd(forward: Any, nd: int) -> Handler:
    def handler(ctx: Any, func: Any, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
        """Nearest upsampling's backward (plain and ``nearest-exact``, 1-d to 3-d): the
        forward applied to one plane's positions gives each output's source."""
        g, out_size, in_size = args[:3]
        spatial = tuple(int(n) for n in in_size[-nd:])
        plane = torch.arange(math.prod(spatial), dtype=torch.float64).reshape(
            (1, 1) + spatial)
        src = forward(plane, out_size, *args[3:], **kw)
        x = torch.empty(tuple(in_size), dtype=g.dtype, device="meta")
        return _per_plane(g, x, nd, src.numpy().astype(np.int64).reshape(-1))
    return handler


def _col2im(ctx: Any, func: Any, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
    """``nn.Fold`` (and ``nn.Unfold``'s backward): each column entry is added to the
    image position ``im2col`` reads it from; entries in the zero padding are dropped."""
    cols, out_size, kernel, dilation, padding, stride = args[:6]
    batched = cols.ndim == 3
    c = cols.shape[-2] // (kernel[0] * kernel[1])
    shape = ((cols.shape[0],) if batched else ()) + (c, *out_size)
    plane = torch.arange(1, c * out_size[0] * out_size[1] + 1, dtype=torch.float64)
    src = torch.ops.aten.im2col(plane.reshape(1, c, *out_size), kernel, dilation, padding,
                                stride).numpy().astype(np.int64).reshape(-1) - 1
    keep = src >= 0
    n = cols.shape[0] if batched else 1
    size = c * out_size[0] * out_size[1]
    dst = np.arange(n)[:, None] * size + src[keep][None, :]
    vals = to_numpy(cols).reshape(n, -1)[:, keep]
    out = scatter_sum(np.zeros(n * size, vals.dtype), dst, vals)
    return from_numpy(out.reshape(shape), cols.dtype)


def _build() -> dict[str, Handler]:
    aten = torch.ops.aten
    table: dict[str, Handler] = {
        "scatter_add": _scatter_add(False), "scatter_add_": _scatter_add(True),
        "index_add": _index_add(False), "index_add_": _index_add(True),
        "index_put": _index_put(False), "index_put_": _index_put(True),
        "_index_put_impl_": _index_put(True), "col2im": _col2im,
        "put": _put(False), "put_": _put(True),
        "scatter_reduce": _scatter_reduce(False), "scatter_reduce_": _scatter_reduce(True),
        "index_reduce": _index_reduce(False), "index_reduce_": _index_reduce(True),
        "max_pool2d_with_indices_backward": _max_pool_bwd(2),
        "max_pool3d_with_indices_backward": _max_pool_bwd(3),
        "adaptive_max_pool2d_backward": _max_pool_bwd(2),
        "adaptive_max_pool3d_backward": _max_pool_bwd(3),
        "fractional_max_pool2d_backward": _max_pool_bwd(2),
        "fractional_max_pool3d_backward": _max_pool_bwd(3),
    }
    for name in ("upsample_nearest", "_upsample_nearest_exact"):
        for k in (1, 2, 3):
            table[f"{name}{k}d_backward"] = _nearest_bwd(getattr(aten, f"{name}{k}d"), k)
    for kind in ("reflection", "replication"):
        for nd in (1, 2, 3):
            name = f"{kind}_pad{nd}d"
            table[f"{name}_backward"] = _pad_bwd(getattr(aten, name), nd)
    return table


#: aten op name (overload packet) -> handler
INDEXING: dict[str, Handler] = _build()
