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

from ampref.common.checks import TensorIndexError, check_flag, check_int, reshape_entries

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
        """The shape, or its length along ``dim``.

        Raises:
            TypeError / ValueError: ``dim`` not an int in [-ndim, ndim), or any dim of a
                0-d tensor (it has none).
        """
        if dim is None:
            return self.shape
        d = self._dim("size", dim)
        if not self.shape:
            raise ValueError(f"size: dim {dim} of a 0-d tensor (it has no dims)")
        return self.shape[d]

    def _dim(self, op: str, dim: Any, extra: int = 0) -> int:
        """``dim`` normalised against the dims (``extra`` more: unsqueeze's result), as
        the float tensor's methods check it: a dim past the shape is refused with the op
        and the valid range named, never handed to NumPy. A 0-d tensor takes 0 and -1,
        as torch wraps its dims as if it had one."""
        n = max(self.ndim + extra, 1)
        d = check_int(f"{op}: dim", dim)
        if not -n <= d < n:
            raise ValueError(f"{op}: dim {d} is out of range for a tensor of shape "
                             f"{self.shape} (valid: {-n} to {n - 1})")
        return d % n

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
        try:
            return self._new(self.data[idx])
        except IndexError as e:  # NumPy's words, with the shape and the index named
            raise TensorIndexError(f"index {idx!r} of a tensor of shape {self.shape}: "
                                   f"{e}") from None

    def reshape(self, *shape: Any) -> IndexTensor:
        """The elements in row-major order in ``shape`` (``reshape(2, 3)`` or
        ``reshape((2, 3))``; one entry may be -1, inferred).

        Raises:
            TypeError: an entry that is not an int.
            ValueError: an entry below -1, two -1 entries, or a shape of another size.
        """
        given = tuple(shape[0]) if len(shape) == 1 and isinstance(shape[0], (tuple, list)) \
            else shape
        dims = reshape_entries("reshape", given)
        try:
            return self._new(self.data.reshape(dims))
        except ValueError as e:
            raise ValueError(f"cannot reshape {self.shape} to {dims}: {e}") from None

    view = reshape

    def flatten(self) -> IndexTensor:
        return self._new(self.data.reshape(-1))

    def unsqueeze(self, dim: int) -> IndexTensor:
        return self._new(self.backend.xp.expand_dims(self.data, self._dim("unsqueeze", dim, 1)))

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

    def sum(self, dim: Any = None, keepdim: bool = False) -> IndexTensor:
        """Exact integer count/sum (bool counts as 0/1), int64 as in torch, over ``dim``
        (an int, a tuple or list of ints, or None/empty for every dim)."""
        keep = check_flag("sum: keepdim", keepdim)
        dims = () if dim is None else (dim,) if not isinstance(dim, (tuple, list)) else dim
        axes = tuple(self._dim("sum", d) for d in dims)
        # every dim when none is named; a 0-d tensor's dim 0 / -1 is its one element
        axis = axes if axes and self.ndim else None
        return self._new(self.data.astype("int64").sum(axis=axis, keepdims=keep))

    def all(self) -> IndexTensor:
        return self._new(self.data.all())

    def any(self) -> IndexTensor:
        return self._new(self.data.any())

    def argmax(self, dim: int | None = None, keepdim: bool = False) -> IndexTensor:
        """Index of the largest value (the first on ties), over every element when
        ``dim`` is None or the tensor is 0-d.

        Raises:
            TypeError: a bool tensor (torch has no argmax for bool; ``.long()`` first),
                a ``dim`` that is not an int or a ``keepdim`` that is not a bool.
            ValueError: a ``dim`` out of range.
        """
        if self.dtype == "bool":
            raise TypeError("argmax: a bool tensor has none, as in torch; take it of "
                            "mask.long()")
        keep = check_flag("argmax: keepdim", keepdim)
        if dim is None or not self.ndim:
            if dim is not None:
                self._dim("argmax", dim)
            return self._new(self.backend.xp.argmax(self.data.reshape(-1)))
        axis = self._dim("argmax", dim)
        return self._new(self.backend.xp.argmax(self.data, axis=axis, keepdims=keep))
