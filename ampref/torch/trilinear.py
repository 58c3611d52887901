"""aten's ``_trilinear`` (``nn.Bilinear``, ``F.bilinear`` and their gradients) on
ampref's numerics (``specs/torch.md`` TRC-NN-010).

``_trilinear(i1, i2, i3, expand1, expand2, expand3, sumdim)`` unsqueezes each input at
its ``expand`` axes, multiplies the three broadcast, and sums over ``sumdim`` (those
axes removed). ampref gives each output element the exact sum of its triple products
rounded once to float32 (ACC-EXA-003), then to the output dtype. ``bilinear``'s bias is
a separate add (emulated as TRC-PWO-001). float64 inputs are refused.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from ampref.accumulation.tripledot import triple_dot_f32

from .convert import from_numpy, meta, to_numpy

__all__ = ["TRILINEAR"]

Handler = Callable[[Any, Any, tuple[Any, ...], dict[str, Any]], Any]


def _lift(t: torch.Tensor, expand: Any) -> Any:
    """The input as float32 with size-1 axes inserted at its ``expand`` positions."""
    v = to_numpy(t).astype(np.float32)
    for d in sorted(int(e) for e in expand):
        v = np.expand_dims(v, d)
    return v


def _trilinear(ctx: Any, func: Any, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
    i1, i2, i3, e1, e2, e3, sumdim = args[:7]
    if torch.float64 in (i1.dtype, i2.dtype, i3.dtype):
        raise NotImplementedError("ampref.torch: _trilinear (bilinear) of float64 operands")
    out = meta(func, args, kw)
    a, b, c = _lift(i1, e1), _lift(i2, e2), _lift(i3, e3)
    shape = np.broadcast_shapes(a.shape, b.shape, c.shape)
    summed = sorted(int(d) % len(shape) for d in sumdim)
    keep = [d for d in range(len(shape)) if d not in summed]

    def rows(v: Any) -> Any:  # summed axes last, flattened into one
        full = np.broadcast_to(v, shape).transpose(keep + summed)
        return full.reshape(full.shape[:len(keep)] + (-1,))
    r = triple_dot_f32(rows(a), rows(b), rows(c))
    return from_numpy(r.reshape(tuple(out.shape)), out.dtype)


#: aten op name (overload packet) -> handler
TRILINEAR: dict[str, Handler] = {"_trilinear": _trilinear}
