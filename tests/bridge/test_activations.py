"""The bridge's activation functions (``ampref.torch.activations``, TRC-ACT-001): every
formula against an exact oracle in fp16, bf16 and fp32; at the points their definitions
decide (±0, ±inf, NaN, the branch boundaries) against torch itself; and torch's
activation modules end to end under emulate without fallback.

Oracles: float32 steps as exact rational arithmetic rounded once each, function values
at 60 digits rounded to float32 (tests/value_oracles.py), then one rounding to the
tensor's format (tests/oracle.py); nothing is taken from the bridge."""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal
from fractions import Fraction as Q
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from oracle import round_value  # noqa: E402
from value_oracles import DTYPES, dec, r32, sigmoid_d, tanh_d, wide  # noqa: E402

import ampref  # noqa: E402
from ampref.testing import assert_bitwise_equal  # noqa: E402
from ampref.torch import emulate  # noqa: E402
from ampref.torch.activations import ACTIVATIONS  # noqa: E402

aten = torch.ops.aten
ONE, ZERO = Q(1), Q(0)


def f32(v: float) -> Q:
    """A Python scalar as the kernel sees it: rounded to float32."""
    return Q(float(np.float32(v)))


def _softplus_d(d: Decimal) -> Decimal:
    return (1 + d.exp()).ln()


def _elu(alpha: float, scale: float, s: float) -> Callable[[Q], Q]:
    c, lam, sc = r32(f32(alpha) * f32(scale)), f32(scale), f32(s)
    return lambda x: r32(x * lam) if x > 0 else wide(
        lambda d: ((d * dec(sc)).exp() - 1) * dec(c))(x)


def _elu_grad(alpha: float, scale: float, s: float) -> Callable[[Q, Q], Q]:
    c, lam, sc = r32(f32(alpha) * f32(scale)), f32(scale), f32(s)
    return lambda g, x: r32(g * lam) if x > 0 else r32(g * wide(
        lambda d: dec(sc) * dec(c) * (d * dec(sc)).exp())(x))


def _elu_grad_of_result(alpha: float, scale: float, s: float) -> Callable[[Q, Q], Q]:
    c, lam, sc = r32(f32(alpha) * f32(scale)), f32(scale), f32(s)
    return lambda g, y: r32(g * lam) if y > 0 else r32(r32(g * sc) * r32(y + c))


def _mish_grad_d(d: Decimal) -> Decimal:
    t = tanh_d(_softplus_d(d))
    return t + d * sigmoid_d(d) * (1 - t * t)


def _hardswish_grad(g: Q, x: Q) -> Q:
    if x <= -3:
        return ZERO
    return g if x >= 3 else r32(g * r32(r32(x / 3) + Q(1, 2)))


SIXTH = r32(ONE / 6)
SELU = (1.6732632423543772, 1.0507009873554805)

