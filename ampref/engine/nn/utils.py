"""``ampref.nn.utils``: gradient clipping in torch's call shape (SCL-CLP-001).

The norm is accumulated in float64 over the parameters in order (the order of
``parameters``), so it is reproducible; clipping multiplies each gradient in float64 by
``max_norm / (total + 1e-6)`` and rounds once to the gradient's format.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import numpy as np

from ampref.common.checks import check_flag

from ..tensor import Tensor, round_to

__all__ = ["clip_grad_norm_"]


def _params(parameters: Tensor | Iterable[Tensor]) -> list[Tensor]:
    if isinstance(parameters, Tensor):
        return [parameters]
    if isinstance(parameters, (str, bytes)) or not isinstance(parameters, Iterable):
        raise TypeError(f"clip_grad_norm_ takes a Tensor or an iterable of Tensors, got "
                        f"{type(parameters).__name__}")
    params = list(parameters)
    for i, p in enumerate(params):
        if not isinstance(p, Tensor):
            raise TypeError(f"clip_grad_norm_: parameter {i} is a {type(p).__name__}, not an "
                            "ampref.Tensor (pass model.parameters())")
    return params


def clip_grad_norm_(parameters: Tensor | Iterable[Tensor], max_norm: float, norm_type: float = 2.0,
                    error_if_nonfinite: bool = False) -> float:
    """Scale the gradients in place so that their total ``norm_type`` norm is at most
    ``max_norm``; return the total norm before clipping (a float).

    ``norm_type`` is a positive number or ``inf`` (max |g|). Parameters without a gradient
    are skipped. A non-finite total norm clips nothing and is returned, or raises with
    ``error_if_nonfinite`` (torch's error). Gradients still multiplied by a loss scale
    (a backward from ``scaler.scale(loss)`` not yet followed by ``scaler.unscale_``) are
    refused: their norm would be the scaled norm.

    Raises:
        TypeError: parameters that are not ampref Tensors.
        ValueError: ``max_norm`` not a positive finite number, bad ``norm_type``.
        RuntimeError: gradients still scaled, or a non-finite norm with
            ``error_if_nonfinite``.
    """
    params = _params(parameters)
    if isinstance(max_norm, bool) or not isinstance(max_norm, (int, float, np.floating)) or \
            not (math.isfinite(max_norm) and max_norm > 0):
        raise ValueError(f"max_norm must be a positive finite number, got {max_norm!r}")
    if isinstance(norm_type, bool) or not isinstance(norm_type, (int, float, np.floating)) or \
            not (norm_type > 0 or math.isinf(norm_type)) or math.isnan(norm_type):
        raise ValueError(f"norm_type must be a positive number or inf, got {norm_type!r}")
    error_if_nonfinite = check_flag("error_if_nonfinite", error_if_nonfinite)
    scaled = [p for p in params if p.grad is not None and p.grad_scale is not None]
    if scaled:
        raise RuntimeError(f"clip_grad_norm_ before unscale: {len(scaled)} gradient(s) are still "
                           f"multiplied by the loss scale {scaled[0].grad_scale:g}; call "
                           "scaler.unscale_(optimizer) first")
    grads = [p for p in params if p.grad is not None]
    total = _total_norm([p.backend.to_numpy(p.grad) for p in grads], float(norm_type))
    if not math.isfinite(total):
        if error_if_nonfinite:
            raise RuntimeError(f"The total norm of order {norm_type} for gradients from "
                               "`parameters` is non-finite, so it cannot be clipped. To disable "
                               "this error and scale the gradients by the non-finite norm "
                               "anyway, set `error_if_nonfinite=False`")
        return total
    coef = max_norm / (total + 1e-6)
    if coef < 1:
        for p in grads:
            xp = p.backend.xp
            with np.errstate(all="ignore"):
                wide = xp.asarray(p.grad, dtype=xp.float64) * coef
            p.grad = round_to(p.backend, wide, p.format)
    return total


def _total_norm(grads: list[Any], norm_type: float) -> float:
    """The ``norm_type`` norm of all elements, in float64, parameters in order."""
    with np.errstate(over="ignore", invalid="ignore"):
        if math.isinf(norm_type):
            return max((float(np.max(np.abs(g))) for g in grads if g.size), default=0.0)
        total = 0.0
        for g in grads:
            total += float(np.sum(np.abs(g.astype(np.float64)) ** norm_type))
        # sqrt for the 2-norm: correctly rounded, where pow(total, 0.5) may differ in the
        # last bit
        return math.sqrt(total) if norm_type == 2 else total ** (1.0 / norm_type)
