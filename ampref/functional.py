"""Engine ops: forward numerics, autocast category and derivative, side by side.

Every op follows the rounding rules of ``specs/engine.md``:

* ENG-RND-001 elementwise ops compute in float32 (+ - * / are IEEE float32 operations;
  exp, log, tanh, erf, sqrt are evaluated in float64 and rounded to float32) and round
  once to the output format; float64 tensors compute in float64 throughout.
* ENG-MM-001 matmul: fl_out(fl32(exact a.b)) under the default ``exact`` accumulation
  (or any model of :mod:`ampref.accumulation`).
* ENG-RED-001 sums: fl_out(fl32(exact sum)); mean = fl_out(fl32(fl32(sum) / n)).
* ENG-PRM-001 the compute format of a multi-input op is the common format of its
  inputs: equal formats stay, float64 wins, any other mix (fp16+fp32, fp16+bf16) is
  float32 (torch's promote_types). Python scalars are weak: they take the tensor's
  format and are rounded to float32 first.
* ENG-BWD-001 each op's derivative is evaluated with the same rules (float32 arithmetic,
  exact-then-fp32 sums and matmuls); the engine rounds it to the input's format.

NaN and inf propagate with IEEE semantics (relu(NaN) = NaN, exp(inf) = inf, log(0) =
-inf, log(-1) = NaN); overflow in the output format gives ±inf (fp16/bf16).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from contextlib import nullcontext
from typing import Any

import numpy as np

from . import autocast_mode as _ac
from .formats import Format, get_format
from .tensor import Node, Tensor, is_grad_enabled, round_to, storage_dtype

__all__ = [
    "add",
    "binary_cross_entropy",
    "broadcast_to",
    "concat",
    "conv2d",
    "cross_entropy",
    "div",
    "dropout",
    "embedding",
    "exp",
    "gelu",
    "index",
    "layer_norm",
    "linear",
    "log",
    "log_softmax",
    "masked_fill",
    "matmul",
    "mean",
    "mse_loss",
    "mul",
    "neg",
    "nll_loss",
    "pow",
    "relu",
    "reshape",
    "rms_norm",
    "scaled_dot_product_attention",
    "sigmoid",
    "softmax",
    "sub",
    "sum",
    "tanh",
    "to_format",
    "transpose",
]

F32 = get_format("float32")
F64 = get_format("float64")
Scalar = (int, float, np.floating, np.integer)


# -- plumbing ----------------------------------------------------------------------------

def _backend(*ts: Any) -> Any:
    found = {t.backend.name: t.backend for t in ts if isinstance(t, Tensor)}
    if len(found) > 1:
        raise TypeError("tensors of different backends mixed in one op: " + " and ".join(found))
    return next(iter(found.values()))


def _make(be: Any, data: Any, fmt: Format, op: str, parents: Sequence[Tensor],
          backward: Any) -> Tensor:
    req = is_grad_enabled() and any(p.requires_grad for p in parents)
    node = Node(op, tuple(parents), backward) if req else None
    return Tensor(data, fmt, requires_grad=req, node=node, backend=be)


def _promote(fmts: Sequence[Format]) -> Format:
    names = {f.name for f in fmts}
    if "float64" in names:
        return F64
    if len(names) == 1:
        return fmts[0]
    return F32


def _wide(fmt: Format) -> bool:
    return fmt.name == "float64"


def _dt(fmt: Format) -> Any:
    return storage_dtype(fmt)


def _math(be: Any, fmt: Format, f: Any, *xs: Any) -> Any:
    """A transcendental in float64, then float32 (or kept in float64 for float64).

    ``f(xp, *arrays)`` gets the backend's array module, so it runs where the data lives."""
    xp = be.xp
    with np.errstate(all="ignore"):
        r = f(xp, *(xp.asarray(x, dtype=xp.float64) for x in xs))
    return r if _wide(fmt) else r.astype(xp.float32)


def _sum_to(be: Any, g: Any, shape: tuple[int, ...]) -> Any:
    """Reduce a broadcast gradient back to ``shape`` (exact-then-fp32 sums)."""
    if tuple(g.shape) == tuple(shape):
        return g
    lead = g.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(lead + i for i, s in enumerate(shape)
                                      if s == 1 and g.shape[lead + i] != 1)
    return be.sum(g, axis=axes, keepdims=True).reshape(shape) if axes else g.reshape(shape)


def _shape(v: Any) -> tuple[int, ...]:
    """Shape of an array operand; () for a Python or NumPy scalar."""
    return tuple(v.shape) if hasattr(v, "shape") else ()


def _flag(name: str, v: Any) -> bool:
    """A bool argument; a truthy string or number is refused rather than guessed."""
    if not isinstance(v, (bool, np.bool_)):
        raise TypeError(f"{name} must be a bool, got {type(v).__name__}: {v!r}")
    return bool(v)


def _check_tensor(x: Any, op: str) -> Tensor:
    if not isinstance(x, Tensor):
        raise TypeError(f"{op} expects an ampref.Tensor, got {type(x).__name__}")
    return x


def to_format(input: Tensor, fmt: str | Format) -> Tensor:
    """Cast (one rounding, nearest-even, from the exact stored value; ENG-CST-001).

    The derivative passes the gradient back, rounded to the source format.
    """
    x = _check_tensor(input, "to_format")
    f = get_format(fmt)
    if f == x.format:
        return x
    be = x.backend
    data = be.quantize(x.data, f) if not _wide(f) else x.data.astype(be.xp.float64)
    if not _wide(f):
        data = be.xp.asarray(data, dtype=be.xp.float32)
    out = _make(be, data, f, "to_format", [x], lambda g: (g,))
    out.name = x.name  # a weight's cast keeps the weight's name (gradient statistics)
    return out


