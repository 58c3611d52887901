"""Plumbing shared by the op modules: backend resolution, graph nodes, promotion, the
float64 evaluation of transcendentals, gradient reduction, argument checks, and applying
autocast's plan (the op layer performs the casts and owns the weight-cast cache).
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import Any

import numpy as np

from ampref.policy import autocast as _ac
from ampref.backends import Backend  # type: ignore[attr-defined]  # mapped from backends/
from ampref.formats.table import Format, get_format
from ..indices import IndexTensor
from ..tensor import Node, Tensor, is_grad_enabled, round_to

__all__ = ["F32", "F64", "SCALAR_TYPES", "autocast_args", "autocast_inputs", "backend_of",
           "check_tensor", "dims_of", "host_index", "index_data", "one_dim", "expand_grad", "make",
           "nested_ops", "promote", "round_to", "shape_of", "sum_to", "to_format", "wide_math"]

F32 = get_format("float32")
F64 = get_format("float64")
#: Python and NumPy numbers that ops accept as weak scalars (ENG-PRM-001)
SCALAR_TYPES = (int, float, np.floating, np.integer)

def backend_of(*ts: Any) -> Backend:
    found = {t.backend.name: t.backend for t in ts if isinstance(t, Tensor)}
    if len(found) > 1:
        raise TypeError("tensors of different backends mixed in one op: " + " and ".join(found))
    return next(iter(found.values()))


def make(be: Backend, data: Any, fmt: Format, op: str, parents: Sequence[Tensor],
         backward: Any) -> Tensor:
    req = is_grad_enabled() and any(p.requires_grad for p in parents)
    node = Node(op=op, parents=tuple(parents), backward=backward) if req else None
    return Tensor(data, fmt, requires_grad=req, node=node, backend=be)


def promote(fmts: Sequence[Format]) -> Format:
    names = {f.name for f in fmts}
    if "float64" in names:
        return F64
    if len(names) == 1:
        return fmts[0]
    return F32


def wide_math(be: Backend, fmt: Format, f: Any, *xs: Any) -> Any:
    """A transcendental in float64, then float32 (or kept in float64 for float64).

    ``f(xp, *arrays)`` gets the backend's array module, so it runs where the data lives."""
    xp = be.xp
    with np.errstate(all="ignore"):  # overflow to inf in float32 is the defined result
        r = f(xp, *(xp.asarray(x, dtype=xp.float64) for x in xs))
        return r if fmt.wide else r.astype(xp.float32)


def sum_to(be: Backend, g: Any, shape: tuple[int, ...]) -> Any:
    """Reduce a broadcast gradient back to ``shape`` (exact-then-fp32 sums)."""
    if tuple(g.shape) == tuple(shape):
        return g
    lead = g.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(lead + i for i, s in enumerate(shape)
                                      if s == 1 and g.shape[lead + i] != 1)
    return be.sum(g, axis=axes, keepdims=True).reshape(shape) if axes else g.reshape(shape)


def shape_of(v: Any) -> tuple[int, ...]:
    """Shape of an array operand; () for a Python or NumPy scalar."""
    return tuple(v.shape) if hasattr(v, "shape") else ()


def check_tensor(x: Any, op: str) -> Tensor:
    """``x`` if it is a floating-point tensor, else a TypeError naming ``op``."""
    if isinstance(x, IndexTensor):
        raise TypeError(f"{op} needs a floating-point tensor, got an integer tensor "
                        f"(dtype {x.dtype}); cast it first with .float() or .to(format)")
    if not isinstance(x, Tensor):
        raise TypeError(f"{op} expects an ampref.Tensor, got {type(x).__name__}")
    return x


def index_data(v: Any) -> Any:
    """The array of an integer operand (targets, ids, index arrays): an integer tensor's
    data, a float tensor's data, or the value as given."""
    return v.data if isinstance(v, (Tensor, IndexTensor)) else v


def host_index(be: Backend, v: Any) -> np.ndarray:
    """An integer operand (ids, targets) as a host NumPy array: host data as given (no
    copy), device data in one explicit transfer. Index checks (ranges, ignored
    targets, grouping of equal ids) run on it, so a device backend learns them without
    one synchronisation per check, and a host operand (the training loop's batches)
    costs none."""
    d = index_data(v)
    if isinstance(d, np.ndarray):
        return d
    if hasattr(d, "dtype") and not isinstance(d, np.generic):  # a device array
        return np.asarray(be.to_numpy(d))
    return np.asarray(d)


