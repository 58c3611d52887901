"""Every formula of the bridge's pointwise table (``ampref.torch.pointwise``) against an
independent oracle, for fp16, bf16 and fp32 tensors (TRC-PWO-001).

The rule the table implements: + - * / are float32 operations in the formula's order,
each exactly rounded, except the multiply-adds torch's kernels fuse (one rounding); exp,
log, tanh, sigmoid, sqrt, rsqrt, pow, gelu and silu are the function's value rounded to
float32 ("float64, then round"); the float32 result is rounded once into the output
dtype. The fused and 16-bit kernels are also compared with torch's own words. The oracle
computes each step exactly with ``fractions.Fraction`` and the transcendental values
with ``decimal`` at 60 digits, then rounds with the rational rounding of
tests/oracle.py; nothing is taken from the bridge. A formula computed in float32 instead
(errors near 1 ulp) differs on a good fraction of the 300 inputs per case; the float64
path differs from the 60-digit value only within ~2^-50 of a float32 rounding boundary
(not met by these inputs)."""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal
from fractions import Fraction as Q
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from oracle import round_value  # noqa: E402
from value_oracles import DTYPES, SQRT2, erfc_d, gelu_tanh_d, r32, sigmoid_d, tanh_d, wide  # noqa: E402

import ampref  # noqa: E402
from ampref.testing import assert_bitwise_equal  # noqa: E402
from ampref.torch import emulate  # noqa: E402
from ampref.torch.pointwise import POINTWISE  # noqa: E402

LN2 = Decimal(2).ln()
ORACLES: dict[str, tuple[int, str, Callable[..., Q]]] = {
    # name: (tensor operands, domain, oracle on exact float32-widened inputs)
    "add": (2, "any", lambda x, y: r32(x + y)),
    "sub": (2, "any", lambda x, y: r32(x - y)),
    "rsub": (2, "any", lambda x, y: r32(y - x)),
    "mul": (2, "any", lambda x, y: r32(x * y)),
    "div": (2, "nonzero", lambda x, y: r32(x / y)),
    "neg": (1, "any", lambda x: -x),
    "abs": (1, "any", abs),
    "reciprocal": (1, "nonzero", lambda x: r32(1 / x)),
    "exp": (1, "any", wide(lambda d: d.exp())),
    "log": (1, "pos", wide(lambda d: d.ln())),
    "tanh": (1, "any", wide(tanh_d)),
    "sigmoid": (1, "any", wide(sigmoid_d)),
    "sqrt": (1, "pos", wide(lambda d: d.sqrt())),
    "rsqrt": (1, "pos", wide(lambda d: 1 / d.sqrt())),
    "gelu": (1, "any", wide(lambda d: d / 2 * erfc_d(-d / SQRT2))),
    "silu": (1, "any", wide(lambda d: d * sigmoid_d(d))),
    "relu": (1, "any", lambda x: max(x, Q(0))),
    "pow": (2, "pos", wide(lambda a, b: (b * a.ln()).exp())),
    # torch's kernels fuse these multiply-adds: one rounding for product and sum
    "lerp": (3, "any", lambda x, e, w: (r32(x + w * r32(e - x)) if abs(w) < Q(1, 2)
                                        else r32(e - r32(e - x) * r32(1 - w)))),
    "addcmul": (3, "any", lambda x, a, b: r32(x + a * b)),
    "addcdiv": (3, "nonzero", lambda x, a, b: r32(x + r32(a / b))),
    "xlogy": (2, "pos", lambda x, y: r32(x * wide(lambda d: d.ln())(y))),
    "remainder": (2, "nonzero", lambda x, y: (lambda m: r32(m + y) if m != 0 and (m < 0) != (
        y < 0) else m)(x - y * int(x / y))),  # fmod exact (truncated quotient), then + y
    "hypot": (2, "any", wide(lambda a, b: (a * a + b * b).sqrt())),
    "logaddexp": (2, "any", wide(lambda a, b: (a.exp() + b.exp()).ln())),
    "logaddexp2": (2, "any", wide(lambda a, b: ((a * LN2).exp() + (b * LN2).exp()).ln() / LN2)),
    "logit": (1, "unit", wide(lambda d: (d / (1 - d)).ln())),
    "logit_backward": (2, "unit", lambda g, x: r32(g / r32(x * r32(1 - x)))),
    "maximum": (2, "any", max),
    "minimum": (2, "any", min),
    "tanh_backward": (2, "any", lambda g, y: r32(g * r32(1 - y * y))),
    "sigmoid_backward": (2, "any", lambda g, y: r32(r32(g * r32(1 - y)) * y)),
    "silu_backward": (2, "any", lambda g, x: r32(g * wide(
        lambda d: sigmoid_d(d) * (1 + d * (1 - sigmoid_d(d))))(x))),
}
#: (name, dtype) whose torch kernel works in the 16-bit dtype's own arithmetic: each
#: float32 step rounded to the dtype (float16's sigmoid backward, logit's backward)
NARROW_ORACLES: dict[tuple[str, str], Callable[..., Q]] = {
    ("sigmoid_backward", "float16"): lambda g, y: _h("float16", _h(
        "float16", g * _h("float16", 1 - y)) * y),
    **{("logit_backward", fmt): (lambda g, x, f=fmt: _h(f, g / _h(f, x * _h(f, 1 - x))))
       for fmt in ("float16", "bfloat16")}}