# -- binary elementwise ------------------------------------------------------------------

def _binary_inputs(op: str, a: Any, b: Any) -> tuple[Any, Any, Format, Any]:
    """Cast tensor inputs to the common compute format; scalars become weak constants."""
    ta, tb = isinstance(a, Tensor), isinstance(b, Tensor)
    if not (ta or tb):
        raise TypeError(f"{op} needs at least one ampref.Tensor, got {type(a).__name__} and {type(b).__name__}")
    for v in (a, b):
        if not isinstance(v, Tensor) and not isinstance(v, Scalar):
            raise TypeError(f"{op}: operand must be an ampref.Tensor or a real number, got {type(v).__name__}")
    be = _backend(a, b)
    tensors = [t for t in (a, b) if isinstance(t, Tensor)]
    tensors, _, _ = _ac.cast_inputs(op, tensors)
    it = iter(tensors)
    a = next(it) if ta else a
    b = next(it) if tb else b
    fmt = _promote([t.format for t in (a, b) if isinstance(t, Tensor)])
    if ta and a.format != fmt:
        a = to_format(a, fmt)
    if tb and b.format != fmt:
        b = to_format(b, fmt)
    return a, b, fmt, be


def _val(be: Any, v: Any, fmt: Format) -> Any:
    if isinstance(v, Tensor):
        return v.data
    return _dt(fmt)(v) if _wide(fmt) else np.float32(v)


def _parents(*vs: Any) -> list[Tensor]:
    return [v for v in vs if isinstance(v, Tensor)]


def _grads_for(a: Any, b: Any, ga: Any, gb: Any) -> tuple[Any, ...]:
    out = []
    if isinstance(a, Tensor):
        out.append(ga)
    if isinstance(b, Tensor):
        out.append(gb)
    return tuple(out)


def add(input: Any, other: Any) -> Tensor:
    """input + other (broadcasting)."""
    a, b, fmt, be = _binary_inputs("add", input, other)
    x, y = _val(be, a, fmt), _val(be, b, fmt)
    with np.errstate(all="ignore"):
        out = round_to(be, x + y, fmt)

    def bwd(g: Any) -> tuple[Any, ...]:
        return _grads_for(a, b, _sum_to(be, g, _shape(x)), _sum_to(be, g, _shape(y)))
    return _make(be, out, fmt, "add", _parents(a, b), bwd)


def sub(input: Any, other: Any) -> Tensor:
    """input - other (broadcasting)."""
    a, b, fmt, be = _binary_inputs("sub", input, other)
    x, y = _val(be, a, fmt), _val(be, b, fmt)
    with np.errstate(all="ignore"):
        out = round_to(be, x - y, fmt)

    def bwd(g: Any) -> tuple[Any, ...]:
        return _grads_for(a, b, _sum_to(be, g, _shape(x)), _sum_to(be, -g, _shape(y)))
    return _make(be, out, fmt, "sub", _parents(a, b), bwd)


def mul(input: Any, other: Any) -> Tensor:
    """input * other (broadcasting)."""
    a, b, fmt, be = _binary_inputs("mul", input, other)
    x, y = _val(be, a, fmt), _val(be, b, fmt)
    with np.errstate(all="ignore"):
        out = round_to(be, x * y, fmt)

    def bwd(g: Any) -> tuple[Any, ...]:
        with np.errstate(all="ignore"):
            return _grads_for(a, b, _sum_to(be, g * y, _shape(x)), _sum_to(be, g * x, _shape(y)))
    return _make(be, out, fmt, "mul", _parents(a, b), bwd)


def div(input: Any, other: Any) -> Tensor:
    """input / other (broadcasting); x/0 = ±inf, 0/0 = NaN."""
    a, b, fmt, be = _binary_inputs("div", input, other)
    x, y = _val(be, a, fmt), _val(be, b, fmt)
    with np.errstate(all="ignore"):
        out = round_to(be, x / y, fmt)

    def bwd(g: Any) -> tuple[Any, ...]:
        with np.errstate(all="ignore"):
            ga = g / y
            gb = -(g * x) / (y * y)
        return _grads_for(a, b, _sum_to(be, ga, _shape(x)), _sum_to(be, gb, _shape(y)))
    return _make(be, out, fmt, "div", _parents(a, b), bwd)


def pow(input: Any, exponent: Any) -> Tensor:
    """input ** exponent. Autocast name ``pow`` (fp32 under torch-cuda). x^p computed in
    float64."""
    a, b, fmt, be = _binary_inputs("pow", input, exponent)
    x, y = _val(be, a, fmt), _val(be, b, fmt)
    out = round_to(be, _math(be, fmt, lambda xp, u, v: xp.power(u, v), x, y), fmt)

    def bwd(g: Any) -> tuple[Any, ...]:
        with np.errstate(all="ignore"):
            ga = g * (y * _math(be, fmt, lambda xp, u, v: xp.power(u, v), x, y - 1))
            gb = g * _math(be, fmt, lambda xp, u, v: xp.power(u, v) * xp.log(u), x, y) \
                if isinstance(b, Tensor) else None
        return _grads_for(a, b, _sum_to(be, ga, _shape(x)),
                          None if gb is None else _sum_to(be, gb, _shape(y)))
    return _make(be, out, fmt, "pow", _parents(a, b), bwd)


def neg(input: Tensor) -> Tensor:
    """-input (exact)."""
    x = _check_tensor(input, "neg")
    return _make(x.backend, -x.data, x.format, "neg", [x], lambda g: (-g,))


