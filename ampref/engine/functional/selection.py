"""Ops that pick values without computing new ones: ``where``, ``tril``, ``triu``.

Picking never rounds: each output element is an input element (in the common format of
the inputs, ENG-PRM-001) or a zero, and each gradient element is the incoming gradient
or zero, then reduced to a broadcast operand's shape by an exactly rounded sum (ENG-SEL-001).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ampref.common.checks import check_int
from ..indices import IndexTensor
from ..tensor import Tensor, round_to
from .core import (SCALAR_TYPES, autocast_inputs, backend_of, check_tensor, index_data, make,
                   promote, shape_of, sum_to, to_format)

__all__ = ["tril", "triu", "where"]


def _condition(be: Any, condition: Any) -> Any:
    c = index_data(condition)
    if getattr(getattr(c, "dtype", None), "kind", None) != "b":
        raise TypeError(f"where: condition must be a bool tensor or array, got "
                        f"{getattr(c, 'dtype', type(c).__name__)}")
    return be.xp.asarray(c)


def where(condition: Any, input: Any, other: Any) -> Tensor:
    """``input`` where ``condition`` (bool, broadcast) is True, else ``other``: tensors
    or Python numbers (weak, as in torch: they take the tensor's format), broadcast
    together, in the common format of the tensors. NaN, ±inf and -0 pass through as they
    are. The gradient goes to ``input`` where True and to ``other`` where False.

    Raises:
        TypeError: a non-bool condition, an integer tensor as a value (cast it with
            ``.float()``), or neither value a float tensor.
    """
    vals = (input, other)
    if not any(isinstance(v, Tensor) for v in vals):
        raise TypeError("where: at least one of input and other must be an ampref.Tensor")
    for v in vals:
        if isinstance(v, IndexTensor) or not isinstance(v, (Tensor, *SCALAR_TYPES)):
            raise TypeError(f"where: input and other must be float tensors or real numbers, "
                            f"got {type(v).__name__}; cast an integer tensor with .float()")
    be = backend_of(*[v for v in vals if isinstance(v, Tensor)])
    tensors, _, _ = autocast_inputs("where", [v for v in vals if isinstance(v, Tensor)])
    fmt = promote([t.format for t in tensors])
    it = iter(to_format(t, fmt) if t.format != fmt else t for t in tensors)
    a, b = (next(it) if isinstance(v, Tensor) else v for v in vals)
    c = _condition(be, condition)

    def data(v: Any) -> Any:  # a weak scalar is rounded to the format once
        return v.data if isinstance(v, Tensor) else \
            round_to(be, be.xp.asarray([v], dtype=be.xp.float64), fmt)[0]
    with np.errstate(all="ignore"):
        out = be.xp.where(c, data(a), data(b))
    out = out.astype(data(a).dtype if isinstance(a, Tensor) else data(b).dtype)
    zero = out.dtype.type(0)

    def bwd(g: Any) -> tuple[Any, ...]:
        ga = sum_to(be, be.xp.where(c, g, zero), shape_of(a.data)) \
            if isinstance(a, Tensor) else None
        gb = sum_to(be, be.xp.where(c, zero, g), shape_of(b.data)) \
            if isinstance(b, Tensor) else None
        return tuple(x for x, v in ((ga, a), (gb, b)) if isinstance(v, Tensor))
    return make(be, out, fmt, "where", [v for v in (a, b) if isinstance(v, Tensor)], bwd)


def _triangle(op: str, input: Any, diagonal: Any) -> Any:
    """The elements on and below (tril) or above (triu) the ``diagonal``-th diagonal of
    the last two dims, the rest zero (+0); integer tensors stay integer."""
    k = check_int(f"{op}: diagonal", diagonal)
    if len(getattr(input, "shape", ())) < 2:  # NumPy would make a 1-D input 2-D
        raise ValueError(f"{op}: needs a tensor of at least 2 dims, got shape "
                         f"{getattr(input, 'shape', type(input).__name__)}")
    if isinstance(input, IndexTensor):
        pick = getattr(input.backend.xp, op)
        return IndexTensor(pick(input.data, k), input.backend)
    x = check_tensor(input, op)
    xp = x.backend.xp
    n, m = x.shape[-2:]
    keep = (xp.tri(n, m, k, dtype=bool) if op == "tril"
            else ~xp.tri(n, m, k - 1, dtype=bool))
    zero = x.data.dtype.type(0)
    return make(x.backend, xp.where(keep, x.data, zero), x.format, op, [x],
                lambda g: (xp.where(keep, g, g.dtype.type(0)),))


def tril(input: Any, diagonal: int = 0) -> Any:
    """The lower triangle (``diagonal`` > 0 keeps more, < 0 fewer) of the last two dims;
    NaN and inf outside it become +0, as torch's. The causal mask ``tril(ones(T, T))``.

    Raises:
        TypeError: a non-int diagonal. ValueError: fewer than 2 dims.
    """
    return _triangle("tril", input, diagonal)


def triu(input: Any, diagonal: int = 0) -> Any:
    """The upper triangle (``diagonal`` > 0 keeps fewer) of the last two dims; the rest
    +0, as torch's.

    Raises:
        TypeError: a non-int diagonal. ValueError: fewer than 2 dims.
    """
    return _triangle("triu", input, diagonal)
