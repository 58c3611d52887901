"""The pointwise formulas where torch's CPU kernels are not the plain float32 formula
rounded once (``specs/torch.md`` TRC-PWO-001): multiply-adds torch 2.13's compiled
kernels fuse, the arithmetic its pow kernel substitutes for small integer exponents, and
the 16-bit kernels that round operands or steps to the dtype.

Measured against torch 2.13's CPU kernels on x86-64 with AVX512 (the CI machine; an AVX2 build
is not measured): ``add``/``sub`` with ``alpha``, ``addcmul``, ``lerp`` and
``tanh_backward`` are fused (12 % to 24 % of float32 words differ unfused).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from ampref.formats.exactsum import add_rounded, fma64
from ampref.formats.table import get_format

from .convert import dtype_steps

__all__ = ["POW_ARITHMETIC", "fused", "narrow_formulas", "narrow_table", "pow_formula"]

_F32 = get_format("float32")


def wide(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Evaluate ``fn`` in float64 and round to float32 (kept in float64 for float64)."""
    def run(*xs: Any) -> Any:
        dt = xs[0].dtype if hasattr(xs[0], "dtype") else np.float32
        r = fn(*(np.asarray(x, dtype=np.float64) for x in xs))
        return r if dt == np.float64 else np.asarray(r).astype(np.float32)
    return run


def fused(a: Any, b: Any, c: Any) -> Any:
    """``fl(a b + c)``, one rounding in the compute format (float64 if an operand is
    float64, else float32): torch's CPU kernels contract these multiply-adds (``vec::fmadd``
    in the add kernel and in lerp; the compiler's contraction elsewhere), so its values
    are the fused ones (TRC-PWO-001). NaN and inf follow IEEE; an exact zero sum is +0
    unless both terms are -0."""
    if any(np.asarray(t).dtype == np.float64 for t in (a, b, c)):
        return fma64(a, b, c)
    product = np.asarray(a, np.float64) * np.asarray(b, np.float64)  # exact: 24 x 24 bits
    return add_rounded(c, product, _F32, "nearest_even").astype(np.float32)


#: torch's float32/float64 pow kernel replaces these scalar exponents by arithmetic
POW_ARITHMETIC: dict[float, Callable[[Any], Any]] = {
    2.0: lambda x: x * x, 3.0: lambda x: x * x * x,
    -1.0: lambda x: x.dtype.type(1) / x, -2.0: lambda x: x.dtype.type(1) / (x * x)}


def pow_formula(x: Any, e: Any) -> Any:
    """A tensor to a Python-scalar power of 2, 3, -1 or -2: torch's float32/float64
    kernel's arithmetic in that format (``x x x``, ``1 / (x x)``); otherwise the float64
    value rounded (TRC-PWO-001)."""
    if isinstance(e, np.generic) and isinstance(x, np.ndarray) and float(e) in POW_ARITHMETIC:
        return POW_ARITHMETIC[float(e)](x)
    return wide(np.power)(x, e)


def narrow_formulas(dtype: torch.dtype, divide: Callable[..., Any],
                    logit_backward: Callable[..., Any]) -> dict[str, Callable[..., Any]]:
    """torch 2.13's CPU kernels for a 16-bit dtype where they differ from the float32
    formula rounded once (TRC-PWO-001). The add kernel's vectorised path rounds
    ``alpha`` and a scalar operand to the dtype, then fuses in float32 (its scalar tail,
    at most one vector's length, works in the dtype's arithmetic: the vectorised path is
    the definition); bfloat16's ``x ** 3`` and ``x ** -2`` run in bfloat16 arithmetic;
    float16's sigmoid backward works in float16 arithmetic; ``div`` with a rounding mode
    (and ``floor_divide``) by a tensor works in the dtype's arithmetic (``divide(x, y,
    mode, h)``: the generic division formula with ``h`` rounding each step), by a Python
    scalar in float32; ``logit_backward`` (the generic formula taking the same ``h``)
    works in the dtype's arithmetic."""
    h = dtype_steps(dtype)

    # the add kernel converts its operands to the dtype: a Python scalar (or a 0-d
    # tensor of a wider dtype) is rounded to it first; tensors of the dtype are unchanged
    def add(x: Any, y: Any, alpha: Any = 1) -> Any:
        return h(x) + h(y) if alpha == 1 else fused(h(alpha), h(y), h(x))

    def sub(x: Any, y: Any, alpha: Any = 1) -> Any:
        return h(x) - h(y) if alpha == 1 else fused(-h(alpha), h(y), h(x))

    def div(x: Any, y: Any, rounding_mode: str | None = None) -> Any:
        # with a rounding mode and a tensor divisor torch's kernel works in the dtype,
        # every step rounded to it; a one-element divisor (Python scalar, 0-d or broadcast
        # tensor: torch's "cpu scalar") takes its float32 path
        if rounding_mode is None or np.size(y) == 1:
            return divide(x, y, rounding_mode)
        return divide(x, y, rounding_mode, h)

    table: dict[str, Callable[..., Any]] = {
        "add": add, "sub": sub, "rsub": lambda x, y, alpha=1: sub(y, x, alpha), "div": div,
        "floor_divide": lambda x, y: div(x, y, "floor"),
        "logit_backward": lambda g, x, eps=None: logit_backward(g, x, eps, h)}
    if dtype == torch.bfloat16:
        steps = {3.0: lambda x: h(h(x * x) * x), -2.0: lambda x: h(x.dtype.type(1) / h(x * x))}
        table["pow"] = lambda x, e: (steps[float(e)](x) if isinstance(e, np.generic)
                                     and isinstance(x, np.ndarray) and float(e) in steps
                                     else pow_formula(x, e))
    if dtype == torch.float16:
        table["sigmoid_backward"] = lambda g, y: h(h(g * h(y.dtype.type(1) - y)) * y)
    return table


def narrow_table(divide: Callable[..., Any], logit_backward: Callable[..., Any]
                 ) -> dict[str, dict[torch.dtype, Callable[..., Any]]]:
    """op name -> {16-bit dtype: its formula} from :func:`narrow_formulas`."""
    by_op: dict[str, dict[torch.dtype, Callable[..., Any]]] = {}
    for dtype in (torch.bfloat16, torch.float16):
        for name, fn in narrow_formulas(dtype, divide, logit_backward).items():
            by_op.setdefault(name, {})[dtype] = fn
    return by_op
