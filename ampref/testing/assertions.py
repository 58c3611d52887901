"""Bitwise and ulp assertions whose failures show each differing element in hex, exactly,
with its position (row, block, element) and input (no hypothesis needed)."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from ampref.common.checks import check_count, real_array
from ampref.formats.table import Format
from ampref.formats.ordinal import ordinal

__all__ = ["assert_bitwise_equal", "assert_within_ulps", "ordinal"]

_UINT = {2: np.uint16, 4: np.uint32, 8: np.uint64, 1: np.uint8}


def _bits(a: npt.NDArray[Any]) -> npt.NDArray[Any]:
    return np.ascontiguousarray(a).view(_UINT[a.dtype.itemsize])


def _hex(v: Any, width: int) -> str:
    return f"0x{int(v):0{width * 2}x}"


def assert_bitwise_equal(actual: npt.ArrayLike, desired: npt.ArrayLike, *,
                         nan: str = "bitwise", max_report: int = 5, msg: str = "",
                         inputs: npt.ArrayLike | None = None, block: int | None = None) -> None:
    """Assert two arrays hold identical bit patterns (same dtype and shape).

    Args:
        nan: ``"bitwise"`` (NaN payloads and signs must match too) or ``"any"`` (any NaN
            equals any NaN; everything else still bitwise).
        msg: a prefix for the failure message (joined with ": ").
        inputs: the array that produced ``actual`` (same shape): each reported element
            shows its input in hex and as ``float.hex`` (``0x1.000002p-119``: the
            binade and the bits that decide the rounding, which decimal hides).
        block: block width along the last axis: positions show (block, element).

    Raises:
        AssertionError: with count, positions (index tuple, block and element) and the
            hex and exact values of the first differences.
        ValueError: unknown ``nan`` policy, or ``inputs`` of another shape.
    """
    if nan not in ("bitwise", "any"):
        raise ValueError(f"nan must be 'bitwise' or 'any', got {nan!r}")
    max_report, msg = _report_args(max_report, msg)
    if block is not None:
        block = check_count("block", block)
    a, d = np.asarray(actual), np.asarray(desired)
    for name, arr in (("actual", a), ("desired", d)):
        if arr.dtype.kind not in "fiub" or arr.dtype.itemsize not in _UINT:
            raise TypeError(f"assert_bitwise_equal compares real numbers or codes of 1, 2, 4 or "
                            f"8 bytes; {name} has dtype {arr.dtype}")
    # callers may end msg with their own ": "; one separator either way
    head = f"{msg.rstrip(': ')}: " if msg.strip(": ") else ""
    if a.dtype != d.dtype or a.shape != d.shape:
        raise AssertionError(f"{head}dtype/shape differ: actual {a.dtype}{a.shape}, "
                             f"desired {d.dtype}{d.shape}")
    x = None if inputs is None else np.asarray(inputs)
    if x is not None and x.shape != a.shape:
        raise ValueError(f"inputs has shape {x.shape}, the outputs {a.shape}")
    ab, db = _bits(a).reshape(-1), _bits(d).reshape(-1)
    bad = ab != db
    if nan == "any" and a.dtype.kind == "f":
        bad &= ~(np.isnan(a.reshape(-1)) & np.isnan(d.reshape(-1)))
    if not bad.any():
        return
    idx = np.flatnonzero(bad)
    rows = [_report_row(int(i), a, d, x, block) for i in idx[:max_report]]
    raise AssertionError(f"{head}{idx.size} of {ab.size} elements differ bitwise:\n"
                         + "\n".join(rows))


def _report_args(max_report: Any, msg: Any) -> tuple[int, str]:
    if not isinstance(msg, str):
        raise TypeError(f"msg must be a str, got {type(msg).__name__}: {msg!r}")
    return check_count("max_report", max_report, lo=0), msg


def _exact(v: Any) -> str:
    """A value in hex bits and exactly: float.hex for floats, the integer otherwise."""
    arr = np.asarray(v)
    bits = _hex(_bits(arr.reshape(1))[0], arr.dtype.itemsize)
    return f"{bits} ({float(arr).hex() if arr.dtype.kind == 'f' else int(arr)})"


def _report_row(i: int, a: Any, d: Any, x: Any, block: int | None) -> str:
    pos = tuple(int(k) for k in np.unravel_index(i, a.shape)) if a.ndim else ()
    where = f"at {pos}"
    if block and a.ndim:
        where += f" [block {pos[-1] // block}, element {pos[-1] % block}]"
    src = "" if x is None else f" input {_exact(x.reshape(-1)[i])};"
    return (f"  {where}:{src} actual {_exact(a.reshape(-1)[i])} desired "
            f"{_exact(d.reshape(-1)[i])}")


def assert_within_ulps(actual: npt.ArrayLike, desired: npt.ArrayLike, ulps: int,
                       fmt: str | Format | None = None, *, max_report: int = 5,
                       msg: str = "") -> None:
    """Assert |ordinal(actual) - ordinal(desired)| <= ulps elementwise.

    Distances are counted on ``fmt``'s grid (or the arrays' own float type). NaN must
    meet NaN; inf counts as the step after max.

    Raises:
        AssertionError: shapes differ, or elements further apart than ``ulps``.
        TypeError: an argument of the wrong type (arrays of non-real numbers included).
        ValueError: a negative ``ulps``.
    """
    ulps = check_count("ulps", ulps, lo=0)
    max_report, msg = _report_args(max_report, msg)
    a = real_array("actual", actual)
    d = real_array("desired", desired)
    if a.shape != d.shape:
        raise AssertionError(f"{msg}shapes differ: {a.shape} vs {d.shape}")
    an, dn = np.isnan(a), np.isnan(d)
    both = ~(an | dn)
    dist = np.zeros(a.shape, dtype=np.int64)
    dist[both] = np.abs(ordinal(a[both], fmt) - ordinal(d[both], fmt))
    bad = (an != dn) | (dist > ulps)
    if not bad.any():
        return
    idx = np.flatnonzero(bad.reshape(-1))
    w = a.dtype.itemsize
    ab, db = _bits(a).reshape(-1), _bits(d).reshape(-1)
    rows = [f"  [{i}] actual {_hex(ab[i], w)} ({a.reshape(-1)[i]!r}) desired {_hex(db[i], w)} "
            f"({d.reshape(-1)[i]!r}) distance {dist.reshape(-1)[i]} ulps" for i in idx[:max_report]]
    raise AssertionError(f"{msg}{idx.size} of {a.size} elements are more than {ulps} ulps "
                         f"apart:\n" + "\n".join(rows))

