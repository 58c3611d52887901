"""Weighted ``bincount`` and ``histc`` under emulate (TRC-IDX-001, TRC-EMU-001)."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from oracle import round_value  # noqa: E402

from ampref import get_format  # noqa: E402
from ampref.testing import assert_bitwise_equal  # noqa: E402
from ampref.torch import emulate  # noqa: E402


F32 = get_format("float32")


def _exact_bins(ids: list[int], weights: list[float], n: int, wide: bool) -> np.ndarray:
    """Each bin's exact Fraction sum of +0 and its weights, rounded once: to float64
    (Python's correctly rounded Fraction division) or to float32 (tests/oracle.py)."""
    sums = [Fraction(0)] * n
    for i, w in zip(ids, weights, strict=True):
        sums[i] += Fraction(w)
    if wide:
        return np.array([float(s) for s in sums], np.float64)
    return np.array([float(round_value(s, F32)) for s in sums], np.float32)


@pytest.mark.clause("TRC-IDX-001")
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
def test_weighted_bincount_is_each_bins_exact_sum_rounded_once(dtype: str) -> None:
    """Inputs: 3,000 seeded entries in 0..6 (minlength 9, so bins 7 and 8 are empty)
    with weights of ``dtype`` spread over 2^-20..2^20 (float16: 2^-10..2^10) and both
    signs. Expected: bin j =
    the exact Fraction sum of its weights rounded once (float32 output for float32
    weights, float64 otherwise, torch's dtypes); empty bins +0 (before:
    UnsupportedOpError). Pass: bitwise."""
    dt = getattr(torch, dtype)
    rng = np.random.default_rng(21)
    ids = rng.integers(0, 7, 3_000)
    top = 10 if dtype == "float16" else 20  # float16 overflows past 65504
    w = (rng.standard_normal(3_000) * 2.0 ** rng.integers(-top, top, 3_000))
    weights = torch.from_numpy(w).to(dt)
    with emulate(fallback="error"):
        ours = torch.bincount(torch.from_numpy(ids), weights=weights, minlength=9)
    assert ours.dtype == torch.bincount(torch.from_numpy(ids), weights=weights).dtype
    want = _exact_bins(ids.tolist(), weights.double().tolist(), 9, dtype != "float32")
    assert_bitwise_equal(ours.numpy(), want, msg=f"bincount {dtype}")


@pytest.mark.clause("TRC-IDX-001")
def test_weighted_bincount_equals_torch_where_its_running_sum_is_exact() -> None:
    """Inputs: float32 weights that are multiples of 2^-8 below 2^8 (every running sum
    exact). Expected: torch's words. Pass: bitwise."""
    rng = np.random.default_rng(4)
    ids = torch.from_numpy(rng.integers(0, 12, 500))
    w = torch.from_numpy((rng.integers(-2 ** 16, 2 ** 16, 500) / 2.0 ** 8).astype(np.float32))
    with emulate(fallback="error"):
        ours = torch.bincount(ids, weights=w, minlength=15)
    assert_bitwise_equal(ours.numpy(), torch.bincount(ids, weights=w, minlength=15).numpy())


@pytest.mark.clause("TRC-IDX-001")
def test_weighted_bincount_specials_and_refusals() -> None:
    """Inputs: bins of NaN, of +inf and -inf, of one +inf, of -0 only, and float64
    weights whose running sum overflows (1e308, 1e308, -1e308); then a negative entry.
    Expected: the NaN, the machine's default NaN (inf - inf), +inf, +0, 1e308 (the
    exact sum; torch's running sum gives inf);
    the negative entry raises torch's own RuntimeError. Pass: bitwise / the error."""
    ids = torch.tensor([0, 1, 1, 2, 3, 4, 4, 4])
    w = torch.tensor([float("nan"), float("inf"), float("-inf"), float("inf"), -0.0,
                      1e308, 1e308, -1e308], dtype=torch.float64)
    with emulate(fallback="error"):
        ours = torch.bincount(ids, weights=w)
    with np.errstate(invalid="ignore"):
        default_nan = np.float64(np.inf) - np.float64(np.inf)  # the machine's, as torch's
    want = np.array([np.nan, default_nan, np.inf, 0.0, 1e308])
    assert_bitwise_equal(ours.numpy(), want, msg="specials")
    with pytest.raises(RuntimeError, match="non-negative"):
        with emulate(fallback="error"):
            torch.bincount(torch.tensor([-1, 2]), weights=torch.ones(2))


@pytest.mark.clause("TRC-EMU-001")
def test_histc_counts_are_torchs() -> None:
    """Inputs: 1,000 seeded normals, 13 bins over [-2, 2] and over the data's range.
    Expected: torch's counts (exact integers by torch's binning; before:
    UnsupportedOpError). Pass: bitwise."""
    x = torch.randn(1_000, generator=torch.Generator().manual_seed(8))
    for lo, hi in ((-2.0, 2.0), (0.0, 0.0)):
        with emulate(fallback="error"):
            ours = torch.histc(x, bins=13, min=lo, max=hi)
        assert_bitwise_equal(ours.numpy(), torch.histc(x, bins=13, min=lo, max=hi).numpy())
