"""``ampref.nn.init`` against torch.nn.init (ENG-INI-001): gains and constants bit for
bit; random initialisers by their distributions, with the bound or std taken from torch's
documented formula and that formula checked on torch's own samples in the same test."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

import ampref
from ampref import nn
from ampref.engine.creation import default_generator
from ampref.testing import assert_bitwise_equal

init = nn.init

NONLINEARITIES = ["linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d",
                  "conv_transpose2d", "conv_transpose3d", "sigmoid", "tanh", "relu", "selu"]


@pytest.mark.clause("ENG-INI-001")
@pytest.mark.parametrize("name, param", [*((n, None) for n in NONLINEARITIES),
                                         ("leaky_relu", None), ("leaky_relu", 0),
                                         ("leaky_relu", 0.2), ("leaky_relu", -3),
                                         ("leaky_relu", math.sqrt(5))])
def test_calculate_gain_equals_torchs_bit_for_bit(name: str, param: Any) -> None:
    """Inputs: every nonlinearity torch names, leaky_relu with five slopes. Expected:
    torch.nn.init.calculate_gain's float (1 for the linear kinds). Pass: equal hex."""
    torch = pytest.importorskip("torch")
    ours, theirs = init.calculate_gain(name, param), torch.nn.init.calculate_gain(name, param)
    assert float(ours).hex() == float(theirs).hex()


@pytest.mark.clause("ENG-INI-001", "API-ERR-001")
@pytest.mark.parametrize("call", [
    lambda i, t: i.calculate_gain("swish"),
    lambda i, t: i.calculate_gain("leaky_relu", True),
    lambda i, t: i.calculate_gain("leaky_relu", "0.1"),
    lambda i, t: i.xavier_uniform_(t(4)),
    lambda i, t: i.kaiming_normal_(t(4)),
    lambda i, t: i.kaiming_uniform_(t(3, 4), mode="fan_avg"),
])
def test_bad_initialiser_arguments_are_refused_as_torch_refuses_them(call: Any) -> None:
    """Inputs: an unknown nonlinearity, bad slopes, a 1-D tensor for a fan rule, an
    unknown mode. Expected: ValueError from both libraries. Pass: both raise."""
    torch = pytest.importorskip("torch")
    with pytest.raises(ValueError):
        call(torch.nn.init, torch.empty)
    with pytest.raises(ValueError):
        call(init, ampref.zeros)


@pytest.mark.clause("ENG-INI-001", "ENG-PRM-001")
@pytest.mark.parametrize("fmt, val", [
    *((f, v) for f in ("float32", "bfloat16", "float16", "float64")
      for v in (0.1, -0.0, 1e-46, 1e-8, 1 + 2**-11 + 2**-40, 65504.0, math.inf, -math.inf,
                math.nan, 1, -7)),
    *((f, v) for f in ("float32", "bfloat16", "float64") for v in (3.0e38, -3.3e38)),
    ("bfloat16", 3.3895313892515355e38), ("float32", 3.4028234663852886e38)])
def test_constant_ones_zeros_and_eye_equal_torchs_fill_bit_for_bit(fmt: str, val: Any) -> None:
    """Inputs: a 3x4 tensor of each format; constants near every boundary (a float32
    subnormal underflow, fp16 subnormal 1e-8, the fp16 double-rounding case 1 + 2^-11 +
    2^-40, each format's largest finite value, the last binade, ±inf, NaN, ints).
    Expected: torch.nn.init's values (torch fills through float32), and ones/zeros/eye
    likewise. Pass: equal bits (any NaN)."""
    torch = pytest.importorskip("torch")
    from torch_compare import assert_same_result
    ours = ampref.zeros(3, 4, dtype=fmt)
    theirs = torch.zeros(3, 4, dtype=getattr(torch, fmt))
    assert init.constant_(ours, val) is ours
    torch.nn.init.constant_(theirs, val)
    assert_same_result(ours, theirs, f"constant_({val!r}) in {fmt}")
    for fn in ("ones_", "zeros_", "eye_"):
        assert_same_result(getattr(init, fn)(ours), getattr(torch.nn.init, fn)(theirs), fn)


