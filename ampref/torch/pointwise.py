"""aten's pointwise ops, casts, optimizer and GradScaler ops on ampref's numerics
(``specs/torch.md`` TRC-PWO-*).

The engine's elementwise rule (ENG-RND-001) applied to aten's ops: inputs widen exactly
to float32 (float64 for float64 outputs), + - * / are IEEE operations in that format in
the op's formula order, exp/log/tanh/sigmoid/erf/sqrt are evaluated in float64 and
rounded to float32, and the result is rounded once into the output dtype (nearest-even).
Python scalars are rounded to the compute format first (weak scalars, ENG-PRM-001).
Output dtypes and shapes are torch's own (computed on the meta device).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from scipy.special import erf, erfc

from ampref.common.smoothfn import sigmoid as sigmoid64
from ampref.scaling.machine import ScalerConfig, ScalerState, transition

from .convert import from_numpy, is_float, meta, to_numpy
from .fusedops import fused, narrow_table, pow_formula, wide

__all__ = ["POINTWISE", "clamp", "pointwise", "wide"]

Handler = Callable[[Any, Any, tuple[Any, ...], dict[str, Any]], Any]


def _compute_dtype(out: Any) -> Any:
    return np.float64 if out.dtype == torch.float64 else np.float32


def _operands(args: tuple[Any, ...], cf: Any) -> list[Any]:
    """Tensors as arrays of the compute format, Python numbers rounded into it."""
    vals: list[Any] = []
    for a in args:
        if isinstance(a, torch.Tensor):
            v = to_numpy(a)
            vals.append(v.astype(cf) if is_float(a) else v)
        elif isinstance(a, (float, int)) and not isinstance(a, bool):
            vals.append(cf(a))
        else:
            vals.append(a)
    return vals


class _Out:
    """Output dtype and shape of a pointwise op whose tensors share one floating dtype:
    that dtype (Python scalars are weak in torch's promotion), and the broadcast of the
    tensor shapes (the first operand's for in-place ops). Cheaper than the meta device's
    decompositions, which the other cases use."""

    def __init__(self, tensors: list[torch.Tensor], inplace: bool) -> None:
        self.dtype = tensors[0].dtype
        self.shape = tuple(tensors[0].shape) if inplace else tuple(
            torch.broadcast_shapes(*(t.shape for t in tensors)))


def _out(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], inplace: bool) -> Any:
    tensors = [a for a in args if isinstance(a, torch.Tensor)]
    if (tensors and len({t.dtype for t in tensors}) == 1 and tensors[0].dtype.is_floating_point
            and not kwargs.get("dtype")):
        return _Out(tensors, inplace)
    return meta(func, args, kwargs)


def pointwise(fn: Callable[..., Any], *, inplace: bool = False,
              narrow: dict[torch.dtype, Callable[..., Any]] | None = None) -> Handler:
    """A handler computing ``fn`` on the operands and rounding into torch's output;
    ``narrow`` gives another formula for an output dtype whose torch kernel differs."""
    def handler(ctx: Any, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        out = _out(func, args, kwargs, inplace)
        cf = _compute_dtype(out)
        vals = _operands(args, cf)
        kw = {k: (cf(v) if isinstance(v, float) else v) for k, v in kwargs.items()}
        f = (narrow or {}).get(out.dtype, fn)
        with np.errstate(all="ignore"):
            r = np.broadcast_to(f(*vals, **kw), tuple(out.shape))
        result = from_numpy(r, out.dtype)
        if inplace:
            return args[0].copy_(result)
        return result
    return handler


def _add(x: Any, y: Any, alpha: Any = 1) -> Any:
    return x + y if alpha == 1 else fused(alpha, y, x)


def _sub(x: Any, y: Any, alpha: Any = 1) -> Any:
    return x - y if alpha == 1 else fused(-alpha, y, x)


def _div(x: Any, y: Any, rounding_mode: str | None = None,
         r: Callable[[Any], Any] = lambda v: v) -> Any:
    """True division, or truncated / floor division with each step then ``r`` (a 16-bit
    kernel's rounding to its dtype; the identity in float32 and float64)."""
    q = x / y
    if rounding_mode is None:
        return q
    return np.trunc(r(q)) if rounding_mode == "trunc" else _floor_div(x, y, r)


def _floor_div(a: Any, b: Any, r: Callable[[Any], Any] = lambda v: v) -> Any:
    """torch's ``div_floor_floating`` (Python's floor division), each step an IEEE
    operation in the compute format, then ``r`` (a 16-bit kernel's rounding to its
    dtype): ``d = (a - fmod(a, b)) / b``, less 1 where the remainder's sign differs from
    ``b``'s, then ``floor(d)``, plus 1 where ``d`` exceeds it by more than 1/2; ``±0``
    with the sign of ``a / b`` where ``d`` is 0; ``a / b`` where ``b`` is 0 (IEEE: ±inf
    or NaN). ``floor(a / b)`` differs where the rounded quotient reaches an integer the
    exact one does not."""
    a, b = np.broadcast_arrays(np.asarray(a), np.asarray(b))
    one, half, zero = (a.dtype.type(v) for v in (1, 0.5, 0))
    q = r(a / b)
    mod = np.fmod(a, b)
    d = r(r(a - mod) / b)
    d = np.where((mod != 0) & ((b < 0) != (mod < 0)), r(d - one), d)
    f = np.floor(d)
    f = np.where(r(d - f) > half, r(f + one), f)
    return np.where(b == 0, q, np.where(d != 0, f, np.copysign(zero, q)))


def _lerp(x: Any, end: Any, weight: Any) -> Any:
    """torch's formula, both branches fused: |w| < 0.5 ? fl(x + w fl(end - x)) :
    fl(end - fl(end - x) fl(1 - w))."""
    w = np.asarray(weight)
    one = w.dtype.type(1)
    d = end - x
    return np.where(np.abs(w) < 0.5, fused(w, d, x), fused(-d, one - w, end))


def _addcmul(x: Any, t1: Any, t2: Any, value: Any = 1) -> Any:
    """fl(x + fl(v t1) t2), the last product fused into the sum (torch's kernel)."""
    return fused(t1 if value == 1 else value * t1, t2, x)


def _addcdiv(x: Any, t1: Any, t2: Any, value: Any = 1) -> Any:
    return x + (t1 if value == 1 else value * t1) / t2


def _xlogy(x: Any, y: Any) -> Any:
    """torch's xlogy: NaN where y is NaN, else 0 where x == 0, else x * fl32(log y)."""
    return np.where(np.isnan(y), y, np.where(x == 0, 0, x * wide(np.log)(y)))


def _gelu(x: Any, approximate: str = "none") -> Any:
    """The engine's cancellation-free forms: x erfc(-x/sqrt 2)/2, x sigmoid(2u)."""
    if approximate == "tanh":
        c = math.sqrt(2.0 / math.pi)
        return wide(lambda v: v * sigmoid64(np, 2.0 * c * (v + 0.044715 * v**3)))(x)
    return wide(lambda v: 0.5 * v * erfc(-v / math.sqrt(2.0)))(x)


def _remainder(x: Any, y: Any) -> Any:
    """torch's CPU remainder: m = fmod(x, y) (exact), then m + y where m is nonzero and
    its sign differs from y's (one IEEE addition)."""
    m = np.fmod(x, y)
    return np.where((m != 0) & ((y < 0) != (m < 0)), m + y, m)


def _logit(x: Any, eps: Any = None) -> Any:
    """log(z / (1 - z)) in float64, rounded to float32, z = x clamped to [eps, 1 - eps]
    (bounds in float32) when eps is given."""
    if eps is not None:
        lo = x.dtype.type(eps)
        x = clamp(x, lo, x.dtype.type(1) - lo)
    return wide(lambda v: np.log(v / (1.0 - v)))(x)


def _logit_backward(g: Any, x: Any, eps: Any = None,
                    r: Callable[[Any], Any] = lambda v: v) -> Any:
    """torch's vectorised kernel, each step then ``r`` (a 16-bit kernel's rounding to its
    dtype): ``g / (x (1 - x))`` (so ``±inf`` at ``x = ±0`` and 1 by the signs of the
    division); without ``eps`` (or with a negative one) NaN where ``x`` lies outside [0,
    1]; with it the value where ``eps <= x <= 1 - eps`` (bounds in the compute format)
    and 0 elsewhere, NaN ``x`` included. (torch's scalar tail, at most one vector's
    length, returns ``g inf`` at 0 and 1 and NaN for a NaN ``x`` with ``eps``.)"""
    one = x.dtype.type(1)
    value = r(g / r(x * r(one - x)))
    if eps is None or eps < 0:
        return np.where((x < 0) | (x > one), x.dtype.type(np.nan), value)
    lo = r(x.dtype.type(eps))
    return np.where((x >= lo) & (x <= r(one - lo)), value, g.dtype.type(0))


def clamp(x: Any, min: Any = None, max: Any = None) -> Any:  # noqa: A002 - aten's names
    """torch's clamp: x unless it lies strictly beyond a bound (so a zero bound keeps x's
    sign: clamp(-0, min=0) = -0), NaN stays NaN. np.maximum would return the bound on a
    tie, +0 for -0."""
    if min is not None:
        x = np.where(x < min, min, x)
    if max is not None:
        x = np.where(x > max, max, x)
    return x


_FORMULAS: dict[str, Callable[..., Any]] = {
    "add": _add, "sub": _sub, "rsub": lambda x, y, alpha=1: _sub(y, x, alpha),
    "mul": lambda x, y: x * y, "div": _div, "floor_divide": lambda x, y: _div(x, y, "floor"),
    "neg": lambda x: -x, "abs": np.abs,
    "reciprocal": lambda x: x.dtype.type(1) / x,
    "exp": wide(np.exp), "log": wide(np.log), "tanh": wide(np.tanh),
    "sigmoid": wide(lambda v: sigmoid64(np, v)),
    "sqrt": wide(np.sqrt), "rsqrt": wide(lambda v: 1.0 / np.sqrt(v)),
    "gelu": _gelu, "silu": wide(lambda v: v * sigmoid64(np, v)),
    "relu": lambda x: clamp(x, min=x.dtype.type(0)),
    # the other elementary functions (rotary and sinusoidal position codes, custom
    # activations): float64 value rounded to float32, as exp and log
    **{name: wide(f) for name, f in {
        "sin": np.sin, "cos": np.cos, "tan": np.tan, "asin": np.arcsin, "acos": np.arccos,
        "atan": np.arctan, "atan2": np.arctan2, "sinh": np.sinh, "cosh": np.cosh,
        "asinh": np.arcsinh, "acosh": np.arccosh, "atanh": np.arctanh, "erf": erf,
        "erfc": erfc, "log2": np.log2, "log10": np.log10, "log1p": np.log1p,
        "expm1": np.expm1, "exp2": np.exp2, "hypot": np.hypot, "logaddexp": np.logaddexp,
        "logaddexp2": np.logaddexp2}.items()},
    "remainder": _remainder, "logit": _logit, "logit_backward": _logit_backward,
    "pow": pow_formula, "lerp": _lerp, "addcmul": _addcmul, "addcdiv": _addcdiv,
    "clamp": clamp, "clamp_min": lambda x, m: clamp(x, min=m),
    "clamp_max": lambda x, m: clamp(x, max=m),
    "xlogy": _xlogy, "maximum": np.maximum, "minimum": np.minimum,
    "where": lambda c, x, y: np.where(c, x, y),
    # torch's kernels: 1 - y y fused (the compiler contracts it); (g (1 - y)) y in order
    "tanh_backward": lambda g, y: g * fused(-y, y, y.dtype.type(1)),
    "silu_backward": lambda g, x: g * wide(
        lambda v: (lambda s: s * (1.0 + v * (1.0 - s)))(sigmoid64(np, v)))(x),
    "sigmoid_backward": lambda g, y: (g * (y.dtype.type(1) - y)) * y,
    # torch: x <= t ? 0 : g, so a NaN input passes its gradient
    "threshold_backward": lambda g, x, t: np.where(x <= t, g.dtype.type(0), g),
    "masked_fill": lambda x, m, v: np.where(m, v, x),
}


def _cast(ctx: Any, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``_to_copy``/``to``: a floating result is the source's exact value rounded once to
    the target dtype (nearest-even); anything else is torch's (no rounding)."""
    dtype = kwargs.get("dtype") or args[0].dtype
    if not (is_float(args[0]) and dtype.is_floating_point) or kwargs.get("device") not in (
            None, args[0].device):
        return func(*args, **kwargs)
    return from_numpy(to_numpy(args[0]), dtype)


def _copy(ctx: Any, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    dst, src = args[0], args[1]
    if is_float(dst) and is_float(src) and dst.dtype != src.dtype:
        src = from_numpy(to_numpy(src), dst.dtype)
    return func(dst, src, *args[2:], **kwargs)


def _unscale(ctx: Any, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``_amp_foreach_non_finite_check_and_unscale_``: found_inf = 1 if any scaled value is
    inf/NaN; each gradient becomes round(widen(g) * inv_scale) in its dtype (SCL-UNS-001)."""
    grads, found, inv = args
    inv32 = np.float32(to_numpy(inv).reshape(()))
    for g in grads:
        v = to_numpy(g)
        if not np.isfinite(v).all():
            found.fill_(1.0)
        with np.errstate(all="ignore"):
            g.copy_(from_numpy(v.astype(np.float32) * inv32, g.dtype))
    return None


def _update_scale(ctx: Any, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``_amp_update_scale_``: one step of ampref's loss-scale state machine under torch's
    profile with the given factors and interval (SCL-UPD-*); scale and growth tracker are
    written back in place, as torch does."""
    scale, tracker, found, growth, backoff, interval = args
    cfg = ScalerConfig(growth_factor=float(growth), backoff_factor=float(backoff),
                       growth_interval=int(interval))
    st = ScalerState(scale=float(scale.item()), growth_tracker=int(tracker.item()),
                     hysteresis_tracker=1, step=0, last_overflow=0)
    new, _ = transition(cfg, st, bool(found.item() != 0))
    scale.fill_(new.scale)
    tracker.fill_(new.growth_tracker)
    return scale


def _foreach(single: Handler, base: Any, inplace: bool) -> Handler:
    """``_foreach_<op>``: ``single`` on each tensor of the first list (the other operands
    zipped when they are lists), in place (returning None, as aten) for the ``_``
    variants."""
    def handler(ctx: Any, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        n = len(args[0])
        per = [[a[i] if isinstance(a, (list, tuple)) else a for a in args] for i in range(n)]
        outs = [single(ctx, base, tuple(p), kwargs) for p in per]
        return None if inplace else outs
    return handler


def _build() -> dict[str, Handler]:
    table: dict[str, Handler] = {}
    narrow = narrow_table(_div, _logit_backward)
    for name, fn in _FORMULAS.items():
        table[name] = pointwise(fn, narrow=narrow.get(name))
        if hasattr(torch.ops.aten, name + "_"):
            table[name + "_"] = pointwise(fn, inplace=True, narrow=narrow.get(name))
    table["_to_copy"] = _cast
    table["copy_"] = _copy
    table["_amp_foreach_non_finite_check_and_unscale_"] = _unscale
    table["_amp_update_scale_"] = _update_scale
    aten = torch.ops.aten
    for name in ("add", "sub", "mul", "div", "addcmul", "addcdiv", "lerp", "sqrt", "neg",
                 "reciprocal", "exp", "maximum", "clamp_min", "clamp_max", "abs"):
        # the packets resolve the overload (Tensor, Scalar, List) from the operands
        table[f"_foreach_{name}"] = _foreach(table[name], getattr(aten, name), False)
        if hasattr(aten, name + "_"):
            table[f"_foreach_{name}_"] = _foreach(table[name + "_"], getattr(aten, name + "_"),
                                                  True)
    return table


#: aten op name (overload packet) -> handler
POINTWISE: dict[str, Handler] = _build()
