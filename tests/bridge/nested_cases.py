"""Code that switches CUDA autocast off inside a CUDA autocast region (TRC-AUT-006): the
cases both sides run, torch's real CUDA autocast on fake CUDA tensors
(``scripts/fake_cuda_nested.py`` records them into
``tests/data/autocast_nested_fake_cuda.json``) and ``ampref.torch.autocast("cuda")`` on
CPU tensors (``tests/bridge/test_nested_autocast.py`` replays them).

Each case takes float32 operands ``x`` and ``w`` (4x4, on the device the region
emulates) inside an enabled CUDA autocast region and returns the dtypes it observes,
by name.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import torch

Case = Callable[[torch.Tensor, torch.Tensor], dict[str, str]]


def _name(t: torch.Tensor) -> str:
    return str(t.dtype).removeprefix("torch.")


@torch.library.custom_op("ampref_nested::double_it", mutates_args=())
def double_it(x: torch.Tensor) -> torch.Tensor:
    """An op outside aten whose CUDA autocast casts its input to float32."""
    return x * 2


@double_it.register_fake
def _(x: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(x)


double_it.register_autocast("cuda", torch.float32)


class CastToFloat32(torch.autograd.Function):
    """``custom_fwd(cast_inputs=float32)``: inputs cast, the body runs with autocast off."""

    @staticmethod
    @torch.amp.custom_fwd(device_type="cuda", cast_inputs=torch.float32)
    def forward(ctx: Any, a: torch.Tensor, b: torch.Tensor) -> Any:
        return a @ b, torch.softmax(a, -1), a.dtype

    @staticmethod
    @torch.amp.custom_bwd(device_type="cuda")
    def backward(ctx: Any, *grads: Any) -> Any:  # pragma: no cover - forward only
        return grads[0], grads[0]


class Plain(torch.autograd.Function):
    """``custom_fwd`` without ``cast_inputs``: the body runs under the region's autocast."""

    @staticmethod
    @torch.amp.custom_fwd(device_type="cuda")
    def forward(ctx: Any, a: torch.Tensor, b: torch.Tensor) -> Any:
        return a @ b

    @staticmethod
    @torch.amp.custom_bwd(device_type="cuda")
    def backward(ctx: Any, *grads: Any) -> Any:  # pragma: no cover - forward only
        return grads[0], grads[0]


def section_off(x: torch.Tensor, w: torch.Tensor) -> dict[str, str]:
    """``torch.autocast("cuda", enabled=False)``: float32 operands stay float32, a 16-bit
    tensor is not cast to float32 by softmax; after the section casting resumes."""
    h = x @ w
    with torch.autocast("cuda", enabled=False):
        off_mm, off_softmax = x @ w, torch.softmax(h, -1)
        off_16 = h @ h
    return {"on_mm": _name(h), "off_mm": _name(off_mm), "off_softmax_of_16bit":
            _name(off_softmax), "off_mm_of_16bit": _name(off_16), "after_mm": _name(x @ w),
            "after_softmax_of_16bit": _name(torch.softmax(h, -1))}


def deprecated_section_off(x: torch.Tensor, w: torch.Tensor) -> dict[str, str]:
    """``torch.cuda.amp.autocast(enabled=False)``, the deprecated spelling."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        with torch.cuda.amp.autocast(enabled=False):
            off = x @ w
    return {"off_mm": _name(off)}


def custom_fwd_cast_inputs(x: torch.Tensor, w: torch.Tensor) -> dict[str, str]:
    """``custom_fwd(device_type="cuda", cast_inputs=float32)`` applied to a 16-bit input."""
    h = x @ w
    mm, sm, seen = CastToFloat32.apply(h, w)
    return {"input_seen": str(seen).removeprefix("torch."), "mm": _name(mm),
            "softmax": _name(sm)}


def custom_fwd_plain(x: torch.Tensor, w: torch.Tensor) -> dict[str, str]:
    """``custom_fwd(device_type="cuda")``: autocast stays on inside."""
    return {"mm": _name(Plain.apply(x, w))}


def outside_op_off(x: torch.Tensor, w: torch.Tensor) -> dict[str, str]:
    """An op outside aten with a float32 CUDA autocast rule, on and off."""
    h = x @ w
    on = double_it(h)
    with torch.autocast("cuda", enabled=False):
        off = double_it(h)
    return {"on": _name(on), "off": _name(off)}


CASES: dict[str, Case] = {f.__name__: f for f in (
    section_off, deprecated_section_off, custom_fwd_cast_inputs, custom_fwd_plain,
    outside_op_off)}
