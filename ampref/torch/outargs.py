"""aten's ``out=`` overloads (``torch.maximum(a, b, out=c)``, ``torch.div(..., out=)``)
under the modes (``specs/torch.md`` TRC-EMU-006).

Handlers are keyed by overload packet and compute the functional overload; an ``out``
overload (one whose schema marks arguments as outputs) is answered by its functional
twin, the overload of the same packet whose arguments are the others, and the result is
written into the given tensors as torch's ``out`` convention does: a tensor of another
shape is resized to the result's, then the values are copied (an exact copy for the
same dtype; torch's own nearest-even conversion into another floating dtype).
"""

from __future__ import annotations

from typing import Any

import torch

from .base import UnsupportedOpError

__all__ = ["functional_form", "functional_twin", "out_names", "store"]


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


def functional_form(func: Any, kwargs: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    """The overload a handler computes and its keyword arguments: for an ``out``
    overload its functional twin without the output arguments, else ``func`` itself.

    Raises:
        UnsupportedOpError: an ``out`` overload whose packet has no functional twin.
    """
    outs = out_names(func)
    if not outs:
        return func, kwargs
    twin = functional_twin(func)
    if twin is None:
        raise UnsupportedOpError(f"no functional overload of {func} to compute its out= form")
    return twin, {k: v for k, v in kwargs.items() if k not in outs}


def store(outs: list[torch.Tensor], result: Any) -> Any:
    """Write ``result`` (a tensor or a tuple of them) into ``outs`` and return them as
    the ``out`` overload does: the tensor, or the tuple."""
    results = result if isinstance(result, (list, tuple)) else (result,)
    for o, r in zip(outs, results, strict=True):
        if tuple(o.shape) != tuple(r.shape):
            o.resize_(r.shape)
        o.copy_(r)
    return outs[0] if len(outs) == 1 else tuple(outs)
