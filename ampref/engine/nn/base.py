"""The module base class: parameters in registration order, children, hooks,
train/eval, ``to_format`` and ``state_dict`` (ENG-NN-*); and ``Parameter``."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import numpy as np

from ampref.common.checks import check_flag
from ampref.formats.table import Format, get_format

from ..creation import tensor
from ..indices import IndexTensor
from ..tensor import Tensor
from ..placement import move_in_place, parse_to
from .tree import ModuleTree

__all__ = ["IncompatibleKeys", "Module", "Parameter"]


class IncompatibleKeys(NamedTuple):
    """What ``load_state_dict(strict=False)`` skipped (torch's ``_IncompatibleKeys``)."""

    missing_keys: list[str]
    unexpected_keys: list[Any]


def Parameter(values: Any, fmt: str | Format = "float32", backend: str = "numpy") -> Tensor:
    """A leaf tensor that requires grad.

    Raises:
        TypeError: ``fmt`` is not a format name or Format (None included: a parameter
            always has a floating-point format).
    """
    if not isinstance(fmt, (str, Format)):
        raise TypeError(f"Parameter format must be a format name or Format, got "
                        f"{type(fmt).__name__}: {fmt!r}")
    return tensor(values, fmt, requires_grad=True, backend=backend)


class Module(ModuleTree):
    """Base class: attributes that are Tensors requiring grad are parameters; Modules
    are children; ``register_buffer`` adds state that is saved but not trained (a causal
    mask, running statistics). Order of registration is the order of
    ``named_parameters`` and ``state_dict``; walking the tree is :mod:`.tree`'s."""

    _params: dict[str, Tensor]
    _buffers: dict[str, Tensor | IndexTensor | None]
    _transient: set[str]
    _children: dict[str, Module]
    _hooks: list[Callable[[Module, Any], None]]
    training: bool

    def __init__(self) -> None:
        object.__setattr__(self, "_params", {})
        object.__setattr__(self, "_buffers", {})
        object.__setattr__(self, "_transient", set())
        object.__setattr__(self, "_children", {})
        object.__setattr__(self, "training", True)
        object.__setattr__(self, "_hooks", [])

    def __setattr__(self, name: str, value: Any) -> None:
        if "_params" not in self.__dict__:
            raise RuntimeError(f"{type(self).__name__}.__init__ must call super().__init__() first")
        if name in self._buffers:
            _check_buffer(name, value)
            self._buffers[name] = value
        elif name in self._params and not _is_parameter(value):
            if value is not None:
                raise TypeError(f"cannot assign {type(value).__name__} as parameter {name!r} "
                                f"(a leaf tensor that requires grad, or None, expected)")
            del self._params[name]
        elif _is_parameter(value):
            self._children.pop(name, None)
            self._params[name] = value
        elif isinstance(value, Module):
            self._params.pop(name, None)
            self._children[name] = value
        object.__setattr__(self, name, value)

    def register_buffer(self, name: str, tensor: Tensor | IndexTensor | None,
                        persistent: bool = True) -> None:
        """Keep ``tensor`` as ``self.<name>``: not a parameter (no optimizer updates it),
        listed by ``named_buffers``, in ``state_dict`` unless ``persistent=False``, and
        rounded by ``to_format`` if floating-point. A float ``tensor`` that requires grad
        is kept as given (torch keeps it too).

        Raises:
            TypeError: ``name`` is not a str, ``tensor`` neither a tensor nor None.
            ValueError: ``name`` is empty, dotted, or already another attribute.
        """
        self._check_new_name("buffer", name)
        _check_buffer(name, tensor)
        persistent = check_flag("persistent", persistent)
        self._buffers[name] = tensor
        (self._transient.discard if persistent else self._transient.add)(name)
        object.__setattr__(self, name, tensor)

    def register_parameter(self, name: str, param: Tensor | None) -> None:
        """Add ``param`` (a leaf tensor that requires grad, or None) as ``self.<name>``.

        Raises:
            TypeError: ``name`` is not a str, or ``param`` is not a parameter or None.
            ValueError: ``name`` is empty, dotted, or already another attribute.
        """
        self._check_new_name("parameter", name)
        if param is not None and not _is_parameter(param):
            raise TypeError(f"cannot assign {type(param).__name__} as parameter {name!r} "
                            f"(a leaf tensor that requires grad, or None, expected)")
        if param is not None:
            self._params[name] = param
        object.__setattr__(self, name, param)

    def _check_new_name(self, kind: str, name: Any) -> None:
        if not isinstance(name, str):
            raise TypeError(f"{kind} name must be a str, got {type(name).__name__}: {name!r}")
        if not name or "." in name:
            raise ValueError(f"{kind} name must be non-empty and without '.', got {name!r}")
        own = name in self._buffers if kind == "buffer" else name in self._params
        if hasattr(self, name) and not own:
            raise ValueError(f"cannot register {kind} {name!r} on {type(self).__name__}: the "
                             f"attribute already exists")

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(f"{type(self).__name__} must define forward()")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        out = self.forward(*args, **kwargs)
        for hook in self._hooks:
            hook(self, out)
        return out

    def register_forward_hook(self, fn: Callable[[Module, Any], None]) -> None:
        """Call ``fn(module, output)`` after every forward (activation statistics)."""
        self._hooks.append(fn)

    def train(self, mode: bool = True) -> Module:
        mode = check_flag("mode", mode)
        for _, m in self.named_modules():
            object.__setattr__(m, "training", mode)
        return self

    def eval(self) -> Module:
        return self.train(False)

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Clear every parameter's gradient: None (default, as torch) or zeros."""
        set_to_none = check_flag("set_to_none", set_to_none)
        for p in self.parameters():
            if set_to_none or p.grad is None:
                p.grad = None
            else:
                p.grad = p.backend.xp.zeros_like(p.grad)

    def to_format(self, fmt: str | Format) -> Module:
        """Store every parameter and floating-point buffer in ``fmt`` (rounded to
        nearest-even), in place; integer buffers stay as they are (torch's ``half()``
        also leaves them)."""
        f = get_format(fmt)
        floats = [b for _, b in self.named_buffers() if isinstance(b, Tensor)]
        for p in [*self.parameters(), *floats]:
            if p.format != f:
                p.data = p.backend.asarray(p.backend.quantize(p.data, f), dtype=np.float32) \
                    if not f.wide else p.data.astype(np.float64)
                p.format = f
                p.grad = None
        return self

    def to(self, *args: Any, **kwargs: Any) -> Module:
        """torch's ``Module.to`` (ENG-DEV-001): a device moves every parameter, gradient
        and buffer there in place (exact copies); a dtype rounds the floating-point ones
        (:meth:`to_format`); ``to(tensor)`` does both. Returns self.

        Raises:
            TypeError, ValueError: arguments ``Tensor.to`` would refuse, or a device whose
                backend is not available here.
        """
        want = parse_to(args, kwargs, "Module.to")
        if want.device is not None:
            held: list[Tensor | IndexTensor] = [*self.parameters(), *(
                b for _, b in self.named_buffers())]
            move_in_place(held, want.device)
        if want.dtype is not None:
            self.to_format(want.dtype)
        return self

    def cpu(self) -> Module:
        return self.to("cpu")

    def cuda(self) -> Module:
        return self.to("cuda")

    def _saved(self) -> dict[str, Tensor | IndexTensor]:
        """What ``state_dict`` holds, in torch's order: per module its parameters, then
        its persistent buffers, then its children; shared objects under every name."""
        out: dict[str, Tensor | IndexTensor] = {}
        for prefix, m in self.named_modules(remove_duplicate=False):
            entries = [*m._params.items(),
                       *((k, b) for k, b in m._buffers.items() if k not in m._transient)]
            out.update({f"{prefix}.{k}" if prefix else k: v for k, v in entries
                        if v is not None})
        return out

    def state_dict(self) -> dict[str, np.ndarray]:
        """Name -> exact values (NumPy copies: float32/float64 for float tensors,
        int64/bool for integer buffers). A tied parameter appears under each name."""
        return {name: t.numpy() for name, t in self._saved().items()}

    def load_state_dict(self, state_dict: Mapping[str, Any],
                        strict: bool = True) -> IncompatibleKeys:
        """Load values by name (NumPy arrays or tensors, as torch's state dicts hold). With
        ``strict`` (the default) every name must match; without it, names only one side
        has are skipped and returned, as torch's ``strict=False``. Shapes must match
        either way (torch refuses a size mismatch under both). Nothing is loaded unless
        every entry passes.

        Returns:
            the (missing_keys, unexpected_keys) that were skipped (empty when strict).

        Raises:
            TypeError: ``state_dict`` is not a mapping, or ``strict`` not a bool.
            ValueError: missing or unexpected names when strict, or a shape mismatch
                (named).
        """
        sd = state_dict
        if not isinstance(sd, Mapping):
            raise TypeError(f"load_state_dict takes a state dict (a mapping of parameter "
                            f"names to arrays or tensors), got {type(sd).__name__}")
        strict = check_flag("strict", strict)
        own = self._saved()
        # in torch's orders: the module's names, then the state dict's
        missing, extra = [n for n in own if n not in sd], [k for k in sd if k not in own]
        if strict and (missing or extra):
            raise ValueError(f"state_dict mismatch: missing {missing or 'none'}, unexpected "
                             f"{extra or 'none'}")
        values: dict[str, Any] = {}
        for name, p in own.items():
            if name not in sd:
                continue
            entry = sd[name]
            v = entry.numpy() if isinstance(entry, (Tensor, IndexTensor)) else np.asarray(entry)
            if v.shape != p.shape:
                raise ValueError(f"state_dict entry {name!r} has shape {v.shape}, the module's "
                                 f"tensor has {p.shape}")
            values[name] = _converted(name, v, p)
        for name, data in values.items():
            own[name].data = data
        return IncompatibleKeys(missing, extra)


def _is_parameter(value: Any) -> bool:
    return isinstance(value, Tensor) and value.requires_grad and value.is_leaf


def _check_buffer(name: str, value: Any) -> None:
    if value is not None and not isinstance(value, (Tensor, IndexTensor)):
        raise TypeError(f"cannot assign {type(value).__name__} as buffer {name!r} (an "
                        f"ampref.Tensor, IndexTensor or None expected)")


def _converted(name: str, values: np.ndarray, into: Tensor | IndexTensor) -> Any:
    """``values`` as the data of ``into``: rounded to a float tensor's format, or an
    integer buffer's int64/bool (integers only: a fractional value is refused)."""
    if isinstance(into, Tensor):
        return tensor(values, into.format, backend=into.backend).data
    if values.dtype.kind not in "iub":
        raise ValueError(f"state_dict entry {name!r} has dtype {values.dtype}; the module's "
                         f"buffer is {into.dtype} (integer or bool values expected)")
    return into.backend.xp.asarray(values.astype(into.data.dtype))
