"""Outputs with torch's memory layout: ampref computes values in NumPy, whose results
are contiguous; torch's kernels give some outputs other strides (an elementwise op on a
transposed tensor keeps the transpose, ``_to_copy`` preserves the layout, the CPU
attention kernel returns a permuted output). Code after the op can depend on them
(``linear`` takes another path for a non-contiguous input; ``view`` refuses one), so an
emulated output is given torch's strides (``specs/torch.md`` TRC-EMU-005).

torch's strides come from :func:`ampref.torch.convert.kernel_meta`: for elementwise ops
(whose meta strides differ from the CPU kernel's once operands have mixed layouts) and
the ops of :data:`~ampref.torch.convert.KERNEL_META`, torch's CPU kernel run once per call
signature on zeros; for every other op, and for ops that write into arguments, draw
random numbers or have value-dependent shapes, the meta device (cached likewise).
"""

from __future__ import annotations

from typing import Any

import torch

from .convert import kernel_meta

__all__ = ["match_layout"]

def _expected(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    try:
        out = kernel_meta(func, args, kwargs)
    except Exception:  # noqa: BLE001 - ops without a meta kernel keep ampref's layout
        return None
    outs = out if isinstance(out, (list, tuple)) else [out]
    return tuple(o.stride() if isinstance(o, torch.Tensor) else () for o in outs)


def _restride(t: Any, stride: tuple[int, ...]) -> Any:
    if not isinstance(t, torch.Tensor) or t.stride() == stride or len(stride) != t.dim():
        return t
    if t.numel() == 0:  # no values to copy; torch's empty outputs have its strides too
        return torch.empty_strided(t.shape, stride, dtype=t.dtype, device=t.device)
    if t.numel() == 1:
        return t
    out = torch.empty_strided(t.shape, stride, dtype=t.dtype, device=t.device)
    return out.copy_(t)


def match_layout(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> Any:
    """``out`` (an emulated result) with the strides torch's kernel would give it; values
    unchanged (a copy). In-place results (an input returned) are left as they are."""
    outs = out if isinstance(out, (list, tuple)) else [out]
    if any(o is a for o in outs if isinstance(o, torch.Tensor) for a in args) or not any(
            isinstance(o, torch.Tensor) and (o.dim() > 1 or o.numel() == 0) for o in outs):
        return out
    strides = _expected(func, args, kwargs)
    if strides is None or len(strides) != len(outs):
        return out
    fixed = [_restride(o, s) for o, s in zip(outs, strides, strict=True)]
    if not isinstance(out, (list, tuple)):
        return fixed[0]
    return type(out)(fixed)
