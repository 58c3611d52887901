"""aten's ``linspace`` and ``logspace`` as torch's CPU kernels compute them
(``specs/torch.md`` TRC-PWO-003).

``linspace(start, end, steps)`` for float32 and float64 outputs is torch's formula in
that format, each operation rounded nearest-even: ``step = fl(fl(end - start) / (steps
- 1))``; the first ``steps // 2`` values ``fl(start + step i)``, the rest ``fl(end -
step (steps - 1 - i))``, each one fused multiply-add (torch's compiled kernel contracts
the expression: on x86-64 torch 2.13 gives the fused values, not ``fl(start + fl(step
i))``), so both ends are exact. For float16 and bfloat16 outputs it is torch's c10
arithmetic, every operation done in float32 and rounded to the dtype (nothing to fuse):
the ends ``Half(float(x))``, ``step = h(h(end - start) / h(steps - 1))``, values ``h(start
+ h(step h(i)))`` and ``h(end - h(step h(steps - 1 - i)))`` (an integer operand is made
Half first). One step gives ``start`` (16-bit: through float32); zero steps an empty
tensor. Infinite or NaN ends follow IEEE arithmetic (``inf - inf = NaN``). With more than
one step a finite end beyond the dtype's largest finite value is a ValueError naming it
(torch raises), and so is one float32 step's value.

``logspace(start, end, steps, base)`` is torch's CPU formula, which (unlike linspace's
kernel) is compiled without contraction and works in float64: the ends rounded to the
output dtype (16-bit dtypes through float32, as torch's conversions go), ``step =
float64(fl_dtype(end - start)) / (steps - 1)`` (the difference in the dtype's
arithmetic: float32 for 16-bit, then rounded to the dtype), exponents ``start + step
i`` for the first ``steps // 2`` and ``end - step (steps - 1 - i)`` for the rest, each
operation a float64 rounding, then the C library's float64 ``pow(base, exponent)`` (the
function torch's kernel calls; glibc's is within 0.52 float64 ulp, not always correctly
rounded), rounded to float32 and then to a 16-bit dtype (two roundings, as torch's
``Half(float)`` conversion), or kept for float64. One step gives ``pow(base, start)``
with ``start`` unrounded; zero steps an empty tensor. C's special values: ``pow``
overflow gives ``±inf`` (negative for a negative base and an odd integer exponent), ``0``
to a negative power ``inf`` (``-inf`` for ``-0`` and an odd integer), a negative base to a
non-integer power NaN, NaN exponents NaN (except base 1). Integer dtypes run in torch
(no floating rounding of the output).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from ampref.formats.exactsum import add_rounded, fma64
from ampref.formats.table import get_format

from .convert import dtype_steps, from_numpy, meta

__all__ = ["RANGES"]

Handler = Callable[[Any, Any, tuple[Any, ...], dict[str, Any]], Any]


def linspace_values(start: float, end: float, steps: int, cf: Any) -> Any:
    """torch's linspace formula in the compute format ``cf`` (module docstring)."""
    a, b = cf(start), cf(end)
    if steps <= 1:
        return np.full(steps, a, cf)
    idx = np.arange(steps)
    half = steps // 2
    with np.errstate(all="ignore"):
        step = (b - a) / cf(steps - 1)
        if cf is np.float64:
            low = fma64(step, idx.astype(np.float64), a)
            high = fma64(-step, (steps - 1 - idx).astype(np.float64), b)
        else:
            # step (24 bits) times an index below 2^29 is exact in float64: one rounding
            f32 = get_format("float32")
            low = add_rounded(a, np.float64(step) * idx, f32, "nearest_even")
            high = add_rounded(b, -np.float64(step) * (steps - 1 - idx), f32, "nearest_even")
    return np.where(idx < half, low, high).astype(cf)


