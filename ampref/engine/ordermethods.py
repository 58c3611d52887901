"""Tensor methods that order values: ``sort`` and ``topk`` (torch's call shapes; the
definitions are ``ampref.engine.functional.ordering``'s, ENG-ORD-001)."""

from __future__ import annotations

from typing import Any

from .viewmethods import functional_ops

__all__ = ["sort", "topk"]


def sort(self: Any, dim: int = -1, descending: bool = False, *, stable: bool = False) -> Any:
    return functional_ops().sort(self, dim, descending, stable=stable)


def topk(self: Any, k: int, dim: int | None = None, largest: bool = True,
         sorted: bool = True) -> Any:
    return functional_ops().topk(self, k, dim, largest, sorted)
