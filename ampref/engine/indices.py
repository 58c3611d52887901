"""Integer and boolean tensors: labels, token ids, masks, argmax results (ENG-INT-001).

torch keeps ``torch.tensor([1, 2])`` as int64 and ``a == b`` as bool; a script that
passes labels to ``cross_entropy`` or ids to an embedding relies on that. ampref's
:class:`~ampref.engine.tensor.Tensor` holds values of a floating-point format and records
gradients, so integer data lives in this second, small class: no format, no gradient, no
graph (torch's integer tensors cannot require grad either). It supports what scripts do
with labels and masks: shape queries, indexing, views, comparison, counting
(``sum``), ``item``/``tolist``, and casts back to a float format (``.float()``,
``.to(fmt)``), exact for every integer up to 2^24 in float32. Handing an integer tensor
to a floating-point op raises a ``TypeError`` that names the op and the cast to use.
"""

from __future__ import annotations

import operator
from typing import Any

import numpy as np

__all__ = ["IndexTensor"]

_KINDS = {"i": "int64", "u": "int64", "b": "bool"}


class IndexTensor:
    """An int64 or bool array (NumPy or CuPy) with torch's tensor methods for labels."""

    __slots__ = ("backend", "data")
    __array_priority__ = 1000

    def __init__(self, data: Any, backend: Any) -> None:
        kind = getattr(data, "dtype", np.dtype(object)).kind
        if kind not in _KINDS:
            raise TypeError(f"an integer tensor holds int or bool data, got dtype "
                            f"{getattr(data, 'dtype', type(data).__name__)}")
        self.backend = backend
        self.data = backend.xp.asarray(data, dtype=_KINDS[kind])

    # -- what a shape is ------------------------------------------------------------------
    @property
    def dtype(self) -> str:
        """``"int64"`` or ``"bool"`` (torch: ``torch.int64`` / ``torch.bool``)."""
        return str(self.data.dtype)

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.data.shape)

    @property
    def ndim(self) -> int:
        return int(self.data.ndim)

    def dim(self) -> int:
        return self.ndim

    def numel(self) -> int:
        return int(self.data.size)

    def size(self, dim: int | None = None) -> Any:
        return self.shape if dim is None else self.shape[dim]

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    def __repr__(self) -> str:
        return f"ampref.tensor({np.array2string(self.numpy(), threshold=8)}, dtype={self.dtype})"

    # -- values out ---------------------------------------------------------------------
    def numpy(self) -> np.ndarray:
        return np.array(self.backend.to_numpy(self.data), copy=True)

    def tolist(self) -> Any:
        return self.numpy().tolist()

    def item(self) -> int | bool:
        """The value of a one-element tensor (int, or bool for a bool tensor).

        Raises:
            ValueError: more than one element (the shape named).
        """
        if self.numel() != 1:
            raise ValueError(f"item() needs a one-element tensor, got shape {self.shape}")
        v = self.numpy().reshape(-1)[0]
        return bool(v) if self.dtype == "bool" else int(v)

    def __int__(self) -> int:
        return int(self.item())

    def __index__(self) -> int:
        return int(self.item())

    def __bool__(self) -> bool:
        return bool(self.item())

    # -- views and selection (values move, never change) ----------------------------------
    def _new(self, data: Any) -> IndexTensor:
        return IndexTensor(data, self.backend)

    def __getitem__(self, idx: Any) -> IndexTensor:
        if isinstance(idx, IndexTensor):
            idx = idx.data
        return self._new(self.data[idx])

    def reshape(self, *shape: Any) -> IndexTensor:
        dims = tuple(shape[0]) if len(shape) == 1 and isinstance(shape[0], (tuple, list)) \
            else shape
        return self._new(self.data.reshape(dims))

    view = reshape

    def flatten(self) -> IndexTensor:
        return self._new(self.data.reshape(-1))

    def unsqueeze(self, dim: int) -> IndexTensor:
        return self._new(self.backend.xp.expand_dims(self.data, dim))

    def clone(self) -> IndexTensor:
        return self._new(self.data.copy())

    def detach(self) -> IndexTensor:
        return self

    def cpu(self) -> IndexTensor:
        return self

    def long(self) -> IndexTensor:
        return self._new(self.data.astype("int64"))

    # -- casts into a floating-point format (exact up to 2^24 in float32, then rounded) ---
    def to(self, fmt: Any) -> Any:
        """A float :class:`~ampref.engine.tensor.Tensor` of ``fmt``, each integer rounded
        once (nearest-even) from its exact value; True is 1, False is 0."""
        from .creation import tensor  # an upward hook: creation builds on this module

        return tensor(self.data.astype("int64"), fmt, backend=self.backend)

    def float(self) -> Any:
        return self.to("float32")

    def half(self) -> Any:
        return self.to("float16")

    def bfloat16(self) -> Any:
        return self.to("bfloat16")

    def double(self) -> Any:
        return self.to("float64")

    # -- arithmetic that stays integer ---------------------------------------------------
    def _other(self, o: Any) -> Any:
        if isinstance(o, IndexTensor):
            return o.data
        if isinstance(o, (bool, int, np.integer, np.bool_)):
            return o
        raise TypeError(f"integer tensors combine with integer tensors and ints here, got "
                        f"{type(o).__name__}; cast with .float() first for floating-point "
                        f"arithmetic (docs/torch-api-differences.md)")

    def _compare(self, o: Any, op: Any) -> Any:
        # a float tensor compares in its own format (ENG-INT-002): hand the comparison to
        # its reflected method, as torch promotes int vs float to the float dtype
        if hasattr(o, "format") and not isinstance(o, IndexTensor):
            return NotImplemented
        return self._new(op(self.data, self._other(o)))

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

    def __add__(self, o: Any) -> IndexTensor:
        return self._new(self.data + self._other(o))

    def __sub__(self, o: Any) -> IndexTensor:
        return self._new(self.data - self._other(o))

    def __mul__(self, o: Any) -> IndexTensor:
        return self._new(self.data * self._other(o))

    __hash__ = None  # type: ignore[assignment]  # == is elementwise, as in torch

    def sum(self, dim: int | None = None, keepdim: bool = False) -> IndexTensor:
        """Exact integer count/sum (bool counts as 0/1), int64 as in torch."""
        return self._new(self.data.astype("int64").sum(axis=dim, keepdims=keepdim))

    def all(self) -> IndexTensor:
        return self._new(self.data.all())

    def any(self) -> IndexTensor:
        return self._new(self.data.any())

    def argmax(self, dim: int | None = None, keepdim: bool = False) -> IndexTensor:
        return self._new(self.backend.xp.argmax(self.data, axis=dim, keepdims=keepdim))