def _h(fmt: str, v: Q) -> Q:
    """One 16-bit operation: the float32 step, then rounded to ``fmt`` (finite here)."""
    return Q(round_value(r32(v), ampref.get_format(fmt)))


# formulas with non-tensor arguments or exact selections: their own cases below
SELECTIONS = {"clamp", "clamp_min", "clamp_max", "where", "masked_fill", "threshold_backward"}
# formulas whose oracle is torch's own kernel, below (floor division's correction steps)
TORCH_ORACLED = {"floor_divide"}
# elementary functions: their 60-digit mpmath oracles are in test_elementary_functions.py
ELEMENTARY = {"sin", "cos", "tan", "asin", "acos", "atan", "atan2", "sinh", "cosh", "asinh",
              "acosh", "atanh", "erf", "erfc", "log2", "log10", "log1p", "expm1", "exp2"}


def _inputs(domain: str, dtype: str, n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    v = rng.standard_normal(n) * np.exp2(rng.integers(-3, 4, n))
    if domain == "pos":
        v = np.abs(v) + 2.0**-6
    if domain == "nonzero":
        v = np.where(np.abs(v) < 2.0**-6, 0.5, v)
    if domain == "unit":  # strictly inside (0, 1) after rounding to any of the formats
        v = np.clip(1 / (1 + np.exp(-v)), 2.0**-6, 1 - 2.0**-6)
    return ampref.quantize(v, dtype).astype(np.float64)


def _run(name: str, arrays: list[np.ndarray], dtype: str) -> np.ndarray:
    args = tuple(torch.tensor(a, dtype=torch.float64).to(getattr(torch, dtype))
                 for a in arrays)
    out = POINTWISE[name](None, getattr(torch.ops.aten, name), args, {})
    return np.asarray(out.double().numpy(), np.float64)


def test_every_formula_of_the_table_has_an_oracle_or_a_selection_case() -> None:
    """Inputs: the names of the bridge's formula table (POINTWISE without in-place,
    foreach and non-formula entries). Expected: each has an oracle above or is one of
    the exact selections tested below. Pass: no formula left untested."""
    formulas = {n for n in POINTWISE if not n.startswith("_") and not n.endswith("_")}
    formulas -= {"copy"}
    covered = set(ORACLES) | SELECTIONS | ELEMENTARY | TORCH_ORACLED
    assert formulas <= covered, sorted(formulas - covered)


@pytest.mark.clause("TRC-PWO-001")
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", sorted(ORACLES))
def test_each_pointwise_formula_is_float32_steps_or_float64_then_round(name: str,
                                                                       dtype: str) -> None:
    """Inputs: 300 random values per operand (normal, scaled by 2^-3..2^3, positive or
    nonzero where the function needs it) rounded to ``dtype``. Expected: the oracle's
    value (exact float32 steps, fused multiply-adds one step, or the 60-digit function
    value rounded to float32) rounded once to ``dtype`` (float16's sigmoid backward and
    16-bit logit backward: every step rounded to the dtype). Pass: every element bitwise
    equal (values compared exactly)."""
    arity, domain, oracle = ORACLES[name]
    oracle = NARROW_ORACLES.get((name, dtype), oracle)
    arrays = [_inputs(domain, dtype, 300, seed=k + 17) for k in range(arity)]
    if name == "lerp":  # weights on both sides of 0.5, as lerp's two branches
        w = np.random.default_rng(3).uniform(-0.5, 1.5, 300)
        w[:80] = np.tile([0.5, -0.5, 0.5 - 2.0**-11, 0.5 + 2.0**-10], 20)  # branch boundary
        arrays[2] = ampref.quantize(w, dtype).astype(np.float64)
    got = _run(name, arrays, dtype)
    fmt = ampref.get_format(dtype)
    bad = []
    for i in range(300):
        want = float(round_value(oracle(*(Q(float(a[i])) for a in arrays)), fmt))
        if got[i] != want:
            bad.append((tuple(float(a[i]) for a in arrays), float(got[i]), want))
    assert not bad, f"{name} {dtype}: {len(bad)} of 300 differ; first (inputs, got, want): " \
                    f"{bad[:3]}"


@pytest.mark.clause("TRC-PWO-001")
@pytest.mark.parametrize("dtype", DTYPES)
def test_selections_keep_values_exactly_and_propagate_nan(dtype: str) -> None:
    """Inputs: values with NaN, +-inf, +-0 in ``dtype``, gradients with inf and NaN;
    relu, clamp(-1, 2), clamp_min(0.5), clamp_min(0), clamp_max(-0.25), clamp_max(-0),
    where(x > 0, x, y), masked_fill(x, x < 0, 3), threshold_backward(g, x, 0). Expected:
    torch's own CPU results (selections, no arithmetic: a bound equal to x keeps x, so
    relu(-0) = clamp_min(-0, 0) = -0; NaN stays NaN; threshold_backward passes g where x
    is NaN and gives 0 where x <= 0, whatever g is). Pass: equal bit patterns."""
    x = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, -3.0, 0.75, 5.0, -0.5, 1.0, -0.0, 0.0])
    y = np.array([1.0, 2.0, np.inf, np.nan, -np.inf, 6.0, 7.0, 8.0, np.nan, 10.0, -0.0, 3.0])
    tx, ty = (torch.tensor(a).to(getattr(torch, dtype)) for a in (x, y))
    aten = torch.ops.aten
    cases: list[tuple[str, tuple[Any, ...]]] = [
        ("relu", (tx,)), ("clamp", (tx, -1.0, 2.0)), ("clamp_min", (tx, 0.5)),
        ("clamp_min", (tx, 0.0)), ("clamp_max", (tx, -0.25)), ("clamp_max", (tx, -0.0)),
        ("where", (tx > 0, tx, ty)), ("masked_fill", (tx, tx < 0, 3.0)),
        ("threshold_backward", (ty, tx, 0.0))]
    for name, args in cases:
        op = getattr(aten, name)
        got = POINTWISE[name](None, op, args, {}).double().numpy()
        want = op(*args).double().numpy()
        assert np.array_equal(got.view(np.uint64), want.view(np.uint64)), \
            f"{name}{args[1:]}: {got} want {want}"


