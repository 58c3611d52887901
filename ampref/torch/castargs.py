"""The arguments of one autocast call: the order torch casts them in, the call with casts
put in, and the float32 ``dtype`` redispatches of torch's fp32_set_opt_dtype and
fp32_append_dtype ops (TRC-AUT-001, TRC-AUT-004). Used by :mod:`ampref.torch.autocast`'s
kernels; nothing here dispatches through autocast itself.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import torch

__all__ = ["APPEND_DTYPE", "append_dtype_call", "cast_order", "leaves", "replaced",
           "with_float32_dtype"]

#: fp32_append_dtype ops and the overload torch redispatches each to with a trailing
#: ``dtype=float32`` (autocast_mode.cpp, KERNEL_..._DIFFERENT_REDISPATCH_SIGNATURE)
APPEND_DTYPE = {"norm.Scalar": "norm.ScalarOpt_dtype",
                "norm.ScalarOpt_dim": "norm.ScalarOpt_dim_dtype",
                "norm.names_ScalarOpt_dim": "norm.names_ScalarOpt_dim_dtype"}


def _overload(name: str) -> Any:
    base, _, overload = name.partition(".")
    return getattr(getattr(torch.ops.aten, base), overload or "default")


def append_dtype_call(op: Any, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """torch's fp32_append_dtype redispatch: the ``dtype`` overload called with every
    positional argument of ``op`` (defaults filled in: a caller, or torch's own dispatch,
    leaves defaulted trailing ones out, and ``norm.ScalarOpt_dim_dtype``'s ``keepdim``
    has no default) and ``dtype=float32``."""
    full, kw = list(args), dict(kwargs)
    for a in op._schema.arguments[len(args):]:
        if a.kwarg_only:
            break
        full.append(kw.pop(a.name) if a.name in kw else a.default_value)
    return _overload(APPEND_DTYPE[name])(*full, dtype=torch.float32, **kw)


def with_float32_dtype(op: Any, args: tuple[Any, ...],
                kwargs: dict[str, Any]) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """The call with the op's optional ``dtype`` set to float32 where the caller left it
    None (torch's set_opt_dtype)."""
    i = [a.name for a in op._schema.arguments].index("dtype")
    if len(args) > i:
        if args[i] is None:
            args = (*args[:i], torch.float32, *args[i + 1:])
    elif kwargs.get("dtype") is None:
        kwargs = {**kwargs, "dtype": torch.float32}
    return args, kwargs


def cast_order(args: tuple[Any, ...],
                kwargs: dict[str, Any]) -> Iterator[tuple[tuple[Any, ...], Any]]:
    """Each argument (its position, its value) in the order torch's autocast kernels cast
    them: its C++ wrappers expand ``cached_cast(args)...`` as call arguments, which GCC
    (torch's Linux builds) evaluates right to left, so the last argument is cast first;
    a tensor list is cast front to back (TRC-AUT-004). The order fixes the autograd
    nodes' sequence numbers, hence the order of backward ops and of gradient sums into
    a shared tensor. A position is ``(i,)`` or ``(i, j)`` for argument i (element j of
    a list), ``(name,)`` or ``(name, j)`` for a keyword."""
    entries = [*enumerate(args), *kwargs.items()]
    for key, a in reversed(entries):
        if isinstance(a, (list, tuple)):
            yield from (((key, j), v) for j, v in enumerate(a))
        else:
            yield (key,), a


def leaves(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Iterator[Any]:
    for a in (*args, *kwargs.values()):
        if isinstance(a, (list, tuple)):
            yield from a
        else:
            yield a


def replaced(args: tuple[Any, ...], kwargs: dict[str, Any],
              casts: dict[tuple[Any, ...], torch.Tensor]) -> tuple[tuple[Any, ...],
                                                                   dict[str, Any]]:
    """The call with the argument at each position of ``casts`` replaced by its cast."""
    def one(key: Any, a: Any) -> Any:
        if isinstance(a, (list, tuple)):
            return type(a)(casts.get((key, j), v) for j, v in enumerate(a))
        return casts.get((key,), a)
    return (tuple(one(i, a) for i, a in enumerate(args)),
            {k: one(k, v) for k, v in kwargs.items()})
