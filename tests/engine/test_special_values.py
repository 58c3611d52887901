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


def _sigmoid_oracle(x: float) -> float:
    """sigmoid(x) at 60 digits, rounded to float32 (tests/value_oracles.py)."""
    from fractions import Fraction as Q

    from value_oracles import sigmoid_d, wide
    return float(wide(sigmoid_d)(Q(float(x))))


#: the far negative tail: 0.5 (1 + tanh(x/2)) loses float32's accuracy below -17 and is
#: 0 below -38, where sigmoid is still a normal (to -87.3) or subnormal float32 number
TAIL = np.array([-17.5, -20.0, -25.25, -37.0, -40.0, -60.5, -87.0, -88.0, -95.0, -100.0,
                 -103.0, -104.0, -110.0, 17.5, 40.0, -0.0], np.float32)


@pytest.mark.clause("ENG-RND-001")
@pytest.mark.parametrize("be", ["numpy", DEVICE])
def test_sigmoid_is_the_correctly_rounded_value_in_its_far_negative_tail(
        device: Any, be: str) -> None:
    """Inputs: TAIL (x from -110 to 40, sigmoid from 0 over float32's subnormals to 1).
    Expected: the 60-digit value of 1 / (1 + e^-x) rounded to float32 (6.1e-39 at -88,
    not 0). Pass: equal float32 words."""
    y = F.sigmoid(ampref.tensor(TAIL, "float32", backend=be))
    got = y.backend.to_numpy(y.data)
    want = np.array([_sigmoid_oracle(v) for v in TAIL], np.float32)
    assert _words(got) == _words(want), list(zip(TAIL.tolist(), got.tolist(), want.tolist(),
                                                  strict=True))
