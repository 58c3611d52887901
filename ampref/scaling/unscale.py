"""Host unscaling of gradients with torch's kernel semantics (``specs/scaling.md``
SCL-UNS-001): the arithmetic behind :meth:`ampref.scaling.scaler.LossScaler.unscale`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["unscale_arrays"]


def unscale_arrays(grads: Any, scale: float, *, allow_fp16: bool = False) -> tuple[Any, bool]:
    """Unscaled gradients and whether any *scaled* value was inf/NaN.

    inv = float32(1 / float64(scale)) (inf for a zero scale); each gradient becomes
    round(widen(g) * inv) in its own dtype (float16 and float32 in float32, float64 in
    float64): an inf or NaN stays non-finite, a product beyond the dtype's range becomes
    ±inf, subnormal results are kept. ``grads`` is an array, a list/tuple or a dict of
    arrays; None entries pass through.

    Raises:
        ValueError: float16 gradients without ``allow_fp16`` (torch refuses them).
        TypeError: a gradient that is not a floating array.
    """
    inv = np.float32(1.0 / np.float64(scale)) if scale != 0 else np.float32(np.inf)
    found = False

    def one(g: Any) -> Any:
        nonlocal found
        if g is None:
            return None
        a = np.asarray(g)
        if a.dtype == np.float16 and not allow_fp16:
            raise ValueError("Attempting to unscale FP16 gradients (torch refuses them; "
                             "keep fp32 master gradients or pass allow_fp16=True)")
        if a.dtype.kind != "f":
            raise TypeError(f"gradients must be floating arrays, got dtype {a.dtype}")
        found = found or not bool(np.isfinite(a).all())
        wide = a.astype(np.float64 if a.dtype == np.float64 else np.float32)
        with np.errstate(over="ignore", invalid="ignore"):
            out = wide * (np.float64(inv) if a.dtype == np.float64 else inv)
        return out.astype(a.dtype)

    if isinstance(grads, dict):
        result: Any = {k: one(v) for k, v in grads.items()}
    elif isinstance(grads, (list, tuple)):
        result = type(grads)(one(g) for g in grads)
    else:
        result = one(grads)
    return result, found
