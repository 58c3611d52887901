"""Elementwise ops: + - * / ** with broadcasting and weak Python scalars, the unary
functions, masked_fill and dropout (ENG-RND-001, ENG-PRM-001, ENG-DRP-001).

Every op computes in float32 (float64 for float64 tensors) and rounds once to the output
format; transcendentals are evaluated in float64 first. Derivatives use the same rules,
and gradients of broadcast operands are reduced with exactly rounded sums.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from ampref.backends import Backend  # type: ignore[attr-defined]  # mapped from backends/
from ampref.common.checks import check_flag
from ampref.common.smoothfn import sigmoid as sigmoid64
from ampref.formats.table import Format
from ..indices import IndexTensor
from ..tensor import Tensor, round_to, storage_dtype
from .core import (SCALAR_TYPES, autocast_inputs, backend_of, check_tensor, index_data, make,
                   promote, shape_of, sum_to, to_format, wide_math)

__all__ = ["add", "div", "dropout", "exp", "gelu", "log", "masked_fill", "mul", "neg", "pow",
           "relu", "rsqrt", "sigmoid", "silu", "sqrt", "sub", "tanh"]

Forward = Callable[[Backend, Format, Any, Any], Any]
Grads = Callable[[Backend, Format, Any, Any, Any], tuple[Any, Any]]


# -- binary ops --------------------------------------------------------------------------

def _integer_operand(op: str, a: Any, b: Any) -> tuple[Any, Any, Any]:
    """An integer or bool tensor beside a float tensor, set apart: as torch promotes it,
    it takes the float operand's format (after autocast) and carries no gradient."""
    if isinstance(a, IndexTensor) and isinstance(b, Tensor):
        return None, b, a
    if isinstance(b, IndexTensor) and isinstance(a, Tensor):
        return a, None, b
    return a, b, None


def _as_float(ints: IndexTensor, fmt: Format) -> Tensor:
    """int64/bool -> ``fmt`` as torch converts: to float32 (float64 for float64) with one
    rounding, then to the format: the float32 step rounds integers past 2^24. Never
    through float64 for a narrower format: past 2^53 that would round twice."""
    be = ints.backend
    wide = ints.data.astype(be.xp.float64 if fmt.wide else be.xp.float32)
    return Tensor(round_to(be, wide, fmt), fmt, backend=be)


def _binary_inputs(op: str, a: Any, b: Any) -> tuple[Any, Any, Format, Any]:
    """Cast tensor inputs to the common compute format; scalars become weak constants;
    an integer tensor takes the float tensor's format."""
    a, b, ints = _integer_operand(op, a, b)
    if ints is not None:
        t, u, fmt, be = _binary_inputs(op, *((a, 0.0) if a is not None else (0.0, b)))
        conv = _as_float(ints, fmt)
        return (t, conv, fmt, be) if a is not None else (conv, u, fmt, be)
    ta, tb = isinstance(a, Tensor), isinstance(b, Tensor)
    if not (ta or tb):
        raise TypeError(f"{op} needs at least one ampref.Tensor, got {type(a).__name__} and "
                        f"{type(b).__name__}")
    for v in (a, b):
        if not isinstance(v, Tensor) and not isinstance(v, SCALAR_TYPES):
            raise TypeError(f"{op}: operand must be an ampref.Tensor or a real number, got "
                            f"{type(v).__name__}")
    be = backend_of(a, b)
    tensors = [t for t in (a, b) if isinstance(t, Tensor)]
    tensors, _, _ = autocast_inputs(op, tensors)
    it = iter(tensors)
    a = next(it) if ta else a
    b = next(it) if tb else b
    fmt = promote([t.format for t in (a, b) if isinstance(t, Tensor)])
    if ta and a.format != fmt:
        a = to_format(a, fmt)
    if tb and b.format != fmt:
        b = to_format(b, fmt)
    return a, b, fmt, be


def _val(be: Backend, v: Any, fmt: Format) -> Any:
    if isinstance(v, Tensor):
        return v.data
    return storage_dtype(fmt)(v) if fmt.wide else np.float32(v)


def _parents(*vs: Any) -> list[Tensor]:
    return [v for v in vs if isinstance(v, Tensor)]


