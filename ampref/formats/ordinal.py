"""Positions on a format's ordered number line: the integer distance between two values
is their distance in ulps (``specs/formats.md`` FMT-ORD-001). Used wherever results are
measured in ulps: the testing kit's assertions, the torch bridge's reports, data-parallel
reduction errors.
"""

from __future__ import annotations


import numpy as np
import numpy.typing as npt

from .cast import decode, encode
from .table import Format, get_format

__all__ = ["ordinal"]

_UINT = {2: np.uint16, 4: np.uint32, 8: np.uint64, 1: np.uint8}


def ordinal(x: npt.ArrayLike, fmt: str | Format | None = None) -> npt.NDArray[np.int64]:
    """Position of each value on the ordered number line of ``fmt`` (or x's dtype).

    Adjacent values differ by 1; +0 and -0 share position 0; the largest finite value
    and +inf are adjacent where the format has inf. NaN has no position (its bits give
    one beyond inf: callers mask NaN first). Subnormals count like any other step.

    Raises:
        TypeError: no ``fmt`` and an array that is not float32/float64.
        ValueError: a value not exactly representable in ``fmt`` (the first one named),
            or an unknown format name.
    """
    arr = np.asarray(x)
    if fmt is None:
        if arr.dtype not in (np.float32, np.float64):
            raise TypeError(f"ordinal without fmt needs float32/float64, got {arr.dtype}")
        u = np.ascontiguousarray(arr).view(_UINT[arr.dtype.itemsize])
        top = u.dtype.type(1) << u.dtype.type(arr.dtype.itemsize * 8 - 1)
        mag = (u & (top - u.dtype.type(1))).astype(np.int64)
        return np.where((u & top) != 0, -mag, mag)
    fmt = get_format(fmt)
    vals = arr.astype(np.float32)
    codes = encode(vals, fmt).astype(np.int64)
    back = decode(codes, fmt)
    exact = (back == vals) | (np.isnan(back) & np.isnan(vals))
    if not exact.all():
        i = int(np.flatnonzero(~exact.reshape(-1))[0])
        raise ValueError(f"element {i} ({vals.reshape(-1)[i]!r}) is not representable in "
                         f"{fmt.name}")
    if not fmt.is_signed:
        return codes
    sign = np.int64(fmt.sign_mask)
    mag = codes & (sign - 1)
    return np.where(codes & sign, -mag, mag)
