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

import builtins
from typing import Any

import numpy as np

from ampref.common.checks import TensorIndexError, check_int, reshape_entries

from .indexops import index_key, wrap_dim
from .indexstores import IndexStores

__all__ = ["IndexTensor"]

_KINDS = {"i": "int64", "u": "int64", "b": "bool"}


class IndexTensor(IndexStores):
    """An int64 or bool array (NumPy or CuPy) with torch's tensor methods for labels;
    what it computes and stores is in :mod:`ampref.engine.indexops` and
    :mod:`ampref.engine.indexstores`."""

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
        return wrap_dim(op, self.shape, dim, extra)

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
        idx = index_key(idx)
        try:
            out = self.data[idx]
            if isinstance(out, np.generic):  # one element: a 0-d view, as torch's x[i, j]
                out = self.data[(idx if isinstance(idx, tuple) else (idx,)) + (Ellipsis,)]
            return self._new(out)
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

    def view(self, *shape: Any) -> IndexTensor:
        """As :meth:`reshape`, but always a view (writes through it reach this tensor),
        as torch's: a layout no view can give (a transposed or sliced tensor flattened)
        is a ValueError naming ``reshape``, which copies, where NumPy would copy silently.
        """
        out = self.reshape(*shape)
        share = getattr(self.backend.xp, "shares_memory", None)
        if out.numel() and share is not None and not share(out.data, self.data):
            raise ValueError(f"view: shape {out.shape} is not a view of this tensor's "
                             f"layout (shape {self.shape}, strided); use .reshape(...), "
                             f"which copies")
        return out

    def flatten(self) -> IndexTensor:
        return self._new(self.data.reshape(-1))

    def unsqueeze(self, dim: int) -> IndexTensor:
        return self._new(self.backend.xp.expand_dims(self.data, self._dim("unsqueeze", dim, 1)))

    def squeeze(self, dim: Any = None) -> IndexTensor:
        """Without the size-1 dims (all of them, or those of ``dim``: an int or a tuple;
        a named dim of another size stays, as in torch)."""
        dims = range(self.ndim) if dim is None else dim if isinstance(dim, tuple) else (dim,)
        axes = {self._dim("squeeze", d) for d in dims}
        return self._new(self.data.reshape(tuple(n for i, n in enumerate(self.shape)
                                                 if not (i in axes and n == 1))))

    def contiguous(self) -> IndexTensor:
        """The same values in row-major memory (a copy only when not already so)."""
        return self._new(self.backend.xp.ascontiguousarray(self.data))

    def view_as(self, other: Any) -> IndexTensor:
        return self.reshape(tuple(other.shape))

    def transpose(self, dim0: int, dim1: int) -> IndexTensor:
        """A view with dims ``dim0`` and ``dim1`` swapped."""
        return self._new(self.backend.xp.swapaxes(self.data, self._dim("transpose", dim0),
                                                  self._dim("transpose", dim1)))

    def t(self) -> IndexTensor:
        """The transpose of a tensor of at most 2 dims (itself for 0 or 1 dim).

        Raises:
            ValueError: more than 2 dims (torch refuses them too).
        """
        if self.ndim > 2:
            raise ValueError(f"t() needs a tensor of at most 2 dims, got shape {self.shape}")
        return self._new(self.data.T)

    @property
    def T(self) -> IndexTensor:  # noqa: N802  # torch's name
        return self._new(self.data.T)

    def permute(self, *dims: Any) -> IndexTensor:
        """A view with the dims in the order ``dims`` (``permute(1, 0)`` or
        ``permute((1, 0))``), each dim named once."""
        given = tuple(dims[0]) if len(dims) == 1 and isinstance(dims[0], (tuple, list)) else dims
        order = tuple(self._dim("permute", d) for d in given)
        if sorted(order) != list(range(self.ndim)):
            raise ValueError(f"permute: {given} must name each of the {self.ndim} dims of "
                             f"shape {self.shape} once")
        return self._new(self.backend.xp.transpose(self.data, order))

    def expand(self, *sizes: Any) -> IndexTensor:
        """A read-only broadcast view to ``sizes`` (-1 keeps a dim's size)."""
        given = tuple(sizes[0]) if len(sizes) == 1 and isinstance(sizes[0], (tuple, list)) \
            else sizes
        lead = len(given) - self.ndim
        if lead < 0:
            raise ValueError(f"expand: {given} has fewer dims than shape {self.shape}")
        want = tuple(self.shape[i - lead] if check_int("expand: size", n) == -1 and i >= lead
                     else n for i, n in enumerate(given))
        try:
            return self._new(self.backend.xp.broadcast_to(self.data, want))
        except ValueError as e:
            raise ValueError(f"expand: cannot expand shape {self.shape} to {given}: {e}") \
                from None

    def expand_as(self, other: Any) -> IndexTensor:
        return self.expand(tuple(other.shape))

    def repeat(self, *sizes: Any) -> IndexTensor:
        """The tensor tiled ``sizes`` times per dim (at least as many sizes as dims)."""
        given = tuple(sizes[0]) if len(sizes) == 1 and isinstance(sizes[0], (tuple, list)) \
            else sizes
        reps = tuple(check_int("repeat: size", n) for n in given)
        if len(reps) < self.ndim or builtins.any(n < 0 for n in reps):
            raise ValueError(f"repeat: sizes {given} must be >= 0 and at least one per dim "
                             f"of shape {self.shape}")
        return self._new(self.backend.xp.tile(self.data, reps))

    def flip(self, *dims: Any) -> IndexTensor:
        """A copy with the order of ``dims`` reversed (``flip(0)``, ``flip((0, 1))``)."""
        given = tuple(dims[0]) if len(dims) == 1 and isinstance(dims[0], (tuple, list)) else dims
        return self._new(self.backend.xp.flip(
            self.data, tuple(self._dim("flip", d) for d in given)).copy())

    def clone(self) -> IndexTensor:
        return self._new(self.data.copy())

    def detach(self) -> IndexTensor:
        return self

    def cpu(self) -> Any:
        return self.to("cpu")

    def cuda(self) -> Any:
        return self.to("cuda")

    @property
    def device(self) -> Any:
        """Where the data lives (ENG-DEV-001): ``device("cpu")`` on the NumPy backend."""
        from .device import device_of  # an upward hook, as ``to`` below

        return device_of(self.backend)

    def long(self) -> IndexTensor:
        """int64: this tensor itself when it is one (as torch's, so writes are shared)."""
        return self if self.dtype == "int64" else self._new(self.data.astype("int64"))

    def bool(self) -> IndexTensor:
        """bool (nonzero is True): this tensor itself when it is one."""
        return self if self.dtype == "bool" else self._new(self.data != 0)

    # -- casts into a floating-point format (exact up to 2^24 in float32, then rounded) ---
    def to(self, *args: Any, **kwargs: Any) -> Any:
        """torch's ``to``: a device moves it, ``int64``/``bool`` keep it integer, a float
        format converts it (:meth:`to_float`); ``ampref.engine.placement.index_to``."""
        from .placement import index_to  # an upward hook: placement builds on this module

        return index_to(self, *args, **kwargs)

    def to_float(self, fmt: Any) -> Any:
        """A float :class:`~ampref.engine.tensor.Tensor` of ``fmt``, each integer rounded
        once (nearest-even) from its exact value; True is 1, False is 0."""
        from .creation import tensor  # an upward hook: creation builds on this module

        return tensor(self.data.astype("int64"), fmt, backend=self.backend)

    def float(self) -> Any:
        return self.to_float("float32")

    def half(self) -> Any:
        return self.to_float("float16")

    def bfloat16(self) -> Any:
        return self.to_float("bfloat16")

    def double(self) -> Any:
        return self.to_float("float64")