def _grads_for(a: Any, b: Any, ga: Any, gb: Any) -> tuple[Any, ...]:
    out = []
    if isinstance(a, Tensor):
        out.append(ga)
    if isinstance(b, Tensor):
        out.append(gb)
    return tuple(out)


def _binary(op: str, input: Any, other: Any, forward: Forward, grads: Grads) -> Tensor:
    """out = fl_out(forward(be, fmt, x, y)); ``grads(be, fmt, g, x, y)`` gives the two
    operand gradients (None for one that needs none) before their reduction to the
    operands' shapes. The binary twin of :func:`_unary`."""
    a, b, fmt, be = _binary_inputs(op, input, other)
    x, y = _val(be, a, fmt), _val(be, b, fmt)
    with np.errstate(all="ignore"):
        out = round_to(be, forward(be, fmt, x, y), fmt)

    def bwd(g: Any) -> tuple[Any, ...]:
        with np.errstate(all="ignore"):
            ga, gb = grads(be, fmt, g, x, y)
        # only a tensor operand's gradient is reduced: a scalar's would be an exact sum
        # of the whole gradient, computed to be dropped
        return _grads_for(a, b, sum_to(be, ga, shape_of(x)) if isinstance(a, Tensor) else None,
                          sum_to(be, gb, shape_of(y)) if isinstance(b, Tensor)
                          and gb is not None else None)
    return make(be, out, fmt, op, _parents(a, b), bwd)


def add(input: Any, other: Any) -> Tensor:
    """input + other (broadcasting)."""
    return _binary("add", input, other, lambda be, f, x, y: x + y,
                   lambda be, f, g, x, y: (g, g))


def sub(input: Any, other: Any) -> Tensor:
    """input - other (broadcasting)."""
    return _binary("sub", input, other, lambda be, f, x, y: x - y,
                   lambda be, f, g, x, y: (g, -g))


def mul(input: Any, other: Any) -> Tensor:
    """input * other (broadcasting)."""
    return _binary("mul", input, other, lambda be, f, x, y: x * y,
                   lambda be, f, g, x, y: (g * y, g * x))


def div(input: Any, other: Any) -> Tensor:
    """input / other (broadcasting); x/0 = ±inf, 0/0 = NaN."""
    return _binary("div", input, other, lambda be, f, x, y: x / y,
                   lambda be, f, g, x, y: (g / y, -(g * x) / (y * y)))


def _power(xp: Any, u: Any, v: Any) -> Any:
    return xp.power(u, v)


def pow(input: Any, exponent: Any) -> Tensor:
    """input ** exponent. Autocast name ``pow`` (fp32 under torch-cuda). x^p computed in
    float64; the exponent's gradient only where the exponent is a tensor."""
    need_b = isinstance(exponent, Tensor)

    def grads(be: Backend, fmt: Format, g: Any, x: Any, y: Any) -> tuple[Any, Any]:
        ga = g * (y * wide_math(be, fmt, _power, x, y - 1))
        gb = g * wide_math(be, fmt, lambda xp, u, v: xp.power(u, v) * xp.log(u), x, y) \
            if need_b else None
        return ga, gb
    return _binary("pow", input, exponent, lambda be, f, x, y: wide_math(be, f, _power, x, y),
                   grads)


def neg(input: Tensor) -> Tensor:
    """-input (exact)."""
    x = check_tensor(input, "neg")
    return make(x.backend, -x.data, x.format, "neg", [x], lambda g: (-g,))


def masked_fill(input: Tensor, mask: Any, value: float) -> Tensor:
    """Where ``mask`` (bool array, broadcast) is True the value (rounded to x's format).

    Raises:
        TypeError: ``mask`` is not boolean.
    """
    x = check_tensor(input, "masked_fill")
    be = x.backend
    m = be.xp.asarray(index_data(mask))
    if m.dtype != bool:
        raise TypeError(f"masked_fill needs a boolean mask, got dtype {m.dtype}")
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"masked_fill value must be a real number, got {value!r}")
    fill = round_to(be, be.xp.asarray([value], dtype=be.xp.float64), x.format)[0]
    out = be.xp.where(m, fill, x.data).astype(x.data.dtype)

    def bwd(g: Any) -> tuple[Any]:
        return (sum_to(be, be.xp.where(m, 0, g).astype(g.dtype), x.shape),)
    return make(be, out, x.format, "masked_fill", [x], bwd)


