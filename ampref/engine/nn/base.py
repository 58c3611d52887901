"""The module base class: parameters in registration order, children, hooks,
train/eval, ``to_format`` and ``state_dict`` (ENG-NN-*); and ``Parameter``."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any, NamedTuple

import numpy as np

from ampref.common.checks import check_flag
from ampref.formats.table import Format, get_format

from ..creation import tensor
from ..tensor import Tensor

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


class Module:
    """Base class: attributes that are Tensors requiring grad are parameters; Modules
    are children. Order of registration is the order of ``named_parameters``."""

    _params: dict[str, Tensor]
    _children: dict[str, Module]
    _hooks: list[Callable[[Module, Any], None]]
    training: bool

    def __init__(self) -> None:
        object.__setattr__(self, "_params", {})
        object.__setattr__(self, "_children", {})
        object.__setattr__(self, "training", True)
        object.__setattr__(self, "_hooks", [])

    def __setattr__(self, name: str, value: Any) -> None:
        if "_params" not in self.__dict__:
            raise RuntimeError(f"{type(self).__name__}.__init__ must call super().__init__() first")
        if isinstance(value, Tensor) and value.requires_grad and value.is_leaf:
            self._params[name] = value
        elif isinstance(value, Module):
            self._children[name] = value
        object.__setattr__(self, name, value)

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

    def named_modules(self, prefix: str = "") -> Iterator[tuple[str, Module]]:
        yield prefix, self
        for name, child in self._children.items():
            yield from child.named_modules(f"{prefix}.{name}" if prefix else name)

    def named_parameters(self, prefix: str = "") -> Iterator[tuple[str, Tensor]]:
        for name, p in self._params.items():
            yield (f"{prefix}.{name}" if prefix else name), p
        for name, child in self._children.items():
            yield from child.named_parameters(f"{prefix}.{name}" if prefix else name)

    def parameters(self) -> list[Tensor]:
        return [p for _, p in self.named_parameters()]

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
        """Store every parameter in ``fmt`` (rounded to nearest-even), in place."""
        f = get_format(fmt)
        for _, p in self.named_parameters():
            if p.format != f:
                p.data = p.backend.asarray(p.backend.quantize(p.data, f), dtype=np.float32) \
                    if not f.wide else p.data.astype(np.float64)
                p.format = f
                p.grad = None
        return self

    def state_dict(self) -> dict[str, np.ndarray]:
        """Parameter name -> exact values (NumPy float32/float64 copies)."""
        return {name: p.numpy() for name, p in self.named_parameters()}

    def load_state_dict(self, sd: Mapping[str, Any], strict: bool = True) -> IncompatibleKeys:
        """Load values by name (NumPy arrays or tensors, as torch's state dicts hold). With
        ``strict`` (the default) every name must match; without it, names only one side
        has are skipped and returned, as torch's ``strict=False``. Shapes must match
        either way (torch refuses a size mismatch under both). Nothing is loaded unless
        every entry passes.

        Returns:
            the (missing_keys, unexpected_keys) that were skipped (empty when strict).

        Raises:
            TypeError: ``sd`` is not a mapping, or ``strict`` not a bool.
            ValueError: missing or unexpected names when strict, or a shape mismatch
                (named).
        """
        if not isinstance(sd, Mapping):
            raise TypeError(f"load_state_dict takes a state dict (a mapping of parameter "
                            f"names to arrays or tensors), got {type(sd).__name__}")
        strict = check_flag("strict", strict)
        own = dict(self.named_parameters())
        # in torch's orders: the module's names, then the state dict's
        missing, extra = [n for n in own if n not in sd], [k for k in sd if k not in own]
        if strict and (missing or extra):
            raise ValueError(f"state_dict mismatch: missing {missing or 'none'}, unexpected "
                             f"{extra or 'none'}")
        values = {}
        for name, p in own.items():
            if name not in sd:
                continue
            v = sd[name].numpy() if isinstance(sd[name], Tensor) else np.asarray(sd[name])
            if v.shape != p.shape:
                raise ValueError(f"state_dict entry {name!r} has shape {v.shape}, parameter has "
                                 f"{p.shape}")
            values[name] = tensor(v, p.format, backend=p.backend).data
        for name, data in values.items():
            own[name].data = data
        return IncompatibleKeys(missing, extra)
