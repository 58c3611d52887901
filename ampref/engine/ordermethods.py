"""Tensor methods that order or pick values: ``sort``, ``topk`` (ENG-ORD-001) and
``gather`` (ENG-GTH-001), torch's call shapes over ``ampref.engine.functional``'s ops."""

from __future__ import annotations

from typing import Any

from .viewmethods import functional_ops

__all__ = ["gather", "sort", "topk"]


def sort(self: Any, dim: int = -1, descending: bool = False, *, stable: bool = False) -> Any:
    return functional_ops().sort(self, dim, descending, stable=stable)


def topk(self: Any, k: int, dim: int | None = None, largest: bool = True,
         sorted: bool = True) -> Any:
    return functional_ops().topk(self, k, dim, largest, sorted)


def gather(self: Any, dim: int, index: Any) -> Any:
    return functional_ops().gather(self, dim, index)
