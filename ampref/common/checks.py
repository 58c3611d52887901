"""Argument checks shared by every layer (layer 0: imports nothing of ampref)."""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["check_count", "check_flag"]


def check_flag(name: str, v: Any) -> bool:
    """``v`` as a bool; only bool and NumPy bool are accepted (a string such as "no" is
    truthy and would silently mean True).

    Raises:
        TypeError: ``v`` is not a bool (its type and value named).
    """
    if not isinstance(v, (bool, np.bool_)):
        raise TypeError(f"{name} must be a bool (True/False), got {type(v).__name__}: {v!r}")
    return bool(v)


def check_count(name: str, v: Any, lo: int = 1) -> int:
    """``v`` as an int >= ``lo`` (threads, tile sizes, layer sizes): a float, a string or
    a bool is refused rather than truncated or read as 1.

    Raises:
        TypeError: not an int (its type and value named).
        ValueError: below ``lo``.
    """
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)):
        raise TypeError(f"{name} must be an int >= {lo}, got {type(v).__name__}: {v!r}")
    if v < lo:
        raise ValueError(f"{name} must be an int >= {lo}, got {v}")
    return int(v)
