"""The Adam/AdamW update, compiled: one pass over the parameter with the same float32
(or float64) operations in the same order as the NumPy specification
(``Adam._update`` in :mod:`ampref.engine.optim.optimizers`), so the same bits: each product, sum,
quotient and square root is one correctly rounded IEEE operation in the parameter's
dtype (numba does not contract a product and a sum into an FMA without fast-math).
"""

from __future__ import annotations

from typing import Any

import numba as nb
import numpy as np
import numpy.typing as npt

from .jitcache import CACHE
from .arrays import frozen
from .threads import run_blocks

__all__ = ["adam_update"]


@nb.njit(cache=CACHE, nogil=True)
def _adam(w: Any, g: Any, m: Any, v: Any, k: Any, decoupled: bool, decay: bool, out: Any,
          m_out: Any, v_out: Any, lo: int, hi: int) -> None:
    wd_factor, wd, b1, c1, b2, c2, bias2, eps, step_size = k
    for i in range(lo, hi):
        wi, gi = w[i], g[i]
        if decoupled and decay:
            wi = wi * wd_factor
        elif decay:
            gi = gi + wd * wi
        mi = b1 * m[i] + c1 * gi
        vi = b2 * v[i] + c2 * (gi * gi)
        m_out[i], v_out[i] = mi, vi
        denom = np.sqrt(vi) / bias2 + eps
        out[i] = wi - step_size * (mi / denom)


def adam_update(w: npt.NDArray[Any], g: npt.NDArray[Any], m: npt.NDArray[Any],
                v: npt.NDArray[Any], constants: tuple[Any, ...], *, decoupled: bool,
                decay: bool) -> tuple[Any, Any, Any]:
    """(new w, new m, new v); ``constants`` in the parameter's dtype, in the order
    (1 - lr wd, wd, b1, 1 - b1, b2, 1 - b2, sqrt(1 - b2^t), eps, lr / (1 - b1^t))."""
    shape = w.shape
    flat = [frozen(a).reshape(-1) for a in (w, g, m, v)]
    out, m_out, v_out = (np.empty(flat[0].shape, flat[0].dtype) for _ in range(3))
    run_blocks(_adam, flat[0].size, *flat, constants, decoupled, decay, out, m_out, v_out)
    return out.reshape(shape), m_out.reshape(shape), v_out.reshape(shape)
