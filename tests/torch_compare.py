"""One comparison of an ampref result with torch's for the engine's tables: the same
dtype name, and the same values: integer and bool tensors as lists, float tensors bit
for bit at float32 (float64 for float64), any NaN equal to any NaN (payloads differ
between libraries' conversions, FMT-SPC-001), differences reported in hex."""

from __future__ import annotations

from typing import Any

import numpy as np

from ampref.testing import assert_bitwise_equal


def dtype_name(v: Any) -> str:
    """``float16``, ``int64``, ``bool``...: an ampref format's name or torch's dtype's."""
    fmt = getattr(v, "format", None)
    return str(fmt.name if fmt is not None else v.dtype).removeprefix("torch.")


def values(v: Any) -> np.ndarray:
    """The values as NumPy: float tensors widened exactly to float32 (float64 stays)."""
    if getattr(v, "format", None) is not None:  # an ampref float tensor: its storage
        return np.ascontiguousarray(v.numpy())
    if hasattr(v, "detach"):  # a torch tensor: 16-bit dtypes widened exactly
        t = v.detach()
        return np.ascontiguousarray((t.float() if t.is_floating_point() and
                                     t.element_size() < 4 else t).numpy())
    return np.ascontiguousarray(v.numpy())  # an ampref integer tensor


def assert_same_result(ours: Any, theirs: Any, msg: str) -> None:
    """Equal dtype names and equal values (see the module docstring)."""
    assert dtype_name(ours) == dtype_name(theirs), f"{msg}: dtype {dtype_name(ours)} vs " \
                                                   f"{dtype_name(theirs)}"
    a, b = values(ours), values(theirs)
    if a.dtype.kind != "f":
        assert a.shape == b.shape and a.tolist() == b.tolist(), msg
        return
    assert_bitwise_equal(a, b.astype(a.dtype), nan="any", msg=msg)
