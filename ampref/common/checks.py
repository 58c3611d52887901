"""Argument checks shared by every layer (layer 0: imports nothing of ampref)."""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["TensorIndexError", "check_count", "check_flag", "check_instance", "check_int",
           "check_real", "flag_items", "real_array", "real_float32", "reshape_entries",
           "same_shape"]


class TensorIndexError(IndexError, ValueError):
    """An index that torch refuses with ``IndexError`` (out of bounds, too many indices, a
    float index): an ``IndexError`` for code written against torch, and a ``ValueError``
    like every other bad argument of ampref (API-ERR-001)."""


def check_flag(name: str, v: Any) -> bool:
    """``v`` as a bool; only bool and NumPy bool are accepted (a string such as "no" is
    truthy and would silently mean True).

    Raises:
        TypeError: ``v`` is not a bool (its type and value named).
    """
    if not isinstance(v, (bool, np.bool_)):
        raise TypeError(f"{name} must be a bool (True/False), got {type(v).__name__}: {v!r}")
    return bool(v)


def check_instance(name: str, v: Any, cls: type, context: str) -> None:
    """Refuse a ``v`` that is not a ``cls`` (a record such as a scaler config or state)
    before any field of it is read, which would fail with a foreign AttributeError.

    Raises:
        TypeError: the expected class, the type and value given, and the context.
    """
    if not isinstance(v, cls):
        raise TypeError(f"{context}: {name} must be a {cls.__name__}, got "
                        f"{type(v).__name__}: {v!r}"[:300])


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


def check_int(name: str, v: Any) -> int:
    """``v`` as an int of any sign (dims, offsets): a float, string or bool is refused.

    Raises:
        TypeError: not an int (its type and value named).
    """
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)):
        raise TypeError(f"{name} must be an int, got {type(v).__name__}: {v!r}")
    return int(v)


def check_real(name: str, v: Any, *, finite: bool = True, lo: float | None = None) -> float:
    """``v`` as a float: an int or float (not a bool, string or complex); with ``finite``
    NaN and ±inf are refused, with ``lo`` values below it.

    Raises:
        TypeError: not a real number (its type and value named).
        ValueError: NaN/inf where a finite value is needed, or below ``lo``.
    """
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, float, np.integer,
                                                              np.floating)):
        raise TypeError(f"{name} must be a real number, got {type(v).__name__}: {v!r}")
    f = float(v)
    if finite and not np.isfinite(f):
        raise ValueError(f"{name} must be finite, got {f}")
    if lo is not None and f < lo:
        raise ValueError(f"{name} must be >= {lo}, got {f}")
    return f


def real_array(name: str, x: Any) -> Any:
    """``x`` as a NumPy array of real numbers (bool, int, float or an ml_dtypes float):
    complex values (whose imaginary part a cast would drop), objects, strings and None are
    refused before any arithmetic sees them.

    Raises:
        TypeError: ``x`` is None or its dtype is not real (the dtype named).
    """
    if x is None:
        raise TypeError(f"{name} must be an array of real numbers, got None")
    arr = np.asarray(x)
    ml_float = arr.dtype.kind == "V" and "float" in arr.dtype.name
    if arr.dtype.kind not in "biuf" and not ml_float:
        raise TypeError(f"{name} must hold real numbers (bool, int or float), got dtype "
                        f"{arr.dtype}")
    return arr


def flag_items(values: list[str] | None, flag: str) -> list[str]:
    """A list flag's items: ``a b``, ``a,b`` and ``a, b`` mean the same; empty items
    (``,,``) are refused."""
    items = [v.strip() for raw in values or [] for v in raw.split(",")]
    if not items or any(not v for v in items):
        raise ValueError(f"{flag} needs names separated by commas or spaces, got "
                         f"{' '.join(values or []) or 'nothing'!r}")
    return items


def real_float32(name: str, x: Any) -> Any:
    """``x`` (checked by :func:`real_array`) rounded to float32, nearest-even: a float64
    past float32's range becomes ±inf, as the rounding says, without NumPy's overflow
    warning.

    Raises:
        TypeError: as :func:`real_array`.
    """
    arr = real_array(name, x)
    with np.errstate(over="ignore"):
        return arr.astype(np.float32)


def same_shape(name: str, arr: Any, shape: tuple[int, ...]) -> Any:
    """``arr`` when its shape is ``shape`` (no broadcasting, no reshaping: either would
    silently reinterpret the values).

    Raises:
        ValueError: another shape (both named).
    """
    if tuple(arr.shape) != tuple(shape):
        raise ValueError(f"{name} has shape {tuple(arr.shape)}, expected {tuple(shape)}")
    return arr


def reshape_entries(op: str, shape: tuple[Any, ...]) -> tuple[int, ...]:
    """The entries of a target shape (reshape, view) as ints, each >= 0 or -1 (the one
    dimension inferred), as torch reads them.

    Raises:
        TypeError: an entry that is not an int (a float or bool is not truncated).
        ValueError: an entry below -1 (NumPy would read any negative entry as -1; torch
            refuses it).
    """
    for d in shape:
        if isinstance(d, (bool, np.bool_)) or not isinstance(d, (int, np.integer)):
            raise TypeError(f"{op}: shape entries must be ints, got {d!r} in {shape!r}")
        if d < -1:
            raise ValueError(f"{op}: invalid shape dimension {d} in {shape} (each is >= 0, "
                             f"or -1 for the one dimension inferred)")
    return tuple(int(d) for d in shape)
