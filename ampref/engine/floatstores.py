"""In-place writes into float tensors (ENG-INP-001): ``x[i] = v``, ``masked_fill_``,
``fill_``, ``zero_``, ``copy_``, ``clamp_``, ``add_``/``sub_``/``mul_``/``div_`` and
``+= -= *= /=``, as torch scripts use them under ``no_grad`` (masking logits before
sampling, manual updates, EMA weights).

Each computes what the out-of-place op computes (same rounding, ENG-RND-001 and
ENG-PRM-001: a Python number is rounded through float32 to the tensor's format), then
rounds once more to the tensor's own format, as torch's in-place ops keep the destination
dtype. The result must have the tensor's shape (a write cannot broadcast the destination).

What differs from torch, on purpose: the tensor gets a new array. Values an earlier graph
saved stay as they were (torch would raise at backward instead), and a view taken before
the write keeps the old values (torch's would show the new ones). While gradients are
recorded, a tensor that requires grad is refused (torch refuses leaves and rewrites the
history of other tensors; ampref does neither): write under ``no_grad()``.
"""

from __future__ import annotations

from typing import Any

from .gradmode import is_grad_enabled, no_grad
from .indexops import index_key
from .viewmethods import functional_ops

__all__ = ["add_", "clamp_", "copy_", "div_", "fill_", "iadd", "idiv", "imul", "isub",
           "masked_fill_", "mul_", "setitem", "sub_", "zero_"]


def _writable(t: Any, op: str) -> None:
    if is_grad_enabled() and t.requires_grad:
        kind = "a leaf tensor that requires grad" if t.is_leaf else \
            "a tensor recorded in the autograd graph"
        raise RuntimeError(f"{op}: {kind} cannot be written in place while gradients are "
                           f"recorded; write under ampref.no_grad(), or use the "
                           f"out-of-place op")


def _store(t: Any, result: Any, op: str) -> Any:
    """``t`` holding ``result``'s values in ``t``'s format (a fresh array)."""
    if tuple(result.shape) != t.shape:
        raise RuntimeError(f"{op}: the result has shape {tuple(result.shape)}, the tensor "
                           f"{t.shape}: an in-place op cannot change the destination's shape")
    if result.format != t.format:
        result = functional_ops().to_format(result, t.format)
    t.data = t.backend.xp.array(result.data, copy=True)
    return t


def _apply(t: Any, op: str, compute: Any) -> Any:
    _writable(t, op)
    with no_grad():
        return _store(t, compute(), op)


def add_(self: Any, other: Any) -> Any:
    return _apply(self, "add_", lambda: functional_ops().add(self, other))


def sub_(self: Any, other: Any) -> Any:
    return _apply(self, "sub_", lambda: functional_ops().sub(self, other))


def mul_(self: Any, other: Any) -> Any:
    return _apply(self, "mul_", lambda: functional_ops().mul(self, other))


def div_(self: Any, other: Any) -> Any:
    return _apply(self, "div_", lambda: functional_ops().div(self, other))


iadd, isub, imul, idiv = add_, sub_, mul_, div_


def clamp_(self: Any, min: float | None = None, max: float | None = None) -> Any:
    return _apply(self, "clamp_", lambda: functional_ops().clamp(self, min, max))


def fill_(self: Any, value: float) -> Any:
    """Every element ``value`` (through float32 to the format, ENG-PRM-001)."""
    _writable(self, "fill_")
    self.data = self.backend.xp.full(self.shape, _scalar(self, value, "fill_"),
                                     dtype=self.data.dtype)
    return self


def zero_(self: Any) -> Any:
    return fill_(self, 0.0)


def copy_(self: Any, src: Any) -> Any:
    """``src``'s values (a float tensor, broadcast to this shape, moved from its device)
    rounded to this tensor's format."""
    def compute() -> Any:
        from .functional.core import check_tensor  # an upward hook, as functional_ops
        from .placement import move  # a copy from another device moves first, as torch's

        f = functional_ops()
        moved = move(check_tensor(src, "copy_"), self.backend)
        return f.broadcast_to(f.to_format(moved, self.format), self.shape)
    return _apply(self, "copy_", compute)


def masked_fill_(self: Any, mask: Any, value: float) -> Any:
    return _apply(self, "masked_fill_", lambda: functional_ops().masked_fill(self, mask, value))


def setitem(self: Any, idx: Any, value: Any) -> None:
    """``x[idx] = value``: a number, or a float tensor rounded to this format and
    broadcast to the selection."""
    _writable(self, "x[i] = v")
    if isinstance(value, type(self)):
        v = functional_ops().to_format(value, self.format).data
    else:
        v = _scalar(self, value, "x[i] = v")
    new = self.backend.xp.array(self.data, copy=True)
    new[index_key(idx)] = v
    self.data = new


def _scalar(t: Any, value: Any, op: str) -> Any:
    """A Python or NumPy number as ``t``'s format stores it: through float32 (ENG-PRM-001);
    NaN and ±inf as given."""
    from .tensor import round_to  # the tensor module binds these functions

    if isinstance(value, (bool, int, float)) or getattr(value, "dtype", None) is not None \
            and getattr(value, "shape", None) == ():
        xp = t.backend.xp
        return round_to(t.backend, xp.asarray([float(value)], dtype=xp.float64), t.format)[0]
    raise TypeError(f"{op}: the value must be a real number or a float ampref.Tensor, got "
                    f"{type(value).__name__}")