@pytest.mark.clause("TRC-PWO-001")
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", ["addcmul", "addcdiv", "add", "sub"])
def test_a_scalar_multiplier_is_rounded_first_and_applied_as_torchs_kernel(
        name: str, dtype: str) -> None:
    """Inputs: 300 random operands in ``dtype`` and value/alpha = 0.3 (not a float32
    value). Expected: 0.3 rounded to float32 first (weak scalar; alpha further to a
    16-bit ``dtype``, as torch's add kernel does), then torch's kernels: x + fl(v t1) t2
    and x +- a y with the product fused into the sum (one rounding), x + fl(v t1) / t2
    in float32 steps; the result rounded to ``dtype``. Pass: every element equal."""
    v = r32(Q(0.3))
    a = v if dtype == "float32" else round_value(v, ampref.get_format(dtype))
    arity = 3 if name.startswith("addc") else 2
    arrays = [_inputs("nonzero", dtype, 300, seed=k + 5) for k in range(arity)]
    key = "value" if arity == 3 else "alpha"
    args = tuple(torch.tensor(a).to(getattr(torch, dtype)) for a in arrays)
    got = np.asarray(POINTWISE[name](None, getattr(torch.ops.aten, name), args,
                                     {key: 0.3}).double().numpy())
    table: dict[str, Callable[..., Q]] = {
        "addcmul": lambda x, t1, t2: r32(x + r32(v * t1) * t2),
        "addcdiv": lambda x, t1, t2: r32(x + r32(r32(v * t1) / t2)),
        "add": lambda x, y: r32(x + a * y),
        "sub": lambda x, y: r32(x - a * y)}
    steps = table[name]
    fmt = ampref.get_format(dtype)
    want = [float(round_value(steps(*(Q(float(a[i])) for a in arrays)), fmt))
            for i in range(300)]
    bad = np.flatnonzero(got != np.array(want))
    assert bad.size == 0, f"{name} {dtype} with 0.3: {bad.size} of 300 differ"