def masked_fill(input: Tensor, mask: Any, value: float) -> Tensor:
    """Where ``mask`` (bool array, broadcast) is True the value (rounded to x's format).

    Raises:
        TypeError: ``mask`` is not boolean.
    """
    x = _check_tensor(input, "masked_fill")
    be = x.backend
    m = be.xp.asarray(mask.data if isinstance(mask, Tensor) else mask)
    if m.dtype != bool:
        raise TypeError(f"masked_fill needs a boolean mask, got dtype {m.dtype}")
    fill = round_to(be, be.xp.asarray([value], dtype=be.xp.float64), x.format)[0]
    out = be.xp.where(m, fill, x.data).astype(x.data.dtype)

    def bwd(g: Any) -> tuple[Any]:
        return (_sum_to(be, be.xp.where(m, 0, g).astype(g.dtype), x.shape),)
    return _make(be, out, x.format, "masked_fill", [x], bwd)


# -- unary elementwise -------------------------------------------------------------------

def _unary(op: str, x: Tensor, f: Any, df: Any, *, exact: bool = False) -> Tensor:
    """y = fl_out(f(x)); df(g, x, y) gives the input gradient. ``exact`` ops (whose
    result is already a value of x's format) skip the float64 evaluation."""
    x = _check_tensor(x, op)
    (x,), _, _ = _ac.cast_inputs(op, [x])
    be, fmt = x.backend, x.format
    out = f(be.xp, x.data) if exact else round_to(be, _math(be, fmt, f, x.data), fmt)
    xv = x.data

    def bwd(g: Any) -> tuple[Any]:
        with np.errstate(all="ignore"):
            return (df(g, xv, out),)
    return _make(be, out, fmt, op, [x], bwd)


def exp(input: Tensor) -> Tensor:
    """e^x; exp(inf) = inf, exp(-inf) = 0, overflow -> inf."""
    return _unary("exp", input, lambda xp, v: xp.exp(v), lambda g, x, y: g * y)


def log(input: Tensor) -> Tensor:
    """ln x; log(0) = -inf, log(<0) = NaN."""
    return _unary("log", input, lambda xp, v: xp.log(v), lambda g, x, y: g / x)


def tanh(input: Tensor) -> Tensor:
    return _unary("tanh", input, lambda xp, v: xp.tanh(v), lambda g, x, y: g * (1 - y * y))


def sigmoid(input: Tensor) -> Tensor:
    """1 / (1 + e^-x), evaluated in float64 as 0.5 * (1 + tanh(x / 2)) (no overflow)."""
    return _unary("sigmoid", input, lambda xp, v: 0.5 * (1.0 + xp.tanh(0.5 * v)),
                  lambda g, x, y: g * (y * (1 - y)))


def relu(input: Tensor) -> Tensor:
    """max(x, 0) (exact); relu(NaN) = NaN; derivative 0 at x <= 0."""
    return _unary("relu", input, lambda xp, v: xp.maximum(v, v.dtype.type(0)), lambda g, x, y: g * (x > 0),
                  exact=True)


def _erf(xp: Any, v: Any) -> Any:
    """erf where the data lives: SciPy for NumPy arrays, cupyx.scipy for CuPy ones, and
    a host round trip for any other array module."""
    if xp is np:
        from scipy.special import erf

        return erf(v)
    if getattr(xp, "__name__", "") == "cupy":
        from cupyx.scipy.special import erf as cupy_erf

        return cupy_erf(v)
    from scipy.special import erf

    return xp.asarray(erf(xp.asnumpy(v)))


def gelu(input: Tensor, approximate: str = "none") -> Tensor:
    """x * Phi(x) (``approximate="none"``, erf form) or the tanh approximation."""
    x = _check_tensor(input, "gelu")
    if approximate == "none":
        def f(xp: Any, v: Any) -> Any:
            return 0.5 * v * (1.0 + _erf(xp, v / math.sqrt(2.0)))

        def df(g: Any, xv: Any, y: Any) -> Any:
            d = _math(x.backend, x.format, lambda xp, v: 0.5 * (1.0 + _erf(xp, v / math.sqrt(2.0)))
                      + v * xp.exp(-0.5 * v * v) / math.sqrt(2.0 * math.pi), xv)
            return g * d
    elif approximate == "tanh":
        c = math.sqrt(2.0 / math.pi)

        def f(xp: Any, v: Any) -> Any:
            return 0.5 * v * (1.0 + xp.tanh(c * (v + 0.044715 * v**3)))

        def df(g: Any, xv: Any, y: Any) -> Any:
            def d(xp: Any, v: Any) -> Any:
                t = xp.tanh(c * (v + 0.044715 * v**3))
                return 0.5 * (1 + t) + 0.5 * v * (1 - t * t) * c * (1 + 3 * 0.044715 * v * v)
            return g * _math(x.backend, x.format, d, xv)
    else:
        raise ValueError(f"gelu approximate must be 'none' or 'tanh', got {approximate!r}")
    return _unary("gelu", x, f, df)


# -- matmul ------------------------------------------------------------------------------

def _mm(be: Any, a: Any, b: Any, acc: str, fmt: Format) -> Any:
    return be.matmul(a, b, acc, fmt)


