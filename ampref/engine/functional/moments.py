"""Variance and standard deviation (ENG-VAR-001), the two-pass formula with the engine's
rounding points, so a hand-written LayerNorm or BatchNorm (``x.var(-1, unbiased=False)``)
ports unchanged.

Over the ``n`` elements of each reduced slice, in float32 (float64 for float64 tensors):

1. ``m = fl32(fl32(exact sum x) / n)`` (the mean of ENG-RED-001, before its final
   rounding to the input's format);
2. ``d = fl32(x - m)``, then ``s = fl32(exact sum fl32(d * d))``;
3. ``var = fl32(s / max(0, n - correction))``, ``std = fl32(sqrt(var))`` (sqrt correctly
   rounded); the result is rounded once to the input's format.

With ``n - correction <= 0`` the division gives inf (s > 0) or NaN (s = 0), as torch's
(torch also warns). NaN or inf in a slice give NaN. Not autocast-listed ops (torch's CUDA
lists have no var or std; under CPU autocast they run in the input's format).

Derivatives (torch's formulas, float32 steps): d var / dx = fl32(fl32(fl32(2 g) / (n - c))
* d); d std / dx = that with g replaced by fl32(g / fl32(2 r)), r = fl32(sqrt(var)) before
the rounding to the input's format.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ampref.common.checks import check_flag, check_real
from ..tensor import Tensor, round_to, storage_dtype
from .core import check_tensor, dims_of, expand_grad, make

__all__ = ["std", "var"]


def _moments(x: Tensor, dim: Any, correction: Any, keepdim: Any,
             op: str) -> tuple[Any, Any, float, tuple[int, ...], bool]:
    """(var in the compute dtype, deviations d, n - correction, axes, keepdims)."""
    keepdims = check_flag("keepdim", keepdim)
    c = check_real(f"{op} correction", correction)
    be, axes = x.backend, dims_of(x, dim)
    n = math.prod(x.shape[a] for a in axes) if axes else 1
    dt = storage_dtype(x.format)
    with np.errstate(all="ignore"):
        m = be.sum(x.data, axes, True) / dt(n)
        d = x.data - m
        s = be.sum(d * d, axes, keepdims)
        dof = max(0.0, n - c)
        v = (s / dt(dof)).astype(dt)
    return v, d, dof, axes, keepdims


def var(input: Tensor, dim: Any = None, *, correction: float = 1,
        keepdim: bool = False) -> Tensor:
    """Variance over ``dim`` (all dims when None) with ``correction`` (1: Bessel's; 0: the
    population variance a LayerNorm uses); rounding as in the module docstring."""
    x = check_tensor(input, "var")
    v, d, dof, axes, keepdims = _moments(x, dim, correction, keepdim, "var")
    be, dt = x.backend, storage_dtype(x.format)

    def bwd(g: Any) -> tuple[Any]:
        with np.errstate(all="ignore"):
            scale = (dt(2) * g) / dt(dof)
            return (expand_grad(be.xp, scale, x.shape, axes, keepdims) * d,)
    return make(be, round_to(be, v, x.format), x.format, "var", [x], bwd)


def std(input: Tensor, dim: Any = None, *, correction: float = 1,
        keepdim: bool = False) -> Tensor:
    """Standard deviation: fl_out(fl32(sqrt(var))) with var as :func:`var` computes it."""
    x = check_tensor(input, "std")
    v, d, dof, axes, keepdims = _moments(x, dim, correction, keepdim, "std")
    be, dt = x.backend, storage_dtype(x.format)
    with np.errstate(all="ignore"):
        root = be.xp.sqrt(v.astype(be.xp.float64)).astype(dt)

    def bwd(g: Any) -> tuple[Any]:
        with np.errstate(all="ignore"):
            g_var = g / (dt(2) * root)
            scale = (dt(2) * g_var) / dt(dof)
            return (expand_grad(be.xp, scale, x.shape, axes, keepdims) * d,)
    return make(be, round_to(be, root, x.format), x.format, "std", [x], bwd)
