"""Losses: nll_loss, cross_entropy, mse_loss, binary_cross_entropy (mean reduction).

Composite losses run their parts as engine ops; when the policy lists the composite
itself, its parts run with autocast suspended, as torch does.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..tensor import Tensor, round_to, storage_dtype
from .core import (SCALAR_TYPES, autocast_args, autocast_inputs, check_tensor, host_index,
                   make, nested_ops, wide_math)
from .norms import log_softmax
from .shapes import reshape

__all__ = ["binary_cross_entropy", "cross_entropy", "mse_loss", "nll_loss"]


_REDUCTIONS = ("mean", "sum", "none")


def _reduction(op: str, reduction: Any) -> str:
    if reduction not in _REDUCTIONS:
        raise ValueError(f"{op}: reduction must be one of {', '.join(_REDUCTIONS)}, got "
                         f"{reduction!r}")
    return str(reduction)


def _targets(logp: Tensor, target: Any, ignore_index: int) -> np.ndarray:
    """The targets as a host array, checked there (one transfer for device targets)."""
    t = host_index(logp.backend, target)
    if logp.ndim != 2 or t.shape != (logp.shape[0],) or t.dtype.kind not in "iu":
        raise ValueError(f"nll_loss needs (N, C) log-probabilities and N integer targets, got "
                         f"{logp.shape} and {t.shape} ({t.dtype})")
    if isinstance(ignore_index, bool) or not isinstance(ignore_index, (int, np.integer)):
        raise TypeError(f"ignore_index must be an int, got {ignore_index!r}")
    used = t[t != ignore_index]
    if used.size and (int(used.min()) < 0 or int(used.max()) >= logp.shape[1]):
        raise ValueError(f"targets must lie in [0, {logp.shape[1]}) or equal ignore_index "
                         f"{ignore_index}, got range [{int(used.min())}, {int(used.max())}]")
    return t


def nll_loss(input: Tensor, target: Any, *, ignore_index: int = -100,
             reduction: str = "mean") -> Tensor:
    """loss_i = -logp[i, target_i] for targets other than ``ignore_index`` (+0 for
    ignored ones); ``mean`` = fl_out(fl32(-fl32(exact sum) / count)) over the counted
    targets (NaN when none counts, as torch), ``sum`` = fl_out(fl32(-exact sum)),
    ``none`` = the N losses (exact negations, so -0 where logp is +0). A zero sum is +0
    whatever the signs of its terms, as torch, which accumulates the negated terms from
    +0 (so ``mean`` and ``sum`` of only ignored targets, or of log-probabilities 0, are
    NaN and +0, never -0). Autocast name ``nll_loss`` (fp32 under both torch policies)."""
    logp = check_tensor(input, "nll_loss")
    red = _reduction("nll_loss", reduction)
    (logp,), _, _ = autocast_inputs("nll_loss", [logp])
    be, fmt = logp.backend, logp.format
    xp = be.xp
    # targets, their mask and count on the host: the device gets index arrays only
    t = _targets(logp, target, ignore_index)
    valid = t != ignore_index
    rows = xp.arange(logp.shape[0])
    count = storage_dtype(fmt)(int(valid.sum())) if red == "mean" else storage_dtype(fmt)(1)
    with np.errstate(all="ignore"):
        # exact negations; an ignored row +0 (a negated +0 would be torch's -0 there)
        losses = xp.where(xp.asarray(valid),
                          -logp.data[rows, xp.asarray(np.where(valid, t, 0))], 0)
        if red == "none":
            out = round_to(be, losses, fmt)
        else:
            total = be.sum(losses)  # fl32(-exact sum): round-to-nearest is sign-symmetric
            # + (+0): a zero total is +0, as torch's accumulation from +0 gives it
            out = round_to(be, (total + total.dtype.type(0)) / count, fmt)

    # the counted rows and their classes, copied now (a caller may reuse its targets
    # array before backward)
    counted, classes = np.flatnonzero(valid), t[valid]

    def bwd(g: Any) -> tuple[Any]:
        grad = xp.zeros(logp.shape, dtype=g.dtype)
        rows_d = xp.asarray(counted)
        with np.errstate(all="ignore"):
            grad[rows_d, xp.asarray(classes)] = (-g[rows_d] if red == "none" else -g / count)
        return (grad,)
    return make(be, out, fmt, "nll_loss", [logp], bwd)


def cross_entropy(input: Tensor, target: Any, *, ignore_index: int = -100,
                  reduction: str = "mean") -> Tensor:
    """nll_loss(log_softmax(logits)) over the last axis (reductions and ``ignore_index``
    as :func:`nll_loss`; ``none`` has the targets' shape).

    Autocast name ``cross_entropy_loss``: listed as fp32 under torch-cpu (the whole
    composite runs in float32); unlisted under torch-cuda, where its parts meet the
    policy as torch decomposes it: torch's composite asks ``log_softmax`` for the
    logits' own dtype explicitly (so fp32_set_opt_dtype leaves float16 logits' log
    probabilities in float16), then ``nll_loss`` (fp32) casts them to float32 (AUT-CAT-005).
    """
    logits = check_tensor(input, "cross_entropy")
    _reduction("cross_entropy", reduction)
    (logits,), _, listed = autocast_inputs("cross_entropy_loss", [logits])
    t = host_index(logits.backend, target)
    with nested_ops(listed):
        flat = reshape(logits, (-1, logits.shape[-1]))
        out = nll_loss(log_softmax(flat, -1, dtype=flat.format), t.reshape(-1),
                       ignore_index=ignore_index,
                       reduction=reduction)
        return reshape(out, t.shape) if reduction == "none" else out


def mse_loss(input: Tensor, target: Any, *, reduction: str = "mean") -> Tensor:
    """torch's ``mse_loss``: l_i = fl(fl(a - b)^2), then ``mean`` (fl_out(fl32(exact sum) /
    n)), ``sum`` or ``none``. Backward in torch's float32 operations and order:
    fl(fl(c·(a - b))·g) with c = fl32(2 / n) for the mean, 2 otherwise, and the same with
    (b - a) for a tensor target. NaN and inf propagate as in those operations. ``target``:
    an ampref Tensor of the input's shape, or a real number. Autocast name ``mse_loss``
    (fp32)."""
    red = _reduction("mse_loss", reduction)
    (a, b), _, _ = autocast_args("mse_loss", check_tensor(input, "mse_loss"), target)
    _check_target("mse_loss", b, a)
    be, fmt = a.backend, a.format
    xp = be.xp
    work = xp.float64 if fmt.wide else xp.float32
    av = xp.asarray(a.data, dtype=work)
    bv = xp.asarray(b.data, dtype=work) if isinstance(b, Tensor) else work(b)
    with np.errstate(all="ignore"):
        d = av - bv
        out = _reduced(be, d * d, red, fmt, a.data.dtype)
    c = work(2.0 / a.data.size) if red == "mean" else work(2)

    def bwd(g: Any) -> tuple[Any, ...]:
        gv = xp.asarray(g, dtype=work)
        with np.errstate(all="ignore"):
            grads = [(c * (av - bv) * gv).astype(a.data.dtype)]
            if isinstance(b, Tensor):
                grads.append((c * (bv - av) * gv).astype(b.data.dtype))
        return tuple(grads)
    return make(be, out, fmt, "mse_loss", [a] + ([b] if isinstance(b, Tensor) else []), bwd)


def _check_target(op: str, target: Any, input: Tensor) -> None:
    """A loss target: an ampref Tensor of the input's shape, or a real number."""
    if isinstance(target, Tensor):
        if target.shape != input.shape:
            raise ValueError(f"{op}: target shape {target.shape} must equal the input shape "
                             f"{input.shape} (ampref does not broadcast a loss's target)")
    elif isinstance(target, bool) or not isinstance(target, SCALAR_TYPES):
        raise TypeError(f"{op}: target must be an ampref.Tensor or a real number, got "
                        f"{type(target).__name__}")


