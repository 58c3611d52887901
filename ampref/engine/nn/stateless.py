"""Layers without parameters, as torch.nn names them: activations, ``Identity``,
``Flatten``, and the losses as modules (``CrossEntropyLoss``, ``NLLLoss``, ``MSELoss``).

Each forward is one op of :mod:`ampref.engine.functional` with its rounding rules; the
module only holds the op's options (``dim``, ``reduction``, ``ignore_index``).
"""

from __future__ import annotations

from typing import Any

from ampref.common.checks import check_int

from .. import functional as F
from ..tensor import Tensor
from .base import Module

__all__ = ["CrossEntropyLoss", "Flatten", "Identity", "MSELoss", "NLLLoss", "SiLU", "Sigmoid",
           "Softmax"]


class Identity(Module):
    """Returns its input (extra arguments are accepted and ignored, as torch's)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__()

    def forward(self, x: Any) -> Any:
        return x


class Sigmoid(Module):
    def forward(self, x: Tensor) -> Tensor:
        return F.sigmoid(x)


class SiLU(Module):
    """x * sigmoid(x) (``F.silu``; torch's ``inplace`` is omitted: ops never write in
    place)."""

    def forward(self, x: Tensor) -> Tensor:
        return F.silu(x)


class Softmax(Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.dim = check_int("Softmax dim", dim)

    def forward(self, x: Tensor) -> Tensor:
        return F.softmax(x, self.dim)


class Flatten(Module):
    """Merge dims ``start_dim`` .. ``end_dim`` (default: all but the batch dim)."""

    def __init__(self, start_dim: int = 1, end_dim: int = -1) -> None:
        super().__init__()
        self.start_dim = check_int("Flatten start_dim", start_dim)
        self.end_dim = check_int("Flatten end_dim", end_dim)

    def forward(self, x: Tensor) -> Tensor:
        return x.flatten(self.start_dim, self.end_dim)


class CrossEntropyLoss(Module):
    """:func:`ampref.functional.cross_entropy` with the stored options."""

    def __init__(self, *, ignore_index: int = -100, reduction: str = "mean") -> None:
        super().__init__()
        self.ignore_index, self.reduction = ignore_index, reduction

    def forward(self, input: Tensor, target: Any) -> Tensor:
        return F.cross_entropy(input, target, ignore_index=self.ignore_index,
                               reduction=self.reduction)


class NLLLoss(Module):
    def __init__(self, *, ignore_index: int = -100, reduction: str = "mean") -> None:
        super().__init__()
        self.ignore_index, self.reduction = ignore_index, reduction

    def forward(self, input: Tensor, target: Any) -> Tensor:
        return F.nll_loss(input, target, ignore_index=self.ignore_index,
                          reduction=self.reduction)


class MSELoss(Module):
    """Mean of squared differences (only ``reduction="mean"``; see
    docs/torch-api-differences.md)."""

    def __init__(self, reduction: str = "mean") -> None:
        super().__init__()
        if reduction != "mean":
            raise ValueError(f"MSELoss: only reduction='mean' is implemented, got "
                             f"{reduction!r}")
        self.reduction = reduction

    def forward(self, input: Tensor, target: Any) -> Tensor:
        return F.mse_loss(input, target)
