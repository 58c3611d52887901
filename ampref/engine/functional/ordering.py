"""sort and topk (ENG-ORD-001): values in order with their int64 positions, as torch's.

Order along ``dim``: ascending or descending by value, NaN above every number (so it comes
first in a descending order and last in an ascending one, as torch's); -0.0 and +0.0 are
equal; equal values keep their positions' order (a stable sort: torch guarantees it for
``sort(stable=True)``; ampref always sorts stably). ``topk(k, largest=True)`` is the
first k of the descending order, ``largest=False`` of the ascending one. Values are moved,
never rounded; the gradient of the values goes back to the positions they came from.
"""

from __future__ import annotations

from collections import namedtuple
from typing import Any

import numpy as np

from ampref.common.checks import check_flag
from ..indices import IndexTensor
from ..tensor import Tensor
from .core import check_tensor, make, one_dim

__all__ = ["sort", "topk"]

#: what sort and topk return: ``values, indices = x.sort()`` or ``.values``, as torch
Sorted = namedtuple("Sorted", ["values", "indices"])


def _order(be: Any, data: Any, axis: int, descending: bool) -> Any:
    """Positions along ``axis`` in the order of the module docstring (on the host: the
    order of a few values per row is cheap to compute there and the same everywhere)."""
    v = np.moveaxis(be.to_numpy(data), axis, -1)
    nan = np.isnan(v)
    # NaN set aside by the primary key; -0.0 and +0.0 compare equal in NumPy's sort
    key = np.where(nan, 0, -v if descending else v)
    pos = np.broadcast_to(np.arange(v.shape[-1]), v.shape)
    # lexsort: the last key is the primary one; NaN first when descending, else last
    order = np.lexsort((pos, key, ~nan if descending else nan), axis=-1)
    return np.moveaxis(order, -1, axis)


def _pick(x: Tensor, order: Any, axis: int, op: str) -> Sorted:
    be = x.backend
    idx = be.asarray(order.astype(np.int64))
    values = be.xp.take_along_axis(x.data, idx, axis=axis)

    def bwd(g: Any) -> tuple[Any]:
        out = be.xp.zeros(x.shape, dtype=g.dtype)
        be.xp.put_along_axis(out, idx, g, axis=axis)  # positions are distinct: no sums
        return (out,)
    return Sorted(make(be, values, x.format, op, [x], bwd), IndexTensor(idx, be))


def sort(input: Tensor, dim: int = -1, descending: bool = False, *,
         stable: bool = False) -> Sorted:
    """(values, indices) along ``dim``; always stable (``stable`` is accepted for torch's
    call shape)."""
    x = check_tensor(input, "sort")
    desc = check_flag("descending", descending)
    check_flag("stable", stable)
    axis = one_dim(x, dim) if x.ndim else 0
    if not x.ndim:
        return Sorted(make(x.backend, x.data, x.format, "sort", [x], lambda g: (g,)),
                      IndexTensor(x.backend.asarray(np.zeros((), np.int64)), x.backend))
    return _pick(x, _order(x.backend, x.data, axis, desc), axis, "sort")


def topk(input: Tensor, k: int, dim: int | None = None, largest: bool = True,
         sorted: bool = True) -> Sorted:
    """The ``k`` largest (or smallest) values along ``dim`` (None: the last) and their
    positions, in order (``sorted`` is accepted for torch's call shape: the result is
    always sorted).

    Raises:
        TypeError: ``k`` not an int.
        ValueError: ``k`` outside [0, size of ``dim``].
    """
    x = check_tensor(input, "topk")
    big = check_flag("largest", largest)
    check_flag("sorted", sorted)
    dim = -1 if dim is None else dim
    axis = one_dim(x, dim) if x.ndim else 0
    n = x.shape[axis] if x.ndim else 1
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)):
        raise TypeError(f"topk: k must be an int, got {type(k).__name__}: {k!r}")
    if not 0 <= k <= n:
        raise ValueError(f"topk: k = {k} is outside [0, {n}] (the size of dim {dim})")
    if not x.ndim:
        return sort(x)
    order = np.take(_order(x.backend, x.data, axis, big), np.arange(int(k)), axis=axis)
    return _pick(x, order, axis, "topk")
