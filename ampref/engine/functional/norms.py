"""Normalisations: softmax, log_softmax, layer_norm and rms_norm (ENG-NRM-001).

All steps run in float32 (float64 for float64 tensors) with exactly rounded sums; square
roots, divisions by them, exp and log are evaluated in float64 and rounded to float32.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ampref.backends import Backend  # type: ignore[attr-defined]  # mapped from backends/
from ampref.formats.table import Format, get_format
from ..tensor import Tensor, round_to, storage_dtype
from .core import (F32, F64, autocast_args, autocast_inputs, check_tensor, make, one_dim,
                   to_format, wide_math)

__all__ = ["layer_norm", "layer_norm_stats", "log_softmax", "log_softmax_grad", "rms_norm",
           "softmax", "softmax_grad"]


def _shifted_exp(op: str, x: Tensor, dim: int,
                 dtype: str | Format | None) -> tuple[Any, ...]:
    """Shared first steps of softmax and log_softmax: the output format (``dtype``, the
    policy's forced float32, or x's), the compute format, the row max, e = fl32(exp(x -
    max)) and s = fl32(exact sum e)."""
    x = check_tensor(x, op)
    if dim is None or isinstance(dim, (tuple, list)):
        raise TypeError(f"{op} needs one int dim, got {dim!r}")
    axis = one_dim(x, dim)
    (x,), forced, _ = autocast_inputs(op, [x])  # a policy may list it in any category
    fmt = get_format(dtype) if dtype is not None else (forced or x.format)
    if fmt != x.format:  # as torch: the input is cast to dtype first (ENG-DTY-001)
        x = to_format(x, fmt)
    be = x.backend
    cf = F64 if fmt.wide or x.format.wide else F32
    m = be.xp.max(x.data, axis=axis, keepdims=True)
    e = wide_math(be, cf, lambda xp, v, mm: xp.exp(v - mm), x.data, m)
    return x, fmt, cf, axis, m, e, be.sum(e, axis, True)


def softmax(input: Tensor, dim: int, *, dtype: str | Format | None = None) -> Tensor:
    """e_i = fl32(exp(x_i - max)), s = fl32(exact sum e), y = fl_out(fl32(e_i / s)).

    A row of all -inf gives NaN; +inf in a row gives NaN. Autocast name ``softmax``
    (fp32_set_opt_dtype under torch-cuda: float32 output; unlisted on CPU).
    """
    x, fmt, cf, axis, _m, e, s = _shifted_exp("softmax", input, dim, dtype)
    be = x.backend
    with np.errstate(all="ignore"):
        out = round_to(be, e / s, fmt)

    def bwd(g: Any) -> tuple[Any]:
        return (softmax_grad(be, cf, g, out, axis),)
    return make(be, out, fmt, "softmax", [x], bwd)


def softmax_grad(be: Backend, cf: Format, g: Any, out: Any, axis: int) -> Any:
    """softmax's input gradient from its output y: y (g - sum(fl(g y))), in ``cf``."""
    y = out.astype(storage_dtype(cf))
    with np.errstate(all="ignore"):
        gy = (g * y).astype(storage_dtype(cf))
        return y * (g - be.sum(gy, axis, True))


def log_softmax(input: Tensor, dim: int, *, dtype: str | Format | None = None) -> Tensor:
    """y = fl_out(fl32((x - max) - ln s)) with s = fl32(exact sum fl32(exp(x - max))).

    Autocast name ``log_softmax`` (fp32_set_opt_dtype under torch-cuda).
    """
    x, fmt, cf, axis, m, _e, s = _shifted_exp("log_softmax", input, dim, dtype)
    be = x.backend
    out = round_to(be, wide_math(be, cf, lambda xp, v, mm, ss: (v - mm) - xp.log(ss), x.data, m, s),
                   fmt)

    def bwd(g: Any) -> tuple[Any]:
        return (log_softmax_grad(be, cf, g, out, axis),)
    return make(be, out, fmt, "log_softmax", [x], bwd)