@pytest.mark.clause("ENG-INI-001", "API-ERR-001")
@pytest.mark.parametrize("fmt, val", [("float16", 65505.0), ("float16", -7e4),
                                      ("bfloat16", 3.3895314e38), ("float32", 3.4028235e38),
                                      ("bfloat16", 1e39)])
def test_a_constant_that_overflows_the_format_is_refused_as_torch_refuses_it(
        fmt: str, val: float) -> None:
    """Inputs: constants just past each format's largest finite value (65505 and
    3.3895314e38 would round down to fp16's and bf16's largest; torch refuses them all
    the same).
    Expected: torch's fill_ raises, ampref raises ValueError naming value and format.
    Pass: both raise."""
    torch = pytest.importorskip("torch")
    with pytest.raises(RuntimeError, match="overflow"):
        torch.nn.init.constant_(torch.zeros(2, dtype=getattr(torch, fmt)), val)
    with pytest.raises(ValueError, match=f"overflows {fmt}"):
        init.constant_(ampref.zeros(2, dtype=fmt), val)


def _torch_sample(torch: Any, fn: str, shape: tuple[int, ...], **kw: Any) -> np.ndarray:
    torch.manual_seed(0)
    t = torch.empty(shape)
    getattr(torch.nn.init, fn)(t, **kw)
    return t.numpy()


def _ampref_sample(fn: str, shape: tuple[int, ...], **kw: Any) -> np.ndarray:
    ampref.manual_seed(0)
    t = ampref.zeros(*shape)
    assert getattr(init, fn)(t, **kw) is t
    return t.numpy()


#: (initialiser, shape, arguments, kind, bound or std by torch's documented formula);
#: fans of a (out, in, k, k) tensor: fan_in = in * k * k, fan_out = out * k * k
CASES = [
    ("uniform_", (300, 400), {"a": -0.5, "b": 1.5}, "uniform", (-0.5, 1.5)),
    ("normal_", (300, 400), {"mean": 0.25, "std": 0.02}, "normal", (0.25, 0.02)),
    ("xavier_uniform_", (300, 400), {"gain": 5 / 3}, "uniform",
     (-(b := 5 / 3 * math.sqrt(6 / 700)), b)),
    ("xavier_normal_", (64, 32, 3, 3), {}, "normal", (0.0, math.sqrt(2 / (96 * 9)))),
    ("kaiming_uniform_", (300, 400), {"a": math.sqrt(5)}, "uniform",
     (-(b := math.sqrt(6 / (1 + 5)) / math.sqrt(400)), b)),
    ("kaiming_normal_", (64, 32, 3, 3), {"mode": "fan_out", "nonlinearity": "relu"},
     "normal", (0.0, math.sqrt(2) / math.sqrt(64 * 9))),
]


def _check_distribution(x: np.ndarray, kind: str, params: tuple[float, float],
                        who: str) -> None:
    """Uniform: every value in [lo, hi], the extremes within 0.1% of the range of the
    ends, the mean within 5 sampling sigmas. Normal: mean and std within 5 sampling
    sigmas (n >= 73,728, so 5 sigmas of the std are under 1.4%)."""
    n = x.size
    if kind == "uniform":
        lo, hi = params
        span = hi - lo
        assert lo <= x.min() and x.max() <= hi, f"{who}: outside [{lo}, {hi}]"
        assert x.min() - lo < 1e-3 * span and hi - x.max() < 1e-3 * span, who
        mean, sd = (lo + hi) / 2, span / math.sqrt(12)
    else:
        mean, sd = params
    assert abs(x.mean() - mean) < 5 * sd / math.sqrt(n), f"{who}: mean {x.mean()}"
    assert abs(x.std() / sd - 1) < 5 / math.sqrt(2 * n) + (kind == "uniform") * 0.01, \
        f"{who}: std {x.std()} vs {sd}"


@pytest.mark.clause("ENG-INI-001", "ENG-RNG-001")
@pytest.mark.parametrize("fn, shape, kw, kind, params", CASES, ids=[c[0] for c in CASES])
def test_random_initialisers_have_torchs_distributions(fn: str, shape: tuple[int, ...],
                                                       kw: dict[str, Any], kind: str,
                                                       params: tuple[float, float]) -> None:
    """Inputs: each random initialiser on a tensor of >= 73,728 elements, seed 0.
    Expected: the distribution torch documents (uniform bounds or normal mean/std from
    the gain and fan formulas written out in CASES), satisfied by torch's own sample
    (which checks the formula) and by ampref's. Pass: range and moment checks."""
    torch = pytest.importorskip("torch")
    _check_distribution(_torch_sample(torch, fn, shape, **kw), kind, params, f"torch {fn}")
    _check_distribution(_ampref_sample(fn, shape, **kw), kind, params, f"ampref {fn}")


