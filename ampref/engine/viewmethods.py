"""torch's view methods of float tensors: the same values in another shape or order.

Views never round: each is one call of a shape op of :mod:`ampref.engine.functional`
(``reshape``, ``transpose``, ``permute``, ``broadcast_to``), so its gradient is that op's
(values moved back, broadcast dims summed exactly). :class:`~ampref.engine.tensor.Tensor`
binds these functions as its methods. Dims are checked as torch checks them: a dim past
the shape, a dim named twice or a shape that does not fit is a named ValueError, a
non-int entry a TypeError.
"""

from __future__ import annotations

import warnings
from typing import Any

from ampref.common.checks import check_int

__all__ = ["T", "expand", "expand_as", "flatten", "functional_ops", "mT", "named_dim",
           "permute", "squeeze", "t", "unsqueeze", "view", "view_as"]


def functional_ops() -> Any:
    """The ops module (an upward hook: the ops build on the tensor that binds these
    methods, so the import happens at call time)."""
    from . import functional

    return functional


def named_dim(x: Any, dim: Any, what: str) -> int:
    """``dim`` normalised against ``x``'s dims, or a named error (a dim past the shape is
    refused, never wrapped or passed to NumPy)."""
    try:
        return int(functional_ops().core.one_dim(x, dim))
    except (TypeError, ValueError) as e:
        raise type(e)(f"{what}: {e}") from None


def _entries(given: tuple[Any, ...]) -> tuple[Any, ...]:
    """``f(2, 3)`` and ``f((2, 3))`` both mean the entries (2, 3), as torch reads them."""
    if len(given) == 1 and isinstance(given[0], (tuple, list)):
        return tuple(given[0])
    return tuple(given)


def view(self: Any, *shape: Any) -> Any:
    return functional_ops().reshape(self, _entries(shape))


def view_as(self: Any, other: Any) -> Any:
    """This tensor in ``other``'s shape (any object with a ``shape``)."""
    return functional_ops().reshape(self, tuple(other.shape))


def flatten(self: Any, start_dim: int = 0, end_dim: int = -1) -> Any:
    n = len(self.shape)
    if n == 0:
        return functional_ops().reshape(self, (1,))
    lo, hi = named_dim(self, start_dim, "flatten"), named_dim(self, end_dim, "flatten")
    if lo > hi:
        raise ValueError(f"flatten: start_dim {start_dim} comes after end_dim {end_dim} "
                         f"for a tensor of shape {self.shape}")
    merged = 1
    for s in self.shape[lo:hi + 1]:
        merged *= s
    return functional_ops().reshape(self, (*self.shape[:lo], merged, *self.shape[hi + 1:]))


def unsqueeze(self: Any, dim: int) -> Any:
    n = len(self.shape) + 1
    d = check_int("unsqueeze: dim", dim)
    if not -n <= d < n:
        raise ValueError(f"unsqueeze: dim {dim} is out of range for a result of "
                         f"{n} dims (valid: {-n} to {n - 1})")
    d %= n
    return functional_ops().reshape(self, (*self.shape[:d], 1, *self.shape[d:]))


def squeeze(self: Any, dim: int | tuple[int, ...] | None = None) -> Any:
    """Without the size-1 dims: all of them, or those named by ``dim`` (an int or a
    tuple); a named dim of another size stays, as in torch."""
    if dim is None:
        return functional_ops().reshape(self, tuple(s for s in self.shape if s != 1))
    dims = dim if isinstance(dim, tuple) else (dim,)
    axes = {named_dim(self, d, "squeeze") for d in dims} if self.shape else set()
    return functional_ops().reshape(self, tuple(
        s for i, s in enumerate(self.shape) if not (i in axes and s == 1)))


def permute(self: Any, *dims: Any) -> Any:
    """The dims in the order ``dims`` (``permute(0, 2, 1)`` or ``permute((0, 2, 1))``)."""
    return functional_ops().permute(self, _entries(dims))


def t(self: Any) -> Any:
    """The transpose of a tensor of at most 2 dims (itself for 0 or 1 dim).

    Raises:
        ValueError: more than 2 dims, as torch refuses them (``mT`` swaps the last two).
    """
    if len(self.shape) > 2:
        raise ValueError(f"t() needs a tensor of at most 2 dims, got shape {self.shape}; "
                         f"use .mT or .transpose(-2, -1) for batches of matrices")
    return T(self)


def T(self: Any) -> Any:  # noqa: N802  # torch's name (a property of Tensor)
    """All dims reversed: a matrix transposed, a vector or scalar unchanged. On more than
    2 dims torch still reverses them all but warns that it will refuse them; so does
    this (a UserWarning with torch's advice: ``mT`` for batches of matrices)."""
    n = len(self.shape)
    if n > 2:
        warnings.warn("x.T on a tensor of more than 2 dims reverses all of them, as torch's "
                      "(deprecated there); use x.mT to transpose batches of matrices or "
                      "x.permute to reverse the dims explicitly", UserWarning, stacklevel=2)
    return self if n < 2 else functional_ops().permute(self, tuple(range(n - 1, -1, -1)))


def mT(self: Any) -> Any:  # noqa: N802  # torch's name (a property of Tensor)
    """The last two dims swapped (a batch of matrices transposed).

    Raises:
        ValueError: fewer than 2 dims, as torch.
    """
    if len(self.shape) < 2:
        raise ValueError(f"mT needs a tensor of at least 2 dims, got shape {self.shape}")
    return functional_ops().transpose(self, -2, -1)


def expand(self: Any, *sizes: Any) -> Any:
    """A broadcast view to ``sizes`` (``expand(4, -1)`` or ``expand((4, -1))``; -1 keeps
    a dim, new dims go in front). Its gradient sums over the broadcast dims, exactly
    rounded once (as ``broadcast_to``'s).

    Raises:
        TypeError: a size that is not an int.
        ValueError: fewer sizes than dims, -1 for a new dim, a size below -1, or a dim of
            size other than 1 changed.
    """
    given = _entries(sizes)
    lead = len(given) - len(self.shape)
    if lead < 0:
        raise ValueError(f"expand: sizes {given} are fewer than the dims of shape "
                         f"{self.shape}")
    want = []
    for i, n in enumerate(given):
        n = check_int("expand: size", n)
        if n == -1 and i >= lead:
            n = self.shape[i - lead]
        if n < 0 or (i >= lead and self.shape[i - lead] not in (1, n)):
            raise ValueError(f"expand: cannot expand shape {self.shape} to {given}")
        want.append(n)
    return functional_ops().broadcast_to(self, tuple(want))


def expand_as(self: Any, other: Any) -> Any:
    return expand(self, tuple(other.shape))
