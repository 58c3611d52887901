"""aten's activation functions beyond the basic pointwise table, on ampref's numerics
(``specs/torch.md`` TRC-ACT-001).

Two kinds, as TRC-PWO-001 defines them:

* piecewise-linear ones (``leaky_relu``, ``hardtanh``/ReLU6, ``hardsigmoid``,
  ``hardswish``, ``threshold``, ``_prelu_kernel``) and their derivatives are a few
  float32 operations in the order of torch's CPU kernel, so ampref's value is torch's
  wherever the kernel's vectorised and scalar paths agree. Where they do not (a NaN
  input of ``hardtanh_backward``, ``hardswish_backward`` and ``elu_backward``) the
  vectorised path is the definition: it is what every element but a short tail of each
  tensor takes (torch 2.13's kernels; ``hardswish_backward`` is 0 at x <= -3 and g at
  x >= 3 in both);
* smooth ones (``elu``/SELU/CELU, ``softplus``, ``mish``, ``log_sigmoid``) are the
  function's value evaluated in float64 and rounded to float32, their derivatives
  ``g * fl32(derivative value)``; branch tests (``x <= 0``, ``x beta > threshold``) and
  the linear branches are torch's float32 operations, so the branch taken is torch's.
  Scalar parameters are rounded to the compute format first, as torch's kernels
  convert them (``negcoef = fl32(fl32(alpha) fl32(scale))``).

Zeros: ``elu(-0) = -0`` (``expm1``, as torch), ``leaky_relu(-0) = -0`` (``x slope``),
``log_sigmoid(inf) = +0``, the clamps keep ``x``'s sign (``clamp``). NaN propagates
through every value (the derivatives take torch's vectorised branch for NaN: ``elu``'s
exponential branch, NaN); inf follows each formula (``softplus(inf) = inf``,
``elu(-inf) = -alpha scale``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from ampref.common.smoothfn import sigmoid as sigmoid64

from .convert import from_numpy, meta, to_numpy
from .pointwise import clamp, pointwise, wide

__all__ = ["ACTIVATIONS", "leaky_relu", "leaky_relu_backward"]

Handler = Callable[[Any, Any, tuple[Any, ...], dict[str, Any]], Any]


def _c(x: Any, v: Any) -> Any:
    """A scalar parameter in x's compute format (torch's ``Scalar.to<scalar_t>()``)."""
    return x.dtype.type(v)


# -- piecewise-linear: torch's float32 operations ------------------------------------------
def leaky_relu(x: Any, slope: Any = 0.01) -> Any:
    """``x`` where ``x > 0``, else ``x * fl(slope)`` in x's compute format (``-0`` stays
    ``-0``, NaN stays NaN, ``-inf`` gives ``-inf`` for a positive slope)."""
    return np.where(x > 0, x, x * _c(x, slope))


def leaky_relu_backward(g: Any, x: Any, slope: Any, self_is_result: bool = False) -> Any:
    """``g`` where ``x > 0``, else ``g * fl(slope)`` (a NaN ``x`` takes the slope)."""
    # x is the input or the result: both are > 0 at the same places for slope > 0
    return np.where(x > 0, g, g * _c(g, slope))


def _hardtanh(x: Any, lo: Any = -1.0, hi: Any = 1.0) -> Any:
    return clamp(x, _c(x, lo), _c(x, hi))


def _hardtanh_backward(g: Any, x: Any, lo: Any, hi: Any) -> Any:
    # torch's vectorised mask: (x > lo) & (x < hi), so a NaN x gives +0
    return np.where((x > _c(x, lo)) & (x < _c(x, hi)), g, g.dtype.type(0))


def _relu6_window(x: Any) -> Any:
    """min(max(x + 3, 0), 6) with NaN propagated (torch's vec::maximum/minimum)."""
    return np.minimum(np.maximum(x + _c(x, 3), _c(x, 0)), _c(x, 6))


def _outside(x: Any, lambd: Any) -> Any:
    """x < -lambd or x > lambd (False for NaN): torch's vectorised shrink test."""
    return (x < -_c(x, lambd)) | (x > _c(x, lambd))


def _softshrink(x: Any, lambd: Any = 0.5) -> Any:
    """x - l above l, x + l below -l, NaN kept, else +0 (the vectorised kernel's zero
    vector: softshrink(-0) = +0), float32 steps."""
    lo = _c(x, lambd)
    return np.where(x > lo, x - lo, np.where(x < -lo, x + lo, np.where(
        np.isnan(x), x, _c(x, 0))))


def _hardshrink(x: Any, lambd: Any = 0.5) -> Any:
    return np.where(_outside(x, lambd) | np.isnan(x), x, _c(x, 0))


def _shrink_backward(g: Any, x: Any, lambd: Any) -> Any:
    """g outside [-lambd, lambd], else 0; 0 at a NaN input (the vectorised kernel)."""
    return np.where(_outside(x, lambd), g, _c(g, 0))


def _hardsigmoid(x: Any) -> Any:
    return _relu6_window(x) / _c(x, 6)


def _hardsigmoid_backward(g: Any, x: Any) -> Any:
    # torch's one_sixth is the float32 quotient 1.0f / 6.0f, also for float64 tensors
    sixth = g.dtype.type(np.float32(1) / np.float32(6))
    return np.where((x > _c(x, -3)) & (x < _c(x, 3)), g * sixth, g.dtype.type(0))


def _hardswish(x: Any) -> Any:
    return x * _relu6_window(x) / _c(x, 6)


def _hardswish_backward(g: Any, x: Any) -> Any:
    inner = g * ((x / _c(x, 3)) + _c(x, 0.5))
    return np.where(x <= _c(x, -3), g.dtype.type(0), np.where(x >= _c(x, 3), g, inner))


def _threshold(x: Any, t: Any, value: Any) -> Any:
    return np.where(x <= _c(x, t), _c(x, value), x)


# -- smooth: the function's value in float64, rounded ---------------------------------------
def _elu(x: Any, alpha: Any = 1.0, scale: Any = 1.0, input_scale: Any = 1.0) -> Any:
    c, s = _c(x, alpha) * _c(x, scale), _c(x, input_scale)
    neg = wide(lambda v, s_, c_: np.expm1(v * s_) * c_)(x, s, c)
    return np.where(x > 0, x * _c(x, scale), neg)


def _elu_backward(g: Any, alpha: Any, scale: Any, input_scale: Any, is_result: bool,
                  b: Any) -> Any:
    c, s, pos = _c(g, alpha) * _c(g, scale), _c(g, input_scale), g * _c(g, scale)
    if is_result:  # b is the result: torch's g s (y + c), float32 steps
        return np.where(b > 0, pos, g * s * (b + c))
    d = wide(lambda v, s_, c_: s_ * c_ * np.exp(v * s_))(b, s, c)
    return np.where(b > 0, pos, g * d)


def _softplus(x: Any, beta: Any = 1.0, threshold: Any = 20.0) -> Any:
    b = _c(x, beta)
    smooth = wide(lambda v, b_: np.logaddexp(0.0, v * b_) / b_)(x, b)
    return np.where(x * b > _c(x, threshold), x, smooth)


def _softplus_backward(g: Any, x: Any, beta: Any, threshold: Any) -> Any:
    b = _c(x, beta)
    d = wide(lambda v, b_: sigmoid64(np, v * b_))(x, b)
    return np.where(x * b > _c(x, threshold), g, g * d)


def _mish(x: Any) -> Any:
    return wide(lambda v: v * np.tanh(np.logaddexp(0.0, v)))(x)


def _mish_derivative(v: Any) -> Any:
    t = np.tanh(np.logaddexp(0.0, v))
    return t + v * sigmoid64(np, v) * (1.0 - t * t)


def _mish_backward(g: Any, x: Any) -> Any:
    return g * wide(_mish_derivative)(x)


def _log_sigmoid_backward(g: Any, x: Any, buffer: Any) -> Any:
    # d/dx log sigmoid(x) = sigmoid(-x); torch's buffer holds exp(-|x|), not needed here
    return g * wide(lambda v: sigmoid64(np, -v))(x)


def _log_sigmoid_forward(ctx: Any, func: Any, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
    """(log sigmoid(x), exp(-|x|)): both function values in float64, rounded; the
    second is torch's saved buffer (ampref's backward does not read it)."""
    x = args[0]
    out, buf = meta(func, args, kw)
    v = to_numpy(x).astype(np.float64)
    with np.errstate(all="ignore"):
        y = np.minimum(v, 0.0) - np.log1p(np.exp(-np.abs(v)))
        e = np.exp(-np.abs(v))
    cf = np.float64 if x.dtype == torch.float64 else np.float32
    return from_numpy(y.astype(cf), out.dtype), from_numpy(e.astype(cf), buf.dtype)


def _celu(ctx: Any, func: Any, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
    """celu(x, alpha) = elu(x, alpha, 1, 1/alpha), 1/alpha in double as torch computes it."""
    alpha = args[1] if len(args) > 1 else kw.get("alpha", 1.0)
    if float(alpha) == 0.0:
        raise ValueError(f"ampref.torch.emulate: celu alpha must be nonzero (it divides the "
                         f"input; torch refuses it too), got alpha={alpha!r}")
    return _ELU(ctx, torch.ops.aten.elu.default, (args[0], alpha, 1.0, 1.0 / float(alpha)), {})


def _prelu(ctx: Any, func: Any, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
    return pointwise(lambda x, w: np.where(x > 0, x, w * x))(ctx, func, args, kw)


def _prelu_backward(ctx: Any, func: Any, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
    """(x > 0 ? g : w g, x > 0 ? 0 : x g), both in the broadcast shape (autograd sums the
    second to the weight's shape with an emulated ``sum``)."""
    g, x, w = args
    out_x, out_w = meta(func, args, kw)
    cf = np.float64 if g.dtype == torch.float64 else np.float32
    gv, xv, wv = (to_numpy(t).astype(cf) for t in (g, x, w))
    with np.errstate(all="ignore"):
        gi = np.where(xv > 0, gv, wv * gv)
        gw = np.where(xv > 0, cf(0), xv * gv)
    return (from_numpy(np.broadcast_to(gi, tuple(out_x.shape)), out_x.dtype),
            from_numpy(np.broadcast_to(gw, tuple(out_w.shape)), out_w.dtype))


def _halves(x: torch.Tensor, dim: int) -> tuple[Any, Any, Any]:
    cf = np.float64 if x.dtype == torch.float64 else np.float32
    a, b = np.split(to_numpy(x).astype(cf), 2, axis=dim)
    return a, b, wide(lambda v: sigmoid64(np, v))(b)


def _glu(ctx: Any, func: Any, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
    """glu(x, dim) = a * fl32(sigmoid(b)) for the halves a, b of x along ``dim``."""
    x, dim = args[0], args[1] if len(args) > 1 else kw.get("dim", -1)
    a, _, s = _halves(x, dim)
    with np.errstate(all="ignore"):
        return from_numpy(a * s, meta(func, args, kw).dtype)


def _glu_backward(ctx: Any, func: Any, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
    """(s g, (1 - s) s a g) for the halves, s = fl32(sigmoid(b)), float32 steps in torch's
    order (its kernel computes ((1 - s) s) a g)."""
    g, x = args[:2]
    dim = args[2] if len(args) > 2 else kw.get("dim", -1)
    a, _, s = _halves(x, dim)
    gv = to_numpy(g).astype(s.dtype)
    one = s.dtype.type(1)
    with np.errstate(all="ignore"):
        r = np.concatenate([s * gv, (one - s) * s * a * gv], axis=dim)
    return from_numpy(r, x.dtype)


_ELU = pointwise(_elu)

_FORMULAS: dict[str, Callable[..., Any]] = {
    "leaky_relu": leaky_relu, "leaky_relu_backward": leaky_relu_backward,
    "hardtanh": _hardtanh, "hardtanh_backward": _hardtanh_backward,
    "hardsigmoid": _hardsigmoid, "hardsigmoid_backward": _hardsigmoid_backward,
    "hardswish": _hardswish, "hardswish_backward": _hardswish_backward,
    "threshold": _threshold, "elu_backward": _elu_backward,
    "softplus": _softplus, "softplus_backward": _softplus_backward,
    "mish": _mish, "mish_backward": _mish_backward,
    "log_sigmoid_backward": _log_sigmoid_backward,
    "softshrink": _softshrink, "softshrink_backward": _shrink_backward,
    "hardshrink": _hardshrink,
    "hardshrink_backward": _shrink_backward,
}


def _build() -> dict[str, Handler]:
    table: dict[str, Handler] = {"elu": _ELU, "celu": _celu,
                                 "log_sigmoid_forward": _log_sigmoid_forward,
                                 "_prelu_kernel": _prelu,
                                 "_prelu_kernel_backward": _prelu_backward,
                                 "glu": _glu, "glu_backward": _glu_backward}
    for name, fn in _FORMULAS.items():
        table[name] = pointwise(fn)
    for name in ("leaky_relu", "hardtanh", "hardsigmoid", "hardswish", "threshold", "elu",
                 "mish"):
        if hasattr(torch.ops.aten, name + "_"):  # the in-place forms (inplace=True modules)
            table[name + "_"] = pointwise(_FORMULAS.get(name, _elu), inplace=True)
    table["celu_"] = lambda ctx, func, args, kw: args[0].copy_(_celu(ctx, func, args, kw))
    return table


#: aten op name (overload packet) -> handler
ACTIVATIONS: dict[str, Handler] = _build()