def narrow_linspace_values(start: float, end: float, steps: int,
                           dtype: torch.dtype) -> Any:
    """torch's 16-bit CPU linspace (module docstring): float32 values of ``dtype``."""
    r = dtype_steps(dtype)  # one c10 Half/BFloat16 operation: float32, then the dtype
    with np.errstate(all="ignore"):
        a, b = r([start, end])  # Half(float(double)): two roundings, as torch's
        if steps <= 1:
            return np.full(steps, a, np.float32)
        idx = np.arange(steps)
        step = r(r(b - a) / r(steps - 1))  # Half / int64_t: the integer made Half first
        low = r(a + r(step * r(idx)))
        high = r(b - r(step * r(steps - 1 - idx)))
    return np.where(idx < steps // 2, low, high)


def _linspace(ctx: Any, func: Any, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
    out = meta(func, args, kw)
    start, end, steps = (args + (None,) * 3)[:3]
    start = kw.get("start", start)
    end = kw.get("end", end)
    steps = int(kw.get("steps", steps))
    # 0-d tensors (linspace.Tensor_* overloads) become floats too
    start, end = float(start), float(end)
    _check_ends("linspace", out.dtype, start, end, steps, {"start": start})
    if out.dtype in (torch.float16, torch.bfloat16):
        values = narrow_linspace_values(start, end, steps, out.dtype)
    else:
        cf = np.float64 if out.dtype == torch.float64 else np.float32
        values = linspace_values(start, end, steps, cf)
    return from_numpy(values, out.dtype)


def _odd_integer(x: float) -> bool:
    return x.is_integer() and math.fmod(x, 2.0) != 0.0


def c_pow(base: float, exponent: float) -> float:
    """C's ``pow`` in float64: :func:`math.pow` calls the C library's, but raises where C
    returns a special value; those values restored (C99 Annex F)."""
    try:
        return math.pow(base, exponent)
    except OverflowError:  # finite operands, |result| past float64's range
        return -math.inf if base < 0 and _odd_integer(exponent) else math.inf
    except ValueError:
        if base == 0:  # a pole: 0 to a negative power
            return math.copysign(math.inf, base) if _odd_integer(exponent) else math.inf
        return math.nan  # a negative base to a non-integer power


def _ends_in(dtype: torch.dtype, start: float, end: float) -> tuple[float, float, float]:
    """The ends as torch's kernel holds them in ``dtype`` and their difference in the
    dtype's arithmetic (float32 for 16-bit dtypes, then rounded to the dtype)."""
    if dtype == torch.float64:
        return start, end, end - start
    with np.errstate(all="ignore"):
        a, b = np.float32(start), np.float32(end)
        if dtype == torch.float32:
            return float(a), float(b), float(b - a)
        r = dtype_steps(dtype)
        a, b = r(np.array([a, b]))
        return float(a), float(b), float(r(b - a))


def logspace_values(start: float, end: float, steps: int, base: float,
                    dtype: torch.dtype) -> Any:
    """torch's logspace values (module docstring) before the last rounding: float64."""
    if steps <= 1:
        return np.array([c_pow(base, start)] * steps, np.float64)
    a, b, diff = _ends_in(dtype, start, end)
    step = diff / (steps - 1)
    half = steps // 2
    # Python floats are float64 operations rounded one at a time: torch's unfused kernel
    return np.array([c_pow(base, a + step * i) if i < half else
                     c_pow(base, b - step * (steps - i - 1)) for i in range(steps)],
                    np.float64)


def _check_ends(op: str, dtype: torch.dtype, start: float, end: float, steps: int,
                single: dict[str, float]) -> None:
    """torch converts the ends to ``dtype`` with a check (c10's ``overflows``) when
    there is more than one step: a finite end beyond the dtype's largest finite value is
    an error, even one that would round to it. One step fills ``single``'s value,
    checked for float32 only (a 16-bit fill overflows to inf)."""
    if not dtype.is_floating_point:
        return
    if steps > 1:
        named = {"start": start, "end": end}
    elif steps == 1 and dtype == torch.float32:
        named = single
    else:
        return
    top = torch.finfo(dtype).max
    for name, v in named.items():
        if math.isfinite(v) and abs(v) > top:
            raise ValueError(f"{op}: {name} {v!r} cannot be converted to {dtype} "
                             f"without overflow (largest finite {top!r})")


_LOGSPACE_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


def _logspace(ctx: Any, func: Any, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
    out = meta(func, args, kw)
    start, end, steps, base = (args + (None,) * 4)[:4]
    start, end = kw.get("start", start), kw.get("end", end)
    steps = int(kw.get("steps", steps))
    base = float(kw.get("base", 10.0 if base is None else base))
    if out.dtype not in _LOGSPACE_DTYPES:
        raise TypeError(f"logspace: dtype {out.dtype} has no CPU kernel in torch; allowed "
                        f"floating dtypes: {', '.join(map(str, _LOGSPACE_DTYPES))}")
    start, end = float(start), float(end)
    _check_ends("logspace", out.dtype, start, end, steps,
                {f"pow({base!r}, start)": c_pow(base, start) if steps == 1 else 0.0})
    values = logspace_values(start, end, steps, base, out.dtype)
    if out.dtype != torch.float64:
        with np.errstate(all="ignore"):
            values = values.astype(np.float32)  # torch's Half(float(x)): two roundings
    return from_numpy(values, out.dtype)


#: aten op name (overload packet) -> handler
RANGES: dict[str, Handler] = {"linspace": _linspace, "logspace": _logspace}
