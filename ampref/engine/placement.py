"""``Tensor.to``, ``Module.to`` and ``device=`` as torch reads them (ENG-DEV-001): the
arguments name a device, a dtype, both, or another tensor to match; a move copies the
values exactly to the device's backend and, for a float tensor, records a graph node
whose gradient moves back.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ampref.common.checks import check_flag
from ampref.formats.table import Format

from .device import DEVICE_KINDS, backend_for, device, device_of
from .functional.core import make
from .indices import IndexTensor
from .tensor import Tensor

__all__ = ["Target", "move", "move_data", "on_device", "parse_to", "placed_backend"]

_KEYWORDS = ("dtype", "device", "copy", "non_blocking")


@dataclass(frozen=True, kw_only=True)
class Target:
    """What a ``to(...)`` call asks for: None where it leaves that aspect alone."""

    device: device | None
    dtype: str | Format | None
    copy: bool


def _is_device(v: Any) -> bool:
    return isinstance(v, device) or isinstance(v, str) and v.partition(":")[0] in DEVICE_KINDS


def parse_to(args: tuple[Any, ...], kwargs: dict[str, Any], what: str) -> Target:
    """torch's ``to`` overloads: ``to(dtype)``, ``to(device)``, ``to(device, dtype)``,
    ``to(tensor)`` (its device and dtype), with ``dtype=``, ``device=``, ``copy=`` and
    ``non_blocking=`` (accepted; moves here are synchronous) by keyword.

    Raises:
        TypeError: more than two positional arguments, an unknown keyword, an argument
            that is neither device, dtype nor tensor, or an aspect given twice.
    """
    unknown = sorted(set(kwargs) - set(_KEYWORDS))
    if unknown or len(args) > 2:
        raise TypeError(f"{what} takes a device, a dtype, both, or a tensor, and keywords "
                        f"{', '.join(_KEYWORDS)}; got {len(args)} positional arguments and "
                        f"keywords {sorted(kwargs)}")
    found: dict[str, Any] = {}
    for a in args:
        if isinstance(a, (Tensor, IndexTensor)):
            pairs = [("device", device_of(a.backend)),
                     ("dtype", a.format if isinstance(a, Tensor) else a.dtype)]
        elif _is_device(a):
            pairs = [("device", device(a))]
        elif isinstance(a, (str, Format)):
            pairs = [("dtype", a)]
        else:
            raise TypeError(f"{what}: {type(a).__name__} {a!r} is neither a device ('cpu', "
                            f"'cuda'), a dtype (a format name or Format) nor a tensor")
        for key, value in pairs:
            if key in found:
                raise TypeError(f"{what}: the {key} is given twice")
            found[key] = value
    for key in ("device", "dtype"):
        if kwargs.get(key) is not None:
            if key in found:
                raise TypeError(f"{what}: the {key} is given twice")
            found[key] = device(kwargs[key]) if key == "device" else kwargs[key]
    check_flag("non_blocking", kwargs.get("non_blocking", False))
    return Target(device=found.get("device"), dtype=found.get("dtype"),
                  copy=check_flag("copy", kwargs.get("copy", False)))


def on_device(backend: Any, where: device) -> bool:
    """Whether ``backend``'s arrays live on ``where`` (an index-less device matches any
    index of its type)."""
    here = device_of(backend)
    return here.type == where.type and (where.index is None or where.index == here.index)


def move_data(data: Any, source: Any, target: Any) -> Any:
    """``data`` (an array of ``source``) as an array of ``target``: the same bits."""
    return target.asarray(source.to_numpy(data), dtype=data.dtype)


def move(x: Tensor | IndexTensor, target: Any) -> Tensor | IndexTensor:
    """``x`` on ``target``'s backend (``x`` itself if already there). A float tensor's
    move is a graph node: its gradient is moved back to ``x``'s backend unchanged."""
    source = x.backend
    if source is target:
        return x
    data = move_data(x.data, source, target)
    if isinstance(x, IndexTensor):
        return IndexTensor(data, target)
    return make(target, data, x.format, "to", [x],
                lambda g: (move_data(g, target, source),))


def placed_backend(backend: Any, where: Any, what: str) -> Any:
    """The backend a creation function uses: ``device``'s when given (``backend`` must
    then be the default or agree), else ``backend`` as given.

    Raises:
        ValueError: ``device`` and ``backend`` name different places.
    """
    if where is None:
        return backend
    target = backend_for(where)
    name = backend if isinstance(backend, str) else getattr(backend, "name", None)
    if name not in ("numpy", target.name):
        raise ValueError(f"{what}: device={str(device(where))!r} and backend={name!r} name "
                         f"different places; give one")
    return target


def tensor_to(x: Tensor, *args: Any, **kwargs: Any) -> Tensor:
    """``Tensor.to``: moved first (exact), then rounded to the dtype (``to_format``'s
    rounding, ENG-CST-001); ``x`` itself when nothing changes, unless ``copy=True``."""
    from .functional.core import to_format

    want = parse_to(args, kwargs, "Tensor.to")
    out: Any = x
    if want.device is not None and not on_device(x.backend, want.device):
        out = move(out, backend_for(want.device))
    if want.dtype is not None:
        out = to_format(out, want.dtype)
    if want.copy and out is x:
        out = make(x.backend, x.data.copy(), x.format, "clone", [x], lambda g: (g,))
    return out  # type: ignore[no-any-return]


def index_to(x: IndexTensor, *args: Any, **kwargs: Any) -> Any:
    """``IndexTensor.to``: moved (exact); an integer dtype keeps it integer (int64 or
    bool, as ``long()``/``bool()``), a float format converts it (``float()``'s rule)."""
    want = parse_to(args, kwargs, "IndexTensor.to")
    out: Any = x
    if want.device is not None and not on_device(x.backend, want.device):
        out = move(out, backend_for(want.device))
    if want.dtype in ("int64", "long"):
        out = out.long()
    elif want.dtype == "bool":
        out = out.bool()
    elif want.dtype is not None:
        out = out.to_float(want.dtype)
    if want.copy and out is x:
        out = IndexTensor(x.data.copy(), x.backend)
    return out


def move_in_place(tensors: list[Tensor | IndexTensor], where: device) -> None:
    """Move each tensor's values (and a float tensor's gradient) to ``where``'s backend
    in place, as ``Module.to(device)`` moves parameters: the same objects, so references
    held elsewhere follow (build optimizers after moving, as with torch)."""
    target = backend_for(where)
    for t in tensors:
        if t.backend is target:
            continue
        t.data = move_data(t.data, t.backend, target)
        if isinstance(t, Tensor) and t.grad is not None:
            t.grad = move_data(t.grad, t.backend, target)
        t.backend = target