def dims_of(x: Tensor, dim: Any) -> tuple[int, ...]:
    """Normalised dims; each must be an int in [-ndim, ndim). None or an empty sequence
    means every dim, as torch's reductions read ``dim=[]`` (sum, mean). A 0-d tensor
    takes dim 0 and -1 as torch does (its one element is the whole reduction): its
    normalised dims are ``()``."""
    axs = (dim,) if dim is None or isinstance(dim, (int, np.integer)) else tuple(dim)
    if dim is None or not axs:
        return tuple(range(x.ndim))
    width = max(x.ndim, 1)  # torch wraps dims of a 0-d tensor as if it had one dim
    for ax in axs:
        if isinstance(ax, bool) or not isinstance(ax, (int, np.integer)):
            raise TypeError(f"dim must be an int or a tuple of ints, got {dim!r}")
        if not -width <= ax < width:
            raise ValueError(f"dim {ax} is out of range for a tensor of shape {x.shape} "
                             f"(valid: {-width} to {width - 1})")
    return tuple(int(ax) % width for ax in axs) if x.ndim else ()


def one_dim(x: Tensor, dim: Any) -> int:
    """One normalised dim (softmax, concat, split): an int in [-ndim, ndim).

    Raises:
        TypeError: not an int (a list or tuple included).
    """
    if isinstance(dim, bool) or not isinstance(dim, (int, np.integer)):
        raise TypeError(f"dim must be an int, got {dim!r}")
    dims_of(x, dim)  # the range check
    return int(dim) % max(x.ndim, 1)


def expand_grad(xp: Any, g: Any, shape: tuple[int, ...], axes: tuple[int, ...],
                keepdims: bool) -> Any:
    if not keepdims:
        for ax in sorted(axes):
            g = xp.expand_dims(g, ax)
    return xp.broadcast_to(g, shape)


def to_format(input: Tensor, fmt: str | Format) -> Tensor:
    """Cast (one rounding, nearest-even, from the exact stored value; ENG-CST-001).

    The derivative passes the gradient back, rounded to the source format.
    """
    x = check_tensor(input, "to_format")
    f = get_format(fmt)
    if f == x.format:
        return x
    be = x.backend
    data = be.quantize(x.data, f) if not f.wide else x.data.astype(be.xp.float64)
    if not f.wide:
        data = be.xp.asarray(data, dtype=be.xp.float32)
    out = make(be, data, f, "to_format", [x], lambda g: (g,))
    out.name = x.name  # a weight's cast keeps the weight's name (gradient statistics)
    return out


# -- autocast: the plan comes from ampref.policy.autocast, the casts happen here -------------

# weight-cast cache per outermost autocast region: id(weight) -> (weakref, cast tensor);
# an entry disappears with its region (AUT-CAC-002)
_WEIGHT_CASTS: weakref.WeakKeyDictionary[_ac.Region, dict[int, tuple[Any, Tensor]]] = \
    weakref.WeakKeyDictionary()


def _cast(t: Tensor, fmt: Format, cacheable: bool) -> Tensor:
    """``t`` rounded to ``fmt``; float32 leaf weights that require grad are cast once per
    region when the plan allows caching (AUT-CAC-001)."""
    region = _ac.cache_region() if cacheable else None
    if region is None or t.format != F32 or not (t.requires_grad and t.is_leaf):
        return to_format(t, fmt)
    cache = _WEIGHT_CASTS.setdefault(region, {})
    hit = cache.get(id(t))
    if hit is not None and hit[0]() is t:
        return hit[1]
    out = to_format(t, fmt)
    cache[id(t)] = (weakref.ref(t), out)
    return out


def autocast_inputs(op: str, tensors: list[Tensor]) -> tuple[list[Tensor], Format | None, bool]:
    """Apply the active autocast policy's plan for ``op`` to its tensor inputs.

    Returns (inputs, forced output format or None, listed); ``listed`` tells the op to run
    its nested ops with autocast suspended.
    """
    plan = _ac.plan(op, [t.format for t in tensors])
    cast = [t if f is None else _cast(t, f, plan.cacheable)
            for t, f in zip(tensors, plan.targets, strict=True)]
    return cast, plan.output, plan.listed


def autocast_args(op: str, *args: Any) -> tuple[tuple[Any, ...], Format | None, bool]:
    """:func:`autocast_inputs` over an op's arguments as they are: tensors are cast,
    anything else (None for an absent bias, a Python number, an index array) stays in its
    place, so an op unpacks its arguments the way it received them."""
    cast, forced, listed = autocast_inputs(op, [a for a in args if isinstance(a, Tensor)])
    it = iter(cast)
    return tuple(next(it) if isinstance(a, Tensor) else a for a in args), forced, listed


def nested_ops(listed: bool) -> AbstractContextManager[Any]:
    """The context for the ops a listed op is composed of: autocast suspended (torch
    excludes the autocast key inside a listed op), else nothing."""
    return _ac.suspended() if listed else nullcontext()
