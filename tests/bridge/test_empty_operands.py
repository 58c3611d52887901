"""Ops with a floating operand of no elements under emulate (TRC-EMU-001): no sum of
values is formed, so torch's kernel gives the result (empty, or built from the other
operands: linear's bias, a reduction's 0 or NaN); likewise when every floating operand
is empty. Found by running torch's OpInfo samples under emulate, where these raised NumPy
reshape errors. Oracle: torch's own kernels."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from ampref.testing import assert_bitwise_equal  # noqa: E402
from ampref.torch import emulate  # noqa: E402

fn = torch.nn.functional


def _t(*shape: int) -> Any:
    n = int(np.prod(shape))
    return (torch.arange(n, dtype=torch.float32).reshape(shape) * 0.37 - 1).requires_grad_()


CALLS: dict[str, Callable[[], Any]] = {
    "linear of 0 input features": lambda: fn.linear(_t(3, 0), _t(4, 0), _t(4)),
    "linear of an empty batch": lambda: fn.linear(_t(0, 5), _t(4, 5), _t(4)),
    "bilinear of an empty batch": lambda: fn.bilinear(_t(0, 2), _t(0, 3), _t(4, 2, 3), _t(4)),
    "mean of an empty tensor": lambda: _t(0, 3).mean(),
    "sum of an empty tensor over dim 0": lambda: _t(0, 3).sum(0),
    "reflection pad of an empty batch": lambda: fn.pad(_t(0, 3, 4), (1, 1), "reflect"),
    "adaptive average pool 1-d of an empty batch": lambda: fn.adaptive_avg_pool1d(
        _t(0, 3, 5), 2),
    "unfold of an empty batch": lambda: fn.unfold(_t(0, 2, 4, 4), 2),
    # empty vectors, every floating operand empty (found by OpInfo samples 4-9: take's
    # backward summed an empty gradient)
    "sum of an empty vector": lambda: _t(0).sum(),
    "2-norm of an empty vector": lambda: _t(0).norm(),
    "cumsum of an empty vector": lambda: _t(0).cumsum(0),
    "softmax of an empty vector": lambda: _t(0).softmax(0),
    "logsumexp of an empty vector": lambda: _t(0).logsumexp(0),
    "distance between empty vectors": lambda: torch.dist(_t(0), _t(0)),
    "MSE loss of empty vectors": lambda: fn.mse_loss(_t(0), _t(0)),
    "take of an empty vector": lambda: torch.take(_t(0), torch.zeros(0, dtype=torch.int64)),
    "bf16 sum of an empty vector": lambda: _t(0).bfloat16().sum().float(),
}


@pytest.mark.clause("TRC-EMU-001")
@pytest.mark.parametrize("name", sorted(CALLS))
def test_an_op_with_an_empty_floating_operand_gives_torchs_result(name: str) -> None:
    """Inputs: the call under emulate(fallback='error') and natively, each on fresh
    leaves; backward of the output's sum where it is finite. Expected: torch's output
    dtype, shape and bits; no error. Pass: bitwise equal."""
    def run(ours: bool) -> Any:
        torch.manual_seed(0)
        if not ours:
            return CALLS[name]()
        with emulate(fallback="error"):
            y = CALLS[name]()
            if torch.isfinite(y).all():
                y.sum().backward()
            return y
    y, want = run(True).detach(), run(False).detach()
    assert (y.dtype, tuple(y.shape)) == (want.dtype, tuple(want.shape))
    assert_bitwise_equal(y.numpy(), want.numpy(), msg=name)
