"""``torch.ldexp`` on ampref's numerics (``specs/torch.md`` TRC-PWO-001).

torch has two paths. A floating ``input`` with an integer (or bool) exponent is scaled
by ``2 ** other`` exactly and rounded once into ``input``'s dtype (its ``ldexp_stub``:
C's ``ldexp``, the exponent converted to C's ``int``, so an int64 wraps): gradual
underflow to subnormals and ±0 with the input's sign, overflow to ±inf, ``ldexp(±0, e)
= ±0`` and ``ldexp(±inf, e) = ±inf`` for every ``e``, NaN kept. A floating exponent is
``input * 2.0 ** other``: the power in the exponent's dtype (ampref's float64 value
rounded once, TRC-PWO-001), then the product in the promoted dtype, each rounded; there
``2.0 ** 200.0`` overflows float32 first, so ``ldexp(2**-100, 200.0)`` is inf where the
integer exponent 200 gives ``2**-100 * 2**200`` exactly. torch's float32 ``pow`` is not
correctly rounded, so the float-exponent path can differ from torch's by the power's
ulp.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from .convert import dtype_steps, from_numpy, is_float, meta, to_numpy

__all__ = ["LDEXP"]

Handler = Callable[[Any, Any, tuple[Any, ...], dict[str, Any]], Any]

#: beyond this |exponent| every finite nonzero float64 over- or underflows, so clipping
#: to it keeps every result
_EXPONENT_CLIP = 4096


def _exact(x: torch.Tensor, e: torch.Tensor, shape: tuple[int, ...]) -> Any:
    """x 2^e in float64: exact for float32 and narrower inputs unless below float64's
    subnormals (far below float32's: the rounding into the output gives ±0 either
    way), correctly rounded for float64 inputs. The exponent is first taken as a C
    ``int``, as torch's kernel passes it to ``ldexp``: an int64 wraps modulo 2^32
    (``ldexp(1.0, 2**40)`` is 1.0 in torch)."""
    k = np.clip(to_numpy(e).astype(np.int64).astype(np.int32), -_EXPONENT_CLIP,
                _EXPONENT_CLIP)
    with np.errstate(all="ignore"):
        return np.broadcast_to(np.ldexp(to_numpy(x).astype(np.float64), k), shape)


def _two_ops(x: Any, e: Any, dtype: torch.dtype, shape: tuple[int, ...]) -> Any:
    """fl(x fl_e(2.0 ** e)): the power in the exponent's own floating dtype (float32
    for an integer exponent), then the product in the output's, each step rounded to a
    16-bit dtype as torch's 16-bit kernels do."""
    pdtype = e.dtype if is_float(e) else torch.float32
    pc = np.float64 if pdtype == torch.float64 else np.float32
    cf = np.float64 if dtype == torch.float64 else np.float32
    with np.errstate(all="ignore"):
        xv, ev = to_numpy(x).astype(cf), to_numpy(e).astype(np.float64)
        p = dtype_steps(pdtype)(np.power(np.float64(2.0), ev).astype(pc))
        return np.broadcast_to(dtype_steps(dtype)(xv * p.astype(cf)), shape)


def _ldexp(ctx: Any, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    x, e = args[0], args[1]
    out = meta(func, args, kwargs)
    if is_float(x) and isinstance(e, torch.Tensor) and not (
            e.dtype.is_floating_point or e.dtype.is_complex):
        values = _exact(x, e, tuple(out.shape))
    else:
        values = _two_ops(x, e, out.dtype, tuple(out.shape))
    with np.errstate(over="ignore"):  # overflow to ±inf is the rounding's result
        return from_numpy(values, out.dtype)


#: aten op name -> handler
LDEXP: dict[str, Handler] = {"ldexp": _ldexp}  # ldexp_: the in-place twin (TRC-EMU-007)
