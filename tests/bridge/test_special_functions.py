"""Special functions under emulate (``ampref.torch.specialfns``, TRC-PWO-004): each is
its float64 value rounded to float32. The oracle is mpmath at 60 digits rounded to
float32 (an exact rational rounding); values within 2^-44 (relative) of a float32
midpoint, where a float64 evaluation of a few ulps' error may round either way, are
exempt and counted. Specials against the clause's list (torch's where it has them)."""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction as Q
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")
mp = pytest.importorskip("mpmath")

from value_oracles import r32_near  # noqa: E402

from ampref.testing import assert_bitwise_equal  # noqa: E402
from ampref.torch import emulate  # noqa: E402

mp.mp.dps = 60
SQ2 = mp.sqrt(2)

#: name -> (torch call, mpmath function, input range), ranges away from the functions'
#: zeros (where a float64 value's relative error grows without bound)
FUNCTIONS: dict[str, tuple[Callable[[Any], Any], Callable[[Any], Any], tuple[float, float]]] = {
    "lgamma": (torch.lgamma, mp.loggamma, (2.5, 40.0)),
    "mvlgamma 3": (lambda t: torch.special.multigammaln(t, 3),
                   lambda v: 3 * mp.log(mp.pi) / 2 + sum(mp.loggamma(v - mp.mpf(j) / 2)
                                                         for j in range(3)), (3.0, 40.0)),
    "digamma": (torch.digamma, mp.digamma, (2.0, 60.0)),
    "polygamma 1": (lambda t: torch.polygamma(1, t), lambda v: mp.polygamma(1, v),
                    (0.1, 30.0)),
    "polygamma 2": (lambda t: torch.polygamma(2, t), lambda v: mp.polygamma(2, v),
                    (0.1, 30.0)),
    "erfinv": (torch.erfinv, mp.erfinv, (0.05, 0.999)),
    "i0": (torch.i0, lambda v: mp.besseli(0, v), (-20.0, 20.0)),
    "i0e": (torch.special.i0e, lambda v: mp.besseli(0, v) * mp.exp(-abs(v)), (-50.0, 50.0)),
    "i1": (torch.special.i1, lambda v: mp.besseli(1, v), (0.1, 20.0)),
    "i1e": (torch.special.i1e, lambda v: mp.besseli(1, v) * mp.exp(-abs(v)), (0.1, 50.0)),
    "ndtri": (torch.special.ndtri, lambda p: SQ2 * mp.erfinv(2 * p - 1), (0.6, 0.999)),
    "log_ndtr": (torch.special.log_ndtr, lambda v: mp.log(mp.erfc(-v / SQ2) / 2),
                 (-30.0, 2.0)),
    "erfcx": (torch.special.erfcx, lambda v: mp.exp(v * v) * mp.erfc(v), (-3.0, 30.0)),
    "entr": (torch.special.entr, lambda v: -v * mp.log(v), (0.001, 0.9)),
    "sinc": (torch.sinc, lambda v: mp.sin(mp.pi * v) / (mp.pi * v), (0.05, 0.95)),
}


def _q(v: Any) -> Q:
    sign, man, exp, _ = v._mpf_
    return (-1 if sign else 1) * Q(int(man)) * Q(2) ** int(exp)


@pytest.mark.clause("TRC-PWO-004")
@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_special_functions_are_their_value_rounded_to_float32(name: str) -> None:
    """Inputs: 300 float32 draws over the function's range. Expected: fl32 of the
    60-digit value, except near-midpoint values (fewer than 2 %). Pass: bitwise on all
    others."""
    call, fn, (lo, hi) = FUNCTIONS[name]
    rng = np.random.default_rng(sum(map(ord, name)))
    x = rng.uniform(lo, hi, 300).astype(np.float32)
    with emulate(fallback="error"):
        got = call(torch.tensor(x)).numpy()
    pairs = [r32_near(_q(fn(mp.mpf(float(v)))), Q(1, 2**44)) for v in x]
    want = np.array([float(r) for r, _ in pairs], np.float32)
    near = np.array([n for _, n in pairs])
    assert near.mean() < 0.02, f"{name}: {near.sum()} exempt"
    assert_bitwise_equal(got[~near], want[~near], inputs=x[~near], msg=name)


@pytest.mark.clause("TRC-PWO-004")
def test_special_functions_take_their_limits_at_specials() -> None:
    """Inputs: poles, zeros, ±inf and NaN. Expected: lgamma(0) = lgamma(-2) = inf,
    lgamma(±inf) = inf; digamma(0) = -inf, digamma(-2) = NaN; erfinv(±1) = ±inf,
    erfinv(1.5) = NaN, erfinv(-0) = -0; sinc(0) = 1; polygamma(1, -inf) = NaN; NaN in,
    NaN out; deg2rad and rad2deg torch's float32 products. Pass: bitwise (NaN any)."""
    inf, nan = math.inf, math.nan
    cases = [
        (torch.lgamma, [0.0, -2.0, inf, -inf, nan], [inf, inf, inf, inf, nan]),
        (torch.digamma, [0.0, -2.0, nan], [-inf, nan, nan]),
        (torch.erfinv, [1.0, -1.0, 1.5, -0.0, nan], [inf, -inf, nan, -0.0, nan]),
        (torch.sinc, [0.0, nan], [1.0, nan]),
        (lambda t: torch.polygamma(1, t), [-inf, nan], [nan, nan]),
    ]
    for call, xs, want in cases:
        with emulate(fallback="error"):
            got = call(torch.tensor(xs)).numpy()
        assert_bitwise_equal(got, np.array(want, np.float32), nan="any", msg=str(xs))
    x = torch.tensor(np.random.default_rng(4).uniform(-720, 720, 1000).astype(np.float32))
    for call in (torch.deg2rad, torch.rad2deg):
        with emulate(fallback="error"):
            got = call(x).numpy()
        assert_bitwise_equal(got, call(x).numpy())
