"""Which implementation runs the kernels: ``"compiled"`` (numba, the default wherever
numba imports) or ``"numpy"`` (the specification the compiled kernels are proven equal
to, bit for bit).

One process-wide choice: :func:`set_kernels`, the context manager :func:`use_kernels`,
or the environment variable ``AMPREF_KERNELS`` (read on first use, inherited by worker
processes; ``ampref train --kernels`` sets it). The choice is not per thread: a
``use_kernels`` block switches every thread of the process while it lasts.
"""

from __future__ import annotations

import importlib.util
import os
from contextlib import ContextDecorator
from functools import cache

__all__ = ["CHOICES", "ENV", "KernelBlock", "compiled", "compiled_available", "get_kernels",
           "set_kernels", "use_kernels"]

#: the environment variable that selects the kernels of a process and its workers
ENV = "AMPREF_KERNELS"
#: the implementations by name
CHOICES = ("compiled", "numpy")

_active: list[str] = []  # empty until the first use resolves the default


@cache
def compiled_available() -> bool:
    """True if numba can be imported (the compiled kernels need it)."""
    return importlib.util.find_spec("numba") is not None


def _check(name: object, where: str) -> str:
    if not isinstance(name, str):
        raise TypeError(f"{where} must be a str, one of {', '.join(CHOICES)}; got "
                        f"{type(name).__name__}: {name!r}")
    if name not in CHOICES:
        raise ValueError(f"{where} must be one of {', '.join(CHOICES)}, got {name!r}")
    if name == "compiled" and not compiled_available():
        raise ValueError(f"{where} asks for the compiled kernels, but numba is not installed "
                         "(pip install numba, or choose 'numpy')")
    return name


def get_kernels() -> str:
    """The active implementation: the last :func:`set_kernels`, else ``AMPREF_KERNELS``,
    else ``"compiled"`` where numba is installed and ``"numpy"`` where it is not.

    Raises:
        ValueError: ``AMPREF_KERNELS`` names an unknown implementation, or ``compiled``
            without numba.
    """
    if not _active:
        env = os.environ.get(ENV)
        if env:
            _active.append(_check(env, f"the environment variable {ENV}"))
        else:
            _active.append("compiled" if compiled_available() else "numpy")
    return _active[-1]


def compiled() -> bool:
    """True while the compiled kernels are active."""
    return get_kernels() == "compiled"


def set_kernels(name: str) -> None:
    """Choose the kernels of this process: ``"compiled"`` or ``"numpy"``.

    Raises:
        TypeError: ``name`` is not a str.
        ValueError: unknown name (choices listed), or ``"compiled"`` without numba.
    """
    name = _check(name, "kernels")
    _active[:] = [name]


def use_kernels(name: str) -> KernelBlock:
    """Run a block with the given kernels, then restore the previous choice; the object
    can be entered again, nested, and decorates functions.

    Raises:
        TypeError, ValueError: as :func:`set_kernels` (when called, before any block).
    """
    return KernelBlock(_check(name, "kernels"))


class KernelBlock(ContextDecorator):
    """Blocks run with the kernels ``name``: each entry saves the choice it replaces, and
    its exit restores that one (so entries of one object nest)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._saved: list[str] = []

    def __enter__(self) -> None:
        self._saved.append(get_kernels())
        set_kernels(self.name)

    def __exit__(self, *exc: object) -> None:
        _active[:] = [self._saved.pop()]
