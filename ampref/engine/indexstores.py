"""What integer and bool tensors store: ``fill_``, ``masked_fill(_)``, ``x[i] = v``
(ENG-INT-003).

A value stored into an int64 tensor is truncated toward zero when it is a float, as torch
stores it; NaN, ±inf and integers outside int64 are refused (torch would store an
unspecified integer). Into a bool tensor, any nonzero value is True. Writes go through
views as torch's do: a basic index (one element included) is a view of its tensor; an
advanced index and ``clone`` are copies; a broadcast view (``expand``) is read-only.
"""

from __future__ import annotations

import math
from typing import Any

from ampref.common.checks import TensorIndexError

from .indexops import IndexOps, index_key, is_float_scalar, is_int_scalar

__all__ = ["IndexStores"]

_INT64 = (-(2**63), 2**63 - 1)


def _like(t: IndexOps, data: Any) -> Any:
    make: Any = type(t)  # the concrete tensor class, built from data and backend
    return make(data, t.backend)


class IndexStores(IndexOps):
    """The writing half of :class:`~ampref.engine.indices.IndexTensor`."""

    __slots__ = ()

    # -- stores -----------------------------------------------------------------------
    def _stored(self, value: Any, op: str) -> Any:
        """``value`` as this tensor's dtype stores it (module docstring)."""
        if isinstance(value, IndexOps) and value.data.size == 1:
            value = value.data.reshape(-1)[0]
        if not (is_int_scalar(value) or is_float_scalar(value)):
            raise TypeError(f"{op}: value must be an int, bool or float, got "
                            f"{type(value).__name__}")
        if self.data.dtype == bool:
            return bool(value)
        if is_float_scalar(value) and not math.isfinite(value):
            raise ValueError(f"{op}: {value!r} cannot be stored in an int64 tensor")
        v = int(value)  # floats truncate toward zero, as torch stores them
        if not _INT64[0] <= v <= _INT64[1]:
            raise ValueError(f"{op}: {v} is outside int64's range [-2^63, 2^63 - 1]")
        return v

    def _mask(self, mask: Any, op: str) -> Any:
        m = mask.data if isinstance(mask, IndexOps) else mask
        if getattr(getattr(m, "dtype", None), "kind", None) != "b":
            raise TypeError(f"{op}: the mask must be a bool tensor, got "
                            f"{getattr(m, 'dtype', type(m).__name__)}")
        return m

    def masked_fill(self, mask: Any, value: Any) -> Any:
        """A copy with ``value`` where the bool ``mask`` (broadcast) is True."""
        m, v = self._mask(mask, "masked_fill"), self._stored(value, "masked_fill")
        xp = self.backend.xp
        return _like(self, xp.where(m, xp.asarray(v, dtype=self.data.dtype), self.data))

    def _write(self, idx: Any, value: Any, op: str) -> Any:
        try:
            self.data[idx] = value
        except IndexError as e:
            raise TensorIndexError(f"{op}: index {idx!r} of a tensor of shape "
                                   f"{tuple(self.data.shape)}: {e}") from None
        except ValueError as e:  # a broadcast view (expand) is read-only, as in torch
            raise ValueError(f"{op}: cannot write into this tensor: {e}") from None
        return self

    def masked_fill_(self, mask: Any, value: Any) -> Any:
        """In place: ``value`` where the bool ``mask`` (broadcast to this shape) is True."""
        m = self.backend.xp.broadcast_to(self._mask(mask, "masked_fill_"), self.data.shape)
        return self._write(m, self._stored(value, "masked_fill_"), "masked_fill_")

    def fill_(self, value: int | float | bool) -> Any:
        """In place: every element ``value``."""
        return self._write(Ellipsis, self._stored(value, "fill_"), "fill_")

    def __setitem__(self, idx: Any, value: Any) -> None:
        """``x[idx] = value``: a number, or an integer tensor broadcast to the selection
        (``labels[labels == pad] = -100``)."""
        v = value.data if isinstance(value, IndexOps) else self._stored(value, "x[i] = v")
        self._write(index_key(idx), v, "x[i] = v")
