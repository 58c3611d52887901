"""aten's randomized leaky ReLU (``nn.RReLU``, ``F.rrelu``) on ampref's numerics
(``specs/torch.md`` TRC-ACT-002).

* Evaluation (``training=False``): ``leaky_relu`` with the slope ``(lower + upper) / 2``
  computed in float64 and rounded to the compute format, as torch's kernel does.
* Training: the slopes are torch's own random draws (its CPU generator, one uniform
  draw in ``[lower, upper]`` per element ``<= 0``, 1 elsewhere, written into the
  ``noise`` argument as torch writes it; for float16/bfloat16 inputs, which torch's CPU
  kernel refuses, drawn in float32 and rounded to the input's dtype), and the output
  is ``x * noise`` in float32 where ``x <= 0`` (``-0`` included), ``x`` elsewhere,
  rounded once to the output dtype. NaN inputs keep NaN with slope 1.
* Backward: ``g * noise`` in training, ``leaky_relu_backward`` with the mean slope
  otherwise (torch 2.13's formula).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from .activations import leaky_relu, leaky_relu_backward
from .convert import from_numpy, to_numpy

__all__ = ["RRELU"]

Handler = Callable[[Any, Any, tuple[Any, ...], dict[str, Any]], Any]

_DEFAULTS = {"lower": 0.125, "upper": 1.0 / 3.0, "training": False}


def _params(args: tuple[Any, ...], kw: dict[str, Any], first: int) -> tuple[float, float, bool]:
    """lower, upper, training from aten's positional or keyword arguments."""
    names = ("lower", "upper", "training")
    vals = [args[first + i] if len(args) > first + i else kw.get(n, _DEFAULTS[n])
            for i, n in enumerate(names)]
    return float(vals[0]), float(vals[1]), bool(vals[2])


def _cf(t: torch.Tensor) -> Any:
    return np.float64 if t.dtype == torch.float64 else np.float32


def _draw(x: torch.Tensor, noise: torch.Tensor, lower: float, upper: float,
          generator: Any) -> None:
    """Fill ``noise`` with torch's own draws (its CPU kernel; float32 for the 16-bit
    dtypes it refuses), consuming torch's generator exactly as torch would."""
    wide = x.dtype in (torch.float32, torch.float64)
    xs = x if wide else x.float()
    slopes = noise if wide else torch.empty_like(xs)
    torch.ops.aten.rrelu_with_noise.default(xs, slopes, lower, upper, True, generator)
    if not wide:
        noise.copy_(from_numpy(to_numpy(slopes), noise.dtype))


def _forward(inplace: bool) -> Handler:
    def handler(ctx: Any, func: Any, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
        x, noise = args[0], args[1]
        lower, upper, training = _params(args, kw, 2)
        cf = _cf(x)
        v = to_numpy(x).astype(cf)
        with np.errstate(all="ignore"):
            if training:
                _draw(x, noise, lower, upper, args[5] if len(args) > 5 else kw.get("generator"))
                r = np.where(v <= 0, v * to_numpy(noise).astype(cf), v)
            else:
                r = leaky_relu(v, (lower + upper) / 2)
        result = from_numpy(r, x.dtype)
        return x.copy_(result) if inplace else result
    return handler


def _backward(ctx: Any, func: Any, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
    g, x, noise = args[:3]
    lower, upper, training = _params(args, kw, 3)
    cf = _cf(g)
    gv = to_numpy(g).astype(cf)
    with np.errstate(all="ignore"):
        if training:
            r = gv * to_numpy(noise).astype(cf)
        else:
            r = leaky_relu_backward(gv, to_numpy(x).astype(cf), (lower + upper) / 2)
    return from_numpy(r, g.dtype)


#: aten op name (overload packet) -> handler
RRELU: dict[str, Handler] = {
    "rrelu_with_noise": _forward(False), "rrelu_with_noise_": _forward(True),
    "rrelu_with_noise_backward": _backward,
}
