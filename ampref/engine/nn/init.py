"""``ampref.nn.init``: torch.nn.init's initialisers, in place, with torch's names,
signatures, gains and fan rules (ENG-INI-001).

Each function overwrites a float tensor's values and returns the tensor. Random ones draw
from ``generator`` (default: the global generator of ``ampref.manual_seed``), so a seed
fixes every weight on every backend; the numbers are ampref's counter-based hash, not
torch's Mersenne twister (ENG-RNG-001). Values are float32 samples rounded once more to
the tensor's format: a bf16 tensor holds ``fl_bf16(fl_32(sample))``, as torch's float
sampling and cast give. Constants go through float32 first, as torch's ``fill_`` does
(ENG-PRM-001): NaN and ±inf are stored as given, ``-0.0`` keeps its sign, a value past
the format's range becomes ±inf and one below its smallest subnormal ±0.

A tensor computed by an op (one with a graph) is refused: overwriting it would change
values its backward has saved. A tensor with no elements is returned unchanged.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ampref.common.checks import check_real
from ..creation import resolve_generator
from ..rng import Generator
from ..tensor import Tensor, round_to

__all__ = ["calculate_gain", "constant_", "eye_", "kaiming_normal_", "kaiming_uniform_",
           "normal_", "ones_", "trunc_normal_", "uniform_", "xavier_normal_",
           "xavier_uniform_", "zeros_"]

#: torch.nn.init's recommended gains (torch/nn/init.py): the layer kinds whose output
#: is not squashed have gain 1; tanh 5/3; relu sqrt(2); selu 3/4 (found empirically,
#: pytorch/pytorch#50664); leaky_relu depends on its slope (see calculate_gain)
GAINS: dict[str, float] = {
    **dict.fromkeys(("linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d",
                     "conv_transpose2d", "conv_transpose3d", "sigmoid"), 1.0),
    "tanh": 5.0 / 3,
    "relu": math.sqrt(2.0),
    "selu": 3.0 / 4,
}
FAN_MODES = ("fan_in", "fan_out")
F32_MAX = float(np.finfo(np.float32).max)

#: a truncated normal is sampled by redrawing what falls outside [a, b]; a range that
#: keeps less than this share of draws would take too many rounds, and is refused
MIN_TRUNC_MASS = 1e-3
#: rounds of redrawing before giving up: with at least MIN_TRUNC_MASS kept per round, an
#: element survives them all with probability below (1 - 1e-3)^20000 = 2e-9 (a guard
#: against a broken mass check, not a limit a valid call meets)
MAX_TRUNC_ROUNDS = 20_000


def calculate_gain(nonlinearity: str, param: int | float | None = None) -> float:
    """torch's gain for ``nonlinearity``; ``leaky_relu``'s is sqrt(2 / (1 + slope^2))
    with ``param`` the slope (default 0.01).

    Raises:
        ValueError: an unknown nonlinearity (the choices named), or a slope that is not
            a real number (a bool included).
    """
    if nonlinearity == "leaky_relu":
        if param is None:
            slope: float = 0.01
        elif isinstance(param, bool) or not isinstance(param, (int, float)):
            raise ValueError(f"calculate_gain('leaky_relu', param): the negative slope must "
                             f"be an int or float, got {param!r}")
        else:
            slope = param
        # torch's slope**2; a slope whose square overflows gives the limit, gain 0
        square = slope**2 if abs(slope) < 1e150 else math.inf
        return math.sqrt(2.0 / (1 + square))
    if param is not None and (isinstance(param, bool) or not isinstance(param, (int, float))):
        raise ValueError(f"calculate_gain: param must be a real number or None, got {param!r}")
    if nonlinearity not in GAINS:
        raise ValueError(f"calculate_gain: unsupported nonlinearity {nonlinearity!r}; choices: "
                         f"{', '.join([*GAINS, 'leaky_relu'])}")
    return GAINS[nonlinearity]


def uniform_(tensor: Tensor, a: float = 0.0, b: float = 1.0,
             generator: Generator | None = None) -> Tensor:
    """Values a + (b - a) * u, u uniform in [0, 1) on a 2^-24 grid (Generator.uniform).

    Raises:
        ValueError: ``a > b``, or a bound beyond float32's finite range (the samples are
            float32 values; torch refuses both too).
    """
    t = _target(tensor, "uniform_")
    lo, hi = check_real("uniform_ a", a), check_real("uniform_ b", b)
    if lo > hi:
        raise ValueError(f"uniform_ needs a <= b, got a={lo!r}, b={hi!r}")
    if max(abs(lo), abs(hi)) > F32_MAX:
        raise ValueError(f"uniform_ bounds must lie within float32's range (±{F32_MAX!r}), "
                         f"got a={lo!r}, b={hi!r}")
    return _store(t, resolve_generator(generator).uniform(t.shape, lo, hi))


def normal_(tensor: Tensor, mean: float = 0.0, std: float = 1.0,
            generator: Generator | None = None) -> Tensor:
    """Values mean + std * z, z standard normal (Generator.normal)."""
    t = _target(tensor, "normal_")
    mu, sd = check_real("normal_ mean", mean), _std("normal_", std)
    return _store(t, resolve_generator(generator).normal(t.shape, sd, mu))


def trunc_normal_(tensor: Tensor, mean: float = 0.0, std: float = 1.0, a: float = -2.0,
                  b: float = 2.0, generator: Generator | None = None) -> Tensor:
    """Values of N(mean, std^2) that lie in [a, b]: every element is drawn, then those
    whose float32 value falls outside [fl32(a), fl32(b)] are drawn again (in element
    order, from the next counters) until none is left. torch samples by inverse CDF
    instead; both give the truncated normal distribution, not the same numbers.

    Raises:
        ValueError: ``a > b``, ``std < 0``, or [a, b] holds less than 0.1% of the
            distribution (rejection would not end in reasonable time).
    """
    t = _target(tensor, "trunc_normal_")
    mu, sd = check_real("trunc_normal_ mean", mean), _std("trunc_normal_", std)
    lo, hi = check_real("trunc_normal_ a", a), check_real("trunc_normal_ b", b)
    if lo > hi:
        raise ValueError(f"trunc_normal_: a must be <= b, got a={lo!r}, b={hi!r}")
    mass = _normal_mass(mu, sd, lo, hi)
    if mass < MIN_TRUNC_MASS:
        raise ValueError(f"trunc_normal_: [{lo!r}, {hi!r}] holds {mass:.3g} of N({mu!r}, "
                         f"{sd!r}^2), less than {MIN_TRUNC_MASS}: move a, b or the mean")
    gen = resolve_generator(generator)
    with np.errstate(over="ignore"):  # a bound past float32's range rounds to ±inf
        lo32, hi32 = np.float32(lo), np.float32(hi)
    values = gen.normal(t.shape, sd, mu).reshape(-1)
    outside = np.flatnonzero((values < lo32) | (values > hi32))
    for _ in range(MAX_TRUNC_ROUNDS):
        if not outside.size:
            return _store(t, values.reshape(t.shape))
        values[outside] = gen.normal((outside.size,), sd, mu)
        outside = outside[(values[outside] < lo32) | (values[outside] > hi32)]
    raise RuntimeError(f"trunc_normal_: {outside.size} samples still outside [{lo!r}, {hi!r}] "
                       f"after {MAX_TRUNC_ROUNDS} rounds")


def constant_(tensor: Tensor, val: float) -> Tensor:
    """Every element ``val`` (through float32, then the tensor's format).

    Raises:
        ValueError: a finite ``val`` beyond the format's largest finite value, even one
            that would round down to it (torch's ``fill_`` refuses the same values).
    """
    t = _target(tensor, "constant_")
    v = check_real("constant_ val", val, finite=False)
    _check_fits(v, t)
    return _store(t, np.full(t.shape, v, dtype=np.float64))


def ones_(tensor: Tensor) -> Tensor:
    return constant_(tensor, 1.0)


def zeros_(tensor: Tensor) -> Tensor:
    return constant_(tensor, 0.0)


def eye_(tensor: Tensor) -> Tensor:
    """The identity matrix (ones on the main diagonal) of a 2-D tensor's shape.

    Raises:
        ValueError: the tensor is not 2-D.
    """
    t = _target(tensor, "eye_")
    if t.ndim != 2:
        raise ValueError(f"eye_ needs a 2-D tensor, got shape {t.shape}")
    return _store(t, np.eye(*t.shape, dtype=np.float64))


def xavier_uniform_(tensor: Tensor, gain: float = 1.0,
                    generator: Generator | None = None) -> Tensor:
    """U(-bound, bound), bound = gain * sqrt(6 / (fan_in + fan_out)) (Glorot & Bengio)."""
    t = _target(tensor, "xavier_uniform_")
    if t.numel() == 0:
        return t
    bound = math.sqrt(3.0) * _xavier_std(t, gain, "xavier_uniform_")
    return uniform_(t, -bound, bound, generator)


def xavier_normal_(tensor: Tensor, gain: float = 1.0,
                   generator: Generator | None = None) -> Tensor:
    """N(0, std^2), std = gain * sqrt(2 / (fan_in + fan_out))."""
    t = _target(tensor, "xavier_normal_")
    if t.numel() == 0:
        return t
    return normal_(t, 0.0, _xavier_std(t, gain, "xavier_normal_"), generator)


def kaiming_uniform_(tensor: Tensor, a: float = 0, mode: str = "fan_in",
                     nonlinearity: str = "leaky_relu",
                     generator: Generator | None = None) -> Tensor:
    """U(-bound, bound), bound = sqrt(3) * gain / sqrt(fan) (He et al.), gain =
    calculate_gain(nonlinearity, a), fan by ``mode``."""
    t = _target(tensor, "kaiming_uniform_")
    if t.numel() == 0:
        return t
    bound = math.sqrt(3.0) * _kaiming_std(t, a, mode, nonlinearity, "kaiming_uniform_")
    return uniform_(t, -bound, bound, generator)


def kaiming_normal_(tensor: Tensor, a: float = 0, mode: str = "fan_in",
                    nonlinearity: str = "leaky_relu",
                    generator: Generator | None = None) -> Tensor:
    """N(0, std^2), std = gain / sqrt(fan)."""
    t = _target(tensor, "kaiming_normal_")
    if t.numel() == 0:
        return t
    return normal_(t, 0.0, _kaiming_std(t, a, mode, nonlinearity, "kaiming_normal_"),
                   generator)


# -- helpers ---------------------------------------------------------------------------

def _target(tensor: Any, fn: str) -> Tensor:
    if not isinstance(tensor, Tensor):
        raise TypeError(f"nn.init.{fn} takes a floating-point ampref.Tensor, got "
                        f"{type(tensor).__name__}")
    if tensor.node is not None:
        raise ValueError(f"nn.init.{fn}: the tensor was computed by {tensor.node.op!r}; "
                         f"overwriting it would change values its backward saved "
                         f"(initialise a leaf tensor or parameter)")
    return tensor


def _store(t: Tensor, values: Any) -> Tensor:
    """Overwrite ``t``'s values with ``values`` rounded to its format (ENG-RND-001's
    rounding: float32 first, then the format)."""
    if t.numel() == 0:
        return t
    t.data = round_to(t.backend, t.backend.asarray(values), t.format)
    return t


def _check_fits(v: float, t: Tensor) -> None:
    """torch's overflow rule for a filled constant (its ``fill_`` of two or more
    elements): a finite value beyond the format's largest finite value is refused, even
    one that would round down to it (torch fills a one-element tensor by another path
    that rounds it; ampref follows the general rule)."""
    if math.isfinite(v) and abs(v) > t.format.max:
        raise ValueError(f"nn.init.constant_: {v!r} overflows {t.format.name}, whose largest "
                         f"finite value is {t.format.max!r}")


def _std(fn: str, std: Any) -> float:
    return check_real(f"{fn} std", std, lo=0.0)


def _fans(t: Tensor, fn: str) -> tuple[int, int]:
    """torch's fans: dim 1 (inputs) and dim 0 (outputs), each times the product of the
    remaining dims (a convolution's receptive field)."""
    if t.ndim < 2:
        raise ValueError(f"nn.init.{fn}: fan in and fan out need a tensor of at least 2 "
                         f"dimensions, got shape {t.shape}")
    field = math.prod(t.shape[2:])
    return t.shape[1] * field, t.shape[0] * field


def _xavier_std(t: Tensor, gain: Any, fn: str) -> float:
    fan_in, fan_out = _fans(t, fn)
    return check_real(f"{fn} gain", gain) * math.sqrt(2.0 / float(fan_in + fan_out))


def _kaiming_std(t: Tensor, a: Any, mode: Any, nonlinearity: str, fn: str) -> float:
    if not isinstance(mode, str) or mode.lower() not in FAN_MODES:
        raise ValueError(f"nn.init.{fn}: mode {mode!r} is not one of {', '.join(FAN_MODES)}")
    fan_in, fan_out = _fans(t, fn)
    fan = fan_in if mode.lower() == "fan_in" else fan_out
    return calculate_gain(nonlinearity, check_real(f"{fn} a", a)) / math.sqrt(fan)


def _normal_mass(mean: float, std: float, a: float, b: float) -> float:
    """P(a <= X <= b) for X ~ N(mean, std^2); a point mass when std is 0."""
    if std == 0:
        return 1.0 if a <= mean <= b else 0.0
    cdf = [0.5 * math.erfc(-(x - mean) / (std * math.sqrt(2.0))) for x in (a, b)]
    return cdf[1] - cdf[0]
