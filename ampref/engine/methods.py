"""torch's Tensor methods that a training script calls, as thin forwards to the ops.

Each method here is one call of an op of :mod:`ampref.engine.functional` (so it records
the same graph node and follows the same rounding rules as the op), or a shape query.
:class:`~ampref.engine.tensor.Tensor` binds them as its methods; they live apart so that
the tensor module stays about its data and its backward walk.
"""

from __future__ import annotations

import builtins
from typing import Any

import numpy as np

from ampref.common.checks import check_flag
from ampref.formats.table import Format, get_format

from .indices import IndexTensor
from .viewmethods import functional_ops as _F, named_dim as _one_dim


__all__ = ["abs", "argmax", "argmin", "as_bool", "as_float", "as_int", "bfloat16", "chunk",
           "clamp", "clone", "compare_method", "COMPARISONS", "contiguous", "cos", "cpu", "cuda",
           "device", "dim", "double", "dtype", "float", "half", "isfinite", "isinf", "isnan",
           "log_softmax", "masked_fill", "max", "min", "numel", "pow", "requires_grad_", "rsqrt",
           "sigmoid", "sin", "size", "softmax", "split", "sqrt", "square", "to", "tolist",
           "type_as", "var", "std", "log1p", "expm1", "reciprocal"]


# -- shape queries ---------------------------------------------------------------------
def size(self: Any, dim: int | None = None) -> Any:
    """The shape as a tuple (torch.Size is a tuple), or its length along ``dim``.

    Raises:
        TypeError / ValueError: ``dim`` not an int in [-ndim, ndim), or any dim of a 0-d
            tensor (it has none).
    """
    if dim is None:
        return self.shape
    d = _one_dim(self, dim, "size")
    if not self.shape:
        raise ValueError(f"size: dim {dim} of a 0-d tensor (it has no dims)")
    return self.shape[d]


def numel(self: Any) -> int:
    return int(self.data.size)


def dim(self: Any) -> int:
    return len(self.shape)


def dtype(self: Any) -> Format:  # a property of Tensor
    """The tensor's format (torch's dtype): ``ampref.float16`` for an fp16 tensor."""
    return self.format


# -- casts: one rounding from the exact stored value (ENG-CST-001) --------------------
def float(self: Any) -> Any:
    return _F().to_format(self, "float32")


def half(self: Any) -> Any:
    return _F().to_format(self, "float16")


def bfloat16(self: Any) -> Any:
    return _F().to_format(self, "bfloat16")


def double(self: Any) -> Any:
    return _F().to_format(self, "float64")


def clone(self: Any) -> Any:
    return _F().reshape(self, self.shape)


def contiguous(self: Any) -> Any:
    return self


def to(self: Any, *args: Any, **kwargs: Any) -> Any:
    """torch's ``to`` (ENG-DEV-001): ``to(format)``, ``to(device)``, ``to(device, format)``,
    ``to(tensor)``, keywords ``dtype``, ``device``, ``copy``, ``non_blocking``."""
    from .placement import tensor_to  # an upward hook: placement builds on Tensor

    return tensor_to(self, *args, **kwargs)


def cpu(self: Any) -> Any:
    return to(self, "cpu")


def cuda(self: Any) -> Any:
    return to(self, "cuda")


def device(self: Any) -> Any:
    """Where the data lives: ``device("cpu")`` on the NumPy backend, ``cuda:0`` on a
    device backend."""
    from .device import device_of  # an upward hook, as ``to``

    return device_of(self.backend)


def requires_grad_(self: Any, requires_grad: bool = True) -> Any:
    from ampref.common.checks import check_flag

    self.requires_grad = check_flag("requires_grad", requires_grad)
    return self


# -- ops ---------------------------------------------------------------------------------
def sigmoid(self: Any) -> Any:
    return _F().sigmoid(self)


def abs(self: Any) -> Any:
    return _F().abs(self)


def clamp(self: Any, min: builtins.float | None = None,
          max: builtins.float | None = None) -> Any:
    return _F().clamp(self, min, max)


def max(self: Any, dim: int | None = None, keepdim: builtins.bool = False) -> Any:
    return _F().max(self, dim, keepdim)


def min(self: Any, dim: int | None = None, keepdim: builtins.bool = False) -> Any:
    return _F().min(self, dim, keepdim)


def square(self: Any) -> Any:
    """x ** 2 (torch's square is its pow with exponent 2, so autocast treats it as pow)."""
    return _F().pow(self, 2.0)


def type_as(self: Any, other: Any) -> Any:
    """This tensor in ``other``'s format (one rounding, ENG-CST-001)."""
    return _F().to_format(self, other.format)


# -- tests of values: bool integer tensors, no gradient --------------------------------
def isnan(self: Any) -> IndexTensor:
    return IndexTensor(self.backend.xp.isnan(self.data), self.backend)


def isinf(self: Any) -> IndexTensor:
    return IndexTensor(self.backend.xp.isinf(self.data), self.backend)