@pytest.mark.clause("TRC-PWO-001")
@pytest.mark.parametrize("dtype", DTYPES)
def test_gelu_tanh_approximation_is_its_function_value_then_round(dtype: str) -> None:
    """Inputs: 300 random values in ``dtype`` and -9, -12, -20 (where 1 + tanh(u)
    evaluated in float64 cancels to 0), gelu with approximate="tanh". Expected: the
    60-digit value of 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) rounded to float32,
    then to ``dtype``. Pass: every element equal."""
    x = _inputs("any", dtype, 300, seed=8)
    x[:3] = [-9.0, -12.0, -20.0]
    got = np.asarray(POINTWISE["gelu"](None, torch.ops.aten.gelu,
                                       (torch.tensor(x).to(getattr(torch, dtype)),),
                                       {"approximate": "tanh"}).double().numpy())
    fmt = ampref.get_format(dtype)
    want = np.array([float(round_value(wide(gelu_tanh_d)(Q(float(v))), fmt)) for v in x])
    assert np.array_equal(got, want), f"{int(np.sum(got != want))} of 300 differ"


@pytest.mark.clause("TRC-PWO-001")
@pytest.mark.parametrize("name", ["sigmoid", "silu", "silu_backward"])
def test_sigmoid_forms_keep_their_accuracy_in_the_far_negative_tail(name: str) -> None:
    """Inputs: float32 x from -110 (-100 for silu, whose value -110 sigmoid(-110) is
    below float32's subnormals) to -17.5 (sigmoid from 0 over float32's subnormals to
    2.5e-8; 0.5 (1 + tanh(x/2)) cancels there and is 0 below -38), gradient 1.5.
    Expected: ORACLES' 60-digit value rounded to float32 (sigmoid(-88) = 6.1e-39, not 0).
    Pass: every element equal."""
    x = np.array([-17.5, -20.0, -25.25, -37.0, -40.0, -60.5, -87.0, -88.0, -95.0, -100.0,
                  -103.0, -104.0, -110.0], np.float64)
    if name != "sigmoid":
        x = x[x >= -100]
    arrays = [np.full_like(x, 1.5), x] if name == "silu_backward" else [x]
    got = _run(name, arrays, "float32")
    oracle = ORACLES[name][2]
    want = [float(oracle(*(Q(float(a[i])) for a in arrays))) for i in range(x.size)]
    assert got.tolist() == want, list(zip(x.tolist(), got.tolist(), want, strict=True))


def _unit_edges(w: Any) -> Any:
    """w with its first elements at logit's edges: 0, 1, NaN, -0, 1 - 2^-11, 2^-11."""
    w = w.clone()
    w[:6] = torch.tensor([0.0, 1.0, float("nan"), -0.0, 1 - 2.0**-11, 2.0**-11])
    return w