def _reduced(be: Any, losses: Any, red: str, fmt: Any, dtype: Any) -> Any:
    """Per-element losses reduced as the engine's reductions: ``none`` as they are,
    ``sum`` fl32(exact sum), ``mean`` fl32(fl32(exact sum) / n); then rounded to ``fmt``."""
    if red == "none":
        return round_to(be, losses, fmt)
    total = be.sum(be.xp.asarray(losses, dtype=dtype))
    n = total.dtype.type(losses.size)
    return round_to(be, total / n if red == "mean" else total, fmt)


#: torch's floor under the backward's denominator (1 - p) p, a float32 constant
_BCE_EPS = np.float32(1e-12)


def binary_cross_entropy(input: Tensor, target: Any, *, reduction: str = "mean") -> Tensor:
    """torch's ``binary_cross_entropy`` (BCELoss): l_i = (y - 1)·max(ln(1 - p), -100) -
    y·max(ln p, -100), then ``mean`` (fl_out(fl32(exact sum) / n)), ``sum`` or ``none``.

    As torch, the logs are clamped at -100, so p = 0 or 1 give finite losses (100 where
    the label disagrees, ±0 where it agrees: -0 for p = y = 1, as torch) instead of NaN;
    p outside [0, 1] or NaN gives NaN (torch raises). The logs (ln p, and ln(1 - p) as
    log1p(-p)) are evaluated in float64 and rounded to float32; the rest runs in torch's
    float32 operations in torch's order, so a loss is torch's up to its libm's last-bit
    log. Backward, also torch's float32 sequence: d/dp = g·(p - y) / max((1 - p)·p,
    1e-12) (then / n for the mean: ±1e12-scale slopes at p = 0 or 1, not inf), d/dy =
    -g·ln(p / (1 - p)) (torch's ``logit``, unclamped: ±inf at p = 0 or 1). ``target``: an
    ampref Tensor of the input's shape, or a real number. Banned under torch-cuda
    autocast (raises with torch's advice); fp32 under torch-cpu."""
    red = _reduction("binary_cross_entropy", reduction)
    (p, y), _, _ = autocast_args("binary_cross_entropy",
                                 check_tensor(input, "binary_cross_entropy"), target)
    _check_target("binary_cross_entropy", y, p)
    be, fmt = p.backend, p.format
    xp = be.xp
    work = xp.float64 if fmt.wide else xp.float32  # torch's arithmetic dtype
    pv = xp.asarray(p.data, dtype=work)
    yv = xp.asarray(y.data, dtype=work) if isinstance(y, Tensor) else work(y)
    one = work(1)
    with np.errstate(all="ignore"):
        lo = xp.maximum(wide_math(be, fmt, lambda m, v: m.log1p(-v), pv), work(-100))
        hi = xp.maximum(wide_math(be, fmt, lambda m, v: m.log(v), pv), work(-100))
        out = _reduced(be, (yv - one) * lo - yv * hi, red, fmt, p.data.dtype)
    n = work(p.data.size)

    def bwd(g: Any) -> tuple[Any, ...]:
        gv = xp.asarray(g, dtype=work)
        with np.errstate(all="ignore"):
            gp = gv * (pv - yv) / xp.maximum((one - pv) * pv, work(_BCE_EPS))
            logit = wide_math(be, fmt, lambda m, v: m.log(v), pv / (one - pv))
            gy = -logit * gv
            if red == "mean":
                gp, gy = gp / n, gy / n
        grads = [gp.astype(p.data.dtype)]
        if isinstance(y, Tensor):
            grads.append(xp.broadcast_to(gy, y.shape).astype(y.data.dtype))
        return tuple(grads)
    parents = [p] + ([y] if isinstance(y, Tensor) else [])
    return make(be, out, fmt, "binary_cross_entropy", parents, bwd)