def matmul(input: Tensor, other: Tensor, *, accumulation: str = "exact") -> Tensor:
    """input @ other for 2-D or batched (..., M, K) @ (..., K, N) operands; 1-D operands
    as torch.

    Rounding (ENG-MM-001): fl_out(fl32(sum_k a_k b_k)) with the exact sum under the
    default model; ``accumulation`` names any model of :mod:`ampref.accumulation`
    (``sequential``, ``tensorcore:a100``, ...). Autocast name ``matmul``.
    """
    a, b = _check_tensor(input, "matmul"), _check_tensor(other, "matmul")
    be = _backend(a, b)
    (a, b), _, _ = _ac.cast_inputs("matmul", [a, b])
    fmt = _promote([a.format, b.format])
    a, b = to_format(a, fmt), to_format(b, fmt)
    if a.ndim == 0 or b.ndim == 0:
        raise ValueError(f"matmul needs operands of at least 1 dimension, got {a.shape} and {b.shape}")
    if a.shape[-1] != b.shape[-2 if b.ndim > 1 else 0]:
        raise ValueError(f"matmul shapes do not chain: {a.shape} @ {b.shape}")
    if a.ndim == 1:  # (K,) @ (..., K, N): a row vector, the row axis dropped
        r = matmul(reshape(a, (1, -1)), b, accumulation=accumulation)
        return reshape(r, r.shape[:-2] + r.shape[-1:])
    if b.ndim == 1:  # (..., M, K) @ (K,): a column vector, the column axis dropped
        r = matmul(a, reshape(b, (-1, 1)), accumulation=accumulation)
        return reshape(r, r.shape[:-1])
    A, B = a.data, b.data
    out = round_to(be, _mm(be, A, B, accumulation, fmt), fmt)

    def bwd(g: Any) -> tuple[Any, Any]:
        ga = _mm(be, g, be.xp.swapaxes(B, -1, -2), accumulation, fmt)
        gb = _mm(be, be.xp.swapaxes(A, -1, -2), g, accumulation, fmt)
        return _sum_to(be, ga, A.shape), _sum_to(be, gb, B.shape)
    return _make(be, out, fmt, "matmul", [a, b], bwd)


def _weighted_inputs(op: str, x: Tensor, weight: Tensor, bias: Tensor | None) -> tuple[Any, ...]:
    """Check, autocast and promote the (input, weight, optional bias) of linear/conv2d."""
    x, weight = _check_tensor(x, op), _check_tensor(weight, op)
    be = _backend(x, weight, bias)
    ins = [x, weight] + ([bias] if bias is not None else [])
    ins, _, _ = _ac.cast_inputs(op, ins)
    fmt = _promote([t.format for t in ins])
    ins = [to_format(t, fmt) for t in ins]
    return be, fmt, ins, ins[0], ins[1], (ins[2] if bias is not None else None)


def linear(input: Tensor, weight: Tensor, bias: Tensor | None = None, *,
           accumulation: str = "exact") -> Tensor:
    """x @ weight.T + bias; y = fl_out(fl32(fl32(exact x.w) + b)) (bias in the epilogue).

    Autocast name ``linear`` (lower precision under both torch policies).
    """
    be, fmt, ins, x, weight, bias = _weighted_inputs("linear", input, weight, bias)
    if weight.ndim != 2 or x.shape[-1] != weight.shape[1]:
        raise ValueError(f"linear: input {x.shape} does not match weight {weight.shape} (out, in)")
    X = x.data.reshape(-1, x.shape[-1])
    W = weight.data
    acc = _mm(be, X, W.T, accumulation, fmt)
    if bias is not None:
        with np.errstate(all="ignore"):
            acc = acc + bias.data
    out = round_to(be, acc, fmt).reshape(x.shape[:-1] + (W.shape[0],))

    def bwd(g: Any) -> tuple[Any, ...]:
        G = g.reshape(-1, W.shape[0])
        gx = _mm(be, G, W, accumulation, fmt).reshape(x.shape)
        gw = _mm(be, G.T, X, accumulation, fmt)
        if bias is None:
            return gx, gw
        return gx, gw, be.sum(G, axis=0)
    return _make(be, out, fmt, "linear", ins, bwd)


def _pair(v: int | tuple[int, int], name: str) -> tuple[int, int]:
    t = (v, v) if isinstance(v, int) else tuple(v)
    if len(t) != 2 or not all(isinstance(k, int) for k in t):
        raise ValueError(f"conv2d {name} must be an int or a pair of ints, got {v!r}")
    return t  # type: ignore[return-value]


