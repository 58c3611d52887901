"""log1p, expm1, reciprocal and leaky_relu (ENG-UNA-001).

``log1p`` and ``expm1`` follow ENG-RND-001's rule for transcendentals (the float64 value,
accurate near 0 where ``log(1 + x)`` and ``exp(x) - 1`` lose every digit, rounded to
float32, then to the format). ``reciprocal`` is the IEEE float32 division 1 / x (float64
for float64 tensors), then the format. ``leaky_relu`` keeps x > 0 and gives the float32
product x * fl32(slope) elsewhere, as torch's kernel does, then the format. Specials:
log1p(-1) = -inf, log1p(x < -1) = NaN, expm1(-inf) = -1, reciprocal(±0) = ±inf,
reciprocal(±inf) = ±0, leaky_relu(-0) = -0, NaN stays NaN. log1p of a subnormal x is x
(correctly rounded; torch's vectorised float32 kernel returns 0 for the smallest ones).
None is on torch's autocast lists except reciprocal under CUDA (float32), which the
policy tables carry.

Derivatives, torch's formulas as float32 steps: log1p: fl32(g / fl32(1 + x)); expm1:
fl32(g * fl32(y + 1)); reciprocal: fl32(-g * fl32(y * y)); leaky_relu: g where x > 0,
else fl32(g * fl32(slope)).
"""

from __future__ import annotations


import numpy as np

from ampref.common.checks import check_real
from ..tensor import Tensor, storage_dtype
from .core import check_tensor
from .elementwise import unary

__all__ = ["expm1", "leaky_relu", "log1p", "reciprocal"]


def log1p(input: Tensor) -> Tensor:
    """ln(1 + x), accurate for tiny x (module docstring)."""
    return unary("log1p", input, lambda xp, v: xp.log1p(v), lambda g, x, y: g / (1 + x))


def expm1(input: Tensor) -> Tensor:
    """e^x - 1, accurate for tiny x (module docstring)."""
    return unary("expm1", input, lambda xp, v: xp.expm1(v), lambda g, x, y: g * (y + 1))


def reciprocal(input: Tensor) -> Tensor:
    """1 / x as one IEEE division (module docstring)."""
    one = storage_dtype(check_tensor(input, "reciprocal").format)(1)
    return unary("reciprocal", input, lambda xp, v: one / v, lambda g, x, y: -g * (y * y),
                 storage=True)


def leaky_relu(input: Tensor, negative_slope: float = 0.01) -> Tensor:
    """x for x > 0, else x * fl32(negative_slope) (module docstring); torch's ``inplace``
    is omitted (ops never write in place)."""
    x = check_tensor(input, "leaky_relu")
    slope = check_real("leaky_relu negative_slope", negative_slope)
    with np.errstate(over="ignore"):  # fl32 of a slope past float32's range is ±inf
        s = storage_dtype(x.format)(slope)
    xp = x.backend.xp
    return unary("leaky_relu", x, lambda xp_, v: xp_.where(v > 0, v, v * s),
                 lambda g, v, y: xp.where(v > 0, g, g * s), storage=True)
