"""aten's negative log-likelihood (``nll_loss_forward`` / ``nll_loss2d_forward`` and
their backward ops; ``cross_entropy`` reaches them through ``_log_softmax``) on ampref's
numerics (``specs/torch.md`` TRC-NN-003).

Per kept target (not ``ignore_index``) the term is ``-logp[i, t_i] w[t_i]``, one float32
product (``w = 1`` without class weights, then exact); ``none`` returns the terms
(ignored rows ``+0``), ``sum`` the exact sum of the terms rounded once, ``mean`` that sum
divided in float32 by the total weight, the exact sum of the kept targets' weights
rounded once (the count of kept targets without weights). A zero sum is ``+0``, as
torch, which accumulates the terms from ``+0``. The backward writes, at each kept
target, ``w fl32(-g / W)`` (mean), ``w (-g)`` (sum) or ``(-w) g_i`` (none), as torch's
CPU kernel. The 2-d ops (``nll_loss2d``: class axis 1 of ``(N, C, H, W)``, targets
``(N, H, W)``, segmentation) are the same with the class axis moved last. Float64
log-probabilities take every step in float64 instead (sums rounded once to float64;
before 2026-11-27 they went through float32).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from ampref.accumulation import certified
from ampref.formats.exactsum import sum64

from .convert import from_numpy, meta, to_numpy

__all__ = ["NLL"]

Handler = Callable[[Any, Any, tuple[Any, ...], dict[str, Any]], Any]


def _exact_sum(values: Any) -> Any:
    """The exact sum of ``values`` rounded once to their format (float32 or float64)."""
    if np.asarray(values).dtype == np.float64:
        return np.float64(sum64(values))
    return certified.sum_f32(values)


class _Rows:
    """The log-probabilities as (rows, classes) in their compute format ``ft`` (float32,
    float64 for float64), targets and kept rows, each kept row's class weight, for a
    class axis at ``class_axis``."""

    def __init__(self, logp: torch.Tensor, target: torch.Tensor, weight: Any, ignore: int,
                 class_axis: int) -> None:
        self.ft = np.float64 if logp.dtype == torch.float64 else np.float32
        lp = to_numpy(logp).astype(self.ft)
        if lp.ndim == 1:
            lp = lp[None]
        self.shape = lp.shape
        self.moved = np.moveaxis(lp, class_axis, -1) if class_axis != -1 else lp
        self.lp = self.moved.reshape(-1, lp.shape[class_axis])
        self.t = to_numpy(target).reshape(-1)
        self.valid = self.t != ignore
        self.safe = np.where(self.valid, self.t, 0)
        w = None if weight is None else to_numpy(weight).astype(self.ft)
        self.w = np.ones(self.t.size, self.ft) if w is None else np.where(
            self.valid, w[self.safe], self.ft(0))
        self.weighted = w is not None


def _class_axis(name: str) -> int:
    return 1 if name.startswith("nll_loss2d") else -1


def _nll(ctx: Any, func: Any, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
    logp, target, weight, reduction, ignore = args
    out = meta(func, args, kw)
    r = _Rows(logp, target, weight, ignore, _class_axis(func.overloadpacket.__name__))
    picked = r.lp[np.arange(r.t.size), r.safe]
    ft = r.ft
    with np.errstate(all="ignore"):
        # one product (exact without weights); ignored rows +0, not -0 * w
        terms = np.where(r.valid, -picked * r.w, ft(0))
    total = _exact_sum(r.w) if r.weighted else ft(int(r.valid.sum()))
    if reduction == 0:
        res: Any = terms
    else:
        s = _exact_sum(terms) + ft(0)  # a zero sum is +0
        with np.errstate(all="ignore"):
            res = s / ft(total) if reduction == 1 else s
    return from_numpy(np.asarray(res).reshape(out[0].shape), out[0].dtype), \
        from_numpy(ft(total), out[1].dtype)


def _nll_bwd(ctx: Any, func: Any, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
    g, logp, target, weight, reduction, ignore, total = args
    axis = _class_axis(func.overloadpacket.__name__)
    r = _Rows(logp, target, weight, ignore, axis)
    ft = r.ft
    gv = to_numpy(g).astype(ft)
    grad = np.zeros(r.lp.shape, ft)
    rows = np.flatnonzero(r.valid)
    w = r.w[rows]
    with np.errstate(all="ignore"):
        if reduction == 0:
            val = (-w) * gv.reshape(-1)[rows]
        else:
            one = -(gv.reshape(())[()] / ft(to_numpy(total)) if reduction == 1
                    else gv.reshape(())[()])
            val = w * one if r.weighted else np.full(rows.size, one, ft)
    grad[rows, r.t[rows]] = val
    moved: Any = grad.reshape(r.moved.shape)
    if axis != -1:
        moved = np.moveaxis(moved, -1, axis)
    return from_numpy(moved.reshape(logp.shape), logp.dtype)


#: aten op name (overload packet) -> handler
NLL: dict[str, Handler] = {
    "nll_loss_forward": _nll, "nll_loss_backward": _nll_bwd,
    "nll_loss2d_forward": _nll, "nll_loss2d_backward": _nll_bwd,
}
