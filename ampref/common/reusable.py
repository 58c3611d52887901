"""Context-manager objects that can be entered more than once, as torch's are (layer 0).

``torch.autocast(...)`` is an object: a script may make it once and enter it in every
step (``ctx = torch.autocast("cuda"); for batch in data: with ctx: ...``), nest it in
itself, or decorate a function with it. A ``contextlib.contextmanager`` object is
single-use (its second ``with`` fails inside contextlib with an AttributeError), so
ampref's regions are :class:`ReusableContext` objects around such a factory.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager, ContextDecorator
from typing import Any, Generic, TypeVar

__all__ = ["ReusableContext"]

T = TypeVar("T")


class ReusableContext(ContextDecorator, Generic[T]):
    """Runs ``factory(*args, **kwargs)``'s context manager afresh at each entry, so one
    object serves any number of ``with`` blocks, nested ones included (the innermost
    entry exits first), and decorates functions (each call is one entry)."""

    def __init__(self, factory: Callable[..., AbstractContextManager[T]], *args: Any,
                 **kwargs: Any) -> None:
        self._make = lambda: factory(*args, **kwargs)
        self._entered: list[AbstractContextManager[T]] = []

    def __enter__(self) -> T:
        cm = self._make()
        value = cm.__enter__()
        self._entered.append(cm)  # only once entered: a failed entry leaves nothing open
        return value

    def __exit__(self, *exc: Any) -> bool | None:
        return self._entered.pop().__exit__(*exc)