# case: (aten op, tensor operands, arguments after them (None: a tensor), oracle on the
# exact float32-widened values)
CASES: dict[str, tuple[str, int, tuple[Any, ...], Callable[..., Q]]] = {
    "leaky_relu": ("leaky_relu", 1, (0.01,), lambda x: x if x > 0 else r32(x * f32(0.01))),
    "leaky_relu 0.2": ("leaky_relu", 1, (0.2,), lambda x: x if x > 0 else r32(x * f32(0.2))),
    "leaky_relu_backward": ("leaky_relu_backward", 2, (0.01, False),
                            lambda g, x: g if x > 0 else r32(g * f32(0.01))),
    "hardtanh": ("hardtanh", 1, (-1.0, 1.0), lambda x: min(max(x, -ONE), ONE)),
    "relu6": ("hardtanh", 1, (0.0, 6.0), lambda x: min(max(x, ZERO), Q(6))),
    "hardtanh_backward": ("hardtanh_backward", 2, (-1.0, 2.5),
                          lambda g, x: g if -1 < x < Q(5, 2) else ZERO),
    "hardsigmoid": ("hardsigmoid", 1, (), lambda x: r32(min(max(r32(x + 3), ZERO), Q(6)) / 6)),
    "hardsigmoid_backward": ("hardsigmoid_backward", 2, (),
                             lambda g, x: r32(g * SIXTH) if -3 < x < 3 else ZERO),
    "hardswish": ("hardswish", 1, (),
                  lambda x: r32(r32(x * min(max(r32(x + 3), ZERO), Q(6))) / 6)),
    "hardswish_backward": ("hardswish_backward", 2, (), _hardswish_grad),
    "threshold": ("threshold", 1, (0.25, 20.0), lambda x: Q(20) if x <= Q(1, 4) else x),
    "elu": ("elu", 1, (1.0, 1.0, 1.0), _elu(1.0, 1.0, 1.0)),
    "selu": ("elu", 1, (*SELU, 1.0), _elu(*SELU, 1.0)),
    "celu 0.3": ("celu", 1, (0.3,), _elu(0.3, 1.0, 1 / 0.3)),
    "elu_backward": ("elu_backward", 2, ("alpha", 1.0, 1.0, False),
                     _elu_grad(1.0, 1.0, 1.0)),
    "selu_backward": ("elu_backward", 2, ("alpha", SELU[1], 1.0, False),
                      _elu_grad(*SELU, 1.0)),
    "elu_backward of the result": ("elu_backward", 2, ("alpha", 1.0, 1.0, True),
                                   _elu_grad_of_result(1.0, 1.0, 1.0)),
    "softplus": ("softplus", 1, (1.0, 20.0),
                 lambda x: x if r32(x) > 20 else wide(_softplus_d)(x)),
    "softplus beta 2": ("softplus", 1, (2.0, 3.0), lambda x: x if r32(2 * x) > 3 else wide(
        lambda d: _softplus_d(2 * d) / 2)(x)),
    "softplus_backward": ("softplus_backward", 2, (2.0, 3.0), lambda g, x: g if r32(2 * x) > 3
                          else r32(g * wide(lambda d: sigmoid_d(2 * d))(x))),
    "mish": ("mish", 1, (), wide(lambda d: d * tanh_d(_softplus_d(d)))),
    "mish_backward": ("mish_backward", 2, (), lambda g, x: r32(g * wide(_mish_grad_d)(x))),
    "log_sigmoid_backward": ("log_sigmoid_backward", 3, (),
                             lambda g, x, b: r32(g * wide(lambda d: sigmoid_d(-d))(x))),
    "prelu": ("_prelu_kernel", 2, (), lambda x, w: x if x > 0 else r32(w * x)),
    "softshrink 0.5": ("softshrink", 1, (0.5,), lambda x: r32(x - Q(1, 2)) if x > Q(1, 2)
                       else r32(x + Q(1, 2)) if x < -Q(1, 2) else ZERO),
    "softshrink_backward": ("softshrink_backward", 2, (1.5,),
                            lambda g, x: ZERO if -f32(1.5) <= x <= f32(1.5) else g),
    "hardshrink 0.3": ("hardshrink", 1, (0.3,),
                       lambda x: ZERO if -f32(0.3) <= x <= f32(0.3) else x),
    "hardshrink_backward": ("hardshrink_backward", 2, (0.3,),
                            lambda g, x: ZERO if -f32(0.3) <= x <= f32(0.3) else g),
}
# elu_backward's first tensor is the gradient, its second (the last argument) x or y
GRAD_LAST = {"elu_backward", "selu_backward", "elu_backward of the result"}


def _inputs(dtype: str, n: int, seed: int) -> np.ndarray:
    """Values on both sides of every branch: normal, scaled by 2^-3..2^4, and the branch
    points themselves (±3, 0, 20, the threshold) among them."""
    rng = np.random.default_rng(seed)
    v = rng.standard_normal(n) * np.exp2(rng.integers(-3, 5, n))
    v[:10] = [-3.0, 3.0, 0.0, 20.0, 0.25, 1.5, -1.0, 2.5, 6.0, -6.0]
    return ampref.quantize(v, dtype).astype(np.float64)


def _call(op: str, tensors: list[Any], extra: tuple[Any, ...], name: str) -> Any:
    if name in GRAD_LAST:
        g, b = tensors
        args: tuple[Any, ...] = (g, 1.0 if name != "selu_backward" else SELU[0], *extra[1:], b)
        return ACTIVATIONS[op](None, getattr(aten, op), args, {})
    return ACTIVATIONS[op](None, getattr(aten, op), (*tensors, *extra), {})


