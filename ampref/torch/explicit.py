"""torch ops whose C++ kernel is a few other aten ops but that reach a dispatch mode
whole, without a decomposition torch can run (``specs/torch.md`` TRC-EMU-007): each
written here as the ops its kernel calls, in its order and dtypes, so that the modes
dispatch those parts to ampref's handlers.

Autograd records such an op before the mode sees it; its backward formula is torch's
and reaches the mode as ordinary aten ops.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

__all__ = ["RECOMPOSED"]


def _allclose(a: torch.Tensor, b: torch.Tensor, rtol: float = 1e-05, atol: float = 1e-08,
              equal_nan: bool = False) -> bool:
    """``allclose``: torch's kernel is ``isclose(...).all().item()``; ``isclose``'s
    differences and tolerances are then ampref's arithmetic (its decomposition)."""
    return bool(torch.isclose(a, b, rtol, atol, equal_nan).all().item())


def _renorm(x: torch.Tensor, p: float, dim: int, maxnorm: float) -> torch.Tensor:
    """``renorm``: every slice along ``dim`` whose ``p``-norm exceeds ``maxnorm`` is
    multiplied by ``maxnorm / (norm + 1e-7)``, others by 1.

    As torch's kernel: the norm over every other dimension (``keepdim``) in float32 for
    16-bit tensors (torch asks for CUDA's accumulation type on every device), else in
    the tensor's dtype; the factor in the norm's dtype, ``maxnorm`` and ``1e-7`` first
    rounded to it, then cast to the tensor's dtype; then one multiplication. A NaN norm
    is not above ``maxnorm``: its slice is multiplied by 1 (NaN elements stay NaN); an
    infinite norm gives the factor 0."""
    dims = [d for d in range(x.ndim) if d != dim % max(x.ndim, 1)]
    wide = torch.float32 if x.dtype in (torch.float16, torch.bfloat16) else None
    norm = torch.linalg.vector_norm(x, p, dims, keepdim=True, dtype=wide)
    limit = torch.full_like(norm, maxnorm)
    scaled = torch.div(limit, torch.add(norm, torch.full_like(norm, 1e-7)))
    factor = torch.where(torch.gt(norm, limit), scaled, torch.ones_like(norm))
    return torch.mul(x, factor.to(x.dtype))


#: aten op name (overload packet) -> the ops torch's kernel is made of
RECOMPOSED: dict[str, Callable[..., Any]] = {
    "allclose": _allclose,
    "renorm": _renorm,
}