#: calls whose torch 2.13 CPU kernels fuse a multiply-add, substitute arithmetic for a
#: scalar power, or (16-bit) round alpha or steps to the dtype
TORCH_KERNEL_CASES: dict[str, Callable[..., Any]] = {
    "add alpha": lambda x, y, z, w: torch.add(x, y, alpha=0.3),
    "sub alpha": lambda x, y, z, w: torch.sub(x, y, alpha=-1.7),
    "rsub alpha": lambda x, y, z, w: torch.rsub(x, y, alpha=0.3),
    "add_ alpha": lambda x, y, z, w: x.clone().add_(y, alpha=-0.01),
    "add scalar": lambda x, y, z, w: x + 0.1,
    "sub scalar": lambda x, y, z, w: x - 1e-5,
    "rsub scalar": lambda x, y, z, w: 0.3 - x,
    "add 0-d float32 tensor": lambda x, y, z, w: x + torch.tensor(0.1),
    "_foreach_add_ alpha": lambda x, y, z, w: (lambda c: (torch._foreach_add_(c, [y], alpha=0.1),
                                                         c[0])[1])([x.clone()]),
    "addcmul": lambda x, y, z, w: torch.addcmul(x, y, z, value=0.3),
    "addcmul_ value 1": lambda x, y, z, w: x.clone().addcmul_(y, z),
    "lerp scalar small": lambda x, y, z, w: torch.lerp(x, y, 0.1),
    "lerp scalar large": lambda x, y, z, w: torch.lerp(x, y, 0.9),
    "lerp tensor": lambda x, y, z, w: torch.lerp(x, y, w),
    "_foreach_lerp_": lambda x, y, z, w: (lambda c: (torch._foreach_lerp_(c, [y], 0.1),
                                                    c[0])[1])([x.clone()]),
    "tanh_backward": lambda x, y, z, w: torch.ops.aten.tanh_backward(x, w / 2),
    "sigmoid_backward": lambda x, y, z, w: torch.ops.aten.sigmoid_backward(x, w.abs() / 2),
    "pow 3": lambda x, y, z, w: x ** 3,
    "pow -2": lambda x, y, z, w: x ** -2,
    "pow -1": lambda x, y, z, w: torch.pow(x, -1),
    "logit_backward": lambda x, y, z, w: torch.ops.aten.logit_backward(x, w),
    "logit_backward eps": lambda x, y, z, w: torch.ops.aten.logit_backward(
        x, w.masked_fill(w > 1.4, float("nan")), 0.1),  # NaN inputs: 0 with eps
    # eps 0 selects the clamped branch (0 outside [0, 1] and for NaN), not the NaN one
    "logit_backward eps 0": lambda x, y, z, w: torch.ops.aten.logit_backward(
        x, _unit_edges(w), 0.0),
    "logit_backward edges": lambda x, y, z, w: torch.ops.aten.logit_backward(
        x, _unit_edges(w)),  # +-inf at 0 and 1 by the signs, NaN outside
    "mse_loss none": lambda x, y, z, w: torch.nn.functional.mse_loss(x, y, reduction="none"),
    "huber_loss none": lambda x, y, z, w: torch.nn.functional.huber_loss(
        x, y, reduction="none", delta=0.7),
    "smooth_l1_loss none": lambda x, y, z, w: torch.nn.functional.smooth_l1_loss(
        x, y, reduction="none", beta=0.7),
    "huber_loss_backward mean": lambda x, y, z, w: torch.ops.aten.huber_loss_backward(
        z[0], x, y, 1, 0.7),
    "mse_loss_backward none": lambda x, y, z, w: torch.ops.aten.mse_loss_backward(z, x, y, 0),
    "mse_loss_backward mean": lambda x, y, z, w: torch.ops.aten.mse_loss_backward(
        z[0], x[:1000], y[:1000], 1),
}


@pytest.mark.clause("TRC-PWO-001", "TRC-NN-006")
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16", "float64"])
@pytest.mark.parametrize("name", sorted(TORCH_KERNEL_CASES))
def test_fused_and_substituted_formulas_equal_torchs_kernels(name: str, dtype: str) -> None:
    """Inputs: 1,024 random operands (x, y, z in [-3, 3], weights w in [-0.5, 1.5]; a length that
    is a whole number of vectors, so torch's vectorised path computes every element) in
    ``dtype``. Expected: torch 2.13's own CPU kernel: add/sub with alpha, addcmul, lerp and
    tanh's backward with the multiply-add fused; scalar powers 3, -2, -1 as arithmetic
    (bfloat16's in bfloat16 steps); alpha and a scalar addend rounded to a 16-bit dtype first;
    float16's sigmoid backward, 16-bit mse loss and its backward, bfloat16's Huber loss,
    float16's smooth L1 loss and 16-bit Huber backward in the dtype's steps. Pass:
    every word equal (unfused, 12 % to 24 % of float32 words differ)."""
    dt = getattr(torch, dtype)
    rng = np.random.default_rng(61)
    x, y, z = (torch.tensor(rng.uniform(-3, 3, 1024)).to(dt) for _ in range(3))
    w = torch.tensor(rng.uniform(-0.5, 1.5, 1024)).to(dt)
    fn = TORCH_KERNEL_CASES[name]
    want = fn(x, y, z, w)
    with emulate(fallback="error"):
        got = fn(x, y, z, w)
    assert_bitwise_equal(got.to(torch.float64).numpy(), want.to(torch.float64).numpy(),
                         msg=f"{name} {dtype}")


