"""torch's fused CPU optimizer steps on ampref's numerics (``specs/torch.md``
TRC-OPT-001): ``_fused_adam_``, ``_fused_adamw_``, ``_fused_sgd_`` and
``_fused_adagrad_``, which ``Adam``, ``AdamW``, ``SGD`` and ``Adagrad`` with
``fused=True`` call.

torch 2.13's kernel (``FusedAdamKernel.cpp``) computes each element in the parameter's
format (float32, or float64) with its bias corrections in double; for float16 and
bfloat16 parameters the same body in float32 on their widened values, each stored
tensor (``p``, ``m``, ``v``, ``v_max``, the unscaled gradient) rounded once to the dtype
while the update uses the float32 moments. Its vectorised body,
the definition here, is (``fl``: one rounding; ``fma``: the exact ``a b + c`` rounded
once; constants rounded from double once)::

    g = fl(g / scale)                        (with GradScaler's grad_scale; stored back)
    g = -g                                   (maximize)
    g = fma(p, wd, g)        (Adam, wd != 0)       p = fl(p fl(1 - lr wd))   (AdamW)
    m = fma(w, fl(g - m), m)                 (w = 1 - beta1; |w| >= 1/2: fma(w - 1, g - m, g))
    v = fma(fl(c g), g, fl(v beta2))         (c = 1 - beta2)
    v_max = max(v_max, v)                    (amsgrad; the denominator then takes v_max)
    d = fl(fl(sqrt(v) / sqrt(1 - beta2^t)) + eps)
    p = fl(p + fl(fl(-lr / (1 - beta1^t) m) / d))

with ``sqrt`` correctly rounded (the vector unit's). SGD's body (``FusedSGDKernel.cpp``)::

    g = fl(g / scale); g = -g (maximize); g = fma(p, wd, g)
    b = g (first step)  or  b = fma(g, fl(1 - dampening), fl(b momentum))
    g = fma(b, momentum, g) (nesterov)  or  g = b
    p = fma(g, -lr, p)

and Adagrad's (``FusedAdagradKernel.cpp``; ``clr = lr / (1 + (t - 1) lr_decay)`` in
double)::

    g = fl(g / scale); g = -g (maximize); g = fma(p, wd, g)
    s = fma(g, g, s);  p = fl(p - fl(fl(clr g) / fl(sqrt(s) + eps)))

A step whose ``found_inf`` is 1 changes nothing. NaN and inf follow IEEE through each
operation; ``max`` keeps a NaN. torch's scalar remainder of each tensor (the last
``numel mod W`` elements past their last whole ``W/2`` group; ``W`` = 16 float32 or 8
float64 elements on AVX512), compiled otherwise, rounds Adam's ``v`` as
``fma(v, beta2, fl(fl(c g) g))``: ampref computes every element as the body does.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from .convert import from_numpy, to_numpy
from .fusedops import fused

__all__ = ["FUSED_OPTIMIZERS"]

Handler = Callable[[Any, Any, tuple[Any, ...], dict[str, Any]], Any]


def _scalar(v: Any) -> float:
    return float(v.item()) if isinstance(v, torch.Tensor) else float(v)


def _constants(kw: dict[str, Any], step: float, cf: Any) -> dict[str, Any]:
    """The kernel's per-step constants: computed in double, then rounded to ``cf``."""
    lr, b1, b2 = _scalar(kw["lr"]), float(kw["beta1"]), float(kw["beta2"])
    wd = float(kw["weight_decay"])
    return {"lr": lr, "decay": cf(1 - lr * wd), "w": cf(1 - b1),
            "c": cf(1 - b2), "b2": cf(b2), "eps": cf(float(kw["eps"])),
            "root": cf(math.sqrt(1 - b2 ** step)), "step_size": cf(-(lr / (1 - b1 ** step)))}


def _skipped(kw: dict[str, Any]) -> bool:
    """GradScaler's ``found_inf`` of 1: the kernels change nothing."""
    found = kw.get("found_inf")
    return found is not None and _scalar(found) == 1.0


def _gradient(x: Any, grad: torch.Tensor, kw: dict[str, Any], decay: bool) -> Any:
    """The kernels' first steps on the gradient, in ``x``'s format: ``fl(g / scale)``
    (written back into ``grad``), ``-g`` (maximize), ``fma(p, wd, g)`` (where ``decay``:
    not AdamW's decoupled decay)."""
    cf = x.dtype.type
    g = to_numpy(grad)
    if kw.get("grad_scale") is not None:
        g = g / cf(_scalar(kw["grad_scale"]))
        grad.copy_(from_numpy(g, grad.dtype))
    if kw["maximize"]:
        g = -g
    wd = float(kw["weight_decay"])
    return fused(x, cf(wd), g) if decay and wd != 0 else g


def _moments(g: Any, m: Any, v: Any, k: dict[str, Any]) -> tuple[Any, Any]:
    """The lerp of the first moment (its two branches by ``|w| < 1/2``) and the fused
    second-moment update."""
    w = k["w"]
    d = g - m
    m = fused(w, d, m) if abs(w) < 0.5 else fused(w - w.dtype.type(1), d, g)
    return m, fused(k["c"] * g, g, v * k["b2"])


