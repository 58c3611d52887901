"""``linspace`` under emulate (``ampref.torch.rangeops``, TRC-PWO-003) against an exact
rational oracle of its formula and against torch's own float32/float64 kernel."""

from __future__ import annotations

from fractions import Fraction as Q
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from value_oracles import r32  # noqa: E402

from ampref.testing import assert_bitwise_equal  # noqa: E402
from ampref.torch import emulate  # noqa: E402


def _emulated_linspace(start: float, end: float, steps: int, dtype: Any) -> np.ndarray:
    with emulate(fallback="error"):
        return torch.linspace(start, end, steps, dtype=dtype).numpy()


@pytest.mark.clause("TRC-PWO-003")
@pytest.mark.parametrize("start,end,steps", [(0.1, 0.7, 9), (-3.3, 1e-3, 64), (1e5, -2.5, 300),
                                             (-1.0, 1.0, 5), (2.0, 2.0, 4), (5.0, 6.0, 1)])
def test_linspace_is_one_fused_rounding_of_start_plus_step_times_index(
        start: float, end: float, steps: int) -> None:
    """Inputs: start, end rounded to float32, steps. Expected: step = fl32(fl32(end -
    start) / (steps - 1)); value i = fl32(start + step i) for i < steps // 2, else
    fl32(end - step (steps - 1 - i)), each the exact rational rounded once (one steps
    gives start; -1..1 in 5 has an exact +0 centre). Pass: bitwise."""
    got = _emulated_linspace(start, end, steps, torch.float32)
    a, b = Q(float(np.float32(start))), Q(float(np.float32(end)))
    if steps == 1:
        want = [a]
    else:
        step = r32(r32(b - a) / (steps - 1))
        want = [r32(a + step * i) if i < steps // 2 else r32(b - step * (steps - 1 - i))
                for i in range(steps)]
    assert_bitwise_equal(got, np.array([float(v) for v in want], np.float32))


@pytest.mark.clause("TRC-PWO-003")
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_linspace_equals_torchs_kernel_on_random_ranges(dtype: Any) -> None:
    """Inputs: 400 random (start, end) of exponents -5..3 and steps 0..300 (seeded).
    Expected: torch's own linspace in the same dtype (for float32 and float64 ampref's
    definition is torch's CPU kernel, fused multiply-add included). Pass: bitwise, every
    range."""
    rng = np.random.default_rng(17)
    for _ in range(400):
        a, b = rng.uniform(-100, 100, 2) * 10.0 ** rng.integers(-5, 4, 2)
        n = int(rng.integers(0, 301))
        got = _emulated_linspace(float(a), float(b), n, dtype)
        assert_bitwise_equal(got, torch.linspace(float(a), float(b), n, dtype=dtype).numpy(),
                             msg=f"linspace({a}, {b}, {n})")
