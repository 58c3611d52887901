"""aten's matmuls, reductions, losses, attention and embedding on
ampref's engine (``specs/torch.md`` TRC-NN-*), through :mod:`ampref.torch.replay`: an
aten-level model and the same model in ampref's engine agree wherever aten's ops are
the engine's ops; where aten fuses differently (addmm / baddbmm with a 2-D bias or
factors, attention's logsumexp) the clause states the definition used.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from ampref.accumulation import certified
from ampref.engine import functional as F
from ampref.formats.exactsum import add_rounded
from ampref.formats.table import get_format

from .convert import dtype_steps, engine, format_of, from_numpy, meta, to_numpy
from .lossops import REDUCTIONS, reduced
from .replay import NP, as_torch, forward, replay

__all__ = ["NN"]

Handler = Callable[[Any, Any, tuple[Any, ...], dict[str, Any]], Any]

_F32 = get_format("float32")


# -- matmuls ----------------------------------------------------------------------------
def _mm(ctx: Any, func: Any, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
    out = meta(func, args, kw)
    r = forward(lambda a, b: F.matmul(a, b, accumulation=ctx.accumulation), args[0], args[1])
    return as_torch(r, out.dtype)


def _dot(ctx: Any, func: Any, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
    """``dot`` (1-D . 1-D) and ``mv`` (2-D @ 1-D): the engine's matmul of the vectors
    as a row / column, so the same dot products under the accumulation model."""
    a, b = args[:2]
    out = meta(func, args, kw)
    row = a if a.ndim == 2 else a.reshape(1, -1)
    r = forward(lambda x, y: F.matmul(x, y, accumulation=ctx.accumulation), row,
                b.reshape(-1, 1))
    return from_numpy(r.data.reshape(tuple(out.shape)), out.dtype)


def _trace(ctx: Any, func: Any, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
    """The engine's exactly rounded sum of the diagonal."""
    out = meta(func, args, kw)
    r = forward(lambda d: F.sum(d, None, False, dtype=format_of(out.dtype)),
                torch.diagonal(args[0]))
    return as_torch(r, out.dtype)


