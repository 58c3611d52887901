"""``linspace`` under emulate (``ampref.torch.rangeops``, TRC-PWO-003) against an exact
rational oracle of its formula and against torch's own float32/float64 kernel;
``logspace`` against torch's own kernel in every floating dtype, boundaries included."""

from __future__ import annotations

import math
import re
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



@pytest.mark.clause("TRC-PWO-003")
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_16_bit_linspace_rounds_every_operation_to_the_dtype(dtype: Any) -> None:
    """Inputs: 30 random (start, end) of exponents -3..2 (inside float16's range),
    steps 0..3000 (seeded), plus (0, 1, 2049) whose step count float16 cannot hold.
    Expected: an independent model of c10's arithmetic written with ml_dtypes: ends
    rounded float64 -> float32 -> dtype, step = h(h(end - start) / h(steps - 1)),
    values h(start + h(step h(i))) below steps // 2, else h(end - h(step h(steps - 1 -
    i))), h = float32 operation then dtype; and torch's own kernel. Pass: bitwise to
    both."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    nd = np.float16 if dtype == torch.float16 else ml_dtypes.bfloat16

    def h(x: Any) -> Any:
        return nd(np.float32(x))

    def model(a: float, b: float, n: int) -> np.ndarray:
        s, e = h(a), h(b)
        if n <= 1:
            return np.array([s] * n, np.float32)
        step = h(np.float32(h(np.float32(e) - np.float32(s))) / np.float32(h(n - 1)))
        fs, fe, fst = np.float32(s), np.float32(e), np.float32(step)
        return np.array([h(fs + np.float32(h(fst * np.float32(h(i))))) if i < n // 2 else
                         h(fe - np.float32(h(fst * np.float32(h(n - 1 - i)))))
                         for i in range(n)], np.float32)
    rng = np.random.default_rng(31)
    cases = [(0.0, 1.0, 2049)] + [
        (float(a), float(b), int(n)) for a, b, n in zip(
            rng.uniform(-60, 60, 30) * 10.0 ** rng.integers(-3, 3, 30),
            rng.uniform(-60, 60, 30) * 10.0 ** rng.integers(-3, 3, 30),
            rng.integers(0, 3001, 30), strict=True)]
    for a, b, n in cases:
        with emulate(fallback="error"):
            got = torch.linspace(a, b, n, dtype=dtype).float().numpy()
        msg = f"linspace({a!r}, {b!r}, {n}, {dtype})"
        assert_bitwise_equal(got, model(a, b, n), msg=msg + " vs the c10 model")
        assert_bitwise_equal(got, torch.linspace(a, b, n, dtype=dtype).float().numpy(),
                             msg=msg + " vs torch")


@pytest.mark.clause("TRC-PWO-003")
@pytest.mark.parametrize("dtype,start,steps,named", [
    (torch.float16, 65505.0, 2, "start 65505.0"),
    (torch.bfloat16, 1e39, 3, "start 1e+39"),
    (torch.float32, 1e39, 1, "start 1e+39"),
])
def test_a_linspace_end_the_dtype_cannot_hold_is_a_value_error_where_torch_errs(
        dtype: Any, start: float, steps: int, named: str) -> None:
    """Inputs: an end past the dtype's largest finite value (65505 rounds to float16's
    65504 but is past it), or one float32 step of 1e39. Expected: torch raises; the
    emulation raises ValueError naming it (16-bit single steps overflow to inf in both).
    Pass: both raise, the message names it."""
    with pytest.raises(RuntimeError, match="without overflow"):
        torch.linspace(start, 1.0, steps, dtype=dtype)
    with emulate(fallback="error"), pytest.raises(ValueError, match=re.escape(named)):
        torch.linspace(start, 1.0, steps, dtype=dtype)

_LOG_DTYPES = [torch.float16, torch.bfloat16, torch.float32, torch.float64]


def _logspace_both(start: float, end: float, steps: int, base: float,
                   dtype: Any) -> tuple[np.ndarray, np.ndarray]:
    """(emulated, torch's own) logspace, widened exactly to float32 (float64 kept)."""
    with emulate(fallback="error"):
        got = torch.logspace(start, end, steps, base=base, dtype=dtype)
    want = torch.logspace(start, end, steps, base=base, dtype=dtype)
    wide = torch.float64 if dtype == torch.float64 else torch.float32
    return got.to(wide).numpy(), want.to(wide).numpy()


@pytest.mark.clause("TRC-PWO-003")
@pytest.mark.parametrize("dtype", _LOG_DTYPES)
def test_logspace_equals_torchs_kernel_on_random_ranges(dtype: Any) -> None:
    """Inputs: 300 random (start, end) (float64 values, a third of them float32 ones) of
    magnitude up to 30, steps 0..70, bases 10, 2, e, 1.5, 0.5, 7.3, -2, -0.5, 0 and 1
    (seeded). Expected: torch's own CPU logspace in the same dtype, word for word (the
    float64 exponents unfused, the C library's pow, float32 then the 16-bit dtype).
    Pass: bitwise, NaN of either sign equal (C's and the CPU's NaN signs are not part of
    the specification)."""
    rng = np.random.default_rng(23)
    bases = [10.0, 2.0, math.e, 1.5, 0.5, 7.3, -2.0, -0.5, 0.0, 1.0]
    for k in range(300):
        a, b = rng.standard_normal(2) * rng.choice([1.0, 3.0, 10.0, 30.0])
        if k % 3 == 0:
            a, b = np.float32(a), np.float32(b)
        n, base = int(rng.integers(0, 71)), bases[k % len(bases)]
        got, want = _logspace_both(float(a), float(b), n, base, dtype)
        assert_bitwise_equal(got, want, nan="any",
                             msg=f"logspace({a!r}, {b!r}, {n}, base={base})")


@pytest.mark.clause("TRC-PWO-003")
@pytest.mark.parametrize("dtype", _LOG_DTYPES)
@pytest.mark.parametrize("start,end,steps,base", [
    (0.1, 0.7, 1, 10.0),             # one step: pow(base, start) of the unrounded start
    (1e-8, 3.0, 7, 10.0),            # fl32(end - start) inexact in float32
    (0.1, 0.3, 40, 10.0),            # every exponent inexact
    (300.0, 320.0, 5, 10.0),         # pow overflows float64: inf
    (1.0, 7.0, 7, -2.0),             # negative base, integer exponents: alternating sign
    (0.5, 1.5, 3, -2.0),             # negative base, non-integer exponents: NaN
    (-3.0, 3.0, 7, 0.0),             # base 0: inf below 0 (a pole), 1 at 0, 0 above
    (float("nan"), 1.0, 4, 1.0),     # base 1: 1 even for a NaN exponent
    (float("nan"), 1.0, 4, 10.0),    # NaN exponents from the low half
    (float("-inf"), float("inf"), 5, 10.0),  # inf - inf: NaN step
    (1.0, 1.0, 3, 1 + 2**-11 + 2**-30),  # float32 rounds to float16's tie, then even
    (1.0, 1.0, 1, 1 + 2**-8 + 2**-30),   # the same for bfloat16 (one rounding: up)
])
def test_logspace_boundaries_equal_torch(start: float, end: float, steps: int, base: float,
                                         dtype: Any) -> None:
    """Inputs: each row (its comment says which boundary). Expected: torch's own CPU
    logspace. Pass: bitwise, NaN of either sign equal."""
    got, want = _logspace_both(start, end, steps, base, dtype)
    assert_bitwise_equal(got, want, nan="any",
                         msg=f"logspace({start}, {end}, {steps}, base={base})")


@pytest.mark.clause("TRC-PWO-003")
@pytest.mark.parametrize("dtype,start,steps,named", [
    (torch.float16, 65505.0, 2, "start 65505.0"),
    (torch.bfloat16, 1e39, 2, "start 1e+39"),
    (torch.float32, 3.4028235e38, 3, "start 3.4028235e+38"),
    (torch.float32, 39.0, 1, "pow(10.0, start)"),
])
def test_a_logspace_value_the_dtype_cannot_hold_is_a_value_error_where_torch_errs(
        dtype: Any, start: float, steps: int, named: str) -> None:
    """Inputs: an end past the dtype's largest finite value (65505 for float16, even
    though it rounds to 65504), or one float32 step whose value 10^39 overflows.
    Expected: torch raises; the emulation raises ValueError naming the value. Pass:
    both raise, the message names it."""
    with pytest.raises(RuntimeError, match="without overflow"):
        torch.logspace(start, 1.0, steps, dtype=dtype)
    with emulate(fallback="error"), pytest.raises(ValueError, match=re.escape(named)):
        torch.logspace(start, 1.0, steps, dtype=dtype)