def test_every_formula_of_the_activation_table_has_an_oracle_case() -> None:
    """Inputs: the activation table's op names (without in-place forms) and the cases'
    ops. Expected: each op has a case here or an end-to-end case below
    (log_sigmoid_forward, _prelu_kernel_backward). Pass: no op left untested."""
    ops = {n for n in ACTIVATIONS if not n.endswith("_")}
    covered = {c[0] for c in CASES.values()} | {"log_sigmoid_forward", "_prelu_kernel_backward",
                                                "glu", "glu_backward"}
    assert ops <= covered, sorted(ops - covered)


@pytest.mark.clause("TRC-ACT-001")
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", sorted(CASES))
def test_each_activation_is_torchs_float32_steps_or_the_function_value(name: str,
                                                                       dtype: str) -> None:
    """Inputs: 300 values per tensor operand in ``dtype`` (branch points included), the
    case's parameters. Expected: the oracle (float32 steps exact then rounded / 60-digit
    function value rounded to float32) rounded once to ``dtype``. Pass: every element
    equal as a value (a rational oracle has no signed zero: the signs of zeros are
    checked against torch below)."""
    op, arity, extra, oracle = CASES[name]
    arrays = [_inputs(dtype, 300, seed=k + 5) for k in range(arity)]
    if op == "_prelu_kernel":
        arrays[1] = arrays[1][:1] * 0 + 0.25
    tensors = [torch.tensor(a, dtype=torch.float64).to(getattr(torch, dtype)) for a in arrays]
    out = _call(op, tensors, extra, name)
    got = np.asarray(out.double().numpy(), np.float64).ravel()
    fmt = ampref.get_format(dtype)
    bad = []
    for i in range(300):
        args = [Q(float(a[min(i, a.size - 1)])) for a in arrays]
        want = float(round_value(oracle(*args), fmt))
        if got[i] != want:
            bad.append((tuple(float(x) for x in args), float(got[i]), want))
    assert not bad, f"{name} {dtype}: {len(bad)} of 300 differ; first (inputs, got, want): " \
                    f"{bad[:3]}"


EXACT_POINTS = [0.0, -0.0, np.inf, -np.inf, np.nan, 3.0, -3.0, 6.0, -6.0, 1.0, -1.0, 2.5,
                0.25, 20.0, 20.000002, -2.0**-149, 2.0**-149, 0.5, -0.75, 7.0]
SMOOTH_POINTS = [0.0, -0.0, np.inf, -np.inf, np.nan, 20.0, 20.000002, 30.0]
F = torch.nn.functional
#: module call -> the points its definition decides exactly
MODULES: dict[str, tuple[Callable[[Any], Any], list[float]]] = {
    "leaky_relu": (F.leaky_relu, EXACT_POINTS),
    "leaky_relu 0.2": (lambda x: F.leaky_relu(x, 0.2), EXACT_POINTS),
    "relu6": (F.relu6, EXACT_POINTS),
    "hardtanh(-1, 2.5)": (lambda x: F.hardtanh(x, -1.0, 2.5), EXACT_POINTS),
    "hardsigmoid": (F.hardsigmoid, EXACT_POINTS),
    "hardswish": (F.hardswish, EXACT_POINTS),
    "threshold(0.25, 20)": (lambda x: F.threshold(x, 0.25, 20.0), EXACT_POINTS),
    "prelu": (lambda x: F.prelu(x, torch.tensor([0.25])), EXACT_POINTS),
    "elu": (F.elu, SMOOTH_POINTS), "selu": (F.selu, SMOOTH_POINTS),
    "celu": (lambda x: F.celu(x, 0.3), SMOOTH_POINTS),
    "elu in place": (lambda x: F.elu(x * 1.0, inplace=True), SMOOTH_POINTS),
    "softplus": (F.softplus, SMOOTH_POINTS), "mish": (F.mish, SMOOTH_POINTS),
    "logsigmoid": (F.logsigmoid, SMOOTH_POINTS),
    "softshrink(0.5)": (lambda x: F.softshrink(x, 0.5), EXACT_POINTS + [0.5, -0.5]),
    "hardshrink(1.5)": (lambda x: F.hardshrink(x, 1.5), EXACT_POINTS + [1.5, -1.5]),
}


def _words(a: Any) -> list[str]:
    v = np.asarray(a, np.float32).ravel()
    return ["nan" if np.isnan(e) else f"{w:08x}" for e, w in zip(v, v.view(np.uint32),
                                                                   strict=True)]


