"""Exact oracles for elementwise values: float32 steps as exact rational arithmetic
rounded once each, and function values at 60 decimal digits rounded to float32
(shared by the engine's and the torch bridge's formula tests)."""

from __future__ import annotations

import math
from collections.abc import Callable
from decimal import Decimal, getcontext
from fractions import Fraction as Q

from oracle import round_value

import ampref

getcontext().prec = 60
F32 = ampref.get_format("float32")
DTYPES = ("float16", "bfloat16", "float32")


def r32(v: Q) -> Q:
    """v rounded to float32 (nearest-even), as a Fraction."""
    out = round_value(v, F32)
    assert isinstance(out, Q), f"{float(v)} overflows float32: the case is malformed"
    return out


def dec(q: Q) -> Decimal:
    return Decimal(q.numerator) / Decimal(q.denominator)


def from_dec(d: Decimal) -> Q:
    return Q(d)


def tanh_d(d: Decimal) -> Decimal:
    e = (2 * d).exp()
    return (e - 1) / (e + 1)


def sigmoid_d(d: Decimal) -> Decimal:
    return 1 / (1 + (-d).exp())


def erf_d(d: Decimal) -> Decimal:
    # float64 erf (libm: within about 1 ulp of float64): the one value not at 60 digits
    return Decimal(math.erf(float(d)))


def wide(f: Callable[..., Decimal]) -> Callable[..., Q]:
    """The function's value (60 digits) rounded to float32."""
    return lambda *xs: r32(from_dec(f(*(dec(x) for x in xs))))


SQRT2 = Decimal(2).sqrt()

