"""What integer and bool tensors compute: comparison, logic, integer arithmetic,
reductions and fills (ENG-INT-001, ENG-INT-003).

These are torch's rules for int64 and bool tensors, which NumPy's integer arithmetic
shares except where this module intervenes:

- int64 arithmetic wraps modulo 2^64 on overflow (torch and NumPy alike);
- ``//`` floors and ``%`` takes the divisor's sign (Python's rules; torch's since 1.13);
  a zero divisor raises ``ZeroDivisionError`` (torch: a RuntimeError naming it; NumPy
  would give 0 and a warning, which is why the divisor is checked here);
- bool + bool is or, bool * bool is and; bool - bool and -bool are refused (torch points
  to ``^`` and ``~``); bool with int64 gives int64;
- ``~`` is logical not on bool and bitwise not on int64, ``& | ^`` likewise;
- a comparison with a Python float rounds both sides to float32 and compares those, as
  torch promotes an int64 tensor with a float scalar to its default float dtype: so
  ``16777217 == 16777216.0`` is True in both libraries;
- arithmetic with a float (``x + 1.5``, ``x / 2``) is refused: torch's result would be a
  float tensor, which ampref makes only through an explicit cast (``.float()``), so the
  format of every float tensor is chosen by the script.

Stores (``fill_``, ``masked_fill``, ``x[i] = v``) are in :mod:`ampref.engine.indexstores`.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from ampref.common.checks import check_flag, check_int

__all__ = ["IndexOps", "Extremes", "index_key", "is_float_scalar", "is_int_scalar", "wrap_dim"]


class Extremes(NamedTuple):
    """``max(dim)``/``min(dim)``'s result, torch's ``return_types.max``: the extreme
    values and the index of the first of each (ties go to the lowest index)."""

    values: Any
    indices: Any


def wrap_dim(op: str, shape: tuple[int, ...], dim: Any, extra: int = 0) -> int:
    """``dim`` normalised against ``shape``'s dims (``extra`` more: unsqueeze's result):
    a dim past the shape is refused with the op and the valid range named, never handed
    to NumPy. A 0-d tensor takes 0 and -1, as torch wraps its dims as if it had one."""
    n = max(len(shape) + extra, 1)
    d = check_int(f"{op}: dim", dim)
    if not -n <= d < n:
        raise ValueError(f"{op}: dim {d} is out of range for a tensor of shape {shape} "
                         f"(valid: {-n} to {n - 1})")
    return d % n


def index_key(idx: Any) -> Any:
    """An index with every integer or bool tensor in it (alone or in a tuple) replaced
    by its array, as NumPy indexes."""
    if isinstance(idx, tuple):
        return tuple(index_key(i) for i in idx)
    return idx.data if isinstance(idx, IndexOps) else idx


def is_int_scalar(o: Any) -> bool:
    return isinstance(o, (bool, int, np.integer, np.bool_))


def is_float_scalar(o: Any) -> bool:
    return isinstance(o, (float, np.floating))


class IndexOps:
    """The computing half of :class:`~ampref.engine.indices.IndexTensor`."""

    __slots__ = ()
    data: Any
    backend: Any

    def _same(self, data: Any) -> Any:
        make: Any = type(self)  # the concrete tensor class, built from data and backend
        return make(data, self.backend)

    # -- operands --------------------------------------------------------------------
    def _other(self, o: Any, op: str) -> Any:
        if is_int_scalar(o):
            return o
        if isinstance(o, IndexOps):
            return o.data
        raise TypeError(f"{op}: integer tensors combine with integer tensors and ints here, "
                        f"got {type(o).__name__}; cast with .float() first for "
                        f"floating-point arithmetic (docs/torch-api-differences.md)")

    def _apply(self, o: Any, op: str, fn: Callable[[Any, Any], Any],
               reflected: bool = False) -> Any:
        if hasattr(o, "format") and not isinstance(o, (IndexOps, str)):
            return NotImplemented  # a float tensor: its reflected op promotes, as torch
        b = self._other(o, op)
        return self._same(fn(b, self.data) if reflected else fn(self.data, b))

    def _divisor(self, o: Any, op: str) -> Any:
        b = self._other(o, op)
        if bool(self.backend.xp.any(self.backend.xp.asarray(b) == 0)):
            raise ZeroDivisionError(f"{op}: integer division by zero (torch raises too)")
        return b

    # -- comparison (a bool tensor; ENG-INT-002 for float operands) -------------------
    def _compare(self, o: Any, op: Callable[[Any, Any], Any]) -> Any:
        """``self <op> o`` as a bool tensor, or NotImplemented where Python should ask
        the other side (a float tensor: ENG-INT-002) or answer itself (``== None`` is
        False, ``< "a"`` a TypeError), as torch's operators do."""
        if is_float_scalar(o):  # torch: int64 with a float scalar -> float32, both rounded
            xp = self.backend.xp
            return self._same(op(self.data.astype(xp.float32), np.float32(o)))
        if isinstance(o, np.ndarray) and o.dtype.kind in "biu":  # a tensor of its dtype
            return self._same(op(self.data, self.backend.xp.asarray(o)))
        if isinstance(o, np.ndarray):
            raise TypeError(f"comparison with a NumPy array of dtype {o.dtype}: make it a "
                            f"tensor first (ampref.tensor(array, format))")
        if not (is_int_scalar(o) or isinstance(o, IndexOps)):
            return NotImplemented
        return self._same(op(self.data, self._other(o, "comparison")))

    def __eq__(self, o: object) -> Any:
        return self._compare(o, operator.eq)

    def __ne__(self, o: object) -> Any:
        return self._compare(o, operator.ne)

    def __lt__(self, o: Any) -> Any:
        return self._compare(o, operator.lt)

    def __le__(self, o: Any) -> Any:
        return self._compare(o, operator.le)

    def __gt__(self, o: Any) -> Any:
        return self._compare(o, operator.gt)

    def __ge__(self, o: Any) -> Any:
        return self._compare(o, operator.ge)

    __hash__ = None  # type: ignore[assignment]  # == is elementwise, as in torch

    def _named(self, o: Any, op: Callable[[Any, Any], Any], mirror: str, name: str) -> Any:
        """The method form (``x.eq(o)``): a float tensor answers with its mirrored
        comparison; anything else that is no number or tensor is a TypeError (a method
        has no Python fallback), as torch's ``eq`` refuses it."""
        out = self._compare(o, op)
        if out is NotImplemented and hasattr(o, mirror) and hasattr(o, "format") \
                and not isinstance(o, str):
            out = getattr(o, mirror)(self)
        if out is NotImplemented:
            raise TypeError(f"{name}: compares with a number or a tensor, got "
                            f"{type(o).__name__}")
        return out

    def eq(self, o: Any) -> Any:
        return self._named(o, operator.eq, "__eq__", "eq")

    def ne(self, o: Any) -> Any:
        return self._named(o, operator.ne, "__ne__", "ne")

    def lt(self, o: Any) -> Any:
        return self._named(o, operator.lt, "__gt__", "lt")

    def le(self, o: Any) -> Any:
        return self._named(o, operator.le, "__ge__", "le")

    def gt(self, o: Any) -> Any:
        return self._named(o, operator.gt, "__lt__", "gt")

    def ge(self, o: Any) -> Any:
        return self._named(o, operator.ge, "__le__", "ge")

    def is_floating_point(self) -> bool:
        return False

    def equal(self, other: Any) -> bool:
        """True when ``other`` has the same shape and the same values (torch.equal)."""
        b = self._other(other, "equal")
        return bool(tuple(getattr(b, "shape", ())) == tuple(self.data.shape)
                    and self.backend.xp.all(self.data == b))

    # -- arithmetic and logic ---------------------------------------------------------
    def __add__(self, o: Any) -> Any:
        return self._apply(o, "+", operator.add)

    def __radd__(self, o: Any) -> Any:
        return self._apply(o, "+", operator.add, reflected=True)

    def _no_bool_sub(self, o: Any) -> None:
        if self.data.dtype == bool or isinstance(o, (bool, np.bool_)) or (
                isinstance(o, IndexOps) and o.data.dtype == bool):
            raise TypeError("-: subtraction with a bool tensor or bool is refused, as torch "
                            "refuses it; use ^ or ~ for masks, or .long() first")

    def __sub__(self, o: Any) -> Any:
        self._no_bool_sub(o)
        return self._apply(o, "-", operator.sub)

    def __rsub__(self, o: Any) -> Any:
        self._no_bool_sub(o)
        return self._apply(o, "-", operator.sub, reflected=True)

    def __mul__(self, o: Any) -> Any:
        return self._apply(o, "*", operator.mul)

    def __rmul__(self, o: Any) -> Any:
        return self._apply(o, "*", operator.mul, reflected=True)

    def __floordiv__(self, o: Any) -> Any:
        return self._same(self.data // self._divisor(o, "//"))

    def __mod__(self, o: Any) -> Any:
        return self._same(self.data % self._divisor(o, "%"))

    def __neg__(self) -> Any:
        if self.data.dtype == bool:
            raise TypeError("-x of a bool tensor: torch refuses it too; invert a mask with ~x")
        return self._same(-self.data)

    def __invert__(self) -> Any:
        return self._same(~self.data)

    def __and__(self, o: Any) -> Any:
        return self._apply(o, "&", operator.and_)

    def __or__(self, o: Any) -> Any:
        return self._apply(o, "|", operator.or_)

    def __xor__(self, o: Any) -> Any:
        return self._apply(o, "^", operator.xor)

    __rand__, __ror__, __rxor__ = __and__, __or__, __xor__

    def abs(self) -> Any:
        """|x| (int64; |-2^63| wraps to -2^63 as in torch). A bool tensor is refused."""
        if self.data.dtype == bool:
            raise TypeError("abs: a bool tensor has none, as in torch")
        return self._same(self.backend.xp.abs(self.data))

    __abs__ = abs

    def clamp(self, min: int | None = None, max: int | None = None) -> Any:
        """min(max(x, min), max) with int bounds (either may be None, not both); a
        bool tensor gives int64, as torch's. ``min > max`` gives ``max`` everywhere."""
        if min is None and max is None:
            raise ValueError("clamp: at least one of min and max must be given")
        out = self.data.astype("int64")
        if min is not None:
            out = self.backend.xp.maximum(out, self._other(min, "clamp: min"))
        if max is not None:
            out = self.backend.xp.minimum(out, self._other(max, "clamp: max"))
        return self._same(out)

    # -- reductions -------------------------------------------------------------------
    def sum(self, dim: Any = None, keepdim: bool = False) -> Any:
        """Exact integer count/sum (bool counts as 0/1), int64 as in torch, over ``dim``
        (an int, a tuple or list of ints, or None/empty for every dim)."""
        keep = check_flag("sum: keepdim", keepdim)
        dims = () if dim is None else (dim,) if not isinstance(dim, (tuple, list)) else dim
        axes = tuple(wrap_dim("sum", self.data.shape, d) for d in dims)
        # every dim when none is named; a 0-d tensor's dim 0 / -1 is its one element
        axis = axes if axes and self.data.ndim else None
        return self._same(self.data.astype("int64").sum(axis=axis, keepdims=keep))

    def _logical(self, op: str, dim: Any, keepdim: Any) -> Any:
        keep = check_flag(f"{op}: keepdim", keepdim)
        fn = getattr(self.backend.xp, op)
        if dim is None:
            return self._same(fn(self.data))
        axis = wrap_dim(op, self.data.shape, dim)
        return self._same(fn(self.data, axis=axis if self.data.ndim else None,
                             keepdims=keep and bool(self.data.ndim)))

    def all(self, dim: int | None = None, keepdim: bool = False) -> Any:
        """True where every element (along ``dim``, or all) is nonzero; bool, as torch."""
        return self._logical("all", dim, keepdim)

    def any(self, dim: int | None = None, keepdim: bool = False) -> Any:
        """True where some element (along ``dim``, or any) is nonzero; bool, as torch."""
        return self._logical("any", dim, keepdim)

    def count_nonzero(self, dim: int | None = None) -> Any:
        """How many elements (along ``dim``, or in all) are nonzero; int64."""
        return (self != 0).sum(dim=dim)

    def cumsum(self, dim: int) -> Any:
        """Running sums along ``dim`` in int64 (a bool tensor counts its True values)."""
        axis = wrap_dim("cumsum", self.data.shape, dim)
        flat = self.data.astype("int64")
        return self._same(flat.cumsum(axis=axis) if flat.ndim else flat.copy())

    def _find(self, op: str, dim: Any, keepdim: Any) -> Any:
        """argmax/argmin: the first extreme's index, over every element when ``dim`` is
        None or the tensor is 0-d."""
        if self.data.dtype == bool:
            raise TypeError(f"{op}: a bool tensor has none, as in torch; take it of "
                            f"mask.long()")
        keep = check_flag(f"{op}: keepdim", keepdim)
        fn = getattr(self.backend.xp, op)
        if dim is None or not self.data.ndim:
            if dim is not None:
                wrap_dim(op, self.data.shape, dim)
            return self._same(fn(self.data.reshape(-1)))
        axis = wrap_dim(op, self.data.shape, dim)
        return self._same(fn(self.data, axis=axis, keepdims=keep))

    def argmax(self, dim: int | None = None, keepdim: bool = False) -> Any:
        """Index of the largest value (the first on ties); a bool tensor is refused."""
        return self._find("argmax", dim, keepdim)

    def argmin(self, dim: int | None = None, keepdim: bool = False) -> Any:
        """Index of the smallest value (the first on ties); a bool tensor is refused."""
        return self._find("argmin", dim, keepdim)

    def _extreme(self, op: str, dim: Any, keepdim: Any) -> Any:
        xp = self.backend.xp
        if isinstance(dim, IndexOps):  # x.max(other): elementwise, as torch.maximum
            return self._same((xp.maximum if op == "max" else xp.minimum)(self.data, dim.data))
        if dim is None:
            if not self.data.size:
                raise ValueError(f"{op}: an empty tensor has no {op}imum; name a dim")
            return self._same(self.data.max() if op == "max" else self.data.min())
        axis = wrap_dim(op, self.data.shape, dim)
        if self.data.ndim and not self.data.shape[axis]:
            raise ValueError(f"{op}: dim {dim} of shape {tuple(self.data.shape)} is empty")
        find = xp.argmax if op == "max" else xp.argmin
        idx = self._same(find(self.data, axis=axis if self.data.ndim else None,
                              keepdims=check_flag(f"{op}: keepdim", keepdim)))
        vals = self._same(xp.take_along_axis(self.data, idx.data, axis=axis)
                          if self.data.ndim and keepdim else
                          (self.data.max if op == "max" else self.data.min)(
                              axis=axis if self.data.ndim else None))
        return Extremes(vals, idx)

    def max(self, dim: Any = None, keepdim: bool = False) -> Any:
        """The largest value (0-d), or ``(values, indices)`` along ``dim`` (the first on
        ties), or the elementwise maximum with another integer tensor."""
        return self._extreme("max", dim, keepdim)

    def min(self, dim: Any = None, keepdim: bool = False) -> Any:
        """The smallest value (0-d), or ``(values, indices)`` along ``dim``, or the
        elementwise minimum with another integer tensor."""
        return self._extreme("min", dim, keepdim)

    def nonzero(self) -> Any:
        """The indices of the nonzero elements, one row each in C order; int64 of shape
        (count, ndim), as torch's."""
        return self._same(self.backend.xp.argwhere(self.data).astype("int64"))
