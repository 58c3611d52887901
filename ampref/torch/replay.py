"""The engine as the reference of aten ops: forward ops run the engine's op of the same
definition on the same values; backward ops replay the engine's op on the inputs the
backward needs and take the engine's gradients (rounded into each input's format, as
the engine rounds them)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from ampref.backends import get as get_backend  # type: ignore[attr-defined]
from ampref.engine.tensor import Tensor as EngineTensor
from ampref.engine.tensor import no_grad

from .convert import engine, format_of, from_numpy, to_numpy, to_torch

__all__ = ["NP", "as_torch", "forward", "replay"]

#: the engine's NumPy backend, for the engine helpers that take one
NP = get_backend("numpy")


def as_torch(x: EngineTensor, dtype: torch.dtype) -> torch.Tensor:
    """An engine result as a torch tensor of ``dtype``: exact where the engine's output
    format is that dtype's (the usual case), else rounded once into it."""
    if x.format == format_of(dtype):
        return to_torch(x.data, dtype)
    return from_numpy(x.data, dtype)


def forward(fn: Callable[..., Any], *inputs: Any, **kw: Any) -> Any:
    """The engine's op on the inputs' values."""
    with no_grad():
        return fn(*(engine(t) for t in inputs), **kw)


def replay(fn: Callable[..., Any], inputs: list[Any], need: list[bool], grad: torch.Tensor,
           **kw: Any) -> list[torch.Tensor | None]:
    """The engine's gradients of ``fn(*inputs)`` for the inputs flagged in ``need``."""
    eng = [engine(t, requires_grad=n) if isinstance(t, torch.Tensor) else t
           for t, n in zip(inputs, need, strict=True)]
    y = fn(*eng, **kw)
    y.backward(EngineTensor(to_numpy(grad), y.format))
    return [to_torch(e.grad, t.dtype) if n and e.grad is not None else
            (torch.zeros_like(t) if n else None)
            for t, e, n in zip(inputs, eng, need, strict=True)]
