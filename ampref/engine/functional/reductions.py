"""Reductions: sum and mean, exactly rounded (ENG-RED-001).

``sum`` is fl_out(fl32(exact sum)) whatever the order or the backend; ``mean`` divides the
float32 sum by n in float32.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ampref.common.checks import check_flag
from ampref.formats.table import Format, get_format
from ..tensor import Tensor, round_to, storage_dtype
from .core import autocast_inputs, check_tensor, dims_of, expand_grad, make, to_format

__all__ = ["mean", "sum"]


def sum(input: Tensor, dim: Any = None, keepdim: bool = False, *,
        dtype: str | Format | None = None) -> Tensor:
    """Sum over ``dim`` (all dims when None): fl_out(fl32(exact sum)) (ENG-RED-001).

    ``dtype`` casts the input to that format first, as torch's ``sum(..., dtype=)``
    (ENG-DTY-001); autocast name ``sum`` (fp32_set_opt_dtype under torch-cuda: float32
    output).
    """
    x = check_tensor(input, "sum")
    keepdims = check_flag("keepdim", keepdim)
    (x,), forced, _ = autocast_inputs("sum", [x])  # a policy may list sum in any category
    fmt = get_format(dtype) if dtype is not None else (forced or x.format)
    if fmt != x.format:  # as torch: the input is cast to dtype first (ENG-DTY-001)
        x = to_format(x, fmt)
    be, axes = x.backend, dims_of(x, dim)
    src = x.data
    out = round_to(be, be.sum(src, axes, keepdims), fmt)

    def bwd(g: Any) -> tuple[Any]:
        return (expand_grad(be.xp, g, x.shape, axes, keepdims),)
    return make(be, out, fmt, "sum", [x], bwd)


def mean(input: Tensor, dim: Any = None, keepdim: bool = False) -> Tensor:
    """Mean over ``dim`` (all dims when None): fl_out(fl32(fl32(exact sum) / n)). Not an
    autocast-listed op."""
    x = check_tensor(input, "mean")
    keepdims = check_flag("keepdim", keepdim)
    be, axes = x.backend, dims_of(x, dim)
    n = math.prod(x.shape[a] for a in axes) if axes else 1
    s = be.sum(x.data, axes, keepdims)
    with np.errstate(all="ignore"):
        out = round_to(be, s / storage_dtype(x.format)(n), x.format)

    def bwd(g: Any) -> tuple[Any]:
        return (expand_grad(be.xp, g / storage_dtype(x.format)(n), x.shape, axes, keepdims),)
    return make(be, out, x.format, "mean", [x], bwd)
