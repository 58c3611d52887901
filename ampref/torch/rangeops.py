"""aten's ``linspace`` on ampref's numerics (``specs/torch.md`` TRC-PWO-003).

``linspace(start, end, steps)`` is torch's CPU formula in the compute format (float32;
float64 for float64 outputs), each operation rounded nearest-even: ``step = fl(fl(end
- start) / (steps - 1))``; the first ``steps // 2`` values ``fl(start + step i)``, the
rest ``fl(end - step (steps - 1 - i))``, each one fused multiply-add (torch's compiled
kernel contracts the expression: on x86-64 torch 2.13 gives the fused values, not
``fl(start + fl(step i))``), so both ends are exact; then rounded once to the output
dtype (for float32 outputs torch's own values; torch's 16-bit CPU kernels round every
step to the dtype instead). One step gives ``start``; zero steps
an empty tensor. Infinite or NaN ends follow IEEE arithmetic (``inf - inf = NaN``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from ampref.formats.exactsum import add_rounded, fma64
from ampref.formats.table import get_format

from .convert import from_numpy, meta

__all__ = ["RANGES"]

Handler = Callable[[Any, Any, tuple[Any, ...], dict[str, Any]], Any]


def linspace_values(start: float, end: float, steps: int, cf: Any) -> Any:
    """torch's linspace formula in the compute format ``cf`` (module docstring)."""
    a, b = cf(start), cf(end)
    if steps <= 1:
        return np.full(steps, a, cf)
    idx = np.arange(steps)
    half = steps // 2
    with np.errstate(all="ignore"):
        step = (b - a) / cf(steps - 1)
        if cf is np.float64:
            low = fma64(step, idx.astype(np.float64), a)
            high = fma64(-step, (steps - 1 - idx).astype(np.float64), b)
        else:
            # step (24 bits) times an index below 2^29 is exact in float64: one rounding
            f32 = get_format("float32")
            low = add_rounded(a, np.float64(step) * idx, f32, "nearest_even")
            high = add_rounded(b, -np.float64(step) * (steps - 1 - idx), f32, "nearest_even")
    return np.where(idx < half, low, high).astype(cf)


def _linspace(ctx: Any, func: Any, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
    out = meta(func, args, kw)
    start, end, steps = (args + (None,) * 3)[:3]
    start = kw.get("start", start)
    end = kw.get("end", end)
    steps = int(kw.get("steps", steps))
    if isinstance(start, torch.Tensor) or isinstance(end, torch.Tensor):
        start, end = float(start), float(end)  # 0-d tensors (linspace.Tensor_* overloads)
    cf = np.float64 if out.dtype == torch.float64 else np.float32
    return from_numpy(linspace_values(float(start), float(end), steps, cf), out.dtype)


#: aten op name (overload packet) -> handler
RANGES: dict[str, Handler] = {"linspace": _linspace}