@pytest.mark.clause("ENG-INI-001")
@pytest.mark.parametrize("mean, std, a, b", [(0.0, 0.02, -0.04, 0.04), (0.0, 1.0, -2.0, 2.0),
                                             (1.0, 1.0, 1.5, 4.0), (0.0, 1.0, -0.1, 0.1)])
def test_trunc_normal_stays_in_range_with_the_truncated_normals_moments(
        mean: float, std: float, a: float, b: float) -> None:
    """Inputs: 300x400 tensors; four truncations (two sigma, a one-sided window, a
    narrow one). Expected: every value in [a, b]; mean and std those of the truncated
    normal (closed form with phi/Phi), within 5 sampling sigmas, for torch's sample and
    ampref's. Pass: range and moment checks."""
    torch = pytest.importorskip("torch")
    al, be = (a - mean) / std, (b - mean) / std
    phi = [math.exp(-v * v / 2) / math.sqrt(2 * math.pi) for v in (al, be)]
    mass = 0.5 * (math.erf(be / math.sqrt(2)) - math.erf(al / math.sqrt(2)))
    mu = mean + std * (phi[0] - phi[1]) / mass
    var = std**2 * (1 + (al * phi[0] - be * phi[1]) / mass - ((phi[0] - phi[1]) / mass)**2)
    kw = {"mean": mean, "std": std, "a": a, "b": b}
    for who, x in (("torch", _torch_sample(torch, "trunc_normal_", (300, 400), **kw)),
                   ("ampref", _ampref_sample("trunc_normal_", (300, 400), **kw))):
        assert np.float32(a) <= x.min() and x.max() <= np.float32(b), who
        assert abs(x.mean() - mu) < 5 * math.sqrt(var / x.size), f"{who}: mean {x.mean()}"
        assert abs(x.var() / var - 1) < 5 * math.sqrt(2 / x.size) * 1.5, f"{who}: var"


@pytest.mark.clause("ENG-INI-001", "ENG-RNG-001")
def test_a_seed_fixes_every_initialised_value_and_a_generator_keeps_its_own_stream() -> None:
    """Inputs: normal_ on a 5x7 tensor after manual_seed(3), twice; then with an
    explicit Generator(3) between global draws. Expected: equal bits twice; the explicit
    generator's values equal the global ones at the same seed and leave the global
    counter alone. Pass: bitwise."""
    first = _ampref_sample_seeded(3)
    assert_bitwise_equal(_ampref_sample_seeded(3), first)
    ampref.manual_seed(11)
    before = default_generator().counter
    t = init.normal_(ampref.zeros(5, 7), generator=ampref.Generator(3))
    assert default_generator().counter == before
    assert_bitwise_equal(t.numpy(), first)


def _ampref_sample_seeded(seed: int) -> np.ndarray:
    ampref.manual_seed(seed)
    return init.normal_(ampref.zeros(5, 7)).numpy()


