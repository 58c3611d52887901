"""aten's special functions on ampref's numerics (``specs/torch.md`` TRC-PWO-004):
``lgamma``, ``mvlgamma``, ``digamma``, ``polygamma``, ``erfinv``, ``i0`` and ``special_i0e`` /
``special_i1`` / ``special_i1e``, ``special_ndtri``, ``special_log_ndtr``,
``special_erfcx``, ``special_entr``, ``sinc``, ``deg2rad``, ``rad2deg``.

Each function's value is evaluated in float64 by ``scipy.special`` (Cephes; relative
error of a few float64 ulps) and rounded to float32, then once to the output dtype, as
TRC-PWO-001's elementary functions: the correctly rounded float32 value except within
that error of a rounding boundary. (torch's own float64 ``polygamma`` is off by up to
~5e-10 relatively; ampref takes scipy's.) ``deg2rad`` / ``rad2deg`` are torch's float32
product with ``fl32(pi / 180)`` resp. ``fl32(180 / pi)``.

Specials are the functions' limits, as torch where torch has them: ``lgamma`` is
``+inf`` at non-positive integers and at ``±inf`` (C99; scipy says ``-inf`` at
``-inf``); ``digamma(0) = -inf`` (torch), NaN
at negative integers; ``polygamma(n, x)`` is scipy's at poles and NaN at ``-inf``;
``erfinv(±1) = ±inf``, NaN outside ``[-1, 1]``, ``erfinv(-0) = -0``; ``sinc(0) = 1``;
NaN propagates.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
from scipy import special as sp

from .pointwise import pointwise, wide

__all__ = ["SPECIAL"]

Handler = Callable[[Any, Any, tuple[Any, ...], dict[str, Any]], Any]


def _lgamma(v: Any) -> Any:
    return np.where(np.isinf(v), np.inf, sp.gammaln(v))  # C99 and torch: +inf at -inf


def _erfinv(v: Any) -> Any:
    return np.where(v == 0, v, sp.erfinv(v))  # keeps -0, as torch


def _polygamma(n: Any, x: Any) -> Any:
    def value(v: Any) -> Any:
        return np.where(np.isneginf(v), np.nan, sp.polygamma(int(n), v))
    return wide(value)(x)


def _mvlgamma(x: Any, p: Any) -> Any:
    """The multivariate log-gamma: sum_j lgamma(x - j/2) + p (p - 1)/4 log(pi), all in
    float64."""
    q = int(p)

    def value(v: Any) -> Any:
        terms = sum(_lgamma(v - j / 2.0) for j in range(q))
        return terms + q * (q - 1) / 4.0 * math.log(math.pi)
    return wide(value)(x)


def _scaled(constant: float) -> Callable[[Any], Any]:
    """torch's ``x * fl(constant)`` in the compute format."""
    return lambda x: x * x.dtype.type(constant)


_FORMULAS: dict[str, Callable[..., Any]] = {
    **{name: wide(f) for name, f in {
        "lgamma": _lgamma, "digamma": sp.psi, "erfinv": _erfinv, "i0": sp.i0,
        "special_i0e": sp.i0e, "special_i1": sp.i1, "special_i1e": sp.i1e,
        "special_ndtri": sp.ndtri, "special_log_ndtr": sp.log_ndtr,
        "special_erfcx": sp.erfcx, "special_entr": sp.entr, "sinc": np.sinc}.items()},
    "polygamma": _polygamma, "mvlgamma": _mvlgamma,
    "deg2rad": _scaled(math.pi / 180), "rad2deg": _scaled(180 / math.pi),
}


def _build() -> dict[str, Handler]:
    table: dict[str, Handler] = {name: pointwise(fn) for name, fn in _FORMULAS.items()}
    for name in ("lgamma", "digamma", "erfinv", "i0", "sinc", "deg2rad", "rad2deg",
                 "polygamma"):
        table[name + "_"] = pointwise(_FORMULAS[name], inplace=True)
    return table


#: aten op name (overload packet) -> handler
SPECIAL: dict[str, Handler] = _build()
