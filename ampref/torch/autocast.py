"""``ampref.torch.autocast``: ampref's autocast policies applied to torch calls on any
device (``specs/torch.md`` TRC-AUT-*), so a CUDA AMP loop's casts happen on CPU tensors.

A ``TorchFunctionMode`` (above autograd) sees the Python-level calls (``F.linear``,
``torch.matmul``, ``Tensor.__matmul__``, ``F.softmax``, ...); for each it asks the
policy's plan (:func:`ampref.policy.autocast.plan`, the engine's own autocast rules) and
casts the floating tensor arguments with ``Tensor.to`` before the call, so the casts
enter the autograd graph as torch's own autocast's do. Leaf tensors that require grad
are cast once per region for the lower-precision ops (torch's weight-cast cache).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from ampref.policy import autocast as policy_autocast
from ampref.policy.policies import MixedPolicy, Policy

from .convert import FLOAT_DTYPES, format_of

__all__ = ["autocast"]

#: Python-level names whose aten op (the policies' vocabulary) is spelled differently
_ATEN = {"__matmul__": "matmul", "__rmatmul__": "matmul", "cross_entropy": "cross_entropy_loss"}
#: functions that take ``dtype=`` for fp32_set_opt_dtype (torch passes float32)
_DTYPE_ARG = {"softmax", "log_softmax", "sum", "cumsum", "cumprod", "prod",
              "linalg_vector_norm"}


def _torch_dtype(fmt: Any) -> torch.dtype:
    for dt, name in FLOAT_DTYPES.items():
        if name == fmt.name:
            return dt
    raise ValueError(f"autocast format {fmt.name} has no torch dtype")


class _AutocastMode(TorchFunctionMode):
    def __init__(self) -> None:
        super().__init__()
        self.cache: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}

    def _cast(self, t: Any, target: Any, cacheable: bool) -> Any:
        dt = _torch_dtype(target)
        if cacheable and t.is_leaf and t.requires_grad and torch.is_grad_enabled():
            hit = self.cache.get(id(t))
            if hit is None or hit[0] is not t or hit[1].dtype != dt:
                hit = (t, t.to(dt))
                self.cache[id(t)] = hit
            return hit[1]
        return t.to(dt)

    def __torch_function__(self, func: Any, types: Any, args: tuple[Any, ...] = (),
                           kwargs: dict[str, Any] | None = None) -> Any:
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        op = _ATEN.get(name, name)
        floats = [i for i, a in enumerate(args)
                  if isinstance(a, torch.Tensor) and a.dtype in FLOAT_DTYPES]
        if not floats:
            return func(*args, **kwargs)
        plan = policy_autocast.plan(op, [format_of(args[i].dtype) for i in floats])
        if not plan.listed:
            return func(*args, **kwargs)
        new = list(args)
        for i, target in zip(floats, plan.targets, strict=True):
            if target is not None:
                new[i] = self._cast(args[i], target, plan.cacheable)
        if plan.output is not None and name in _DTYPE_ARG and kwargs.get("dtype") is None:
            kwargs = {**kwargs, "dtype": _torch_dtype(plan.output)}
        return func(*new, **kwargs)


@contextmanager
def autocast(device_type: str = "cuda", dtype: torch.dtype | None = None, enabled: bool = True,
             cache_enabled: bool = True, *,
             policy: str | Path | Policy | MixedPolicy | None = None) -> Iterator[None]:
    """torch's ``autocast`` call shape with ampref's policies, on tensors of any device.

    ``device_type`` picks the op lists (``"cuda"``: torch's CUDA lists, ``"cpu"``: its CPU
    lists); ``policy`` any other (a shipped name, a TOML path, a jmp string). Inside
    :func:`ampref.torch.emulate` the casts and the ops run on ampref's numerics.

    Raises:
        ValueError: unknown device type or policy, a dtype other than float16/bfloat16.
        TypeError: ``enabled``/``cache_enabled`` not bools, or a dtype that is not a torch
            floating dtype.
    """
    if dtype is not None and dtype not in FLOAT_DTYPES:
        raise TypeError(f"dtype must be a torch floating dtype (torch.float16, torch.bfloat16), "
                        f"got {dtype!r}")
    fmt = None if dtype is None else format_of(dtype)
    with ExitStack() as stack:
        stack.enter_context(policy_autocast.autocast(device_type, fmt, enabled, cache_enabled,
                                                     policy=policy))
        mode = _AutocastMode()
        stack.enter_context(mode)
        yield