def log_softmax_grad(be: Backend, cf: Format, g: Any, out: Any, axis: int) -> Any:
    """log_softmax's input gradient from its output: g - fl32(exp(out)) sum(g), in ``cf``."""
    p = wide_math(be, cf, lambda xp, v: xp.exp(v), out)
    with np.errstate(all="ignore"):
        return g - p * be.sum(g.astype(storage_dtype(cf)), axis, True)


def _norm_axes(op: str, x: Tensor, normalized_shape: Any,
               *params: Tensor | None) -> tuple[int, ...]:
    """The trailing dims that ``normalized_shape`` names; weight and bias must have it.

    Raises:
        ValueError: ``normalized_shape`` is not the trailing shape of the input, or a
            weight/bias of another shape (all shapes named).
    """
    shape = (normalized_shape,) if isinstance(normalized_shape, (int, np.integer)) else \
        tuple(normalized_shape) if isinstance(normalized_shape, (tuple, list)) else None
    if shape is None or any(isinstance(d, bool) or not isinstance(d, (int, np.integer))
                            for d in shape):
        raise TypeError(f"{op}: normalized_shape must be an int or a tuple/list of ints, got "
                        f"{normalized_shape!r}")
    k = len(shape)
    if k == 0 or k > x.ndim or tuple(x.shape[x.ndim - k:]) != tuple(int(d) for d in shape):
        raise ValueError(f"{op}: normalized_shape {tuple(shape)} must be the trailing dims of the "
                         f"input's shape {x.shape}")
    for t in params:
        if t is not None and not isinstance(t, Tensor):
            raise TypeError(f"{op}: weight and bias must be ampref Tensors or None, got "
                            f"{type(t).__name__}")
        if t is not None and t.shape != tuple(shape):
            raise ValueError(f"{op}: weight/bias shape {t.shape} does not match normalized_shape "
                             f"{tuple(shape)}")
    return tuple(range(x.ndim - k, x.ndim))


def _check_eps(op: str, eps: Any) -> float:
    if isinstance(eps, bool) or not isinstance(eps, (int, float, np.floating)) or \
            not (math.isfinite(eps) and eps >= 0):
        raise ValueError(f"{op}: eps must be a finite number >= 0, got {eps!r}")
    return float(eps)


def _norm_affine(be: Backend, xhat: Any, weight: Tensor | None, bias: Tensor | None) -> Any:
    y = xhat
    with np.errstate(all="ignore"):
        if weight is not None:
            y = y * weight.data.astype(xhat.dtype)
        if bias is not None:
            y = y + bias.data.astype(xhat.dtype)
    return y


def _rstd(be: Backend, fmt: Format, var: Any, eps: float) -> Any:
    """fl32(1 / sqrt(fl32(var + eps))), the square root and division in float64."""
    cf = F64 if fmt.wide else F32
    return wide_math(be, cf, lambda xp, v: 1.0 / xp.sqrt(v), var + storage_dtype(cf)(eps))