def _one(p: torch.Tensor, grad: torch.Tensor, m_t: torch.Tensor, v_t: torch.Tensor,
         vmax_t: torch.Tensor | None, step: float, kw: dict[str, Any], adamw: bool) -> None:
    """One parameter's step, written into its tensors."""
    x, m, v = (to_numpy(t) for t in (p, m_t, v_t))
    k = _constants(kw, step, x.dtype.type)
    with np.errstate(all="ignore"):
        g = _gradient(x, grad, kw, decay=not adamw)
        if adamw and float(kw["weight_decay"]) != 0:
            x = x * k["decay"]
        m, v = _moments(g, m, v, k)
        denom_of = v
        if vmax_t is not None:
            denom_of = np.maximum(to_numpy(vmax_t), v)
            vmax_t.copy_(from_numpy(denom_of, vmax_t.dtype))
        d = np.sqrt(denom_of) / k["root"] + k["eps"]
        x = x + (k["step_size"] * m) / d
    for t, val in ((p, x), (m_t, m), (v_t, v)):
        t.copy_(from_numpy(np.asarray(val), t.dtype))


def _fused_adam(adamw: bool) -> Handler:
    def handler(ctx: Any, func: Any, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
        params, grads, exp_avgs, exp_avg_sqs, max_sqs, steps = args[:6]
        if _skipped(kw):
            return None
        for i, p in enumerate(params):
            vmax = max_sqs[i] if kw["amsgrad"] else None
            _one(p, grads[i], exp_avgs[i], exp_avg_sqs[i], vmax, _scalar(steps[i]), kw, adamw)
        return None
    return handler


def _sgd_one(p: torch.Tensor, grad: torch.Tensor, buf_t: torch.Tensor | None,
             kw: dict[str, Any]) -> None:
    """One parameter's fused SGD step, written into its tensors."""
    x = to_numpy(p)
    cf = x.dtype.type
    momentum = float(kw["momentum"])
    with np.errstate(all="ignore"):
        g = _gradient(x, grad, kw, decay=True)
        if momentum != 0 and buf_t is not None:
            b = g if kw["is_first_step"] else fused(
                g, cf(1 - float(kw["dampening"])), to_numpy(buf_t) * cf(momentum))
            buf_t.copy_(from_numpy(np.asarray(b), buf_t.dtype))
            g = fused(b, cf(momentum), g) if kw["nesterov"] else b
        x = fused(g, cf(-_scalar(kw["lr"])), x)
    p.copy_(from_numpy(np.asarray(x), p.dtype))


def _modelled(p: torch.Tensor, name: str) -> None:
    """Refuse 16-bit parameters for the fused SGD and Adagrad kernels: Adagrad's rounds
    its constants to the dtype (not modelled), and torch 2.13's SGD leaves the vector
    body of a 16-bit parameter unchanged (a torch defect: ampref does not copy it)."""
    if p.dtype not in (torch.float32, torch.float64):
        raise NotImplementedError(
            f"ampref.torch: fused {name} on {p.dtype} parameters (float32 and float64 are "
            "modelled; pass foreach=True)")


def _fused_sgd(ctx: Any, func: Any, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
    params, grads, bufs = args[:3]
    if _skipped(kw):
        return None
    for i, p in enumerate(params):
        _modelled(p, "SGD")
        _sgd_one(p, grads[i], bufs[i] if bufs else None, kw)
    return None


def _adagrad_one(p: torch.Tensor, grad: torch.Tensor, sum_t: torch.Tensor, step: float,
                 kw: dict[str, Any]) -> None:
    """One parameter's fused Adagrad step, written into its tensors."""
    x = to_numpy(p)
    cf = x.dtype.type
    clr = cf(_scalar(kw["lr"]) / (1.0 + (step - 1.0) * float(kw["lr_decay"])))
    with np.errstate(all="ignore"):
        g = _gradient(x, grad, kw, decay=True)
        total = fused(g, g, to_numpy(sum_t))
        x = x - (clr * g) / (np.sqrt(total) + cf(float(kw["eps"])))
    sum_t.copy_(from_numpy(np.asarray(total), sum_t.dtype))
    p.copy_(from_numpy(np.asarray(x), p.dtype))


def _fused_adagrad(ctx: Any, func: Any, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
    params, grads, sums, steps = args[:4]
    if _skipped(kw):
        return None
    for i, p in enumerate(params):
        _modelled(p, "Adagrad")
        _adagrad_one(p, grads[i], sums[i], _scalar(steps[i]), kw)
    return None


#: aten op name -> handler
FUSED_OPTIMIZERS: dict[str, Handler] = {"_fused_adam_": _fused_adam(False),
                                        "_fused_adamw_": _fused_adam(True),
                                        "_fused_sgd_": _fused_sgd,
                                        "_fused_adagrad_": _fused_adagrad}
