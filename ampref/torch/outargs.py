"""aten's ``out=`` overloads (``torch.maximum(a, b, out=c)``, ``torch.div(..., out=)``)
and in-place overloads (``x.triu_(1)``, ``c.addmm_(a, b)``) under the modes
(``specs/torch.md`` TRC-EMU-006).

Handlers are keyed by overload packet and compute the functional overload; an ``out``
overload (one whose schema marks arguments as outputs) is answered by its functional
twin, the overload of the same packet whose arguments are the others, and the result is
written into the given tensors as torch's ``out`` convention does: a tensor of another
shape is resized to the result's, then the values are copied (an exact copy for the
same dtype; torch's own nearest-even conversion into another floating dtype).
An in-place overload whose packet has no handler of its own (``addmm_``) is answered
the same way by the overload of the same name and arguments of the functional packet
(``addmm``), written into ``self``: torch's in-place kernels compute in the operands'
common dtype and write that result into ``self``'s dtype, which is this copy.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import torch

from .base import HANDLERS, UnsupportedOpError

__all__ = ["functional_form", "functional_twin", "handler_for", "inplace_twin", "out_names",
           "store"]


def out_names(func: Any) -> list[str]:
    """The names of ``func``'s output arguments, in schema order (empty for a functional
    or in-place overload)."""
    return [a.name for a in func._schema.arguments if a.is_out]


def _signature(schema: Any) -> list[tuple[str, str]]:
    return [(a.name, str(a.type)) for a in schema.arguments if not a.is_out]


def functional_twin(func: Any) -> Any:
    """The overload of ``func``'s packet taking the same non-output arguments and no
    output arguments (``maximum.out`` -> ``maximum.default``), or None if it has none."""
    want = _signature(func._schema)
    packet = func.overloadpacket
    for name in packet.overloads():
        twin = getattr(packet, name)
        if not out_names(twin) and _signature(twin._schema) == want:
            return twin
    return None


@cache
def inplace_twin(func: Any) -> Any:
    """For an in-place overload (packet ``triu_``) the overload of the functional packet
    (``triu``) with the same arguments, or None (not in-place, or no such overload).
    Cached per overload: every ``zero_`` and ``fill_`` asks (a schema scan is ~5 us)."""
    packet = func.overloadpacket.__name__
    if not packet.endswith("_") or packet.endswith("__"):  # ``__and__`` is not in-place
        return None
    base = getattr(torch.ops.aten, packet[:-1], None)
    if base is None:
        return None
    want = _signature(func._schema)
    for name in base.overloads():
        twin = getattr(base, name)
        if not out_names(twin) and _signature(twin._schema) == want:
            return twin
    return None


def handler_for(func: Any) -> tuple[Any, Any]:
    """ampref's handler for ``func`` (None if it has none) and, where that handler is the
    functional packet's answering an in-place overload, the functional overload (else
    None)."""
    name = func.overloadpacket.__name__
    handler = HANDLERS.get(name)
    if handler is not None:
        return handler, None
    twin = inplace_twin(func)
    if twin is None or twin.overloadpacket.__name__ not in HANDLERS:
        return None, None
    return HANDLERS[twin.overloadpacket.__name__], twin


def functional_form(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any],
                    inplace: Any = None) -> tuple[Any, dict[str, Any], list[Any] | None]:
    """The overload a handler computes, its keyword arguments, and the tensors its result
    is written into (None: the result is returned as computed). An ``out`` overload: its
    functional twin without the output arguments, and the outputs. With ``inplace`` (the
    functional overload :func:`handler_for` gave): it, the same arguments, and ``self``
    (the list of tensors of a ``_foreach_`` op). Else ``func`` itself.

    Raises:
        UnsupportedOpError: an ``out`` overload whose packet has no functional twin.
    """
    if inplace is not None:
        target = args[0]
        return inplace, kwargs, list(target) if isinstance(target, (list, tuple)) else [target]
    outs = out_names(func)
    if not outs:
        return func, kwargs, None
    twin = functional_twin(func)
    if twin is None:
        raise UnsupportedOpError(f"no functional overload of {func} to compute its out= form")
    return twin, {k: v for k, v in kwargs.items() if k not in outs}, [kwargs[n] for n in outs]


def store(func: Any, outs: list[torch.Tensor], result: Any) -> Any:
    """Write ``result`` (a tensor or a sequence of them) into ``outs`` and return what
    ``func`` returns: the tensor, the tuple, or nothing (in-place ``_foreach_`` ops)."""
    results = result if isinstance(result, (list, tuple)) else (result,)
    for o, r in zip(outs, results, strict=True):
        if tuple(o.shape) != tuple(r.shape):
            o.resize_(r.shape)
        o.copy_(r)
    if not func._schema.returns:
        return None
    return outs[0] if len(outs) == 1 else tuple(outs)