def _round(ctx: Any, func: Any, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
    """Without ``decimals`` rounding to an integer is exact: torch's. With them, torch's
    float32 steps: nearbyint(x * 10^d) / 10^d (d > 0), nearbyint(x / 10^-d) * 10^-d."""
    d = int(kw.get("decimals", args[1] if len(args) > 1 else 0))
    if d == 0:
        return func(*args, **kw)
    x = to_numpy(args[0])
    ten = x.dtype.type(10.0 ** abs(d))
    with np.errstate(all="ignore"):
        r = np.rint(x * ten) / ten if d > 0 else np.rint(x / ten) * ten
    out = from_numpy(r, args[0].dtype)
    return args[0].copy_(out) if func.overloadpacket.__name__.endswith("_") else out


def _addmm(ctx: Any, func: Any, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
    """``addmm`` / ``baddbmm``: ``beta c + alpha (m1 @ m2)`` as
    ``fl_out(fl32(fl32(alpha P) + fl32(beta c)))`` with ``P = fl32(exact m1 @ m2)``
    under the accumulation model (the multiplications skipped where the factor is 1;
    ``beta = 0`` ignores ``c``, NaN included, as BLAS and torch): with a 1-D bias and unit
    factors this is the engine's ``linear`` epilogue."""
    c, m1, m2 = args[:3]
    out = meta(func, args, kw)
    return _epilogue(ctx, c, m1, m2, kw, out, tuple(out.shape))


def _epilogue(ctx: Any, c: Any, m1: Any, m2: Any, kw: dict[str, Any], out: Any,
              shape: tuple[int, ...]) -> Any:
    """``fl_out(fl32(fl32(alpha P) + fl32(beta c)))``, P = m1 @ m2 reshaped to
    ``shape`` (see ``_addmm``)."""
    beta, alpha = kw.get("beta", 1), kw.get("alpha", 1)
    cf = np.float64 if out.dtype == torch.float64 else np.float32
    acc = NP.matmul(to_numpy(m1).astype(cf), to_numpy(m2).astype(cf), ctx.accumulation,
                    format_of(m1.dtype))
    acc = np.broadcast_to(acc, shape) if acc.ndim == len(shape) else acc.reshape(shape)
    with np.errstate(all="ignore"):
        if alpha != 1:
            acc = acc * cf(alpha)
        if beta != 0:
            cv = to_numpy(c).astype(cf)
            acc = acc + (cv if beta == 1 else cf(beta) * cv)
    return from_numpy(np.broadcast_to(acc, shape), out.dtype)


def _cross(ctx: Any, func: Any, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
    """``linalg_cross``: each component ``a_j b_k - a_k b_j`` exact (two products exact in
    float64, one correctly rounded difference), rounded once to float32; its backward
    is this op again (torch's formula)."""
    a, b = args[:2]
    dim = int(args[2] if len(args) > 2 else kw.get("dim", -1))
    out = meta(func, args, kw)
    x, y = np.broadcast_arrays(to_numpy(a).astype(np.float64), to_numpy(b).astype(np.float64))
    x, y = np.moveaxis(x, dim, -1), np.moveaxis(y, dim, -1)
    comps = []
    with np.errstate(all="ignore"):
        for j, k in ((1, 2), (2, 0), (0, 1)):
            comps.append(add_rounded(x[..., j] * y[..., k], -(x[..., k] * y[..., j]), _F32,
                                     "nearest_even"))
    r = np.moveaxis(np.stack(comps, -1), -1, dim)
    return from_numpy(r.astype(np.float32), out.dtype)


def _addbmm(ctx: Any, func: Any, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
    """``addbmm(c, b1, b2)``: ``_addmm``'s epilogue on the batch-summed product as one
    GEMM over the joined batch and inner axes (``b1`` (B, n, k) as (n, B k), ``b2`` as
    (B k, m)): under ``exact`` each element's whole sum is exact, rounded once."""
    c, b1, b2 = args[:3]
    out = meta(func, args, kw)
    a = b1.permute(1, 0, 2).reshape(b1.shape[1], -1)
    b = b2.reshape(-1, b2.shape[-1])
    return _epilogue(ctx, c, a, b, kw, out, tuple(out.shape))


def _addmv_addr(ctx: Any, func: Any, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
    """``addmv(c, m, v)`` and ``addr(c, v1, v2)``: ``_addmm``'s epilogue on ``m @ v``
    (a column) and on the outer product ``v1 v2^T`` (a product of K = 1: each element
    ``fl32(v1_i v2_j)``)."""
    c, a, b = args[:3]
    out = meta(func, args, kw)
    if a.ndim == 1:  # addr: a column times a row
        return _epilogue(ctx, c, a.reshape(-1, 1), b.reshape(1, -1), kw, out,
                         tuple(out.shape))
    return _epilogue(ctx, c, a, b.reshape(-1, 1), kw, out, tuple(out.shape))


# -- reductions -----------------------------------------------------------------------
def _sum(ctx: Any, func: Any, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
    out = meta(func, args, kw)
    dim = args[1] if len(args) > 1 else kw.get("dim")
    keep = args[2] if len(args) > 2 else kw.get("keepdim", False)
    dims = None if dim is None or (isinstance(dim, (list, tuple)) and len(dim) == 0) else \
        tuple(dim) if isinstance(dim, (list, tuple)) else dim
    r = forward(lambda x: F.sum(x, dims, bool(keep), dtype=format_of(out.dtype)), args[0])
    return as_torch(r, out.dtype)


def _mean(ctx: Any, func: Any, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
    """The engine's mean; with ``dtype=`` the input cast to that dtype first, as torch
    does (``mean(dtype=torch.float64)`` of float32 values is a float64 mean: it was the
    float32 mean widened)."""
    out = meta(func, args, kw)
    dim = args[1] if len(args) > 1 else kw.get("dim")
    keep = args[2] if len(args) > 2 else kw.get("keepdim", False)
    dims = None if not dim else tuple(dim) if isinstance(dim, (list, tuple)) else dim
    x = args[0]
    if x.dtype != out.dtype:
        x = from_numpy(to_numpy(x), out.dtype)
    r = forward(lambda x_: F.mean(x_, dims, bool(keep)), x)
    return as_torch(r, out.dtype)


# -- losses -----------------------------------------------------------------------------
def _mse(ctx: Any, func: Any, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
    """The engine's ``mse_loss`` (torch's definition, ENG-LOS-001) in every reduction; in
    float16/bfloat16 torch's kernel: ``(x - y)^2`` with each step rounded to the dtype,
    then the exactly rounded mean or sum."""
    x, y = args[:2]
    code = int(args[2] if len(args) > 2 else kw.get("reduction", 1))
    if x.dtype in (torch.float16, torch.bfloat16) and y.dtype == x.dtype:
        r = dtype_steps(x.dtype)
        d = r(to_numpy(x) - to_numpy(y))
        return reduced(r(d * d), x.dtype, code, meta(func, args, kw).dtype)
    return as_torch(forward(F.mse_loss, x, y, reduction=REDUCTIONS[code]),
                    meta(func, args, kw).dtype)


def _mse_bwd(ctx: Any, func: Any, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
    g, x, y = args[:3]
    code = int(args[3] if len(args) > 3 else kw.get("reduction", 1))
    if x.dtype in (torch.float16, torch.bfloat16) and y.dtype == x.dtype == g.dtype:
        return _mse_bwd_narrow(g, x, y, code)
    return replay(F.mse_loss, [x, y], [True, False], g, reduction=REDUCTIONS[code])[0]


def _mse_bwd_narrow(g: Any, x: Any, y: Any, code: int) -> Any:
    """torch's 16-bit kernel (TRC-PWO-001): ``norm (x - y) g`` in the dtype's own
    arithmetic, each step a float32 operation rounded to the dtype, ``norm`` (2, or 2/N
    for the mean) rounded to the dtype first."""
    h = dtype_steps(x.dtype)
    norm = h(np.float32(2.0 / x.numel() if REDUCTIONS[code] == "mean" else 2.0))
    with np.errstate(all="ignore"):
        r = h(h(norm * h(to_numpy(x) - to_numpy(y))) * to_numpy(g))
    return from_numpy(np.broadcast_to(r, tuple(x.shape)), x.dtype)


# -- attention, embedding -------------------------------------------------------------
def _sdpa_args(args: tuple[Any, ...], kw: dict[str, Any], first: int) -> tuple[Any, ...]:
    names = ("dropout_p", "is_causal", "attn_mask", "scale")
    vals = dict(zip(names, args[first:], strict=False))
    vals.update({k: v for k, v in kw.items() if k in names})
    if vals.get("dropout_p", 0.0) != 0.0:
        raise NotImplementedError("ampref.torch: attention is emulated without dropout")
    return bool(vals.get("is_causal", False)), vals.get("scale"), vals.get("attn_mask")


def _attention(ctx: Any, causal: bool, scale: Any, mask: Any) -> Callable[..., Any]:
    """The engine's attention with torch's additive mask (a torch tensor: a boolean mask
    reaches this op as 0 / -inf already), TRC-NN-002."""
    bias = None if mask is None else engine(mask)
    return lambda q_, k_, v_: F.scaled_dot_product_attention(
        q_, k_, v_, bias, is_causal=causal, scale=scale, accumulation=ctx.accumulation)


def _shared_heads(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> tuple[Any, Any, int]:
    """Grouped-query attention (``enable_gqa``): each key/value head serves
    ``q_heads / kv_heads`` consecutive query heads, as ``repeat_interleave`` on the head
    axis (torch's definition); returns the repeated k, v and the group size."""
    hq, hk = q.shape[-3], k.shape[-3]
    if hq == hk:
        return k, v, 1
    if hk == 0 or hq % hk or v.shape[-3] != hk:
        raise NotImplementedError(f"ampref.torch: attention with {hq} query heads and "
                                  f"{hk} key / {v.shape[-3]} value heads (grouped-query "
                                  "attention needs a divisor of the query heads)")
    return k.repeat_interleave(hq // hk, -3), v.repeat_interleave(hq // hk, -3), hq // hk


def _fold_heads(g: torch.Tensor, group: int) -> torch.Tensor:
    """The gradient of a repeated key/value head: the exact sum of its ``group`` copies'
    gradients (each in the operand's dtype), rounded once to float32, then to it."""
    if group == 1:
        return g
    x = to_numpy(g)
    parts = x.reshape(x.shape[:-3] + (x.shape[-3] // group, group) + x.shape[-2:])
    return from_numpy(certified.sum_f32(parts.astype(np.float32), -3), g.dtype)


def _sdpa(ctx: Any, func: Any, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
    q = args[0]
    k, v, _ = _shared_heads(*args[:3])
    causal, scale, mask = _sdpa_args(args, kw, 3)
    out = meta(func, args, kw)
    y = forward(_attention(ctx, causal, scale, mask), q, k, v)
    # logsumexp (for torch's own backward, which emulation replaces): of the scaled scores
    s = forward(lambda q_, k_: F.mul(F.matmul(q_, F.transpose(k_, -2, -1)), float(
        scale if scale is not None else 1.0 / math.sqrt(q.shape[-1]))), q, k).data
    if causal:
        s = np.where(np.triu(np.ones(s.shape[-2:], bool), 1), -np.inf, s)
    if mask is not None:
        s = s + to_numpy(mask).astype(s.dtype)
    m = s.max(axis=-1, keepdims=True)
    with np.errstate(all="ignore"):
        lse = (m + np.log(np.exp((s - m).astype(np.float64)).sum(-1, keepdims=True)))[..., 0]
    return (as_torch(y, out[0].dtype), from_numpy(lse, out[1].dtype))


def _sdpa_bwd(ctx: Any, func: Any, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
    g, q = args[:2]
    k, v, group = _shared_heads(q, args[2], args[3])
    causal, scale, mask = _sdpa_args(args, kw, 6)
    gq, gk, gv = replay(_attention(ctx, causal, scale, mask), [q, k, v], [True, True, True], g)
    assert gq is not None and gk is not None and gv is not None  # all requested
    return gq, _fold_heads(gk, group), _fold_heads(gv, group)


def _gelu_bwd(ctx: Any, func: Any, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
    g, x = args[:2]
    approx = args[2] if len(args) > 2 else kw.get("approximate", "none")
    return replay(lambda x_: F.gelu(x_, approx), [x], [True], g)[0]


#: aten op name (overload packet) -> handler
NN: dict[str, Handler] = {
    "gelu_backward": _gelu_bwd,
    "mm": _mm, "bmm": _mm, "addmm": _addmm, "baddbmm": _addmm, "addmv": _addmv_addr,
    "addr": _addmv_addr, "addbmm": _addbmm, "linalg_cross": _cross,
    "dot": _dot, "vdot": _dot, "mv": _dot, "trace": _trace, "round": _round, "round_": _round,
    "sum": _sum, "mean": _mean,
    "mse_loss": _mse, "mse_loss_backward": _mse_bwd,
    "_scaled_dot_product_flash_attention_for_cpu": _sdpa,
    "_scaled_dot_product_flash_attention_for_cpu_backward": _sdpa_bwd,
}
