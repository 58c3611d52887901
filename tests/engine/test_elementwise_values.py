"""The engine's elementwise formulas value by value against exact oracles (ENG-RND-001,
ENG-BWD-001, ENG-TRG-001): + - * / and the derivative formulas are float32 operations in
the written order, each exactly rounded; exp, log, tanh, sigmoid, gelu, pow, sqrt, rsqrt,
silu, sin and cos are the function value rounded to float32 (60-digit decimal values,
gelu's erfc and tanh forms included, also in their far negative tails; sin also at
arguments up to 2^10); the float32 result is rounded once to the tensor's format.
Oracles: tests/value_oracles.py (exact rational steps, nothing from ampref)."""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal
from fractions import Fraction as Q

import numpy as np
import pytest
from oracle import round_value
from value_oracles import (DTYPES, SQRT2, cos_d, dec, erfc_d, from_dec, gelu_tanh_d, r32,
                           sigmoid_d, sin_d, tanh_d, wide)

import ampref
from ampref.testing import assert_bitwise_equal
from ampref.engine import functional as F


# name: (engine op, operands, domain, forward oracle, backward oracle (g, inputs, y) or None)
ONE = Q(1)
SLOPE = r32(Q(0.2))  # leaky_relu's slope as torch's kernel holds it: float32(0.2)
TABLE: dict[str, tuple[Callable[..., object], int, str, Callable[..., Q],
                       Callable[..., Q] | None]] = {
    "add": (lambda a, b: a + b, 2, "any", lambda a, b: r32(a + b), None),
    "sub": (lambda a, b: a - b, 2, "any", lambda a, b: r32(a - b), None),
    "mul": (lambda a, b: a * b, 2, "any", lambda a, b: r32(a * b), None),
    "div": (lambda a, b: a / b, 2, "nonzero", lambda a, b: r32(a / b), None),
    "neg": (F.neg, 1, "any", lambda a: -a, lambda g, x, y: -g),
    "exp": (F.exp, 1, "small", wide(lambda d: d.exp()), lambda g, x, y: r32(g * y)),
    "log": (F.log, 1, "pos", wide(lambda d: d.ln()), lambda g, x, y: r32(g / x)),
    "tanh": (F.tanh, 1, "any", wide(tanh_d), lambda g, x, y: r32(g * r32(ONE - r32(y * y)))),
    "sigmoid": (F.sigmoid, 1, "any", wide(sigmoid_d),
                lambda g, x, y: r32(g * r32(y * r32(ONE - y)))),
    "relu": (F.relu, 1, "any", lambda a: max(a, Q(0)),
             lambda g, x, y: g if x > 0 else Q(0)),
    "gelu": (F.gelu, 1, "any", wide(lambda d: d / 2 * erfc_d(-d / SQRT2)), None),
    "gelu_tanh": (lambda a: F.gelu(a, "tanh"), 1, "any", wide(gelu_tanh_d), None),
    "pow": (lambda a, b: a ** b, 2, "pos", wide(lambda a, b: (b * a.ln()).exp()), None),
    "pow_scalar": (lambda a: a ** 3.0, 1, "any", wide(lambda d: d**3), None),
    "sqrt": (F.sqrt, 1, "pos", wide(lambda d: d.sqrt()), lambda g, x, y: r32(g / (2 * y))),
    "rsqrt": (F.rsqrt, 1, "pos", wide(lambda d: 1 / d.sqrt()),
              lambda g, x, y: r32(-g / 2 * r32(r32(y * y) * y))),
    "silu": (F.silu, 1, "any", wide(lambda d: d * sigmoid_d(d)), None),
    "sin": (F.sin, 1, "any", wide(sin_d), lambda g, x, y: r32(g * r32(from_dec(cos_d(dec(x)))))),
    "cos": (F.cos, 1, "any", wide(cos_d),
            lambda g, x, y: -r32(g * r32(from_dec(sin_d(dec(x)))))),
    "sin_wide": (lambda a: F.sin(a * 64.0), 1, "any", wide(lambda d: sin_d(64 * d)), None),
    "log1p": (F.log1p, 1, "pos", wide(lambda d: (1 + d).ln()), lambda g, x, y: r32(g / r32(1 + x))),
    "log1p_tiny": (lambda a: F.log1p(a * 2.0**-30), 1, "any",
                   wide(lambda d: (1 + d * Decimal(2) ** -30).ln()), None),
    "expm1": (F.expm1, 1, "small", wide(lambda d: d.exp() - 1),
              lambda g, x, y: r32(g * r32(y + 1))),
    "reciprocal": (F.reciprocal, 1, "nonzero", lambda a: r32(1 / a),
                   lambda g, x, y: r32(-g * r32(y * y))),
    "leaky_relu": (lambda a: F.leaky_relu(a, 0.2), 1, "any",
                   lambda a: a if a > 0 else r32(a * SLOPE),
                   lambda g, x, y: g if x > 0 else r32(g * SLOPE)),
}


def _inputs(domain: str, dtype: str, seed: int, n: int = 200) -> np.ndarray:
    rng = np.random.default_rng(seed)
    v = rng.standard_normal(n) * np.exp2(rng.integers(-3, 3, n))
    if domain == "pos":
        v = np.abs(v) + 2.0**-6
    if domain == "nonzero":
        v = np.where(np.abs(v) < 2.0**-6, 0.5, v)
    if domain == "small":  # exp stays below fp16's maximum
        v = np.clip(v, -10.0, 10.0)
    return ampref.quantize(v, dtype).astype(np.float64)


