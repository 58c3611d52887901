"""``fl32(exact sum_k a_k b_k c_k)``: sums of triple products rounded once to float32.

Why a kernel of its own: a product of three float32 values has up to 72 significant
bits, so neither float64 nor the certified matmul (two factors) holds it. Each
``a b`` is exact in float64 (48 bits); it is cut into its top 24 bits and the rest
(at most 24 bits, exact by subtraction), and each part times ``c`` is again exact in
float64 (48 bits). The float64 terms then go through the certified row sums of
:mod:`ampref.accumulation.certify` (compensated sum, certified, integer fallback), which
round the exact sum once to float32.

Inputs are float32-representable (float16, bfloat16 and float32 values); products of
such values stay far inside float64's normal range (``|a b c| >= 2^-447``), so no
part underflows. NaN and ±inf: a row with a non-finite term takes IEEE's float64 sum of
its products (NaN for ``inf * 0`` or ``inf - inf``, else ±inf). An exact zero sum is
+0 (IEEE's sum of exact terms), -0 only when every term is -0 in float64's sum.
Spec: ACC-EXA-003.
"""

from __future__ import annotations


import numpy as np
import numpy.typing as npt

from .certify import resolve

__all__ = ["triple_dot_f32"]

#: float64 bit mask keeping the sign, exponent and top 23 stored significand bits
_TOP24 = np.uint64(~((1 << 29) - 1) & 0xFFFFFFFFFFFFFFFF)


def _representable(x: npt.ArrayLike, name: str) -> npt.NDArray[np.float64]:
    """``x`` as float64, refused (ValueError naming it) unless every value is a float32
    value: the halves of ``a b`` are exact only for float32 operands."""
    v = np.asarray(x, np.float64)
    with np.errstate(over="ignore"):
        narrow = v.astype(np.float32).astype(np.float64)
    if not np.array_equal(v, narrow, equal_nan=True):
        bad = v[~((v == narrow) | np.isnan(v))].ravel()[0]
        raise ValueError(f"triple_dot_f32: {name} must hold float32 values (float16, "
                         f"bfloat16 or float32), got {bad!r}")
    return v


def triple_dot_f32(a: npt.ArrayLike, b: npt.ArrayLike, c: npt.ArrayLike) -> npt.NDArray[np.float32]:
    """``fl32(exact sum over the last axis of a b c)``, the operands broadcast; the
    result has the broadcast shape without its last axis."""
    a64, b64, c64 = (_representable(x, name) for x, name in ((a, "a"), (b, "b"), (c, "c")))
    shape = np.broadcast_shapes(a64.shape, b64.shape, c64.shape)
    with np.errstate(all="ignore"):
        ab = np.broadcast_to(a64 * b64, shape)  # exact: two float32 factors
        cc = np.broadcast_to(c64, shape)
        hi = (ab.view(np.uint64) & _TOP24).view(np.float64)
        lo = ab - hi  # the low bits, exact
        terms = np.concatenate([hi * cc, lo * cc], axis=-1)  # each exact
        naive = np.sum(ab * cc, axis=-1)
    rows = terms.reshape(-1, terms.shape[-1])
    out = np.empty(rows.shape[0], np.float32)
    finite = np.isfinite(naive).reshape(-1)
    if rows.shape[1] == 0:
        out[:] = 0
    elif finite.all():
        resolve(out, None, np.ascontiguousarray(rows))
    else:
        part = np.empty(int(finite.sum()), np.float32)
        if part.size:
            resolve(part, None, np.ascontiguousarray(rows[finite]))
        out[finite] = part
        out[~finite] = naive.reshape(-1)[~finite].astype(np.float32)
    return out.reshape(shape[:-1])
