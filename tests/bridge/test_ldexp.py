"""``torch.ldexp`` under emulate (TRC-PWO-001): integer exponents scale exactly and round
once (torch's C ``ldexp``); floating exponents are ``input * 2.0 ** other`` in two
rounded steps."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from ampref.testing import assert_bitwise_equal  # noqa: E402
from ampref.torch import emulate  # noqa: E402

TINY = 2.0 ** -149  # float32's smallest subnormal
MAX32 = float(np.finfo(np.float32).max)

#: (input, exponent, the float32 result): ties at the subnormal grid, the overflow
#: threshold, zeros, infinities and NaN, exponents beyond every range
HARD = [
    (1.5, -149, 2 * TINY),                 # 1.5 ulp of the last binade: tie to even (2)
    (2.5, -149, 2 * TINY),                 # tie to even (2), not away (3)
    (-1.5, -149, -2 * TINY),
    (0.75, -149, TINY),                    # 0.75 ulp rounds up to the smallest subnormal
    (0.5, -149, 0.0),                      # half the smallest subnormal: tie to +0
    (-0.5, -149, -0.0),                    # ... and to -0 with the input's sign
    (1.0, -150, 0.0),
    (MAX32, 1, float("inf")),
    (0.5 * MAX32, 1, MAX32),
    (-MAX32, 1, float("-inf")),
    (2.0 ** 100, -200, 2.0 ** -100),       # the product 2^-200 would be 0: not computed so
    (2.0 ** -100, 200, 2.0 ** 100),
    (0.0, 5000, 0.0),
    (-0.0, -5000, -0.0),
    (float("inf"), -5000, float("inf")),
    (float("-inf"), 3, float("-inf")),
    (1.0, 2 ** 40, 1.0),                   # an int64 exponent wraps to C's int: 0
    (1.0, 2 ** 32 + 3, 8.0),               # ... 3
    (1.0, 2 ** 31, 0.0),                   # ... -2^31
]


def _exact32(x: float, e: int) -> float:
    """fl32(x 2^e) from the exact rational (nearest-even, gradual underflow, overflow
    at the rounding threshold), by an independent route: float64 holds every float32
    input, and the scaled value is rounded with Fraction arithmetic. ``e`` is first
    wrapped to a 32-bit C int, as torch passes it."""
    e = (e + 2 ** 31) % 2 ** 32 - 2 ** 31
    if x == 0 or not np.isfinite(x) or abs(e) > 4096:
        if x == 0 or not np.isfinite(x):
            return x
        return float(np.copysign(np.inf if e > 0 else 0.0, x))
    v = Fraction(x) * Fraction(2) ** e
    sign, v = (-1 if v < 0 else 1), abs(v)
    k = v.numerator.bit_length() - v.denominator.bit_length()  # floor(log2 v) or one more
    if v < Fraction(2) ** k:
        k -= 1
    ulp = Fraction(2) ** (max(k, -126) - 23)  # the binade's spacing; subnormals: 2^-149
    q, r = divmod(v, ulp)
    q += 1 if r > ulp / 2 or (r == ulp / 2 and q % 2) else 0
    out = q * ulp
    return sign * (float("inf") if out >= Fraction(2) ** 128 else float(out))


@pytest.mark.clause("TRC-PWO-001")
@pytest.mark.parametrize(("x", "e", "want"), HARD)
def test_ldexp_of_an_integer_exponent_rounds_the_exact_scaled_value_once(
        x: float, e: int, want: float) -> None:
    """Inputs: float32 ``x`` and int64 ``e`` from HARD (ties at the subnormal grid,
    overflow, signed zeros, infinities, int64 exponents that wrap to C's int).
    Expected: the float32
    rounding of x 2^e, as HARD states and as an exact Fraction rounding and torch give
    (before: UnsupportedOpError). Pass: bitwise."""
    xt, et = torch.tensor([x], dtype=torch.float32), torch.tensor([e], dtype=torch.int64)
    with emulate(fallback="error"):
        ours = torch.ldexp(xt, et)
    expect = np.array([want], np.float32)
    assert_bitwise_equal(ours.numpy(), expect, msg=f"ldexp({x!r}, {e})")
    assert_bitwise_equal(np.array([_exact32(x, e)], np.float32), expect, msg="oracle")
    assert_bitwise_equal(torch.ldexp(xt, et).numpy(), expect, msg="torch")


@pytest.mark.clause("TRC-PWO-001")
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "float64"])
def test_ldexp_of_integer_exponents_equals_torchs_on_every_kind_of_word(dtype: str) -> None:
    """Inputs: 20,000 random bit patterns of ``dtype`` (NaN, inf, subnormals included)
    with int32 exponents in [-300, 300] and [-30, 30], and in place (``ldexp_``).
    Expected: torch's words (its C ldexp: the exact value rounded once into the dtype).
    Pass: bitwise, NaN for NaN."""
    dt = getattr(torch, dtype)
    rng = np.random.default_rng(7)
    width = torch.finfo(dt).bits
    words = rng.integers(0, 2 ** width, 20_000, dtype=np.uint64)
    ints = {16: torch.int16, 32: torch.int32, 64: torch.int64}[width]
    x = torch.from_numpy(words.astype(f"uint{width}").view(f"int{width}")).view(dt)
    for lo, hi in ((-300, 300), (-30, 30)):
        e = torch.from_numpy(rng.integers(lo, hi, x.numel()).astype(np.int32))
        with emulate(fallback="error"):
            ours, ours_inplace = torch.ldexp(x, e), x.clone().ldexp_(e)
        theirs = torch.ldexp(x, e)
        both_nan = ours.isnan() & theirs.isnan()
        for got in (ours, ours_inplace):
            same = (got.view(ints) == theirs.view(ints)) | both_nan
            bad = int((~same).sum())
            assert bad == 0, (f"{bad} words differ, e.g. at {int((~same).nonzero()[0])}: "
                              f"x={x[~same][0].item()!r}, e={e[~same][0].item()}")


@pytest.mark.clause("TRC-PWO-001")
def test_ldexp_of_a_float_exponent_is_a_rounded_power_then_a_rounded_product() -> None:
    """Inputs: float32 x with integral float32 exponents (the power 2^e is exact where
    it is finite) and the pair (2^-100, 200.0), whose power overflows float32. Expected:
    torch's words on the integral exponents, and inf for the pair (2^200 rounds to inf
    first; the integer exponent 200 gives 2^100). Pass: bitwise."""
    rng = np.random.default_rng(3)
    x = torch.from_numpy(rng.standard_normal(5_000).astype(np.float32))
    e = torch.from_numpy(rng.integers(-60, 60, 5_000).astype(np.float32))
    with emulate(fallback="error"):
        ours = torch.ldexp(x, e)
        overflowed = torch.ldexp(torch.tensor([2.0 ** -100]), torch.tensor([200.0]))
    assert_bitwise_equal(ours.numpy(), torch.ldexp(x, e).numpy(), msg="integral exponents")
    assert overflowed.item() == float("inf")