def _differences(got: np.ndarray, want: list[float], arrays: list[np.ndarray]) -> str:
    bad = np.flatnonzero(got != np.array(want))
    if not bad.size:
        return ""
    i = int(bad[0])
    return (f"{bad.size} of {got.size} differ; first at inputs "
            f"{[float(a[i]) for a in arrays]}: got {float(got[i])!r}, want {want[i]!r}")


@pytest.mark.clause("ENG-RND-001", "ENG-BWD-001", "ENG-TRG-001", "ENG-UNA-001")
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", sorted(TABLE))
def test_each_elementwise_formula_and_its_derivative_round_as_the_rule_says(
        name: str, dtype: str) -> None:
    """Inputs: 200 random values per operand in ``dtype`` (normal scaled by 2^-3..2^2;
    positive, nonzero or within [-10, 10] where needed) and, for the derivative, a random
    output gradient in ``dtype``. Expected: the forward oracle rounded to ``dtype``; for ops with a
    derivative oracle, the input gradient = that oracle (float32 steps in the written
    order) rounded to ``dtype``. Pass: every element equal."""
    fn, arity, domain, forward, backward = TABLE[name]
    fmt = ampref.get_format(dtype)
    arrays = [_inputs(domain, dtype, seed=k + 41) for k in range(arity)]
    ts = [ampref.tensor(a, dtype, requires_grad=True) for a in arrays]
    out = fn(*ts)
    got = np.asarray(out.numpy(), np.float64)  # type: ignore[attr-defined]
    want = [float(round_value(forward(*(Q(float(a[i])) for a in arrays)), fmt))
            for i in range(arrays[0].size)]
    assert not (msg := _differences(got, want, arrays)), f"{name} {dtype} forward: {msg}"
    if backward is None:
        return
    g = _inputs("any", dtype, seed=7)
    out.backward(ampref.tensor(g, dtype))  # type: ignore[attr-defined]
    grad = np.asarray(ts[0].grad, np.float64)
    want_g = [float(round_value(backward(Q(float(g[i])), Q(float(arrays[0][i])),
                                         Q(float(got[i]))), fmt)) for i in range(g.size)]
    assert not (msg := _differences(grad, want_g, arrays)), f"{name} {dtype} gradient: {msg}"


#: special inputs -> ops whose torch float32 results they are compared with
SPECIALS = {"sqrt": [-0.0, 0.0, np.inf, -np.inf, np.nan, -1.0, 1e-45, 4.0],
            "rsqrt": [-0.0, 0.0, np.inf, -np.inf, np.nan, -1.0, 4.0],
            "silu": [-0.0, 0.0, np.inf, -np.inf, np.nan, 1.0],
            "sin": [-0.0, 0.0, np.inf, -np.inf, np.nan, 1e-40, 1e30, -3e38],
            "cos": [-0.0, 0.0, np.inf, -np.inf, np.nan, 1e-40, 1e30, -3e38],
            "log1p": [-1.0, -2.0, -0.0, 0.0, 1e-30, np.inf, -np.inf, np.nan],
            "expm1": [-0.0, 0.0, 1e-30, np.inf, -np.inf, np.nan, 89.0, -100.0],
            "reciprocal": [-0.0, 0.0, np.inf, -np.inf, np.nan, 1e-45, 3e38, -7.0],
            "leaky_relu": [-0.0, 0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45, -3e38]}


@pytest.mark.clause("ENG-SPC-001", "ENG-TRG-001", "ENG-UNA-001")
@pytest.mark.parametrize("name", sorted(SPECIALS))
def test_unary_functions_give_torchs_special_values(name: str) -> None:
    """Inputs: ±0, ±inf, NaN, -1, subnormals, huge arguments (sin(1e30), sin(-3e38),
    expm1(89) overflowing) and plain values in float32. Expected: torch's float32
    results bit for bit (sqrt(-0) = -0, rsqrt(±0) = ±inf, rsqrt(inf) = 0, negatives
    NaN, silu(-inf) = NaN, silu(-0) = -0, sin(±0) = ±0, cos(±0) = 1, sin/cos(±inf) =
    NaN, log1p(-1) = -inf, expm1(-inf) = -1, reciprocal(±0) = ±inf, leaky_relu(-0) =
    -0), NaN equal to any NaN. Pass: equal bits or both NaN."""
    torch = pytest.importorskip("torch")
    x = np.array(SPECIALS[name], np.float32)
    got = getattr(F, name)(ampref.tensor(x, "float32")).numpy()
    want = getattr(torch.nn.functional if name in ("silu", "leaky_relu") else torch, name)(
        torch.tensor(x)).numpy()
    assert_bitwise_equal(got, want, nan="any", inputs=x, msg=name)


@pytest.mark.clause("ENG-UNA-001")
def test_log1p_of_a_subnormal_is_the_subnormal_itself() -> None:
    """Inputs: the smallest float32 subnormals ±2^-149 and 2^-130. Expected: x itself
    (log1p(x) = x - x^2/2 + ..., which rounds to x; torch's float32 kernel gives 0 for
    2^-149, a documented difference). Pass: equal bits."""
    x = np.array([2.0**-149, -(2.0**-149), 2.0**-130], np.float32)
    assert_bitwise_equal(F.log1p(ampref.tensor(x)).numpy(), x)
