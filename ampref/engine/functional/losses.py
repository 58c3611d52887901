"""Losses: nll_loss, cross_entropy, mse_loss, binary_cross_entropy (mean reduction).

Composite losses run their parts as engine ops; when the policy lists the composite
itself, its parts run with autocast suspended, as torch does.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..tensor import Tensor, round_to, storage_dtype
from .core import autocast_args, autocast_inputs, check_tensor, make, nested_ops
from .elementwise import add, log, mul, neg, sub
from .norms import log_softmax
from .reductions import mean
from .shapes import reshape

__all__ = ["binary_cross_entropy", "cross_entropy", "mse_loss", "nll_loss"]


def nll_loss(input: Tensor, target: Any) -> Tensor:
    """-mean_i logp[i, target_i] = fl_out(fl32(-fl32(exact sum) / N)). Autocast name
    ``nll_loss`` (fp32 under both torch policies)."""
    logp = check_tensor(input, "nll_loss")
    (logp,), _, _ = autocast_inputs("nll_loss", [logp])
    be, fmt = logp.backend, logp.format
    t = be.xp.asarray(target.data if isinstance(target, Tensor) else target)
    if logp.ndim != 2 or t.shape != (logp.shape[0],) or t.dtype.kind not in "iu":
        raise ValueError(f"nll_loss needs (N, C) log-probabilities and N integer targets, got "
                         f"{logp.shape} and {t.shape} ({t.dtype})")
    if t.size and (int(t.min()) < 0 or int(t.max()) >= logp.shape[1]):
        raise ValueError(f"targets must lie in [0, {logp.shape[1]}), got range [{int(t.min())}, "
                         f"{int(t.max())}]")
    N = logp.shape[0]
    rows = be.xp.arange(N)
    picked = logp.data[rows, t]
    with np.errstate(all="ignore"):
        out = round_to(be, -be.sum(picked) / storage_dtype(fmt)(N), fmt)

    def bwd(g: Any) -> tuple[Any]:
        grad = be.xp.zeros(logp.shape, dtype=g.dtype)
        grad[rows, t] = -g / storage_dtype(fmt)(N)
        return (grad,)
    return make(be, out, fmt, "nll_loss", [logp], bwd)


def cross_entropy(input: Tensor, target: Any) -> Tensor:
    """nll_loss(log_softmax(logits)) over the last axis, mean over all positions.

    Autocast name ``cross_entropy_loss``: listed as fp32 under torch-cpu (the whole
    composite runs in float32); unlisted under torch-cuda, where its parts are cast
    (log_softmax -> float32 output, nll_loss fp32), as torch decomposes it.
    """
    logits = check_tensor(input, "cross_entropy")
    (logits,), _, listed = autocast_inputs("cross_entropy_loss", [logits])
    t = target.data if isinstance(target, Tensor) else target
    with nested_ops(listed):
        flat = reshape(logits, (-1, logits.shape[-1]))
        return nll_loss(log_softmax(flat, -1), flat.backend.xp.asarray(t).reshape(-1))


def mse_loss(input: Tensor, target: Any) -> Tensor:
    """mean((a - b)^2) with the sub/mul/mean rules. Autocast name ``mse_loss`` (fp32)."""
    (a, b), _, listed = autocast_args("mse_loss", check_tensor(input, "mse_loss"), target)
    with nested_ops(listed):
        d = sub(a, b)
        return mean(mul(d, d))


def binary_cross_entropy(input: Tensor, target: Any) -> Tensor:
    """-mean(y ln p + (1 - y) ln(1 - p)). Banned under torch-cuda autocast (raises with
    torch's advice); fp32 under torch-cpu."""
    (p, y), _, listed = autocast_args("binary_cross_entropy",
                                      check_tensor(input, "binary_cross_entropy"), target)
    with nested_ops(listed):
        return neg(mean(add(mul(y, log(p)), mul(sub(1.0, y), log(sub(1.0, p))))))
