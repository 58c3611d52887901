"""torch's grouped GEMM, ``_grouped_mm`` (the experts of mixture-of-experts layers in
transformers 5: Mixtral, Qwen-MoE, ...), on ampref's matmul (``specs/torch.md``
TRC-NN-014): each group one matmul under the mode's accumulation model, as torch's
CPU kernel runs one ``mm`` per group.

``offs`` holds each group's end (cumulative, int32) along the dimension it splits:

* 2-D ``a`` (rows of every group) with 3-D ``b`` (one matrix per group): group ``g``'s
  rows ``offs[g-1]:offs[g]`` times ``b[g]``; rows past the last offset are undefined in
  torch (its output buffer is not initialised there) and +0 here;
* 3-D with 3-D: a batched matmul, no ``offs``;
* 2-D with 2-D: ``offs`` splits the inner dimension, one output matrix per group
  (``_grouped_mm``'s own backward for ``b``); an empty group is +0;
* 3-D ``a`` with 2-D ``b``: ``offs`` splits ``b``'s columns, ``a[g]`` times group
  ``g``'s columns.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import torch

from ampref.engine import functional as F

from .convert import meta
from .replay import as_torch, forward

__all__ = ["GROUPED"]

Handler = Callable[[Any, Any, tuple[Any, ...], dict[str, Any]], Any]


def _spans(offs: Any, groups: int) -> Iterator[tuple[int, int, int]]:
    """``(group, start, end)`` for each group: the ends are ``offs``, cumulative."""
    ends = [int(v) for v in offs.tolist()] if offs is not None else []
    if len(ends) != groups:
        raise ValueError(f"_grouped_mm: offs has {len(ends)} entries for {groups} groups "
                         "(one cumulative end per group expected)")
    start = 0
    for g, end in enumerate(ends):
        yield g, start, end
        start = end


def _grouped_mm(ctx: Any, func: Any, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
    a, b = args[:2]
    offs = args[2] if len(args) > 2 else kw.get("offs")
    # shape and dtype from torch's CPU kernel run once per signature on zeros
    # (convert.KERNEL_META: the meta kernel applies CUDA's bf16-only rule); that call
    # raises torch's own error for arguments torch refuses (float64, offs not int32,
    # strides not 16-byte aligned, a bias)
    spec = meta(func, args, kw)
    out = torch.zeros(tuple(spec.shape), dtype=spec.dtype)

    def mm(x: Any, y: Any) -> torch.Tensor:
        r = forward(lambda p, q: F.matmul(p, q, accumulation=ctx.accumulation), x, y)
        return as_torch(r, out.dtype)

    if a.ndim == 3 and b.ndim == 3:
        for g in range(a.shape[0]):
            out[g] = mm(a[g], b[g])
    elif a.ndim == 2 and b.ndim == 3:
        for g, s, e in _spans(offs, b.shape[0]):
            if e > s:
                out[s:e] = mm(a[s:e], b[g])
    elif a.ndim == 2 and b.ndim == 2:
        for g, s, e in _spans(offs, out.shape[0]):
            if e > s:
                out[g] = mm(a[:, s:e], b[s:e])
    else:
        for g, s, e in _spans(offs, a.shape[0]):
            if e > s:
                out[:, s:e] = mm(a[g], b[:, s:e])
    return out


#: aten op name (overload packet) -> handler
GROUPED: dict[str, Handler] = {"_grouped_mm": _grouped_mm}
