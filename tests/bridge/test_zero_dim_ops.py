"""0-d tensors with a dim argument under emulate (TRC-EMU-001): torch reads dim 0 and -1
of a 0-d tensor as its one element; reductions, norms and the multi-margin loss that
raised NumPy errors on them, and softmax's backward family that divided by the 0 dims
(found by running torch's OpInfo samples under emulate) now give torch's values.
Oracle: torch's own CPU kernels on the same calls."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from ampref.testing import assert_bitwise_equal  # noqa: E402
from ampref.torch import emulate  # noqa: E402

fn = torch.nn.functional

CALLS: dict[str, Callable[[Any], Any]] = {
    "logsumexp dim 0": lambda x: torch.logsumexp(x, 0),
    "logsumexp dim -1 keepdim": lambda x: torch.logsumexp(x, -1, keepdim=True),
    "sum dim -1": lambda x: x.sum(-1),
    "mean dim [0]": lambda x: x.mean([0]),
    "vector norm dim 0": lambda x: torch.linalg.vector_norm(x, 2, dim=0),
    "vector norm ord 3 dim -1 keepdim": lambda x: torch.linalg.vector_norm(x, 3, -1, True),
    "multi-margin loss of one class": lambda x: fn.multi_margin_loss(x, torch.tensor(0)),
    "logcumsumexp dim 0": lambda x: torch.logcumsumexp(x, 0),
    # softmax's family: the backward ops and _safe_softmax's all -inf test took dim % 0
    "softmax dim 0": lambda x: torch.softmax(x, 0),
    "log_softmax dim -1": lambda x: torch.log_softmax(x, -1),
    "softmin dim 0": lambda x: fn.softmin(x, 0),
    "log_softmax dim 0 to float64": lambda x: torch.log_softmax(x, 0, dtype=torch.float64),
    "_safe_softmax dim -1": lambda x: torch.ops.aten._safe_softmax(x, -1),
}


@pytest.mark.clause("TRC-EMU-001")
@pytest.mark.parametrize("name", sorted(CALLS))
@pytest.mark.parametrize("value", [2.5, -0.0, float("inf"), float("-inf")])
def test_a_0_d_tensor_with_a_dim_gives_torchs_value_and_gradient(name: str,
                                                                 value: float) -> None:
    """Inputs: a 0-d float32 leaf (2.5, -0.0, +inf, -inf) through the call, then backward of
    the result (where it is finite). Expected: torch's output dtype, shape and bits, and
    its input gradient's bits. Pass: bitwise equal (NaN patterns included)."""
    def run(ours: bool) -> tuple[Any, Any]:
        x = torch.tensor(np.float32(value), requires_grad=True)
        if ours:
            with emulate(fallback="error"):
                y = CALLS[name](x)
                if torch.isfinite(y).all():
                    y.sum().backward()
        else:
            y = CALLS[name](x)
            if torch.isfinite(y).all():
                y.sum().backward()
        return y.detach(), x.grad
    (y, g), (want, want_g) = run(True), run(False)
    assert (y.dtype, tuple(y.shape)) == (want.dtype, tuple(want.shape))
    assert_bitwise_equal(y.numpy(), want.numpy(), msg=f"{name} of {value}")
    assert (g is None) == (want_g is None)
    if g is not None:
        assert_bitwise_equal(g.numpy(), want_g.numpy(), msg=f"gradient of {name} at {value}")
