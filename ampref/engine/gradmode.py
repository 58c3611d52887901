"""Whether ops record a graph, and who watches gradients being rounded (ENG-BWD-*).

Both are per thread/context (``contextvars``), never process-global flags. ``no_grad()``
returns an object that can be entered again and decorates functions, as
``torch.no_grad()``'s does (``ctx = no_grad()`` once, ``with ctx:`` in every evaluation).
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from ampref.common.reusable import ReusableContext

__all__ = ["current_observer", "is_grad_enabled", "no_grad", "observe_gradients"]

Observer = Callable[[Any, Any, Any], None]

_GRAD_ENABLED: contextvars.ContextVar[bool] = contextvars.ContextVar("ampref_grad", default=True)
_OBSERVER: contextvars.ContextVar[Observer | None] = contextvars.ContextVar(
    "ampref_grad_observer", default=None)


def is_grad_enabled() -> bool:
    """Whether ops record their inputs for backward here (False inside :func:`no_grad`)."""
    return _GRAD_ENABLED.get()


def no_grad() -> ReusableContext[None]:
    """Ops inside record no graph (optimizer updates, evaluation); the object can be
    entered again, nested, and used as a decorator."""
    return ReusableContext(_grad_mode, False)


@contextmanager
def _grad_mode(enabled: bool) -> Iterator[None]:
    token = _GRAD_ENABLED.set(enabled)
    try:
        yield
    finally:
        _GRAD_ENABLED.reset(token)


def current_observer() -> Observer | None:
    """The function :func:`observe_gradients` installed here, or None."""
    return _OBSERVER.get()


@contextmanager
def observe_gradients(fn: Observer) -> Iterator[None]:
    """During backward, call ``fn(tensor, raw, rounded)`` for every gradient contribution
    rounded into a format narrower than float32 (for underflow/overflow statistics);
    ``raw`` is the float32 value before, ``rounded`` after the rounding."""
    token = _OBSERVER.set(fn)
    try:
        yield
    finally:
        _OBSERVER.reset(token)
