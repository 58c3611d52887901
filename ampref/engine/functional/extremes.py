"""Ops that compare values and keep one: ``abs``, ``clamp``, ``max``, ``min``
(ENG-EXT-001).

None of them rounds a result: each output element is an input element, its magnitude, or
a bound rounded to the tensor's format the way torch converts a Python number (through
float32, ENG-PRM-001). Gradients follow torch's definitions: ``abs`` passes ``g sgn(x)``
(0 at ±0); ``clamp`` passes ``g`` where ``min <= x <= max`` (bounds included) and 0
elsewhere, NaN inputs included; ``max``/``min`` along a dim send ``g`` to the returned
index, and over all elements share it evenly among the elements equal to the result
(``g / count`` in float32), as torch's ``evenly_distribute_backward``.
"""

from __future__ import annotations

import builtins
from typing import Any

import numpy as np

from ampref.common.checks import check_flag
from ..indexops import Extremes
from ..indices import IndexTensor
from ..tensor import Tensor, round_to
from .core import SCALAR_TYPES, check_tensor, make, one_dim

__all__ = ["abs", "clamp", "max", "min"]


def abs(input: Tensor) -> Tensor:
    """|x| (exact): abs(-0) = +0, abs(±inf) = inf, NaN stays NaN (sign cleared)."""
    x = check_tensor(input, "abs")
    xp = x.backend.xp
    return make(x.backend, xp.abs(x.data), x.format, "abs", [x],
                lambda g: (g * xp.sign(x.data),))


def _bound(x: Tensor, v: Any, name: str) -> Any:
    if v is None:
        return None
    if isinstance(v, builtins.bool) or not isinstance(v, SCALAR_TYPES):
        raise TypeError(f"clamp: {name} must be a real number or None, got "
                        f"{type(v).__name__}: {v!r}")
    return round_to(x.backend, x.backend.xp.asarray([v], dtype=x.backend.xp.float64),
                    x.format)[0]


def clamp(input: Tensor, min: float | None = None, max: float | None = None) -> Tensor:
    """min(max(x, min), max) with the bounds rounded to x's format (as torch converts
    them); ``min > max`` gives ``max`` everywhere, NaN stays NaN, -0 at a bound of 0
    stays -0 (torch's).

    Raises:
        ValueError: neither bound given. TypeError: a bound that is not a real number.
    """
    x = check_tensor(input, "clamp")
    if min is None and max is None:
        raise ValueError("clamp: at least one of min and max must be given")
    lo, hi = _bound(x, min, "min"), _bound(x, max, "max")
    xp, out = x.backend.xp, x.data
    # select, never compare-and-pick: -0 clamped at min 0 stays -0 and NaN stays NaN,
    # as torch's std::max/std::min keep the first operand unless the second is larger
    if lo is not None:
        out = xp.where(out < lo, lo, out)
    if hi is not None:
        out = xp.where(out > hi, hi, out)
    inside = xp.ones(x.shape, dtype=bool)
    with np.errstate(invalid="ignore"):
        if lo is not None:
            inside &= x.data >= lo
        if hi is not None:
            inside &= x.data <= hi
    return make(x.backend, out.astype(x.data.dtype), x.format, "clamp", [x],
                lambda g: (xp.where(inside, g, g.dtype.type(0)),))


def _over_all(x: Tensor, op: str) -> Tensor:
    xp = x.backend.xp
    if not x.numel():
        raise ValueError(f"{op}: an empty tensor has no {op}imum; name a dim")
    v = x.data.max() if op == "max" else x.data.min()  # NaN wins, as in torch
    hit = (x.data == v) | (xp.isnan(x.data) & xp.isnan(v))

    def bwd(g: Any) -> tuple[Any]:
        share = g / g.dtype.type(int(hit.sum()))
        return (xp.where(hit, share, g.dtype.type(0)),)
    return make(x.backend, xp.asarray(v, dtype=x.data.dtype), x.format, op, [x], bwd)


def _along(x: Tensor, op: str, dim: Any, keepdim: Any) -> Extremes:
    keep = check_flag(f"{op}: keepdim", keepdim)
    xp = x.backend.xp
    if not x.ndim:  # a 0-d tensor's dim 0 / -1 is its one element
        one_dim(x, dim)
        return Extremes(x, IndexTensor(xp.asarray(0), x.backend))
    axis = one_dim(x, dim)
    if not x.shape[axis]:
        raise ValueError(f"{op}: dim {dim} of shape {x.shape} is empty")
    idx = (xp.argmax if op == "max" else xp.argmin)(x.data, axis=axis, keepdims=True)
    vals = xp.take_along_axis(x.data, idx, axis=axis)

    # the returned index of each slice, as a mask over the input (works on any backend)
    places = xp.arange(x.shape[axis]).reshape([-1 if d == axis else 1 for d in range(x.ndim)])
    chosen = places == idx

    def bwd(g: Any) -> tuple[Any]:
        return (xp.where(chosen, g if keep else xp.expand_dims(g, axis), g.dtype.type(0)),)
    out = vals if keep else xp.squeeze(vals, axis=axis)
    return Extremes(make(x.backend, out, x.format, op, [x], bwd),
                    IndexTensor(idx if keep else xp.squeeze(idx, axis=axis), x.backend))


def max(input: Tensor, dim: int | None = None, keepdim: bool = False) -> Any:
    """The largest element (0-d; NaN if any is NaN), or ``(values, indices)`` along
    ``dim`` (the first index on ties, a NaN counting as the largest), as torch.max.

    Raises:
        ValueError: an empty tensor without a dim, an empty dim, a dim out of range.
        TypeError: a tensor in place of ``dim`` (torch.maximum is not provided).
    """
    return _extreme("max", input, dim, keepdim)


def min(input: Tensor, dim: int | None = None, keepdim: bool = False) -> Any:
    """The smallest element, or ``(values, indices)`` along ``dim``, as torch.min."""
    return _extreme("min", input, dim, keepdim)


def _extreme(op: str, input: Any, dim: Any, keepdim: Any) -> Any:
    x = check_tensor(input, op)
    if isinstance(dim, (Tensor, IndexTensor)):
        raise TypeError(f"{op}: the elementwise form {op}(a, b) is not provided; compare "
                        f"with ampref.where(a > b, a, b)")
    return _over_all(x, op) if dim is None else _along(x, op, dim, keepdim)