# -- unary ops ----------------------------------------------------------------------------

def unary(op: str, x: Tensor, f: Any, df: Any, *, exact: bool = False,
          storage: bool = False) -> Tensor:
    """y = fl_out(f(x)); df(g, x, y) gives the input gradient. ``f`` runs in float64
    (transcendentals); ``storage`` ops run it in the storage dtype's own IEEE arithmetic
    (float32: a division, a product); ``exact`` ops (whose result is already a value of
    x's format) skip the final rounding too."""
    x = check_tensor(x, op)
    (x,), _, _ = autocast_inputs(op, [x])
    be, fmt = x.backend, x.format
    if exact or storage:
        with np.errstate(all="ignore"):  # 1/0 = inf, inf * 0 = NaN: the defined results
            out = f(be.xp, x.data)
        out = out if exact else round_to(be, out, fmt)
    else:
        out = round_to(be, wide_math(be, fmt, f, x.data), fmt)
    xv = x.data

    def bwd(g: Any) -> tuple[Any]:
        with np.errstate(all="ignore"):
            return (df(g, xv, out),)
    return make(be, out, fmt, op, [x], bwd)


def exp(input: Tensor) -> Tensor:
    """e^x; exp(inf) = inf, exp(-inf) = 0, overflow -> inf."""
    return unary("exp", input, lambda xp, v: xp.exp(v), lambda g, x, y: g * y)


def log(input: Tensor) -> Tensor:
    """ln x; log(0) = -inf, log(<0) = NaN."""
    return unary("log", input, lambda xp, v: xp.log(v), lambda g, x, y: g / x)


def tanh(input: Tensor) -> Tensor:
    return unary("tanh", input, lambda xp, v: xp.tanh(v), lambda g, x, y: g * (1 - y * y))


def sigmoid(input: Tensor) -> Tensor:
    """1 / (1 + e^-x), evaluated in float64 without overflow or cancellation
    (``ampref.common.smoothfn.sigmoid``): sigmoid(-88) is 6.1e-39, not 0."""
    return unary("sigmoid", input, sigmoid64,
                  lambda g, x, y: g * (y * (1 - y)))


def silu(input: Tensor) -> Tensor:
    """x * sigmoid(x) (torch's SiLU/swish, the gate of SwiGLU), evaluated in float64 with
    the overflow-free sigmoid: silu(-inf) = NaN (-inf * 0, as torch), silu(inf) = inf,
    silu(±0) = ±0, silu(-100) = -3.7e-42 (a float32 subnormal), not -0. The gradient is
    s (1 + x (1 - s)), s = sigmoid(x), in float64 then float32."""
    x = check_tensor(input, "silu")

    def ds(g: Any, xv: Any, y: Any) -> Any:
        d = wide_math(x.backend, x.format, lambda xp, v: sigmoid64(xp, v) * (
            1.0 + v * sigmoid64(xp, -v)), xv)
        return g * d
    return unary("silu", x, lambda xp, v: v * sigmoid64(xp, v), ds)


def sqrt(input: Tensor) -> Tensor:
    """Square root, correctly rounded (float64's sqrt of a float32 value is exact enough
    that one rounding to float32 is the IEEE result): sqrt(-0) = -0, sqrt(x < 0) = NaN,
    sqrt(inf) = inf. The gradient is g / (2 y), torch's: inf at 0."""
    return unary("sqrt", input, lambda xp, v: xp.sqrt(v), lambda g, x, y: g / (2 * y))


def rsqrt(input: Tensor) -> Tensor:
    """1 / sqrt(x) in float64, rounded once to float32 then to the output format:
    rsqrt(±0) = ±inf, rsqrt(x < 0) = NaN, rsqrt(inf) = 0. Autocast name ``rsqrt``
    (float32 under torch-cuda). The gradient is -g y^3 / 2, torch's form."""
    return unary("rsqrt", input, lambda xp, v: 1.0 / xp.sqrt(v),
                  lambda g, x, y: -0.5 * g * (y * y * y))


