"""``abs``, ``clamp``, ``max`` and ``min`` of float tensors against torch's: values bit
for bit in every format (NaN, ±0, ±inf and ties included), torch's gradient rules (ties
shared evenly over all elements, the returned index along a dim, bounds inclusive), and
the same refusals (specs/engine.md ENG-EXT-001)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import ampref
from torch_compare import assert_same_result

torch = pytest.importorskip("torch")

TORCH_DT = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
#: ties (2.5 twice in row 0, -3 twice in row 1), ±0, ±inf, a subnormal; NaN added apart
BASE = np.array([[2.5, -0.0, 2.5, 1e-7], [-3.0, 0.0, -3.0, 70000.0],
                 [np.inf, -np.inf, 0.75, -1.0009765625]])

#: name -> the call, written once for both libraries
CALLS: dict[str, Callable[[Any], Any]] = {
    "abs": lambda x: x.abs(),
    "clamp(-1, 2)": lambda x: x.clamp(-1, 2),
    "clamp(min=0)": lambda x: x.clamp(min=0),
    "clamp(max=1.0001)": lambda x: x.clamp(max=1.0001),
    "clamp(3, -1)": lambda x: x.clamp(3, -1),
    "clip(-0.5, 0.5)": lambda x: x.clip(-0.5, 0.5),
    "max()": lambda x: x.max(),
    "min()": lambda x: x.min(),
    "max(1).values": lambda x: x.max(1).values,
    "max(1).indices": lambda x: x.max(1).indices,
    "min(0, keepdim=True)[0]": lambda x: x.min(0, keepdim=True)[0],
    "min(-1)[1]": lambda x: x.min(-1)[1],
}


def _tensors(fmt: str, nan: bool) -> tuple[Any, Any]:
    data = BASE.copy()
    if nan:
        data[1, 2] = np.nan
    x32 = ampref.quantize(data, fmt).astype(np.float32)
    return ampref.tensor(x32, fmt), torch.tensor(x32).to(TORCH_DT[fmt])


@pytest.mark.clause("ENG-EXT-001")
@pytest.mark.parametrize("nan", [False, True])
@pytest.mark.parametrize("fmt", sorted(TORCH_DT))
@pytest.mark.parametrize("name", list(CALLS))
def test_abs_clamp_max_min_give_torchs_values_bitwise(name: str, fmt: str, nan: bool) -> None:
    """Inputs: a 3 x 4 tensor in ``fmt`` with ties, ±0, ±inf, a value past fp16's range
    and one (optionally) NaN, through ``name``: abs, clamp with both, one or crossed
    bounds and a bound between two fp16 values, max/min over all and along dims.
    Expected: torch's values (NaN wins a max/min, the first index on ties and for NaN)
    and indices. Pass: equal bit patterns (any NaN equal to any NaN) and equal indices."""
    ours, theirs = _tensors(fmt, nan)
    assert_same_result(CALLS[name](ours), CALLS[name](theirs), f"{name} {fmt}")


GRADS: dict[str, Callable[[Any], Any]] = {
    "abs at ±0": lambda x: x.abs(),
    "clamp at its bounds": lambda x: x.clamp(-3.0, 2.5),
    "max() with a tie": lambda x: x.max(),
    "min() with a tie": lambda x: x.min(),
    "max(1) with ties": lambda x: x.max(1).values,
    "min(1, keepdim=True)": lambda x: x.min(1, keepdim=True).values,
}


@pytest.mark.clause("ENG-EXT-001", "ENG-BWD-001")
@pytest.mark.parametrize("name", list(GRADS))
def test_abs_clamp_max_min_gradients_follow_torchs_rules_bitwise(name: str) -> None:
    """Inputs: the finite part of the tensor (ties at 2.5 and -3, ±0) in float32, ``name``,
    then sum(out * W) backward with W = 1, 2, 3, ...; the tie of max() is 3-way in one
    column. Expected: torch's input gradient: sgn(x) (0 at ±0), g inside [min, max]
    bounds included, g / count on each of tied extremes over all elements, g at the
    returned (first) index along a dim. Pass: equal float32 bit patterns."""
    data = np.array([[2.5, -0.0, 2.5, 0.5], [-3.0, 0.0, -3.0, 1.5], [2.5, -1.0, 0.75, -2.0]],
                    np.float32)
    grads = []
    for lib in (ampref, torch):
        x = lib.tensor(data, requires_grad=True)
        out = GRADS[name](x)
        w = np.arange(1, out.numel() + 1, dtype=np.float32).reshape(tuple(out.shape))
        (out * lib.tensor(w)).sum().backward()
        g = x.grad.numpy() if lib is torch else x.grad
        grads.append(np.ascontiguousarray(g, np.float32).view(np.uint32).tolist())
    assert grads[0] == grads[1], name


@pytest.mark.clause("ENG-EXT-001", "API-ERR-001")
def test_abs_clamp_max_min_refuse_what_torch_refuses_by_name() -> None:
    """Inputs: clamp without bounds or with a string bound, max of an empty tensor
    without a dim, max along an empty dim or a dim past the shape, min with a bool
    keepdim of another type. Expected: torch raises; ampref raises the named
    ValueError/TypeError. Pass: both raise, ampref's words match."""
    x, tx = ampref.tensor(np.ones((2, 3))), torch.ones(2, 3)
    cases: list[tuple[Callable[[Any], Any], type[Exception], str]] = [
        (lambda t: t.clamp(), ValueError, "at least one of min and max"),
        (lambda t: t.clamp("a"), TypeError, "min must be a real number"),
        (lambda t: t[:0].max(), ValueError, "empty tensor has no maximum"),
        (lambda t: t[:, :0].max(1), ValueError, "is empty"),
        (lambda t: t.max(2), ValueError, "dim 2 is out of range"),
        (lambda t: t.min(0, keepdim=1), TypeError, "keepdim must be a bool"),
    ]
    for call, error, words in cases:
        with pytest.raises((RuntimeError, TypeError, ValueError, IndexError)):
            call(tx)
        with pytest.raises(error, match=words):
            call(x)