@pytest.mark.clause("TRC-ACT-001", "TRC-EMU-001")
@pytest.mark.parametrize("name", sorted(MODULES))
def test_activations_at_their_defining_points_are_torchs(name: str) -> None:
    """Inputs: ±0, ±inf, NaN and the function's branch points (±3, ±6, the clamp bounds,
    the threshold, softplus's 20 and the next float32; for the piecewise-linear ones
    also ±2^-149 and plain values), padded to 64 elements (torch's vectorised path),
    through the torch function under emulate(fallback='error') and in torch; backward
    with upstream gradients 1, -2, inf and NaN in turn. Expected: torch's float32 words
    for the output and the input gradient (NaN as NaN). Pass: equal."""
    fn, points = MODULES[name]
    x = np.resize(np.array(points, np.float32), 64)
    g = np.resize(np.array([1.0, -2.0, np.inf, np.nan, 1.0], np.float32), 64)
    res = []
    for emulated in (True, False):
        tx = torch.tensor(x, requires_grad=True)
        if emulated:
            with emulate(fallback="error"):
                y = fn(tx)
                y.backward(torch.tensor(g))
        else:
            y = fn(tx)
            y.backward(torch.tensor(g))
        res.append((_words(y.detach().numpy()), _words(tx.grad.numpy())))
    for what, got, want in zip(("output", "gradient"), res[0], res[1], strict=True):
        bad = [(float(x[i]), got[i], want[i]) for i in range(64) if got[i] != want[i]]
        assert not bad, f"{name} {what}: (x, got, want) {bad[:4]}"


@pytest.mark.clause("TRC-ACT-001", "TRC-EMU-002")
@pytest.mark.parametrize("module", ["ELU", "SELU", "CELU", "LeakyReLU", "ReLU6", "Hardtanh",
                                    "Hardsigmoid", "Hardswish", "Softplus", "Mish",
                                    "LogSigmoid", "Softsign", "PReLU", "Threshold",
                                    "Softshrink", "Hardshrink", "Tanhshrink"])
def test_torchs_activation_modules_run_emulated_without_fallback(module: str) -> None:
    """Inputs: a Linear(8, 8) followed by the torch.nn activation module (in its default
    configuration; Threshold(0.1, 20)), a random batch of 4, forward and backward, under
    emulate(model, fallback='error'). Expected: no UnsupportedOpError, every op of the
    report emulated, gradients of the same shapes as torch's, within 2^-10 of them
    (ampref and torch differ by roundings only). Pass: all."""
    cls = getattr(torch.nn, module)
    act = cls(0.1, 20.0) if module == "Threshold" else cls()
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), act)
    x = torch.randn(4, 8)
    model(x).square().sum().backward()
    want = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    with emulate(model, fallback="error") as em:
        model(x).square().sum().backward()
    assert all(r.emulated for r in em.report.rows())
    for p, w in zip(model.parameters(), want, strict=True):
        assert p.grad is not None and p.grad.shape == w.shape
        assert float((p.grad - w).abs().max()) <= 2.0**-10, module


@pytest.mark.clause("TRC-ACT-001")
@pytest.mark.parametrize("dtype", DTYPES)
def test_glu_and_its_gradient_are_float32_steps_around_the_sigmoid_value(dtype: str) -> None:
    """Inputs: x (40, 6) in ``dtype`` (values to ±48), glu along the last dim, upstream
    gradient g (40, 3). Expected: y = fl(a s), dx = (fl(s g), fl(fl(fl(fl(1 - s) s) a) g))
    with s = fl32(sigmoid(b)) the 60-digit value rounded, each step rounded to float32,
    results rounded to ``dtype``. Pass: every element equal."""
    rng = np.random.default_rng(12)
    x = ampref.quantize(rng.standard_normal((40, 6)) * np.exp2(rng.integers(-3, 5, (40, 6))),
                        dtype).astype(np.float64)
    g = ampref.quantize(rng.standard_normal((40, 3)), dtype).astype(np.float64)
    tdt = getattr(torch, dtype)
    tx = torch.tensor(x).to(tdt)
    y = ACTIVATIONS["glu"](None, aten.glu, (tx, -1), {}).double().numpy()
    dx = ACTIVATIONS["glu_backward"](None, aten.glu_backward,
                                     (torch.tensor(g).to(tdt), tx, -1), {}).double().numpy()
    fmt = ampref.get_format(dtype)
    for i, j in np.ndindex(40, 3):
        a, b, gg = Q(float(x[i, j])), Q(float(x[i, j + 3])), Q(float(g[i, j]))
        s = wide(sigmoid_d)(b)
        assert y[i, j] == float(round_value(r32(a * s), fmt)), (i, j, "forward")
        assert dx[i, j] == float(round_value(r32(s * gg), fmt)), (i, j, "da")
        want_b = r32(r32(r32(r32(1 - s) * s) * a) * gg)
        assert dx[i, j + 3] == float(round_value(want_b, fmt)), (i, j, "db")