def layer_norm(input: Tensor, normalized_shape: Any, weight: Tensor | None = None,
               bias: Tensor | None = None, eps: float = 1e-05) -> Tensor:
    """Normalise over the trailing dims ``normalized_shape`` (ENG-NRM-001), all steps in
    float32:

    mu = fl32(fl32(sum x) / n); d = fl32(x - mu); var = fl32(fl32(sum fl32(d*d)) / n);
    r = fl32(1 / sqrt(fl32(var + eps))) (sqrt and division in float64);
    y = fl_out(fl32(fl32(d * r) * w) + b). Output format: x's (after autocast, which
    casts to float32 under torch-cuda). Autocast name ``layer_norm``. A constant row
    gives d = 0 and y = b; NaN/inf in a row make the row NaN.

    Raises:
        ValueError: ``normalized_shape`` not trailing, weight/bias of another shape,
            or ``eps`` negative or not finite.
    """
    x = check_tensor(input, "layer_norm")
    axes = _norm_axes("layer_norm", x, normalized_shape, weight, bias)
    eps = _check_eps("layer_norm", eps)
    (x, weight, bias), _, _ = autocast_args("layer_norm", x, weight, bias)
    be, fmt = x.backend, x.format
    dt = storage_dtype(F64 if fmt.wide else F32)
    n = math.prod(x.shape[a] for a in axes)
    X = x.data.astype(dt)
    mu, r = layer_norm_stats(be, fmt, X, axes, eps)
    with np.errstate(all="ignore"):
        d = X - mu
        xhat = d * r
    out = round_to(be, _norm_affine(be, xhat, weight, bias), fmt)

    def bwd(g: Any) -> tuple[Any, ...]:
        G = g.astype(dt)
        with np.errstate(all="ignore"):
            gxh = G * weight.data.astype(dt) if weight is not None else G
            s1 = be.sum(gxh, axes, True)
            s2 = be.sum(gxh * xhat, axes, True)
            gx = (r / dt(n)) * ((dt(n) * gxh - s1) - xhat * s2)
            lead = tuple(range(x.ndim - len(axes)))
            res: list[Any] = [gx]
            if weight is not None:
                res.append(be.sum(G * xhat, lead))
            if bias is not None:
                res.append(be.sum(G, lead))
        return tuple(res)
    return make(be, out, fmt, "layer_norm", [t for t in (x, weight, bias) if t is not None], bwd)


def layer_norm_stats(be: Backend, fmt: Format, X: Any, axes: tuple[int, ...],
                     eps: float) -> tuple[Any, Any]:
    """(mu, r) of layer_norm over ``axes`` of the compute-format array ``X``:
    mu = fl32(fl32(sum x) / n), r = fl32(1 / sqrt(fl32(var + eps))) with var the mean of
    fl32(d * d), d = fl32(x - mu) (keepdims)."""
    dt = X.dtype.type
    n = math.prod(X.shape[a] for a in axes)
    with np.errstate(all="ignore"):
        mu = be.sum(X, axes, True) / dt(n)
        d = X - mu
        return mu, _rstd(be, fmt, be.sum(d * d, axes, True) / dt(n), eps)


def rms_norm(input: Tensor, normalized_shape: Any, weight: Tensor | None = None,
             eps: float | None = None) -> Tensor:
    """ms = fl32(fl32(sum fl32(x*x)) / n) over ``normalized_shape``; r = fl32(1/sqrt(fl32(ms
    + eps))); y = fl_out(fl32(fl32(x * r) * w)). ``eps=None`` is the input format's
    machine epsilon, as torch's ``finfo(input.dtype).eps``. Autocast name ``rms_norm``.

    Raises:
        ValueError: as :func:`layer_norm`.
    """
    x = check_tensor(input, "rms_norm")
    axes = _norm_axes("rms_norm", x, normalized_shape, weight)
    eps = x.format.eps if eps is None else _check_eps("rms_norm", eps)
    (x, weight), _, _ = autocast_args("rms_norm", x, weight)
    be, fmt = x.backend, x.format
    dt = storage_dtype(F64 if fmt.wide else F32)
    n = math.prod(x.shape[a] for a in axes)
    X = x.data.astype(dt)
    with np.errstate(all="ignore"):
        r = _rstd(be, fmt, be.sum(X * X, axes, True) / dt(n), eps)
        xhat = X * r
    out = round_to(be, _norm_affine(be, xhat, weight, None), fmt)

    def bwd(g: Any) -> tuple[Any, ...]:
        G = g.astype(dt)
        with np.errstate(all="ignore"):
            gxh = G * weight.data.astype(dt) if weight is not None else G
            s = be.sum(gxh * xhat, axes, True) / dt(n)
            gx = r * (gxh - xhat * s)
            if weight is None:
                return (gx,)
            return gx, be.sum(G * xhat, tuple(range(x.ndim - len(axes))))
    return make(be, out, fmt, "rms_norm", [t for t in (x, weight) if t is not None], bwd)