def isfinite(self: Any) -> IndexTensor:
    return IndexTensor(self.backend.xp.isfinite(self.data), self.backend)


# -- one element as a Python number (torch's float(t), int(t), bool(t)) ---------------
def as_float(self: Any) -> builtins.float:
    return builtins.float(self.item())


def as_int(self: Any) -> int:
    """The value truncated toward zero; NaN and ±inf raise ValueError/OverflowError, as
    Python's int() of them and torch's do."""
    return int(self.item())


def as_bool(self: Any) -> builtins.bool:
    """False only for ±0 (NaN is True), of a one-element tensor; more elements are
    ambiguous and refused, as torch refuses them."""
    if self.numel() != 1:
        raise ValueError(f"bool() of a tensor with {self.numel()} elements is ambiguous "
                         f"(shape {self.shape}); use .any() or .all() of a comparison")
    return self.item() != 0


def sqrt(self: Any) -> Any:
    return _F().sqrt(self)


def rsqrt(self: Any) -> Any:
    return _F().rsqrt(self)


def var(self: Any, dim: Any = None, unbiased: builtins.bool | None = None,
        keepdim: builtins.bool = False, *, correction: builtins.float | None = None) -> Any:
    """torch's ``var`` with both spellings: ``unbiased`` (True: correction 1, False: 0)
    or ``correction`` (default 1), not both (``functional.var``, ENG-VAR-001)."""
    return _F().var(self, dim, correction=_correction(unbiased, correction), keepdim=keepdim)


def std(self: Any, dim: Any = None, unbiased: builtins.bool | None = None,
        keepdim: builtins.bool = False, *, correction: builtins.float | None = None) -> Any:
    """torch's ``std``, spelled as :func:`var` is."""
    return _F().std(self, dim, correction=_correction(unbiased, correction), keepdim=keepdim)


def _correction(unbiased: Any, correction: Any) -> Any:
    if unbiased is not None and correction is not None:
        raise TypeError("var/std take unbiased or correction, not both")
    if unbiased is not None:
        from ampref.common.checks import check_flag

        return 1 if check_flag("unbiased", unbiased) else 0
    return 1 if correction is None else correction


def log1p(self: Any) -> Any:
    return _F().log1p(self)


def expm1(self: Any) -> Any:
    return _F().expm1(self)


def reciprocal(self: Any) -> Any:
    return _F().reciprocal(self)


def sin(self: Any) -> Any:
    return _F().sin(self)


def cos(self: Any) -> Any:
    return _F().cos(self)


def softmax(self: Any, dim: int) -> Any:
    return _F().softmax(self, dim)


def log_softmax(self: Any, dim: int) -> Any:
    return _F().log_softmax(self, dim)


def pow(self: Any, exponent: Any) -> Any:
    return _F().pow(self, exponent)


def masked_fill(self: Any, mask: Any, value: builtins.float) -> Any:
    return _F().masked_fill(self, mask, value)


def _arg_extreme(self: Any, dim: Any, keepdim: Any, op: str) -> IndexTensor:
    """``argmax``/``argmin``: the index of the extreme value, the first one on ties (NaN
    counts as the extreme, as in torch), over every element when ``dim`` is None or the
    tensor is 0-d (its dim 0 / -1 is its one element); an integer tensor without
    gradient. A ``keepdim`` that is not a bool is refused, as torch refuses it."""
    xp = self.backend.xp
    keep = check_flag(f"{op}: keepdim", keepdim)
    find = getattr(xp, op)
    if dim is None or not self.shape:
        if dim is not None:
            _one_dim(self, dim, op)
        return IndexTensor(find(self.data.reshape(-1)), self.backend)
    axis = _one_dim(self, dim, op)
    return IndexTensor(find(self.data, axis=axis, keepdims=keep), self.backend)


def argmax(self: Any, dim: int | None = None, keepdim: bool = False) -> IndexTensor:
    """Index of the largest value (the first one on ties; NaN counts as largest)."""
    return _arg_extreme(self, dim, keepdim, "argmax")


def argmin(self: Any, dim: int | None = None, keepdim: bool = False) -> IndexTensor:
    """Index of the smallest value (the first one on ties; NaN counts as smallest)."""
    return _arg_extreme(self, dim, keepdim, "argmin")


def tolist(self: Any) -> Any:
    return self.backend.to_numpy(self.data).tolist()


