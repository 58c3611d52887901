"""Weighted counts (``specs/torch.md`` TRC-IDX-001): ``torch.bincount`` with weights.

Bin ``j`` holds the exact sum of the weights of the entries equal to ``j``, rounded once
into torch's output dtype: float32 for float32 weights (``fl32(exact sum)``, the
scatter sum of :mod:`ampref.torch.indexops`), float64 for float64, float16 and bfloat16
weights (the exact sum rounded once to float64). torch's CPU kernel adds the weights in
input order in the output dtype; the two agree wherever that running sum is exact. An
empty bin, and one whose weights are all zeros, is +0 (the sum starts from +0, as
torch's does); a NaN weight makes its bin NaN, infinities of both signs too, one sign
of infinity that infinity. Unweighted ``bincount`` (int64 counts) has no floating
output and runs in torch; so do arguments torch refuses, which raise torch's error.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from ampref.formats.exactsum import sum64

from .convert import from_numpy, to_numpy
from .indexops import scatter_sum

__all__ = ["COUNTS"]

Handler = Callable[[Any, Any, tuple[Any, ...], dict[str, Any]], Any]


def _bincount(ctx: Any, func: Any, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
    x = args[0]
    weights = args[1] if len(args) > 1 else kw.get("weights")
    minlength = int(args[2] if len(args) > 2 else kw.get("minlength", 0))
    if (x.dim() != 1 or x.dtype.is_floating_point or (x.numel() and int(x.min()) < 0)
            or minlength < 0 or weights is None or weights.shape != x.shape):
        return func(*args, **kw)  # torch's own error (or its unweighted counts)
    ids = to_numpy(x).astype(np.int64)
    n = max(minlength, int(ids.max()) + 1 if ids.size else 0)
    w = to_numpy(weights)
    if weights.dtype == torch.float32:
        return from_numpy(scatter_sum(np.zeros(n, np.float32), ids, w), torch.float32)
    w64 = w.astype(np.float64)
    sums = np.array([sum64(w64[ids == j]) for j in range(n)], np.float64)
    return from_numpy(sums, torch.float64)


#: aten op name -> handler
COUNTS: dict[str, Handler] = {"bincount": _bincount}
