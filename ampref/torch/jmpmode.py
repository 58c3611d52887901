"""A jmp-style mixed policy on torch calls: every floating op's eligible inputs in the
compute format (``specs/torch.md`` TRC-AUT-003).

jmp casts parameters and inputs at module boundaries, after which every op computes in
the compute format; the same holds when the Python-level calls cast their floating
inputs (a ``TorchFunctionMode``, above autograd, so the casts are in the graph): the aten
ops inside a composite then see compute-format inputs already. float64 is never cast.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from ampref.policy import autocast as policy_autocast

from .convert import FLOAT_DTYPES, format_of

__all__ = ["JmpMode"]


class JmpMode(TorchFunctionMode):
    """Casts the floating tensor arguments of each torch call as the active mixed
    policy's plan says (leaf weights once per region, as the weight-cast cache does)."""

    def __init__(self) -> None:
        super().__init__()
        self.cache: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}

    def _cast(self, t: torch.Tensor, dt: torch.dtype) -> torch.Tensor:
        if t.is_leaf and t.requires_grad and torch.is_grad_enabled():
            hit = self.cache.get(id(t))
            if hit is None or hit[0] is not t or hit[1].dtype != dt:
                hit = (t, t.to(dt))
                self.cache[id(t)] = hit
            return hit[1]
        return t.to(dt)

    def __torch_function__(self, func: Any, types: Any, args: tuple[Any, ...] = (),
                           kwargs: dict[str, Any] | None = None) -> Any:
        kwargs = kwargs or {}
        floats = [i for i, a in enumerate(args)
                  if isinstance(a, torch.Tensor) and a.dtype in FLOAT_DTYPES]
        if not floats:
            return func(*args, **kwargs)
        plan = policy_autocast.plan(getattr(func, "__name__", ""),
                                    [format_of(args[i].dtype) for i in floats])
        new = list(args)
        for i, target in zip(floats, plan.targets, strict=True):
            if target is not None:
                dt = next(d for d, n in FLOAT_DTYPES.items() if n == target.name)
                new[i] = self._cast(args[i], dt)
        return func(*new, **kwargs)
