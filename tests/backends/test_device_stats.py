"""The device backend's one-launch training statistics (BKD-STA-001): the kernels of
``backends/cuda/counts.cuh`` (host build, strict device arrays) against the array
expressions of ``ampref.training.stats`` and ``run`` that they replace, at the
predicates' boundaries."""

from __future__ import annotations

import numpy as np
import pytest
import strictxp
from strict_kernels import StrictHostKernels

import ampref
from ampref.backends import hostbuild
from ampref.backends.device import DeviceBackend
from ampref.backends.fused import StatKernels

pytestmark = pytest.mark.skipif(hostbuild.host_compiler() is None,
                                reason="no C++ compiler for the host build of the kernels")

T = 2.0**-25  # the "below fp16" threshold of run.py's gradient counts


@pytest.fixture(scope="module")
def device() -> DeviceBackend:
    return DeviceBackend(strictxp, StrictHostKernels(hostbuild.HostKernels()), "cupy-host-stats")


def _specials(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(n) * 2.0 ** rng.integers(-40, 20, n)).astype(np.float32)
    x[:10] = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45, 65504.0, 7e4, -3e38]
    return x


@pytest.mark.clause("BKD-STA-001")
@pytest.mark.parametrize("fmt", ["float16", "bfloat16", "float8_e4m3fn", "float8_e5m2"])
def test_rounding_counts_equal_the_array_expressions(device: DeviceBackend, fmt: str) -> None:
    """Inputs: 5,000 float32 gradient values (zeros, +-inf, NaN, subnormals, values past
    each format's range) and their nearest-even roundings into fp16, bf16, e4m3fn, e5m2.
    Expected: underflow = finite nonzero that became 0, overflow = finite that became
    non-finite, as stats.py's array expressions count them. Pass: equal counts (and some
    of each counted somewhere)."""
    assert isinstance(device.kernels, StatKernels)
    raw = _specials(5000, 3)
    rounded = ampref.quantize(raw, fmt).astype(np.float32)
    fin = np.isfinite(raw)
    want = [int(np.count_nonzero((raw != 0) & fin & (rounded == 0))),
            int(np.count_nonzero(fin & ~np.isfinite(rounded)))]
    with ampref.use_kernels("compiled"):
        got = device.rounding_counts(strictxp.asarray(raw), strictxp.asarray(rounded))
    assert got is not None
    assert device.to_numpy(got).tolist() == want
    assert want[0] > 0


@pytest.mark.clause("BKD-STA-001")
@pytest.mark.parametrize("scale", [1.0, 65536.0, 1024.0, 3.0, 1.1])
def test_gradient_counts_equal_the_array_expressions_at_the_threshold(
        device: DeviceBackend, scale: float) -> None:
    """Inputs: gradients within 30 float32 ulps of 2^-25 / scale either side, of both
    signs, NaN, +-inf, zeros, plus random values; scales 1, 2^16, 1024, 3 and 1.1 (not
    float32: fl32(1.1) * g rounds in float32 to the other side of 2^-25 than in float64
    for g = 0x32e8ba2e). Expected: [nonzero, nonzero with fl32(|g| * fl32(scale)) <
    2^-25] as run.py's array expression counts (NaN nonzero, not tiny; exactly 2^-25 not
    tiny). Pass: equal counts."""
    up = np.float32(T / scale).view(np.uint32)
    near = (up + np.arange(-30, 31)).astype(np.uint32).view(np.float32)
    g = np.concatenate([near, -near, _specials(3000, 5)])
    with np.errstate(over="ignore"):
        want = [int(np.count_nonzero(g)),
                int(np.count_nonzero((g != 0) & (np.abs(g) * scale < 2.0**-25)))]
    with ampref.use_kernels("compiled"):
        got = device.grad_counts(strictxp.asarray(g), scale)
    assert got is not None
    assert device.to_numpy(got).tolist() == want


@pytest.mark.clause("BKD-STA-001")
def test_statistics_fall_back_to_array_operations_where_the_kernels_do_not_apply(
        device: DeviceBackend) -> None:
    """Inputs: float64 gradients, and float32 ones under ``use_kernels("numpy")``.
    Expected: both count methods return None (the callers' array expressions count).
    Pass: None each time."""
    g64 = strictxp.asarray(np.ones(4))
    g32 = strictxp.asarray(np.ones(4, np.float32))
    with ampref.use_kernels("compiled"):
        assert device.grad_counts(g64, 1.0) is None
        assert device.rounding_counts(g64, g64) is None
    with ampref.use_kernels("numpy"):
        assert device.grad_counts(g32, 1.0) is None
        assert device.rounding_counts(g32, g32) is None