def split(self: Any, split_size_or_sections: Any, dim: int = 0) -> tuple[Any, ...]:
    """Pieces along ``dim``: of ``split_size`` each (the last one shorter), or of the
    listed sizes (which must add up to the dim's length). Each piece is an indexing op
    (values move; gradients flow back into their slice)."""
    d = _F().core.one_dim(self, dim)
    n = self.shape[d]
    s = split_size_or_sections
    if isinstance(s, (int,)) and not isinstance(s, bool):
        if s < 1:
            raise ValueError(f"split: split_size must be an int >= 1, got {s}")
        sizes = [builtins.min(s, n - a) for a in range(0, n, s)] or [0]
    else:
        if not isinstance(s, (list, tuple)) or any(
                isinstance(v, bool) or not isinstance(v, int) for v in s):
            raise TypeError(f"split: give a size (int) or a list of section sizes (ints), "
                            f"got {s!r}")
        sizes = [int(v) for v in s]
        if sum(sizes) != n or any(v < 0 for v in sizes):
            raise ValueError(f"split: sections {sizes} do not add up to the length {n} of "
                             f"dim {dim}")
    out, start = [], 0
    for size in sizes:
        idx = (slice(None),) * d + (slice(start, start + size),)
        out.append(_F().index(self, idx))
        start += size
    return tuple(out)


def chunk(self: Any, chunks: int, dim: int = 0) -> tuple[Any, ...]:
    """``chunks`` pieces along ``dim`` of ceil(length / chunks) each, as torch."""
    if isinstance(chunks, bool) or not isinstance(chunks, int) or chunks < 1:
        raise ValueError(f"chunk: chunks must be an int >= 1, got {chunks!r}")
    n = self.shape[_F().core.one_dim(self, dim)]
    return split(self, builtins.max(-(-n // chunks), 1), dim)


def compare(self: Any, other: Any, name: str) -> Any:
    """``self <op> other`` elementwise, as torch compares: both sides in their common
    format, then compared exactly; a bool IndexTensor with the broadcast shape.

    The common format is the engine's promotion of the two float formats (ENG-PRM-001); a
    Python/NumPy number or an integer tensor takes ``self``'s format, rounded as
    :func:`round_to` rounds (so ``half == 1.0001`` is True, as in torch). NaN compares
    unequal and unordered; -0 == +0; ±inf are the extremes. NotImplemented for a
    non-numeric ``other`` (Python then answers ``==`` by identity, ``<`` by TypeError).
    A NumPy array counts as a tensor of its dtype (float16/32/64, int, bool)."""
    be, xp = self.backend, self.backend.xp
    if isinstance(other, np.ndarray):  # as torch: the array is a tensor of its own dtype
        other = _array_operand(self, other)
    if isinstance(getattr(other, "format", None), Format):
        fmt = _F().core.promote([self.format, other.format])
        b = other.data if other.format == fmt else _F().to_format(other, fmt).data
    elif isinstance(other, (IndexTensor, builtins.bool, builtins.int, builtins.float,
                            np.integer, np.floating, np.bool_)):
        fmt = self.format
        raw = other.data if isinstance(other, IndexTensor) else other
        b = _F().core.round_to(be, xp.asarray(raw, dtype=xp.float64), fmt)
    else:
        return NotImplemented
    a = self.data if self.format == fmt else _F().to_format(self, fmt).data
    with np.errstate(invalid="ignore"):
        out = getattr(xp, name)(xp.asarray(a, dtype=xp.float64), xp.asarray(b, dtype=xp.float64))
    return IndexTensor(out, be)


def _array_operand(self: Any, arr: np.ndarray) -> Any:
    if arr.dtype.kind in "biu":
        return IndexTensor(arr, self.backend)
    if arr.dtype.name in ("float16", "float32", "float64"):
        return type(self)(self.backend.xp.asarray(arr), get_format(arr.dtype.name),
                          backend=self.backend)
    raise TypeError(f"comparison: a NumPy array of dtype {arr.dtype} is not a tensor "
                    f"operand (allowed: bool, int, float16, float32, float64); convert it "
                    f"with ampref.tensor(array, format) first")


#: the method names of the comparisons, in torch's order, and the NumPy function of each
COMPARISONS = ("eq", "ne", "lt", "le", "gt", "ge")
_UFUNC = dict(zip(COMPARISONS, ("equal", "not_equal", "less", "less_equal", "greater",
                                "greater_equal"), strict=True))


def compare_method(name: str) -> Any:
    """The method form of a comparison (``x.eq(o)``, torch's name): as the operator, but
    an operand that is no number, array or tensor is a TypeError (a method has no Python
    fallback; torch's ``eq`` refuses it too)."""
    def method(self: Any, other: Any) -> Any:
        out = compare(self, other, _UFUNC[name])
        if out is NotImplemented:
            raise TypeError(f"{name}: compares with a number, an array or a tensor, got "
                            f"{type(other).__name__}")
        return out
    method.__name__ = method.__qualname__ = name
    return method


def eq(self: Any, o: Any) -> Any:
    return compare(self, o, "equal")


def ne(self: Any, o: Any) -> Any:
    return compare(self, o, "not_equal")


def lt(self: Any, o: Any) -> Any:
    return compare(self, o, "less")


def le(self: Any, o: Any) -> Any:
    return compare(self, o, "less_equal")


def gt(self: Any, o: Any) -> Any:
    return compare(self, o, "greater")


def ge(self: Any, o: Any) -> Any:
    return compare(self, o, "greater_equal")
