"""The elementary functions under emulate (TRC-PWO-001): sin, cos, tan, their inverses,
hyperbolic functions, erf/erfc, log2/log10/log1p, expm1/exp2 and atan2 are the
function's float64 value rounded to float32. The oracle is mpmath at 60 digits rounded
to float32 (nearest-even, an exact rational rounding): the float64 evaluation may
differ from it only where the exact value lies within float64's error of a float32
midpoint, which the test measures and exempts (none among these inputs). Specials
(±0, ±inf, NaN, subnormals, domain edges) follow IEEE / C99 Annex F, checked against
NumPy's float64 functions and, where it agrees, torch."""

from __future__ import annotations

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

#: aten name -> (mpmath function, input range (low, high) for random draws)
FUNCTIONS: dict[str, tuple[Callable[..., Any], tuple[float, float]]] = {
    "sin": (mp.sin, (-40.0, 40.0)), "cos": (mp.cos, (-40.0, 40.0)),
    "tan": (mp.tan, (-1.5, 1.5)), "asin": (mp.asin, (-1.0, 1.0)),
    "acos": (mp.acos, (-1.0, 1.0)), "atan": (mp.atan, (-30.0, 30.0)),
    "sinh": (mp.sinh, (-20.0, 20.0)), "cosh": (mp.cosh, (-20.0, 20.0)),
    "asinh": (mp.asinh, (-50.0, 50.0)), "acosh": (mp.acosh, (1.0, 50.0)),
    "atanh": (mp.atanh, (-0.999, 0.999)), "erf": (mp.erf, (-4.0, 4.0)),
    "erfc": (mp.erfc, (-3.0, 9.0)), "log2": (mp.log2 if hasattr(mp, "log2") else
                                             (lambda v: mp.log(v, 2)), (1e-6, 1e6)),
    "log10": (mp.log10, (1e-6, 1e6)), "log1p": (mp.log1p, (-0.99, 10.0)),
    "expm1": (mp.expm1, (-20.0, 20.0)), "exp2": (lambda v: mp.power(2, v), (-100.0, 100.0)),
}


def _emulated(name: str, *xs: Any) -> Any:
    with emulate(fallback="error"):
        return getattr(torch, name)(*xs)


def _oracle(fn: Callable[..., Any], *xs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """fl32 of the 60-digit value per element, and whether the value lies within 2^-50
    (relative) of a float32 midpoint (where a float64 evaluation may round either way)."""
    out = np.empty(xs[0].shape, np.float32)
    near = np.zeros(xs[0].shape, bool)
    for i in np.ndindex(xs[0].shape):
        v = fn(*(mp.mpf(float(x[i])) for x in xs))
        sign, man, exp, _ = v._mpf_  # value = (-1)^sign man 2^exp, exactly
        q = (-1 if sign else 1) * Q(int(man)) * Q(2) ** int(exp)
        r, near[i] = r32_near(q)
        out[i] = float(r)
    return out, near


@pytest.mark.clause("TRC-PWO-001")
@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_elementary_functions_are_their_value_rounded_to_float32(name: str) -> None:
    """Inputs: 400 float32 draws over the function's usual range (log-uniform for the
    logarithms), float32. Expected: each result equals fl32 of the 60-digit value,
    except at exempted near-midpoint values (counted: must be fewer than 1 %).
    Pass: bitwise on all others."""
    fn, (lo, hi) = FUNCTIONS[name]
    rng = np.random.default_rng(abs(hash(name)) % 2**32)
    if name in ("log2", "log10"):
        x = np.exp(rng.uniform(np.log(lo), np.log(hi), 400)).astype(np.float32)
    else:
        x = rng.uniform(lo, hi, 400).astype(np.float32)
    got = _emulated(name, torch.tensor(x)).numpy()
    want, near = _oracle(fn, x)
    assert near.mean() < 0.01
    assert_bitwise_equal(got[~near], want[~near], inputs=x[~near], msg=name)


@pytest.mark.clause("TRC-PWO-001")
def test_atan2_is_its_value_rounded_to_float32_in_every_quadrant() -> None:
    """Inputs: 400 (y, x) pairs of float32 over [-10, 10]^2. Expected: fl32 of the
    60-digit atan2(y, x), near-midpoint values exempt. Pass: bitwise."""
    rng = np.random.default_rng(23)
    y, x = (rng.uniform(-10, 10, 400).astype(np.float32) for _ in range(2))
    got = _emulated("atan2", torch.tensor(y), torch.tensor(x)).numpy()
    want, near = _oracle(mp.atan2, y, x)
    assert near.mean() < 0.01
    assert_bitwise_equal(got[~near], want[~near], msg="atan2")


def test_every_elementary_function_named_by_the_formula_census_has_an_oracle_here() -> None:
    """Inputs: the census of test_pointwise_formulas (ELEMENTARY: the formulas whose
    oracle lives in this file). Expected: exactly the functions above plus atan2.
    Pass: equal sets (a function added to one list only fails)."""
    from test_pointwise_formulas import ELEMENTARY

    assert set(FUNCTIONS) | {"atan2"} == ELEMENTARY


SPECIALS = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45, 1.0, -1.0,
                     1e30, -1e30], np.float32)


@pytest.mark.clause("TRC-PWO-001")
@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_elementary_functions_keep_ieee_specials(name: str) -> None:
    """Inputs: ±0, ±inf, NaN, ±smallest subnormal, ±1, ±1e30. Expected: NumPy's float64
    function (C99 Annex F: sin(-0) = -0, log1p(-1) = -inf, atanh(1) = inf, acosh(0) =
    NaN, erf(-inf) = -1, ...) rounded to float32. Pass: bitwise, any NaN equal."""
    numpy_fn = {"asin": np.arcsin, "acos": np.arccos, "atan": np.arctan,
                "asinh": np.arcsinh, "acosh": np.arccosh, "atanh": np.arctanh,
                "erf": None, "erfc": None}.get(name, getattr(np, name, None))
    if numpy_fn is None:
        from scipy import special

        numpy_fn = getattr(special, name)
    with np.errstate(all="ignore"):
        want = numpy_fn(SPECIALS.astype(np.float64)).astype(np.float32)
    got = _emulated(name, torch.tensor(SPECIALS)).numpy()
    assert_bitwise_equal(got, want, nan="any", inputs=SPECIALS, msg=name)


@pytest.mark.clause("TRC-PWO-001", "TRC-EMU-001")
def test_rotary_position_codes_train_without_fallback_under_cuda_autocast() -> None:
    """Inputs: a rotary-embedded attention score (sin/cos of position x frequency,
    computed inside the forward) of a linear layer's output, fp16 CUDA autocast
    emulated, one backward. Expected: no op left to torch, a finite gradient for the
    layer's weight. Pass: all."""
    torch.manual_seed(0)
    lin = torch.nn.Linear(8, 8)
    x = torch.randn(2, 6, 8)
    with emulate(lin, fallback="error") as em:
        from ampref.torch import autocast

        with autocast("cuda", dtype=torch.float16):
            h = lin(x).float()
            pos = torch.arange(6, dtype=torch.float32)[:, None]
            freq = torch.exp2(-torch.arange(4, dtype=torch.float32))[None, :]
            ang = pos * freq
            a, b = h[..., :4], h[..., 4:]
            rot = torch.cat([a * torch.cos(ang) - b * torch.sin(ang),
                             a * torch.sin(ang) + b * torch.cos(ang)], -1)
            score = (rot @ rot.transpose(1, 2)).float().mean()
        score.backward()
    assert em.report.not_emulated() == []
    assert lin.weight.grad is not None and torch.isfinite(lin.weight.grad).all()
