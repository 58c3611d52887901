"""Where the modes send an aten op (``specs/torch.md`` TRC-EMU-001, TRC-EMU-007): to
torch (ops without rounding), to ampref's handler, or to the ops it is made of,
dispatched through the mode again: torch's own decompositions of composite ops, and
``_foreach_`` ops as their per-tensor op on each tensor of the list.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from typing import Any, cast

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from .autocast import casts_per_op
from .emulated import reopened
from .base import HANDLERS
from .passthrough import EXACT, has_complex, passes_through
from .explicit import RECOMPOSED
from .layout import match_layout
from .outargs import handler_for

__all__ = ["decomposed", "per_tensor", "recomposed", "routed"]

_FOREACH = "_foreach_"


@contextmanager
def _reentered(mode: TorchDispatchMode) -> Iterator[None]:
    """torch pops a mode while its ``__torch_dispatch__`` runs; push it back for the
    parts. The base class's enter and exit only: the modes' own add module hooks and
    would reset the module path."""
    TorchDispatchMode.__enter__(mode)
    try:
        yield
    finally:
        TorchDispatchMode.__exit__(mode, None, None, None)


def _reopened() -> Any:
    """The autocast key reopened for a composite's parts inside an ampref region."""
    return reopened() if casts_per_op() else nullcontext()


def decomposed(mode: TorchDispatchMode, func: Any, args: tuple[Any, ...],
               kwargs: dict[str, Any]) -> Any:
    """torch's own decomposition of a composite op (``linear``, ``matmul``, ``gru``),
    its aten ops dispatched through autocast (where on) and ``mode``; ``NotImplemented``
    for an op without one.

    Autograd runs these decompositions before a dispatch mode sees the op; with autograd
    off (``torch.inference_mode()``) the op reaches the mode whole. Decomposing it here
    gives the mode the same aten ops, cast alike, so inference computes what a training
    forward computes."""
    with _reentered(mode), _reopened():
        return func.decompose(*args, **kwargs)


def recomposed(mode: TorchDispatchMode, func: Any, args: tuple[Any, ...],
               kwargs: dict[str, Any]) -> Any:
    """An op whose kernel ampref writes as the aten ops it calls
    (:data:`~ampref.torch.explicit.RECOMPOSED`: ``allclose``, ``renorm``), those parts
    dispatched as :func:`decomposed`'s, the result in the layout torch's kernel gives
    (``renorm`` of a transposed tensor is contiguous; its parts' final product keeps the
    transpose); the in-place form (``renorm_``) writes the result into its tensor.
    ``NotImplemented`` for any other op."""
    name = func.overloadpacket.__name__
    inplace = name.endswith("_") and name[:-1] in RECOMPOSED
    parts = RECOMPOSED.get(name[:-1] if inplace else name)
    if parts is None or func._overloadname not in ("default", ""):
        return NotImplemented
    with _reentered(mode), _reopened():
        out = parts(*args, **kwargs)
    return args[0].copy_(out) if inplace else match_layout(func, args, kwargs, out)


def _per_tensor_op(func: Any) -> Callable[..., Any] | None:
    """What ``_foreach_<op>`` does to each tensor (``add_`` for ``_foreach_add_``), if
    ampref answers ``<op>`` (a handler, an in-place form of one, or an op without
    rounding). An in-place ``_foreach_`` op whose per-tensor op has no in-place form
    (``minimum``) writes the functional result into the tensor, as torch's does."""
    name = func.overloadpacket.__name__
    if not name.startswith(_FOREACH):
        return None
    single = name[len(_FOREACH):]
    base = single[:-1] if single.endswith("_") else single
    if not any(n in HANDLERS or n in EXACT for n in (single, base)):
        return None
    aten = torch.ops.aten
    if hasattr(aten, single):
        return cast(Callable[..., Any], getattr(aten, single))
    functional = getattr(aten, base, None)
    if single == base or functional is None:
        return None
    return lambda x, *args, **kwargs: x.copy_(functional(x, *args, **kwargs))


def per_tensor(mode: TorchDispatchMode, func: Any, args: tuple[Any, ...],
               kwargs: dict[str, Any]) -> Any:
    """A ``_foreach_<op>`` as ``<op>`` on each tensor of its first list, the other list
    operands (tensors or scalars) zipped and the rest shared, each dispatched through
    ``mode``: the list of results, or None for the in-place ``_``-forms (aten returns
    nothing). torch's fused multi-tensor kernels compute each element as the per-tensor
    kernel does. ``NotImplemented`` if ampref answers no such per-tensor op."""
    single = _per_tensor_op(func)
    if single is None:
        return NotImplemented
    n = len(args[0])
    calls = [[a[i] if isinstance(a, (list, tuple)) else a for a in args] for i in range(n)]
    with _reentered(mode):
        outs = [single(*c, **kwargs) for c in calls]
    return outs if func._schema.returns else None


def routed(mode: TorchDispatchMode, func: Any, args: tuple[Any, ...],
           kwargs: dict[str, Any]) -> tuple[Any, Any, Any]:
    """Where ``mode`` sends ``func``: ``(handler, inplace, answer)``. ``answer`` is
    torch's result for an op without rounding, the parts' result for a composite or
    ``_foreach_`` op, else ``NotImplemented``: then the mode computes the op with
    ``handler`` (and ``inplace``, :func:`~ampref.torch.outargs.handler_for`), or refuses
    it where ``handler`` is None. A handler never takes complex operands."""
    handler, inplace = handler_for(func)
    if handler is not None and has_complex(args, kwargs):
        handler = inplace = None
    if passes_through(func, func.overloadpacket.__name__, handler, args, kwargs):
        return handler, inplace, func(*args, **kwargs)
    if handler is not None:
        return handler, inplace, NotImplemented
    answer = recomposed(mode, func, args, kwargs)
    if answer is NotImplemented:
        answer = decomposed(mode, func, args, kwargs)
    if answer is NotImplemented:
        answer = per_tensor(mode, func, args, kwargs)
    return None, None, answer
