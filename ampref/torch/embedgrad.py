"""The gradient of ``nn.Embedding`` (``embedding_dense_backward``) on ampref's numerics
(``specs/torch.md`` TRC-IDX-001): each weight row gets the exact sum of the upstream
gradients of its occurrences, rounded once (the engine's embedding gradient), the
``padding_idx`` row +0.

With ``scale_grad_by_freq=True`` each occurrence's gradient is first multiplied by
``s = fl32(1 / count)``, ``count`` the occurrences of its index in the batch (the
padding index counted too, as torch counts it): row ``k`` is ``fl(exact sum of g_i s)``.
torch's CPU kernel adds ``fma(g_i, s, acc)`` one occurrence at a time in index order;
one addition is exact, so a row used once is torch's word. The products ``g_i s`` are
exact in float64 (two 24-bit significands); each is split into its float32 rounding
``hi`` and the remainder ``lo = g_i s - hi`` (at most 24 significant bits), and the
exact scatter of every ``hi`` and ``lo`` rounds each row once. A remainder below
float32's subnormal range (products under about 2^-100) makes the split inexact: those
elements are summed as Python integers and rounded to odd in float64 before the one
rounding to float32 (round-to-odd keeps it a single rounding). float64 gradients: the
products rounded to float64, then the scatter's float64 sum. NaN and inf propagate as in
IEEE arithmetic; an all-zero or empty row is +0.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from ampref.engine import functional as F
from ampref.formats.cast import quantize
from ampref.formats.exactsum import round_odd_exact

from .convert import from_numpy, to_numpy
from .indexops import scatter_sum
from .replay import replay

__all__ = ["EMBEDDING_GRADS"]

Handler = Callable[[Any, Any, tuple[Any, ...], dict[str, Any]], Any]


def _frequency_scaled(g: torch.Tensor, ids: torch.Tensor, num: int) -> Any:
    """Rows of the gradient (num, D) with each occurrence scaled by fl32(1 / count)."""
    idx = to_numpy(ids).reshape(-1).astype(np.int64)
    gv = to_numpy(g).reshape(idx.size, -1)
    width = gv.shape[1]
    counts = np.bincount(idx, minlength=num)
    # torch: a double 1 / count, then cast to the kernel's float opmath type
    scale = np.float64(1.0) / counts[idx].astype(np.float64)
    dst = (idx[:, None] * width + np.arange(width)[None, :]).reshape(-1)
    if gv.dtype == np.float64:
        return scatter_sum(np.zeros(num * width), dst, (gv * scale[:, None]).reshape(-1))
    prod = gv.astype(np.float64) * scale.astype(np.float32).astype(np.float64)[:, None]
    prod = prod.reshape(-1)
    with np.errstate(invalid="ignore", over="ignore"):
        hi = prod.astype(np.float32)
        lo = np.where(np.isfinite(prod), prod - hi.astype(np.float64), 0.0)
    lo32 = lo.astype(np.float32)
    out = scatter_sum(np.zeros(num * width, np.float32), np.concatenate([dst, dst]),
                      np.concatenate([hi, lo32]))
    inexact = lo32.astype(np.float64) != lo
    for pos in np.unique(dst[inexact]):  # remainders below float32's range: rare
        out[pos] = quantize(np.float64(round_odd_exact(prod[dst == pos])), "float32")
    return out


def _embedding_bwd(ctx: Any, func: Any, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
    g, ids, num, padding_idx, by_freq = args
    gw: torch.Tensor | None
    if by_freq:
        rows = _frequency_scaled(g, ids, int(num))
        gw = from_numpy(rows.reshape(int(num), g.shape[-1]), g.dtype)
    else:
        w = torch.zeros((num, g.shape[-1]), dtype=g.dtype)
        (gw,) = replay(lambda w_: F.embedding(to_numpy(ids), w_), [w], [True], g)
    assert gw is not None  # requested above
    if padding_idx is not None and padding_idx >= 0:
        gw[padding_idx] = 0
    return gw


#: aten op name (overload packet) -> handler
EMBEDDING_GRADS: dict[str, Handler] = {"embedding_dense_backward": _embedding_bwd}
