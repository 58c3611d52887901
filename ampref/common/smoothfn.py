"""Smooth functions evaluated in float64 without cancellation, on any array namespace
(NumPy on the host, CuPy on a GPU): the engine and the torch bridge evaluate their
transcendental ops with these before rounding to float32 (ENG-RND-001, TRC-PWO-001).

``0.5 (1 + tanh(x / 2))``, the textbook overflow-free sigmoid, cancels for x < 0: its
float64 value has a relative error near 2^-53 / sigmoid(x), which passes float32's
2^-24 below x = -20 and is exactly 0 below x = -38, where sigmoid(x) is still a normal
float32 number (sigmoid(-88) = 6.1e-39). The forms here keep float64's relative
accuracy over the whole float32 range.
"""

from __future__ import annotations

from typing import Any

__all__ = ["sigmoid"]


def sigmoid(xp: Any, v: Any) -> Any:
    """1 / (1 + e^-v) in float64 with a relative error of a few float64 ulps for every
    v: with e = e^-|v| (never overflows), 1 / (1 + e) for v >= 0 and e / (1 + e) below.
    sigmoid(+inf) = 1, sigmoid(-inf) = +0, sigmoid(NaN) = NaN, sigmoid(±0) = 0.5; a
    float64 subnormal result (v < -708) is returned as computed (it rounds to 0 in
    float32 anyway)."""
    e = xp.exp(-xp.abs(v))
    r = 1.0 / (1.0 + e)
    return xp.where(v >= 0, r, e * r)
