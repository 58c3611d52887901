"""The engine's relu at the points its definition decides, against torch itself
(ENG-SPC-001): -0, NaN and the infinities forward, and inf/NaN upstream gradients at
x <= 0 backward, in each format, on the NumPy backend and on the device backend (strict
CuPy stand-in, host-built kernels)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from strict_kernels import strict_device

import ampref
import ampref.engine.functional as F
from ampref.backends.device import DeviceBackend

torch = pytest.importorskip("torch")
DEVICE = "cupy-host-special"
TORCH_DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}

X = np.array([np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, -0.0, 0.0, -3.0, 0.75, -1e-40,
              1e-40, -2.0, 5.0], np.float32)
#: upstream gradients: inf and NaN where x <= 0 (selected away), and where x > 0 or NaN
G = np.array([1.5, np.nan, 2.0, np.inf, np.nan, np.inf, -np.inf, 3.0, np.nan, np.inf,
              np.inf, -1.0, -np.inf, np.nan], np.float32)


@pytest.fixture(scope="module")
def device() -> DeviceBackend:
    return strict_device(DEVICE)


def _words(a: Any) -> list[str]:
    """float32 words, NaN as "nan": a NaN's payload is the backend's, not the rule's."""
    v = np.asarray(a, np.float32).ravel()
    return ["nan" if np.isnan(e) else f"{w:08x}" for e, w in zip(v, v.view(np.uint32), strict=True)]


@pytest.mark.clause("ENG-SPC-001")
@pytest.mark.parametrize("fmt", sorted(TORCH_DTYPES))
@pytest.mark.parametrize("be", ["numpy", DEVICE])
def test_relu_keeps_negative_zero_and_selects_its_gradient_as_torch_does(
        device: Any, be: str, fmt: str) -> None:
    """Inputs: X (±NaN, ±inf, ±0, ±subnormal, ordinary values) in ``fmt``; backward with G
    (inf and NaN both where x <= 0 and where x > 0 or NaN). Expected: torch.relu's values
    (relu(-0) = -0, NaN stays NaN) and the input gradient of torch's threshold_backward
    (0 where x <= 0 whatever g is, g elsewhere, NaN x included), both as float32 words
    after the format's rounding, NaN as NaN (its payload is the backend's). Pass: equal
    words."""
    dt = TORCH_DTYPES[fmt]
    tx = torch.tensor(X).to(dt).requires_grad_()
    ty = torch.relu(tx)
    ty.backward(torch.tensor(G).to(dt))
    x = ampref.tensor(tx.detach().float().numpy(), fmt, requires_grad=True, backend=be)
    y = F.relu(x)
    y.backward(ampref.tensor(torch.tensor(G).to(dt).float().numpy(), fmt, backend=be))
    assert _words(x.backend.to_numpy(y.data)) == _words(ty.detach().float().numpy()), "forward"
    assert x.grad is not None
    assert _words(x.backend.to_numpy(x.grad.data)) == _words(tx.grad.float().numpy()), "gradient"
