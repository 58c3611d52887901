"""sin and cos (ENG-TRG-001), for rotary position embeddings and sinusoidal encodings.

The value is the function evaluated in float64 on the exact input and rounded to
float32, then once more to the tensor's format (ENG-RND-001's rule for
transcendentals; float64 tensors keep float64's result). Arguments of any size are
reduced exactly by the float64 library (sin(1e30) is the sine of that float, not of a
rounded multiple of pi). sin(±0) = ±0, cos(±0) = 1, sin(±inf) = cos(±inf) = NaN, NaN
stays NaN. Neither op is on torch's autocast lists: they run in their input's format.

Derivatives follow torch's formulas, as float32 steps in the written order: d sin =
g * fl32(cos x), d cos = -(g * fl32(sin x)); the engine rounds them to the input's format.
"""

from __future__ import annotations

from typing import Any

from ..tensor import Tensor
from .core import check_tensor, wide_math
from .elementwise import unary

__all__ = ["cos", "sin"]


def sin(input: Tensor) -> Tensor:
    """Sine of every element (see the module docstring for specials and rounding)."""
    x = check_tensor(input, "sin")
    be, fmt = x.backend, x.format

    def grad(g: Any, v: Any, _y: Any) -> Any:
        return g * wide_math(be, fmt, lambda xp, a: xp.cos(a), v).astype(g.dtype)
    return unary("sin", x, lambda xp, v: xp.sin(v), grad)


def cos(input: Tensor) -> Tensor:
    """Cosine of every element (see the module docstring for specials and rounding)."""
    x = check_tensor(input, "cos")
    be, fmt = x.backend, x.format

    def grad(g: Any, v: Any, _y: Any) -> Any:
        return -(g * wide_math(be, fmt, lambda xp, a: xp.sin(a), v).astype(g.dtype))
    return unary("cos", x, lambda xp, v: xp.cos(v), grad)