@pytest.mark.clause("TRC-ACT-001")
def test_celu_with_alpha_zero_is_refused_naming_alpha() -> None:
    """Inputs: celu(x, alpha=0) under emulate (torch refuses it: 1/alpha). Expected:
    ValueError naming alpha and its value, not Python's ZeroDivisionError. Pass: the
    type and the message."""
    with pytest.raises(ValueError, match=r"celu alpha must be nonzero.*alpha=0\.0"):
        with emulate(fallback="error"):
            torch.nn.functional.celu(torch.randn(3), alpha=0.0)


@pytest.mark.clause("TRC-ACT-002")
@pytest.mark.parametrize("training", [False, True])
def test_rrelu_equals_torchs_float32_kernel_with_the_same_draws(training: bool) -> None:
    """Inputs: nn.RReLU (lower 1/8, upper 1/3) on x (6, 40) float32 with -0, +0, NaN
    and ±inf planted, forward and backward under emulate without fallback, torch's
    generator seeded alike; then torch alone. Expected: torch's outputs, gradients and
    noise (the product x * noise is one float32 multiply in torch's kernel too; the
    slope (lower + upper) / 2 is rounded from float64 in both). Pass: bitwise."""
    x = torch.randn(6, 40, generator=torch.Generator().manual_seed(5))
    x[0, :4] = torch.tensor([-0.0, 0.0, float("nan"), -float("inf")])
    m = torch.nn.RReLU().train(training)
    runs = []
    for emulated in (True, False):
        xs = x.clone().requires_grad_()
        torch.manual_seed(11)
        if emulated:
            with emulate(m, fallback="error"):
                y = m(xs)
                y.backward(torch.ones_like(y))
        else:
            y = m(xs)
            y.backward(torch.ones_like(y))
        assert xs.grad is not None
        runs.append((y.detach().numpy(), xs.grad.numpy()))
    assert_bitwise_equal(runs[0][0], runs[1][0], msg="forward")
    assert_bitwise_equal(runs[0][1], runs[1][1], msg="backward")


@pytest.mark.clause("TRC-ACT-002")
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_rrelu_training_on_16_bit_inputs_multiplies_by_the_rounded_draws(dtype: str) -> None:
    """Inputs: F.rrelu(x, training=True) on x (500,) float16/bfloat16 under emulate,
    torch's generator seeded; the same draws taken by torch's float32 kernel. Expected:
    noise = the float32 draws rounded to the dtype (ml_dtypes' cast), output =
    x * noise rounded once to the dtype where x <= 0 (the product of two 16-bit values
    is exact in float32), x elsewhere; the input gradient g * noise. Pass: bitwise."""
    tdt = getattr(torch, dtype)
    x = torch.randn(500, generator=torch.Generator().manual_seed(9)).to(tdt)
    torch.manual_seed(2)
    slopes32 = torch.empty(500)
    torch.ops.aten.rrelu_with_noise(x.float(), slopes32, 0.125, 1 / 3, True)
    noise = ampref.quantize(slopes32.numpy(), dtype)
    xs = x.clone().requires_grad_()
    torch.manual_seed(2)
    with emulate(fallback="error"):
        y = torch.nn.functional.rrelu(xs, training=True)
        y.backward(torch.ones_like(y))
    xv = x.float().numpy().astype(np.float64)
    want = np.where(xv <= 0, ampref.quantize(xv * noise, dtype), xv)
    assert_bitwise_equal(y.detach().float().numpy(), want.astype(np.float32))
    assert xs.grad is not None
    assert_bitwise_equal(xs.grad.float().numpy(), noise.astype(np.float32), msg="g * noise")