def relu(input: Tensor) -> Tensor:
    """0 where x < 0, else x (exact; torch's definition): relu(-0) = -0, relu(NaN) = NaN.
    The gradient is 0 where x <= 0 and g elsewhere, NaN included, selected rather than
    multiplied, so an inf or NaN gradient at x <= 0 gives 0 (torch's threshold_backward;
    ``g * (x > 0)`` would give NaN there)."""
    xp = check_tensor(input, "relu").backend.xp
    return unary("relu", input, lambda xp_, v: xp_.where(v < 0, v.dtype.type(0), v),
                  lambda g, x, y: xp.where(x <= 0, g.dtype.type(0), g), exact=True)


def gelu(input: Tensor, approximate: str = "none") -> Tensor:
    """x * Phi(x) (``approximate="none"``, erf form) or the tanh approximation, in float64
    without cancellation: Phi(x) = erfc(-x / sqrt 2) / 2 and 1 + tanh(u) = 2 sigmoid(2u)
    (the forms 1 + erf(.) and 1 + tanh(.) lose every digit of a tiny Phi below x = -8:
    gelu(-10) is -7.6e-23, not -0). gelu(-inf) = NaN (-inf * 0), gelu(inf) = inf,
    gelu(±0) = ±0."""
    x = check_tensor(input, "gelu")
    be = x.backend  # erfc comes from the backend: SciPy on the host, cupyx on a GPU
    if approximate == "none":
        def f(xp: Any, v: Any) -> Any:
            return 0.5 * v * be.erfc(-v / math.sqrt(2.0))

        def df(g: Any, xv: Any, y: Any) -> Any:
            d = wide_math(x.backend, x.format,
                          lambda xp, v: 0.5 * be.erfc(-v / math.sqrt(2.0))
                          + v * xp.exp(-0.5 * v * v) / math.sqrt(2.0 * math.pi), xv)
            return g * d
    elif approximate == "tanh":
        c = math.sqrt(2.0 / math.pi)

        def f(xp: Any, v: Any) -> Any:
            return v * sigmoid64(xp, 2.0 * c * (v + 0.044715 * v**3))

        def df(g: Any, xv: Any, y: Any) -> Any:
            def d(xp: Any, v: Any) -> Any:
                u = 2.0 * c * (v + 0.044715 * v**3)
                s, r = sigmoid64(xp, u), sigmoid64(xp, -u)  # (1 + t) / 2, (1 - t) / 2
                return s + 2.0 * v * s * r * c * (1 + 3 * 0.044715 * v * v)
            return g * wide_math(x.backend, x.format, d, xv)
    else:
        raise ValueError(f"gelu approximate must be 'none' or 'tanh', got {approximate!r}")
    return unary("gelu", x, f, df)


def dropout(input: Tensor, p: float = 0.5, training: bool = True, *, seed: int | None = None,
            offset: int = 0) -> Tensor:
    """Zero each element with probability ``p`` and scale the rest by fl32(1/(1-p)).

    Element i (flat, C order) is dropped when ``bits(seed, offset + i) < round(p*2^32)``
    with the counter-based hash of :mod:`ampref.kernels.srhash` (ENG-DRP-001): the same mask
    on every backend. Without ``seed``, one is drawn from the global generator
    (``ampref.manual_seed``) per call, as torch draws from its default generator.
    ``p = 1`` gives ``input * 0`` (zeros; NaN for NaN and ±inf inputs, as torch).
    """
    x = check_tensor(input, "dropout")
    if isinstance(p, bool) or not isinstance(p, (int, float, np.floating)) or not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout probability must be a number in [0, 1], got {p!r}")
    if isinstance(offset, bool) or not isinstance(offset, (int, np.integer)) or offset < 0:
        raise ValueError(f"dropout offset must be an int >= 0, got {offset!r}")
    if not check_flag("training", training) or p == 0.0:
        return x
    be = x.backend
    if p == 1.0:
        return mul(x, 0.0)
    if seed is None:
        from ..creation import default_generator  # the op layer sits below creation

        seed = default_generator().draw_seed()
    bits = be.random_bits(seed, offset, x.numel()).reshape(x.shape)
    # compared in 64 bits: the threshold round(p * 2^32) reaches 2^32 for p > 1 - 2^-33
    keep = bits.astype(np.uint64) >= np.uint64(round(p * 2.0**32))
    scale = storage_dtype(x.format)(1.0 / (1.0 - p))
    with np.errstate(all="ignore"):
        out = round_to(be, x.data * scale * keep, x.format)
    return make(be, out, x.format, "dropout", [x], lambda g: (g * scale * keep,))
