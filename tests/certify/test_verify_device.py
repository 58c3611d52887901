"""The device verifier (FMT-VER-004) on the host build of the CUDA kernel, driven with
the strict CuPy stand-in: the same counts as the host verifier, the oracle run on device
arrays, a planted kernel fault found with its pattern in hex, bad arguments refused."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import strictxp
from strict_kernels import StrictHostKernels

from ampref import backends
from ampref.backends import hostbuild
from ampref.backends.device import DeviceBackend
from ampref.certify.verify import verify
from ampref.certify.verify_device import verify_device


@pytest.fixture(scope="module")
def device() -> DeviceBackend:
    be = DeviceBackend(strictxp, StrictHostKernels(hostbuild.HostKernels()), "cupy-verify")
    backends.register("cupy-verify", be)
    return be


CELLS = [("float16", "nearest_even", False, True), ("bfloat16", "toward_zero", False, True),
         ("float8_e4m3fn", "nearest_even", True, True), ("float8_e5m2", "odd", False, False),
         ("float8_e4m3fnuz", "toward_negative", False, True),
         ("float4_e2m1fn", "nearest_away", True, True),
         ("float8_e8m0fnu", "toward_positive", False, True),
         ("float6_e3m2fn", "toward_zero", False, False)]


@pytest.mark.clause("FMT-VER-004")
@pytest.mark.parametrize(("fmt", "rnd", "sat", "sub"), CELLS)
def test_the_device_verifier_checks_what_the_host_verifier_checks(
        device: DeviceBackend, fmt: str, rnd: str, sat: bool, sub: bool) -> None:
    """Input: every 65,537th float32 pattern of one cell (8 cells: IEEE, FNUZ, FN, E8M0,
    FP4/FP6 formats, every deterministic mode, saturate and flush variants) on the host
    build with strict device arrays. Expected: the same number of patterns checked as the
    host verifier and 0 mismatches on both. Pass: equal counts, both 0."""
    mine = verify_device(fmt, rnd, backend=device, stride=65537, saturate=sat, subnormals=sub)
    host = verify(fmt, rnd, stride=65537, saturate=sat, subnormals=sub, workers=1,
                  progress=False)
    assert (mine.checked, mine.mismatches) == (host.checked, 0)
    assert host.mismatches == 0 and mine.checked == 65536


@pytest.mark.clause("FMT-VER-004")
def test_stochastic_cells_draw_each_patterns_word_from_seed_and_pattern(
        device: DeviceBackend) -> None:
    """Input: the 2^20 patterns from 1.0 up (stride 1) in float16 and e4m3 stochastic
    rounding, seed 3, in blocks of 2^18 (four device passes). Expected: 0 mismatches
    against the oracle fed srhash words of (seed, pattern), as the host verifier does over
    the same patterns. Pass: counts 2^20 and 0 on both."""
    span = (0x3F800000, 0x3F800000 + (1 << 20))
    for fmt in ("float16", "float8_e4m3fn"):
        mine = verify_device(fmt, "stochastic", backend=device, span=span, seed=3,
                             block=1 << 18)
        assert (mine.checked, mine.mismatches) == (1 << 20, 0)


class _Faulty(StrictHostKernels):
    """The host build with one planted fault: float16 results for the input 1.0 + 2^-11
    (a tie, pattern 0x3f801000) come back one code up."""

    def quantize(self, x: Any, *args: Any) -> Any:
        out = super().quantize(x, *args)
        raw = out._a.view(np.uint32)
        hit = x._a.view(np.uint32) == 0x3F801000
        raw[hit] += 1 << 13  # one float16 ulp at 1.0, written into the float32 result
        return out


@pytest.mark.clause("FMT-VER-004")
def test_a_planted_kernel_fault_is_reported_with_its_pattern_in_hex() -> None:
    """Input: a kernel that rounds the tie 1.0 + 2^-11 (0x3f801000) one float16 ulp up,
    verified over 0x3f800000..0x3f810000 with stride 1. Expected: exactly one mismatch,
    reported as that pattern with the kernel's and the oracle's words in hex, result FAIL.
    Pass: as stated."""
    be = DeviceBackend(strictxp, _Faulty(hostbuild.HostKernels()), "cupy-faulty")
    res = verify_device("float16", backend=be, span=(0x3F800000, 0x3F810000))
    assert res.mismatches == 1 and not res.ok
    assert res.first == [("device oracle", "0x3f801000", "0x3f802000", "0x3f800000")]


@pytest.mark.clause("FMT-VER-004")
@pytest.mark.parametrize(("kwargs", "words"), [
    ({"stride": 0}, "stride must be a positive int"),
    ({"span": (5, 5)}, "0 <= lo < hi <= 2\\*\\*32"),
    ({"span": (0, 1 << 33)}, "0 <= lo < hi"),
    ({"rounding": "stochastic", "stride": 3}, "needs stride=1"),
    ({"block": 0}, "block must be a positive int"),
    ({"backend": "numpy"}, "needs a device backend"),
    ({"rounding": "sideways"}, "sideways"),
])
def test_bad_device_verifier_arguments_are_refused_by_name(kwargs: dict[str, Any],
                                                          words: str) -> None:
    """Input: a zero stride, an empty or too wide span, stochastic with stride 3, a zero
    block, the host backend, an unknown mode. Expected: ValueError naming the bad value
    or the allowed range before any work. Pass: each raises with the words."""
    args = {"backend": "cupy-verify", **kwargs}
    rounding = args.pop("rounding", "nearest_even")
    with pytest.raises(ValueError, match=words):
        verify_device("float16", rounding, **args)
