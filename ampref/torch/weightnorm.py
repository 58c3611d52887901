"""aten's fused weight normalisation (``nn.utils.parametrizations.weight_norm``,
``nn.utils.weight_norm``: ``_weight_norm_interface`` and its backward) on ampref's
numerics (``specs/torch.md`` TRC-NN-013).

torch runs the fused kernel when the normalised dimension is the first or the last
(``w = g v / ||v||`` over every other dimension); other dimensions are a composite of
ops already emulated. In float32 (``opmath``; 16-bit inputs widened exactly):

* forward: ``norm = fl32(sqrt(fl32(exact sum v^2)))`` (TRC-NN-001's 2-norm, the only
  departure from torch, whose kernel sums in a vectorised order), ``a = fl32(g /
  norm)``, ``w = fl(fl32(v a))`` (one more rounding to a 16-bit dtype); ``norm`` is
  returned in float32 in ``g``'s shape.
* backward: ``s = fl32(exact sum grad_w v)``, ``grad_g = fl(fl32(s / norm))``, ``a =
  fl32(g / norm)``, ``b = fl32(fl32(a grad_g32) / norm)``, ``grad_v = fl(fl32(fl32(a
  grad_w) - b v))`` with ``b v`` fused into the subtraction, as torch's compiled kernel
  contracts ``a * grad_w - b * v`` (measured: 0 of 7,980 words differ from torch given
  its own norms; 966 differ unfused).

IEEE arithmetic throughout: a zero norm gives ``a = ±inf`` or NaN, as in torch. float64
inputs are refused (the exact sums here are float32's).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from ampref.accumulation import certified
from ampref.formats.exactsum import add_rounded
from ampref.formats.table import get_format

from .convert import from_numpy, to_numpy
from .vecnorms import vector_norm

__all__ = ["WEIGHT_NORM"]

Handler = Callable[[Any, Any, tuple[Any, ...], dict[str, Any]], Any]

_F = np.float32


def _others(v: torch.Tensor, dim: int) -> list[int]:
    """The dimensions a norm runs over: all but ``dim`` (first or last)."""
    d = dim % v.dim()
    if d not in (0, v.dim() - 1):
        raise NotImplementedError(f"ampref.torch: _weight_norm_interface over dim {dim} "
                                  "(torch's fused kernel takes the first or last only)")
    if v.dtype == torch.float64:
        raise NotImplementedError("ampref.torch: _weight_norm_interface in float64 "
                                  "(float16, bfloat16 and float32 are emulated)")
    return [i for i in range(v.dim()) if i != d]


def _weight_norm(ctx: Any, func: Any, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
    v, g = args[0], args[1]
    dim = int(args[2] if len(args) > 2 else kw.get("dim", 0))
    norm = to_numpy(vector_norm(v, 2, torch.float32, _others(v, dim), keep=True))
    with np.errstate(all="ignore"):
        a = to_numpy(g).astype(_F) / norm.reshape(tuple(g.shape))
        w = to_numpy(v).astype(_F) * a
    return from_numpy(w, v.dtype), from_numpy(norm.reshape(tuple(g.shape)), torch.float32)


def _exact_dots(x: Any, y: Any, axes: list[int]) -> Any:
    """fl32(exact sum of x y) over ``axes``, kept as size-1 dimensions."""
    rest = [i for i in range(x.ndim) if i not in axes]
    order = rest + axes
    xr = np.transpose(x, order).reshape(-1, int(np.prod([x.shape[i] for i in axes])))
    yr = np.transpose(y, order).reshape(xr.shape)
    s = certified.matmul_f32(xr[:, None, :], yr[:, :, None])[:, 0, 0]
    return s.reshape([x.shape[i] if i in rest else 1 for i in range(x.ndim)])


def _weight_norm_bwd(ctx: Any, func: Any, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
    gw_t, v_t, g_t, n_t = args[:4]
    dim = int(args[4] if len(args) > 4 else kw.get("dim", 0))
    axes = _others(v_t, dim)
    gw, v = to_numpy(gw_t).astype(_F), to_numpy(v_t).astype(_F)
    g, norm = to_numpy(g_t).astype(_F), to_numpy(n_t).astype(_F)
    with np.errstate(all="ignore"):
        s = _exact_dots(gw, v, axes).reshape(g.shape)
        grad_g32 = s / norm
        a = g / norm
        b = (a * grad_g32) / norm
        # fl32(fl32(a grad_w) - b v): the product b v exact in float64, one rounding
        grad_v = add_rounded(a * gw, -(b.astype(np.float64) * v), get_format("float32"),
                             "nearest_even").astype(_F)
    return from_numpy(grad_v, v_t.dtype), from_numpy(grad_g32, g_t.dtype)


#: aten op name (overload packet) -> handler
WEIGHT_NORM: dict[str, Handler] = {"_weight_norm_interface": _weight_norm,
                                   "_weight_norm_interface_backward": _weight_norm_bwd}