@pytest.mark.clause("TRC-PWO-001", "TRC-EMU-001")
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", ["addcmul", "addcmul_ value 1", "lerp scalar small",
                                  "lerp scalar large", "lerp tensor", "add alpha",
                                  "tanh_backward", "sigmoid_backward"])
def test_fused_formulas_on_0_d_operands_equal_torchs_kernels(name: str, dtype: str) -> None:
    """Inputs: 0-d operands x = -1.7, y = 2.3, z = 0.9, w = 0.35 (and 0.8 for lerp's
    other branch) in ``dtype`` through the fused-formula cases above. Expected: torch's
    own kernel's word (float64's exact fused multiply-add took np.nonzero of a 0-d array
    and raised before; found by OpInfo samples in float64). Pass: bitwise, shape ()."""
    dt = getattr(torch, dtype)
    for wv in (0.35, 0.8):
        x, y, z, w = (torch.tensor(v, dtype=dt) for v in (-1.7, 2.3, 0.9, wv))
        want = TORCH_KERNEL_CASES[name](x, y, z, w)
        with emulate(fallback="error"):
            got = TORCH_KERNEL_CASES[name](x, y, z, w)
        assert tuple(got.shape) == ()
        assert_bitwise_equal(got.numpy(), want.numpy(), msg=f"{name} {dtype} w={wv}")


@pytest.mark.clause("TRC-PWO-001")
@pytest.mark.parametrize("dtype", ["float32", "float64", "bfloat16", "float16"])
@pytest.mark.parametrize("divisor", ["tensor", "python scalar", "0-d tensor"])
def test_floor_and_trunc_division_are_torchs_kernels(dtype: str, divisor: str) -> None:
    """Inputs: 20,000 numerators, half of them integer multiples k b of their divisor
    (quotients at and near integers, where a rounded quotient can reach an integer the
    exact one does not), the rest of exponents -6..5, zeros among both, ten zero
    divisors; the divisor a tensor, the Python scalar 0.3 or a 0-d float32 tensor.
    Expected: torch's own ``div(rounding_mode="floor"/"trunc")`` and ``floor_divide``:
    Python-style floor division (fmod, correction, floor, round-half-up), in the dtype's
    own steps for a 16-bit tensor divisor, in float32 for a one-element one; trunc of
    the quotient. Pass: bitwise, NaN of either sign equal."""
    dt = getattr(torch, dtype)
    rng = np.random.default_rng(71)
    n = 10_000
    b = torch.tensor(rng.uniform(0.1, 3, 2 * n) * rng.choice([-1, 1], 2 * n)).to(dt)
    a = torch.cat([(torch.tensor(rng.integers(-50, 50, n).astype(np.float64)) * b[:n].double()),
                   torch.tensor(rng.standard_normal(n) * np.exp2(rng.integers(-6, 6, n)))]).to(dt)
    a[:7], b[-10:] = 0, 0
    div = {"tensor": b, "python scalar": 0.3, "0-d tensor": torch.tensor(0.3)}[divisor]
    for name, fn in (("floor", lambda: torch.div(a, div, rounding_mode="floor")),
                     ("trunc", lambda: torch.div(a, div, rounding_mode="trunc")),
                     ("floor_divide", lambda: torch.floor_divide(a, div))):
        want = fn()
        with emulate(fallback="error"):
            got = fn()
        assert_bitwise_equal(got.to(torch.float64).numpy(), want.to(torch.float64).numpy(),
                             nan="any", msg=f"{name} {dtype} by a {divisor}")