def conv2d(input: Tensor, weight: Tensor, bias: Tensor | None = None,
           stride: int | tuple[int, int] = 1, padding: int | tuple[int, int] = 0, *,
           accumulation: str = "exact") -> Tensor:
    """2-D cross-correlation of (N, C, H, W) input with (O, C, kh, kw) weights (ENG-CNV-001).

    Computed as an im2col matmul: every output element is one dot product over
    (c, i, j) in C order, so it rounds like :func:`linear`:
    ``fl_out(fl32(fl32(exact sum) + b))``. The input gradient adds the overlapping
    patch contributions in float64 in kernel-offset order (i, then j) and rounds once.
    Zero padding. Autocast name ``conv2d`` (lower precision under both torch policies).
    """
    be, fmt, ins, x, weight, bias = _weighted_inputs("conv2d", input, weight, bias)
    (sh, sw), (ph, pw) = _pair(stride, "stride"), _pair(padding, "padding")
    if x.ndim != 4 or weight.ndim != 4 or x.shape[1] != weight.shape[1]:
        raise ValueError(f"conv2d needs input (N, C, H, W) and weight (O, C, kh, kw) with equal C, "
                         f"got {x.shape} and {weight.shape}")
    if min(sh, sw) < 1 or min(ph, pw) < 0:
        raise ValueError(f"conv2d stride must be >= 1 and padding >= 0, got {(sh, sw)} and {(ph, pw)}")
    xp = be.xp
    N, C, H, W = x.shape
    O, _, kh, kw = weight.shape
    Ho, Wo = (H + 2 * ph - kh) // sh + 1, (W + 2 * pw - kw) // sw + 1
    if Ho < 1 or Wo < 1:
        raise ValueError(f"conv2d kernel {(kh, kw)} does not fit input {(H, W)} with padding {(ph, pw)}")
    xpad = xp.pad(x.data, ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    win = xp.lib.stride_tricks.sliding_window_view(xpad, (kh, kw), axis=(2, 3))[:, :, ::sh, ::sw]
    cols = xp.ascontiguousarray(win.transpose(0, 2, 3, 1, 4, 5)).reshape(N * Ho * Wo, C * kh * kw)
    Wm = weight.data.reshape(O, -1)
    acc = _mm(be, cols, Wm.T, accumulation, fmt)
    if bias is not None:
        with np.errstate(all="ignore"):
            acc = acc + bias.data
    out = round_to(be, acc, fmt).reshape(N, Ho, Wo, O).transpose(0, 3, 1, 2)
    out = xp.ascontiguousarray(out)

    def bwd(g: Any) -> tuple[Any, ...]:
        G = xp.ascontiguousarray(g.transpose(0, 2, 3, 1)).reshape(-1, O)
        gw = _mm(be, G.T, cols, accumulation, fmt).reshape(weight.shape)
        gcols = _mm(be, G, Wm, accumulation, fmt).reshape(N, Ho, Wo, C, kh, kw)
        gpad = xp.zeros(xpad.shape, dtype=xp.float64)
        for i in range(kh):  # fixed order: kernel row, then column
            for j in range(kw):
                gpad[:, :, i:i + sh * Ho:sh, j:j + sw * Wo:sw] += gcols[:, :, :, :, i, j].transpose(0, 3, 1, 2)
        gx = gpad[:, :, ph:ph + H, pw:pw + W]
        res: list[Any] = [gx, gw]
        if bias is not None:
            res.append(be.sum(G, 0))
        return tuple(res)
    return _make(be, out, fmt, "conv2d", ins, bwd)


# -- reductions -----------------------------------------------------------------------------

def _axes(x: Tensor, dim: Any) -> tuple[int, ...]:
    """Normalised dims (None: all); each must be an int in [-ndim, ndim)."""
    if dim is None:
        return tuple(range(x.ndim))
    axs = (dim,) if isinstance(dim, (int, np.integer)) else tuple(dim)
    for ax in axs:
        if isinstance(ax, bool) or not isinstance(ax, (int, np.integer)):
            raise TypeError(f"dim must be an int or a tuple of ints, got {dim!r}")
        if not -x.ndim <= ax < max(x.ndim, 1):
            raise ValueError(f"dim {ax} is out of range for a tensor of shape {x.shape} "
                             f"(valid: {-max(x.ndim, 1)} to {max(x.ndim, 1) - 1})")
    return tuple(int(ax) % max(x.ndim, 1) for ax in axs)


def _expand(xp: Any, g: Any, shape: tuple[int, ...], axes: tuple[int, ...], keepdims: bool) -> Any:
    if not keepdims:
        for ax in sorted(axes):
            g = xp.expand_dims(g, ax)
    return xp.broadcast_to(g, shape)


def sum(input: Tensor, dim: Any = None, keepdim: bool = False, *,
        dtype: str | Format | None = None) -> Tensor:
    """Sum over ``dim`` (all dims when None): fl_out(fl32(exact sum)) (ENG-RED-001).

    ``dtype`` sets the output format (torch's ``sum(..., dtype=)``); autocast name
    ``sum`` (fp32_set_opt_dtype under torch-cuda: float32 output).
    """
    x = _check_tensor(input, "sum")
    keepdims = _flag("keepdim", keepdim)
    _, forced, _ = _ac.cast_inputs("sum", [x])
    fmt = get_format(dtype) if dtype is not None else (forced or x.format)
    be, axes = x.backend, _axes(x, dim)
    out = round_to(be, be.sum(x.data.astype(_dt(fmt)) if _wide(fmt) else x.data, axes, keepdims), fmt)

    def bwd(g: Any) -> tuple[Any]:
        return (_expand(be.xp, g, x.shape, axes, keepdims),)
    return _make(be, out, fmt, "sum", [x], bwd)


def mean(input: Tensor, dim: Any = None, keepdim: bool = False) -> Tensor:
    """Mean over ``dim`` (all dims when None): fl_out(fl32(fl32(exact sum) / n)). Not an
    autocast-listed op."""
    x = _check_tensor(input, "mean")
    keepdims = _flag("keepdim", keepdim)
    be, axes = x.backend, _axes(x, dim)
    n = math.prod(x.shape[a] for a in axes) if axes else 1
    s = be.sum(x.data, axes, keepdims)
    with np.errstate(all="ignore"):
        out = round_to(be, s / _dt(x.format)(n), x.format)

    def bwd(g: Any) -> tuple[Any]:
        return (_expand(be.xp, g / _dt(x.format)(n), x.shape, axes, keepdims),)
    return _make(be, out, x.format, "mean", [x], bwd)


# -- shape ops (exact) -------------------------------------------------------------------------

def reshape(input: Tensor, shape: Sequence[int]) -> Tensor:
    x = _check_tensor(input, "reshape")
    try:
        out = x.data.reshape(tuple(shape))
    except ValueError as e:
        raise ValueError(f"cannot reshape {x.shape} to {tuple(shape)}: {e}") from None
    return _make(x.backend, out, x.format, "reshape", [x], lambda g: (g.reshape(x.shape),))


def transpose(input: Tensor, dim0: int, dim1: int) -> Tensor:
    """Swap dims ``dim0`` and ``dim1``; a 1-D tensor with dims 0/-1 is returned unchanged.

    Raises:
        ValueError: a dim out of range for the tensor's shape (shape named).
    """
    x = _check_tensor(input, "transpose")
    _axes(x, (dim0, dim1))
    if x.ndim < 2:
        return x
    out = x.backend.xp.swapaxes(x.data, dim0, dim1)
    return _make(x.backend, out, x.format, "transpose", [x],
                 lambda g: (x.backend.xp.swapaxes(g, dim0, dim1),))


def broadcast_to(input: Tensor, shape: Sequence[int]) -> Tensor:
    x = _check_tensor(input, "broadcast_to")
    be = x.backend
    out = be.xp.broadcast_to(x.data, tuple(shape))
    return _make(be, out, x.format, "broadcast_to", [x], lambda g: (_sum_to(be, g, x.shape),))


def index(input: Tensor, idx: Any) -> Tensor:
    """x[idx] (basic and integer-array indexing). Gradients of repeated indices add in
    float64 in index order, then round once (ENG-IDX-001)."""
    x = _check_tensor(input, "index")
    be = x.backend
    if isinstance(idx, Tensor):
        idx = idx.data.astype(np.int64)
    out = x.data[idx]

    def bwd(g: Any) -> tuple[Any]:
        acc = be.xp.zeros(x.shape, dtype=be.xp.float64)
        be.xp.add.at(acc, idx, g.astype(be.xp.float64))
        return (acc,)
    return _make(be, be.xp.asarray(out), x.format, "index", [x], bwd)


def embedding(input: Any, weight: Tensor) -> Tensor:
    """weight[ids]; the weight gradient is a one-hot matmul, so each row's sum is exact
    then rounded once (ENG-IDX-002). Not autocast-listed: output in weight's format."""
    weight = _check_tensor(weight, "embedding")
    be = weight.backend
    ids_arr = be.xp.asarray(input.data if isinstance(input, Tensor) else input)
    if ids_arr.dtype.kind not in "iu":
        raise TypeError(f"embedding ids must be integers, got dtype {ids_arr.dtype}")
    V = weight.shape[0]
    if ids_arr.size and (int(ids_arr.min()) < 0 or int(ids_arr.max()) >= V):
        raise ValueError(f"embedding ids must lie in [0, {V}), got range "
                         f"[{int(ids_arr.min())}, {int(ids_arr.max())}]")
    out = weight.data[ids_arr]

    def bwd(g: Any) -> tuple[Any]:
        flat = ids_arr.reshape(-1)
        G = g.reshape(flat.size, -1)
        onehot = be.xp.zeros((V, flat.size), dtype=G.dtype)
        onehot[flat, be.xp.arange(flat.size)] = 1
        return (be.matmul(onehot, G),)
    return _make(be, out, weight.format, "embedding", [weight], bwd)


def concat(tensors: Sequence[Tensor], dim: int = 0) -> Tensor:
    """Concatenate along ``dim``; autocast name ``cat`` (promote under torch-cpu)."""
    ts = [_check_tensor(t, "concat") for t in tensors]
    if not ts:
        raise ValueError("concat needs at least one tensor")
    axis = _axes(ts[0], dim)[0]
    be = _backend(*ts)
    ts, _, _ = _ac.cast_inputs("cat", ts)
    fmt = _promote([t.format for t in ts])
    ts = [to_format(t, fmt) for t in ts]
    out = be.xp.concatenate([t.data for t in ts], axis=axis)
    cuts = [int(c) for c in np.cumsum([t.shape[axis] for t in ts])[:-1]]

    def bwd(g: Any) -> tuple[Any, ...]:
        return tuple(be.xp.split(g, cuts, axis=axis))
    return _make(be, out, fmt, "cat", ts, bwd)


# -- dropout ------------------------------------------------------------------------------

def dropout(input: Tensor, p: float = 0.5, training: bool = True, *, seed: int,
            offset: int = 0) -> Tensor:
    """Zero each element with probability ``p`` and scale the rest by fl32(1/(1-p)).

    Element i (flat, C order) is dropped when ``bits(seed, offset + i) < round(p*2^32)``
    with the counter-based hash of :mod:`ampref.srhash` (ENG-DRP-001): the same mask
    on every backend, no global RNG.
    """
    x = _check_tensor(input, "dropout")
    if isinstance(p, bool) or not isinstance(p, (int, float, np.floating)) or not 0.0 <= p < 1.0:
        raise ValueError(f"dropout probability must be a number in [0, 1), got {p!r}")
    if not _flag("training", training) or p == 0.0:
        return x
    be = x.backend
    bits = be.random_bits(seed, offset, x.size).reshape(x.shape)
    keep = bits >= np.uint32(min(round(p * 2.0**32), 2**32 - 1))
    scale = _dt(x.format)(1.0 / (1.0 - p))
    with np.errstate(all="ignore"):
        out = round_to(be, x.data * scale * keep, x.format)
    return _make(be, out, x.format, "dropout", [x], lambda g: (g * scale * keep,))


# -- normalisation and softmax --------------------------------------------------------------------

def _shifted_exp(op: str, x: Tensor, dim: int, dtype: str | Format | None) -> tuple[Any, ...]:
    """Shared first steps of softmax and log_softmax: the output format (``dtype``, the
    policy's forced float32, or x's), the compute format, the row max, e = fl32(exp(x -
    max)) and s = fl32(exact sum e)."""
    x = _check_tensor(x, op)
    if dim is None or isinstance(dim, (tuple, list)):
        raise TypeError(f"{op} needs one int dim, got {dim!r}")
    axis = _axes(x, dim)[0]
    _, forced, _ = _ac.cast_inputs(op, [x])
    fmt = get_format(dtype) if dtype is not None else (forced or x.format)
    be = x.backend
    cf = F64 if _wide(fmt) or _wide(x.format) else F32
    m = be.xp.max(x.data, axis=axis, keepdims=True)
    e = _math(be, cf, lambda xp, v, mm: xp.exp(v - mm), x.data, m)
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
        y = out.astype(_dt(cf))
        with np.errstate(all="ignore"):
            gy = (g * y).astype(_dt(cf))
            return (y * (g - be.sum(gy, axis, True)),)
    return _make(be, out, fmt, "softmax", [x], bwd)


def log_softmax(input: Tensor, dim: int, *, dtype: str | Format | None = None) -> Tensor:
    """y = fl_out(fl32((x - max) - ln s)) with s = fl32(exact sum fl32(exp(x - max))).

    Autocast name ``log_softmax`` (fp32_set_opt_dtype under torch-cuda).
    """
    x, fmt, cf, axis, m, _e, s = _shifted_exp("log_softmax", input, dim, dtype)
    be = x.backend
    out = round_to(be, _math(be, cf, lambda xp, v, mm, ss: (v - mm) - xp.log(ss), x.data, m, s), fmt)

    def bwd(g: Any) -> tuple[Any]:
        p = _math(be, cf, lambda xp, v: xp.exp(v), out)
        with np.errstate(all="ignore"):
            return (g - p * be.sum(g.astype(_dt(cf)), axis, True),)
    return _make(be, out, fmt, "log_softmax", [x], bwd)


def _norm_axes(op: str, x: Tensor, normalized_shape: Any, *params: Tensor | None) -> tuple[int, ...]:
    """The trailing dims that ``normalized_shape`` names; weight and bias must have it.

    Raises:
        ValueError: ``normalized_shape`` is not the trailing shape of the input, or a
            weight/bias of another shape (all shapes named).
    """
    shape = (normalized_shape,) if isinstance(normalized_shape, (int, np.integer)) else \
        tuple(normalized_shape)
    k = len(shape)
    if k == 0 or k > x.ndim or tuple(x.shape[x.ndim - k:]) != tuple(int(d) for d in shape):
        raise ValueError(f"{op}: normalized_shape {tuple(shape)} must be the trailing dims of the "
                         f"input's shape {x.shape}")
    for t in params:
        if t is not None and t.shape != tuple(shape):
            raise ValueError(f"{op}: weight/bias shape {t.shape} does not match normalized_shape "
                             f"{tuple(shape)}")
    return tuple(range(x.ndim - k, x.ndim))


def _check_eps(op: str, eps: Any) -> float:
    if isinstance(eps, bool) or not isinstance(eps, (int, float, np.floating)) or \
            not (math.isfinite(eps) and eps >= 0):
        raise ValueError(f"{op}: eps must be a finite number >= 0, got {eps!r}")
    return float(eps)


def _norm_affine(be: Any, xhat: Any, weight: Tensor | None, bias: Tensor | None) -> Any:
    y = xhat
    with np.errstate(all="ignore"):
        if weight is not None:
            y = y * weight.data.astype(xhat.dtype)
        if bias is not None:
            y = y + bias.data.astype(xhat.dtype)
    return y


def _rstd(be: Any, fmt: Format, var: Any, eps: float) -> Any:
    """fl32(1 / sqrt(fl32(var + eps))), the square root and division in float64."""
    cf = F64 if _wide(fmt) else F32
    return _math(be, cf, lambda xp, v: 1.0 / xp.sqrt(v), var + _dt(cf)(eps))


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
    x = _check_tensor(input, "layer_norm")
    axes = _norm_axes("layer_norm", x, normalized_shape, weight, bias)
    eps = _check_eps("layer_norm", eps)
    ins = [x] + [t for t in (weight, bias) if t is not None]
    ins, _, _listed = _ac.cast_inputs("layer_norm", ins)
    x = ins[0]
    rest = iter(ins[1:])
    weight = next(rest) if weight is not None else None
    bias = next(rest) if bias is not None else None
    be, fmt = x.backend, x.format
    dt = _dt(F64 if _wide(fmt) else F32)
    n = math.prod(x.shape[a] for a in axes)
    X = x.data.astype(dt)
    with np.errstate(all="ignore"):
        mu = be.sum(X, axes, True) / dt(n)
        d = X - mu
        r = _rstd(be, fmt, be.sum(d * d, axes, True) / dt(n), eps)
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
    return _make(be, out, fmt, "layer_norm", [t for t in (x, weight, bias) if t is not None], bwd)


def rms_norm(input: Tensor, normalized_shape: Any, weight: Tensor | None = None,
             eps: float | None = None) -> Tensor:
    """ms = fl32(fl32(sum fl32(x*x)) / n) over ``normalized_shape``; r = fl32(1/sqrt(fl32(ms
    + eps))); y = fl_out(fl32(fl32(x * r) * w)). ``eps=None`` is the input format's
    machine epsilon, as torch's ``finfo(input.dtype).eps``. Autocast name ``rms_norm``.

    Raises:
        ValueError: as :func:`layer_norm`.
    """
    x = _check_tensor(input, "rms_norm")
    axes = _norm_axes("rms_norm", x, normalized_shape, weight)
    eps = x.format.eps if eps is None else _check_eps("rms_norm", eps)
    ins, _, _ = _ac.cast_inputs("rms_norm", [x] + ([weight] if weight is not None else []))
    x = ins[0]
    weight = ins[1] if weight is not None else None
    be, fmt = x.backend, x.format
    dt = _dt(F64 if _wide(fmt) else F32)
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
    return _make(be, out, fmt, "rms_norm", [t for t in (x, weight) if t is not None], bwd)


# -- losses -------------------------------------------------------------------------------------

def nll_loss(input: Tensor, target: Any) -> Tensor:
    """-mean_i logp[i, target_i] = fl_out(fl32(-fl32(exact sum) / N)). Autocast name
    ``nll_loss`` (fp32 under both torch policies)."""
    logp = _check_tensor(input, "nll_loss")
    (logp,), _, _ = _ac.cast_inputs("nll_loss", [logp])
    be, fmt = logp.backend, logp.format
    t = be.xp.asarray(target.data if isinstance(target, Tensor) else target)
    if logp.ndim != 2 or t.shape != (logp.shape[0],) or t.dtype.kind not in "iu":
        raise ValueError(f"nll_loss needs (N, C) log-probabilities and N integer targets, got "
                         f"{logp.shape} and {t.shape} ({t.dtype})")
    if t.size and (int(t.min()) < 0 or int(t.max()) >= logp.shape[1]):
        raise ValueError(f"targets must lie in [0, {logp.shape[1]}), got range [{int(t.min())}, {int(t.max())}]")
    N = logp.shape[0]
    rows = be.xp.arange(N)
    picked = logp.data[rows, t]
    with np.errstate(all="ignore"):
        out = round_to(be, -be.sum(picked) / _dt(fmt)(N), fmt)

    def bwd(g: Any) -> tuple[Any]:
        grad = be.xp.zeros(logp.shape, dtype=g.dtype)
        grad[rows, t] = -g / _dt(fmt)(N)
        return (grad,)
    return _make(be, out, fmt, "nll_loss", [logp], bwd)


def cross_entropy(input: Tensor, target: Any) -> Tensor:
    """nll_loss(log_softmax(logits)) over the last axis, mean over all positions.

    Autocast name ``cross_entropy_loss``: listed as fp32 under torch-cpu (the whole
    composite runs in float32); unlisted under torch-cuda, where its parts are cast
    (log_softmax -> float32 output, nll_loss fp32), as torch decomposes it.
    """
    logits = _check_tensor(input, "cross_entropy")
    (logits,), _, listed = _ac.cast_inputs("cross_entropy_loss", [logits])
    t = target.data if isinstance(target, Tensor) else target
    with _ac.suspended() if listed else nullcontext():
        flat = reshape(logits, (-1, logits.shape[-1]))
        return nll_loss(log_softmax(flat, -1), flat.backend.xp.asarray(t).reshape(-1))


def mse_loss(input: Tensor, target: Any) -> Tensor:
    """mean((a - b)^2) with the sub/mul/mean rules. Autocast name ``mse_loss`` (fp32)."""
    a, b = _check_tensor(input, "mse_loss"), target
    ins, _, listed = _ac.cast_inputs("mse_loss", [a] + ([b] if isinstance(b, Tensor) else []))
    a = ins[0]
    b = ins[1] if isinstance(b, Tensor) else b
    with _ac.suspended() if listed else nullcontext():
        d = sub(a, b)
        return mean(mul(d, d))


def binary_cross_entropy(input: Tensor, target: Any) -> Tensor:
    """-mean(y ln p + (1 - y) ln(1 - p)). Banned under torch-cuda autocast (raises with
    torch's advice); fp32 under torch-cpu."""
    p, y = _check_tensor(input, "binary_cross_entropy"), target
    ins, _, listed = _ac.cast_inputs("binary_cross_entropy", [p] + ([y] if isinstance(y, Tensor) else []))
    p = ins[0]
    y = ins[1] if isinstance(y, Tensor) else y
    with _ac.suspended() if listed else nullcontext():
        return neg(mean(add(mul(y, log(p)), mul(sub(1.0, y), log(sub(1.0, p))))))


# -- attention -----------------------------------------------------------------------------------

def scaled_dot_product_attention(query: Tensor, key: Tensor, value: Tensor, attn_mask: Any = None,
                                 dropout_p: float = 0.0, is_causal: bool = False,
                                 scale: float | None = None, *,
                                 accumulation: str = "exact") -> Tensor:
    """softmax(q k^T * scale + mask) v over (..., L, E) inputs, as composed engine ops:

    s = fl(fl(q @ k^T) * fl32(scale)); positions where the boolean ``attn_mask`` is False
    (or above the diagonal with ``is_causal``) get -inf; p = softmax(s) (float32 inside,
    output in the compute format); out = p @ v. ``scale`` defaults to 1/sqrt(E). A row
    with every position masked gives NaN. Autocast name ``scaled_dot_product_attention``
    (lower precision; nested ops are not re-cast).

    Raises:
        TypeError: a non-boolean ``attn_mask`` (additive float masks are not supported).
        ValueError: ``dropout_p`` other than 0 (attention dropout would need a seed; use
            :func:`dropout` on the attention weights).
    """
    q, k, v = (_check_tensor(t, "scaled_dot_product_attention") for t in (query, key, value))
    if dropout_p != 0.0:
        raise ValueError(f"scaled_dot_product_attention: dropout_p must be 0.0, got {dropout_p!r} "
                         "(ampref's dropout is seeded: apply F.dropout(..., seed=...) instead)")
    mask = None
    if attn_mask is not None:
        mask = np.asarray(attn_mask.numpy() if isinstance(attn_mask, Tensor) else attn_mask)
        if mask.dtype != bool:
            raise TypeError(f"scaled_dot_product_attention: attn_mask must be boolean (True = "
                            f"attend), got dtype {mask.dtype}; float masks are not supported")
    is_causal = _flag("is_causal", is_causal)
    (q, k, v), _, listed = _ac.cast_inputs("scaled_dot_product_attention", [q, k, v])
    with _ac.suspended() if listed else nullcontext():
        sc = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
        s = mul(matmul(q, transpose(k, -2, -1), accumulation=accumulation), float(sc))
        L, S = q.shape[-2], k.shape[-2]
        block = np.zeros((L, S), dtype=bool)
        if is_causal:
            block |= np.triu(np.ones((L, S), dtype=bool), k=1)
        if mask is not None:
            block = block | ~mask
        if block.any():
            s = masked_fill(s, block, -np.inf)
        return matmul(softmax(s, -1), v, accumulation=accumulation)