@pytest.mark.clause("ENG-INI-001")
def test_samples_are_rounded_once_more_to_a_low_precision_tensors_format() -> None:
    """Inputs: normal_(std=0.02) into a float32 and a bfloat16 tensor at the same seed.
    Expected: the bf16 values are the float32 samples rounded to bf16 (ml_dtypes as the
    oracle). Pass: bitwise."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    ampref.manual_seed(5)
    f32 = init.normal_(ampref.zeros(64, 64), std=0.02).numpy()
    ampref.manual_seed(5)
    bf16 = init.normal_(ampref.zeros(64, 64, dtype="bfloat16"), std=0.02).numpy()
    assert_bitwise_equal(bf16, f32.astype(ml_dtypes.bfloat16).astype(np.float32))


@pytest.mark.clause("ENG-INI-001", "API-ERR-001")
@pytest.mark.parametrize("call, error, match", [
    (lambda: init.normal_(np.zeros(3)),  # type: ignore[arg-type]
     TypeError, "floating-point ampref.Tensor"),
    (lambda: init.zeros_(ampref.tensor([1, 2])), TypeError, "got IndexTensor"),
    (lambda: init.zeros_(nn.Parameter(np.ones(2)) * 2), ValueError, "computed by 'mul'"),
    (lambda: init.normal_(ampref.zeros(2), std=-1.0), ValueError, "std must be >= 0"),
    (lambda: init.uniform_(ampref.zeros(2), a=math.nan), ValueError, "a must be finite"),
    (lambda: init.trunc_normal_(ampref.zeros(2), a=1.0, b=0.0), ValueError, "a must be <= b"),
    (lambda: init.trunc_normal_(ampref.zeros(2), a=5.0, b=6.0), ValueError, "less than"),
    (lambda: init.trunc_normal_(ampref.zeros(2), mean=5.0, std=0.0, a=0.0, b=1.0), ValueError,
     r"holds 0 of N\(5.0, 0.0\^2\)"),
    (lambda: init.eye_(ampref.zeros(2, 2, 2)), ValueError, "2-D"),
    (lambda: init.uniform_(ampref.zeros(2), a=2.0, b=1.0), ValueError, "a <= b"),
    (lambda: init.uniform_(ampref.zeros(2), a=-1e39, b=0.0), ValueError, "float32's range"),
    (lambda: init.xavier_uniform_(ampref.zeros(2, 2), gain=1e300), ValueError,
     "float32's range"),
    (lambda: init.calculate_gain("relu", "x"),  # type: ignore[arg-type]
     ValueError, "param must be a real number"),
    (lambda: init.kaiming_normal_(ampref.zeros(2, 2), a=None),  # type: ignore[arg-type]
     TypeError, "kaiming_normal_ a"),
    (lambda: init.normal_(ampref.zeros(2), generator=3),  # type: ignore[arg-type]
     TypeError, "Generator"),
])
def test_bad_tensors_and_arguments_are_refused_naming_the_problem(call: Any, error: Any,
                                                                  match: str) -> None:
    """Inputs: a NumPy array, an integer tensor, a tensor with a graph, a negative std,
    a NaN bound, an empty or hopeless truncation (a point mass outside [a, b] among
    them), a 3-D eye_, uniform bounds reversed or past float32 (torch refuses both), a
    non-numeric gain parameter or slope, a non-Generator. Expected:
    the error type with the message naming the problem. Pass: raises."""
    with pytest.raises(error, match=match):
        call()


@pytest.mark.clause("ENG-INI-001")
def test_an_empty_tensor_is_returned_unchanged_and_draws_nothing() -> None:
    """Inputs: (0, 3) and (0, 0) tensors through every initialiser. Expected: the same
    tensor back, no draw from the generator (counter unchanged). Pass: exact."""
    ampref.manual_seed(2)
    for shape in ((0, 3), (0, 0)):
        for fn in ("uniform_", "normal_", "trunc_normal_", "xavier_uniform_",
                   "xavier_normal_", "kaiming_uniform_", "kaiming_normal_", "zeros_"):
            t = ampref.zeros(*shape)
            assert getattr(init, fn)(t) is t and t.shape == shape
    assert default_generator().counter == 0


@pytest.mark.clause("ENG-INI-001")
def test_trunc_normal_with_zero_std_inside_the_range_is_the_mean_everywhere() -> None:
    """Inputs: trunc_normal_(mean=0.5, std=0, a=0, b=1) on 4 elements. Expected: every
    value 0.5 (a point mass inside [a, b] is accepted at once). Pass: exact."""
    t = init.trunc_normal_(ampref.zeros(4), mean=0.5, std=0.0, a=0.0, b=1.0)
    assert t.numpy().tolist() == [0.5] * 4


@pytest.mark.clause("ENG-INI-001")
def test_a_leaky_relu_slope_whose_square_overflows_gives_the_limit_gain_zero() -> None:
    """Inputs: calculate_gain('leaky_relu', ±1e300) (torch's slope**2 raises
    OverflowError there). Expected: sqrt(2 / (1 + inf)) = 0.0. Pass: exact."""
    assert init.calculate_gain("leaky_relu", 1e300) == 0.0
    assert init.calculate_gain("leaky_relu", -1e300) == 0.0
