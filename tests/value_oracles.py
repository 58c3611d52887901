"""Exact oracles for elementwise values: float32 steps as exact rational arithmetic
rounded once each, and function values at 60 decimal digits rounded to float32
(shared by the engine's and the torch bridge's formula tests)."""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal, getcontext, localcontext
from fractions import Fraction as Q

import numpy as np
from oracle import round_value

import ampref

getcontext().prec = 60
F32 = ampref.get_format("float32")
DTYPES = ("float16", "bfloat16", "float32")


def r32(v: Q) -> Q:
    """v rounded to float32 (nearest-even), as a Fraction."""
    out = round_value(v, F32)
    if isinstance(out, float) and out == 0:  # below float32's subnormals: a zero (signed)
        return Q(0)
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


#: pi to 85 digits (a constant, not computed by anything under test)
PI = Decimal("3.14159265358979323846264338327950288419716939937510582097494459230781640628620"
             "899863")


def erfc_d(d: Decimal) -> Decimal:
    """erfc at 60 digits, for every sign and size (also where erfc(|d|) is far below
    1: Phi(x) = erfc(-x/sqrt 2)/2 in GELU's tail). |d| < 2: 1 - erf with erf's series of
    positive terms, erf(y) = 2/sqrt(pi) e^-y^2 sum 2^n y^(2n+1)/(2n+1)!!; |d| >= 2:
    Laplace's continued fraction erfc(y) = e^-y^2/sqrt(pi) / (y + (1/2)/(y + 1/(y +
    (3/2)/(y + ...)))) with 3,000 terms (agrees with the series to 82 digits at 1.99);
    erfc(-y) = 2 - erfc(y). Worked at 90 digits."""
    with localcontext() as ctx:
        ctx.prec = 90
        y = abs(d)
        if y < 2:
            term = s = y
            n = 0
            while term > s * Decimal(10) ** -88:
                n += 1
                term = term * 2 * y * y / (2 * n + 1)
                s += term
            r = 1 - 2 / PI.sqrt() * (-y * y).exp() * s
        else:
            f = y
            for k in range(3000, 0, -1):
                f = y + Decimal(k) / 2 / f
            r = (-y * y).exp() / PI.sqrt() / f
        r = 2 - r if d < 0 else r
    return +r


def sin_d(d: Decimal) -> Decimal:
    """sin at 60 digits: the argument reduced by 2 PI (85 digits; arguments here stay
    below 2^12, so the reduction keeps over 80 digits), then the Taylor series, summed
    at 90 digits until a term falls below 10^-88."""
    with localcontext() as ctx:
        ctx.prec = 90
        two_pi = 2 * PI
        y = d - two_pi * (d / two_pi).to_integral_value()
        term = s = y
        n = 1
        while abs(term) > Decimal(10) ** -88:
            term = -term * y * y / ((n + 1) * (n + 2))
            s += term
            n += 2
    return +s


def cos_d(d: Decimal) -> Decimal:
    """cos x = sin(x + pi/2), at 60 digits."""
    with localcontext() as ctx:
        ctx.prec = 90
        shifted = d + PI / 2
    return sin_d(shifted)


def wide(f: Callable[..., Decimal]) -> Callable[..., Q]:
    """The function's value (60 digits) rounded to float32."""
    return lambda *xs: r32(from_dec(f(*(dec(x) for x in xs))))


SQRT2 = Decimal(2).sqrt()


def gelu_tanh_d(d: Decimal) -> Decimal:
    """GELU's tanh approximation at 60 digits: 0.5 d (1 + tanh(u)) = d sigmoid(2u),
    u = sqrt(2/pi) (d + 0.044715 d^3) (the constants exact)."""
    u = (2 / PI).sqrt() * (d + Decimal("0.044715") * d**3)
    return d * sigmoid_d(2 * u)


def r32_near(q: Q, rel: Q = Q(1, 2**50)) -> tuple[Q, bool]:
    """q rounded to float32, and whether q lies within ``rel`` (relative) of a float32
    rounding boundary (the midpoint between the result and its neighbour toward q),
    where an evaluation with that much error may round the other way."""
    r = r32(q)
    toward = np.float32(np.inf if q > r else -np.inf)
    other = Q(float(np.nextafter(np.float32(float(r)), toward)))
    mid = (r + other) / 2
    return r, mid != 0 and abs(q - mid) <= abs(mid) * rel
