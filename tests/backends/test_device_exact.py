"""The device backend's fused exact GEMM and sums (BKD-MM-005, BKD-RED-001): one kernel
launch per GEMM or sum (``backends/cuda/exact_dot.cuh``), run here as its host build on
strict device arrays, against an integer oracle (exact rationals rounded once by
``tests/oracle.py``) and against the specification's phases on the same arrays.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np
import pytest
import strictxp
from hypothesis import given, settings
from hypothesis import strategies as st
from oracle import round_scalar
from strict_kernels import StrictHostKernels

import ampref
from ampref.accumulation import certified
from ampref.backends import hostbuild
from ampref.backends.device import DeviceBackend
from ampref.backends.fused import ExactKernels

pytestmark = pytest.mark.skipif(hostbuild.host_compiler() is None,
                                reason="no C++ compiler for the host build of the kernels")


@pytest.fixture(scope="module")
def device() -> DeviceBackend:
    """The device backend on the host: strict arrays, host-built kernels."""
    return DeviceBackend(strictxp, StrictHostKernels(hostbuild.HostKernels()), "cupy-host")


def _oracle(terms: list[float]) -> int:
    """Bits of fl32(exact sum of the float64 terms), nearest-even (+0 for an exact 0)."""
    total = sum((Fraction(t) for t in terms), Fraction(0))
    bits = round_scalar(total, ampref.float32, "nearest_even")
    assert bits is not None  # float32 has a code for every finite value and inf
    return int(bits)


def _bits(x: Any) -> np.ndarray:
    return np.ascontiguousarray(x).view(np.uint32)


def _gemm(device: DeviceBackend, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    got = device.matmul(strictxp.asarray(a), strictxp.asarray(b))
    return np.asarray(device.to_numpy(got))


def _check_against_oracle(got: np.ndarray, a: np.ndarray, b: np.ndarray) -> None:
    A, B = a.astype(np.float64), b.astype(np.float64)
    for i in range(a.shape[0]):
        for j in range(b.shape[1]):
            want = _oracle((A[i] * B[:, j]).tolist())
            g = int(_bits(got)[i, j])
            assert g == want, f"[{i},{j}] got {g:08x}, want {want:08x}"


KINDS = ["plain", "wide", "tiny", "ints", "bf16", "fp16"]


def _data(seed: int, shape: tuple[int, ...], kind: str) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape)
    if kind == "wide":  # products from about 2^-290 to 2^250: every accumulator limb
        x = x * 2.0 ** rng.integers(-145, 125, shape)
    elif kind == "tiny":  # subnormal inputs, products far below float32's range
        x = x * 2.0**-140
    elif kind == "ints":  # exact float32 ties are common
        x = rng.integers(-(2**13), 2**13, shape) * 2.0 ** rng.integers(0, 12, shape)
    fmt = {"bf16": "bfloat16", "fp16": "float16"}.get(kind, "float32")
    return ampref.quantize(x.astype(np.float32), fmt)


@pytest.mark.clause("BKD-MM-005", "ENG-MM-001")
@settings(deadline=None)
@given(seed=st.integers(0, 2**32 - 1), kind=st.sampled_from(KINDS), m=st.integers(1, 5),
       k=st.integers(0, 90), n=st.integers(1, 5))
def test_the_fused_exact_gemm_equals_the_integer_oracle_bit_for_bit(
        device: DeviceBackend, seed: int, kind: str, m: int, k: int, n: int) -> None:
    """Inputs: hypothesis m x k @ k x n float32 operands (k 0..90) of six kinds, wide
    ranges and subnormals included, on the fused kernel. Expected: each element the
    exact dot product rounded once to float32 (rational oracle). Pass: bitwise equal."""
    a, b = _data(seed, (m, k), kind), _data(seed + 1, (k, n), kind)
    _check_against_oracle(_gemm(device, a, b), a, b)


#: (a row, b column): sums that no float64 evaluation decides, each needing the exact
#: accumulator (phase 4), and sums at the edges of float32's range
HARD = {
    "tie plus a tiny term rounds up": ([1.0, 2.0**-12, 2.0**-50], [1.0, 2.0**-12, 2.0**-50]),
    "tie minus a tiny term rounds down": ([1.0, 2.0**-12, 2.0**-50],
                                          [1.0, 2.0**-12, -(2.0**-50)]),
    "exact tie to even, odd neighbour below": ([1.0, 3 * 2.0**-13, 2.0**-60],
                                               [1.0, 2.0**-12, 0.0]),
    "cancellation to a negative value below 2^-150": ([2.0**-55, 2.0**-149, 2.0**-55],
                                                      [2.0**-55, -(2.0**-149), -(2.0**-55)]),
    "cancellation to a positive value below 2^-150": ([2.0**-55, 2.0**-149, 2.0**-55],
                                                      [2.0**-55, 2.0**-149, -(2.0**-55)]),
    "exact cancellation is +0": ([2.0**100, 3.0, 2.0**100], [2.0**20, -(2.0**-149), -(2.0**20)]),
    "negative zeros only is +0": ([-0.0, -0.0], [1.0, 1.0]),
    "smallest subnormal from a tie": ([2.0**-75, 2.0**-75], [2.0**-75, 2.0**-76]),
    "rounds up into the normal range": ([1.0 - 2.0**-24, 2.0**-100], [2.0**-126, 2.0**-70]),
    "largest finite": ([2.0**127, 2.0**103, -(2.0**80)], [1.0 + 2.0**-23, 0.5, 2.0**-60]),
    "rounds to inf past the largest finite": ([2.0**127, 2.0**103], [1.0 + 2.0**-23, 1.0]),
    "sum of two overflowing products": ([3e38, 3e38], [1.0, 1.0]),
    "huge terms cancel leaving a tiny one": ([2.0**127, 2.0**-149, -(2.0**127)],
                                             [2.0**127, 2.0**-149, 2.0**127]),
}


@pytest.mark.clause("BKD-MM-005", "ENG-MM-001", "ENG-SPC-001")
@pytest.mark.parametrize("case", sorted(HARD))
def test_the_fused_exact_gemm_decides_ties_zeros_and_range_edges_like_the_oracle(
        device: DeviceBackend, case: str) -> None:
    """Inputs: 1 x K @ K x 1 products at a float32 tie with a term too small for float64
    to keep, sums cancelling below 2^-150, subnormal and overflowing results (HARD), and
    the same with both signs flipped. Expected: the rational oracle's fl32 (ties to
    even, a zero of the exact value's sign, +0 for an exact zero, inf past the largest
    finite value). Pass: bitwise equal."""
    row, col = HARD[case]
    for sign in (1.0, -1.0):
        a = np.array([row], np.float32) * np.float32(sign)
        b = np.array([col], np.float32).T
        _check_against_oracle(_gemm(device, a, b), a, b)


@pytest.mark.clause("BKD-MM-005", "ENG-MM-001")
@settings(deadline=None, max_examples=300)
@given(exp=st.integers(-120, 120), frac=st.integers(0, 2**23 - 1),
       tiny=st.sampled_from([0, 1, -1]), tiny_exp=st.integers(-140, -60),
       noise=st.lists(st.tuples(st.integers(-100, 100), st.integers(1, 2**24 - 1)),
                      max_size=6),
       negate=st.booleans(), seed=st.integers(0, 2**16))
def test_near_tie_sums_that_need_the_exact_accumulator_round_like_the_oracle(
        device: DeviceBackend, exp: int, frac: int, tiny: int, tiny_exp: int,
        noise: list[tuple[int, int]], negate: bool, seed: int) -> None:
    """Inputs (built so that float64 cannot decide them, forcing phase 4): a float32
    value v of either parity, half its ulp (so the sum sits on a float32 tie), a term
    +-2^tiny_exp below float64's reach or none (exact tie: ties to even), pairs w, -w of
    wide random values that cancel exactly (carries and borrows across the accumulator's
    limbs), shuffled, all negated or not, as 1 x K @ K x 1 with b = 1. Expected: the
    rational oracle's fl32. Pass: bitwise equal."""
    v = (1 + frac / 2**23) * 2.0**exp
    terms = [v, 2.0 ** (exp - 24)]
    if tiny:
        terms += [tiny * 2.0**tiny_exp]
    for e, m in noise:
        w = m * 2.0 ** (e - 24)
        terms += [w, -w]
    order = np.random.default_rng(seed).permutation(len(terms))
    a = np.array([[terms[i] for i in order]], np.float32) * np.float32(-1 if negate else 1)
    assert a.astype(np.float64).tolist()[0] == [t * (-1 if negate else 1)
                                                for t in (terms[i] for i in order)]
    b = np.ones((a.shape[1], 1), np.float32)
    _check_against_oracle(_gemm(device, a, b), a, b)


#: (a row, b column, the IEEE class of the exact model's value)
NON_FINITE = [([np.inf, 1.0], [1.0, 5.0], "+inf"), ([-np.inf, 2.0], [1.0, 5.0], "-inf"),
              ([np.inf, np.inf], [1.0, -1.0], "nan"), ([0.0, 1.0], [np.inf, 1.0], "nan"),
              ([np.nan, 1.0], [1.0, 1.0], "nan"), ([3e38, 1.0], [np.inf, 2.0], "+inf")]


@pytest.mark.clause("BKD-MM-005", "ENG-SPC-001")
@pytest.mark.parametrize("row,col,cls", NON_FINITE)
def test_non_finite_inputs_give_the_ieee_class_of_the_exact_model(
        device: DeviceBackend, row: list[float], col: list[float], cls: str) -> None:
    """Inputs: 1 x 2 @ 2 x 1 with +inf, -inf, inf - inf, 0 * inf, NaN, on the fused kernel
    and on the specification. Expected: the class in NON_FINITE from both (+-inf bitwise;
    a NaN's payload is not specified, as in IEEE 754). Pass: both as expected."""
    a, b = np.array([row], np.float32), np.array([col], np.float32).T
    for got in (_gemm(device, a, b)[0, 0], certified.matmul_f32(a, b)[0, 0]):
        if cls == "nan":
            assert np.isnan(got)
        else:
            want = 0x7F800000 if cls == "+inf" else 0xFF800000
            assert int(np.float32(got).view(np.uint32)) == want, f"{got!r}"


@pytest.mark.clause("BKD-MM-005", "ENG-MM-001")
@pytest.mark.parametrize("a_lead,b_lead", [((3,), ()), ((), (4,)), ((2, 3), (3,)),
                                           ((2, 1), (1, 3)), ((2,), (2,))])
def test_batched_and_broadcast_gemms_equal_the_specification(
        device: DeviceBackend, a_lead: tuple[int, ...], b_lead: tuple[int, ...]) -> None:
    """Inputs: (..., 5, 37) @ (..., 37, 6) wide-range operands whose batch dimensions
    broadcast (one side without any, size-1 dimensions, equal ones). Expected: the
    specification's phases (``use_kernels("numpy")``) on the same operands. Pass: equal
    shapes, bitwise equal values."""
    a = _data(7, a_lead + (5, 37), "wide")
    b = _data(8, b_lead + (37, 6), "wide")
    got = _gemm(device, a, b)
    with ampref.use_kernels("numpy"):
        want = certified.matmul_f32(a, b)
    assert got.shape == want.shape
    assert _bits(got).tolist() == _bits(want).tolist()


@pytest.mark.clause("BKD-RED-001", "ENG-RED-001")
@pytest.mark.parametrize("axis", [None, 0, 1, 2, -1, (0, 2), (1, 2)])
@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("kind", ["wide", "ints", "tiny"])
def test_fused_exact_sums_equal_the_specification_over_every_axis(
        device: DeviceBackend, axis: Any, keepdims: bool, kind: str) -> None:
    """Inputs: a (4, 33, 3) float32 array of wide-range, tie-heavy or subnormal values,
    summed over each axis choice, with and without keepdims. Expected: the specification
    (``certified.sum_f32`` with ``use_kernels("numpy")``). Pass: equal shapes, bitwise
    equal values."""
    x = _data(11, (4, 33, 3), kind)
    got = np.asarray(device.to_numpy(device.sum(strictxp.asarray(x), axis, keepdims)))
    with ampref.use_kernels("numpy"):
        want = np.asarray(certified.sum_f32(x, axis, keepdims))
    assert got.shape == want.shape
    assert _bits(got).tolist() == _bits(want).tolist()


@pytest.mark.clause("BKD-MM-005")
def test_the_kernel_switch_selects_the_specifications_phases_on_the_device(
        device: DeviceBackend, monkeypatch: pytest.MonkeyPatch) -> None:
    """Inputs: one GEMM and one sum on the device backend, with the fused kernels made to
    fail. Expected: under ``use_kernels("numpy")`` both run (the specification's phases
    on device arrays, the kernels untouched); under ``compiled`` the fused kernel is
    called. Pass: results equal, and the failure raised only under ``compiled``."""
    assert isinstance(device.kernels, ExactKernels)
    a, b = _data(3, (4, 20), "wide"), _data(4, (20, 2), "wide")
    want = certified.matmul_f32(a, b)

    def boom(*args: Any) -> Any:
        raise RuntimeError("fused kernel called")
    monkeypatch.setattr(device.kernels, "exact_gemm", boom)
    monkeypatch.setattr(device.kernels, "exact_rows", boom)
    with ampref.use_kernels("numpy"):
        assert _bits(_gemm(device, a, b)).tolist() == _bits(want).tolist()
        device.sum(strictxp.asarray(a), 1)
    with ampref.use_kernels("compiled"), pytest.raises(RuntimeError, match="fused"):
        _gemm(device, a, b)


@pytest.mark.clause("BKD-MM-005")
def test_work_above_the_fused_limits_runs_the_specifications_phases(
        device: DeviceBackend, monkeypatch: pytest.MonkeyPatch) -> None:
    """Inputs: a 4 x 20 @ 20 x 2 GEMM (160 products) and sums of rows of 20, with the
    limits set to 159 products and rows of 19, the fused kernels made to fail. Expected:
    both computed by the specification's phases (no fused call), equal to
    ``certified``'s results; at limits of 160 and 20 the fused kernel is called. Pass:
    bitwise equal, and the failure raised only at the higher limits."""
    from ampref.backends import fused as fused_module

    a, b = _data(5, (4, 20), "ints"), _data(6, (20, 2), "ints")

    def boom(*args: Any) -> Any:
        raise RuntimeError("fused kernel called")
    monkeypatch.setattr(device.kernels, "exact_gemm", boom)
    monkeypatch.setattr(device.kernels, "exact_rows", boom)
    monkeypatch.setitem(fused_module.FUSED_EXACT_LIMITS, "gemm", 159)
    monkeypatch.setitem(fused_module.FUSED_EXACT_LIMITS, "sum", 19)
    with ampref.use_kernels("compiled"):
        assert _bits(_gemm(device, a, b)).tolist() == _bits(certified.matmul_f32(a, b)).tolist()
        got = np.asarray(device.to_numpy(device.sum(strictxp.asarray(a), 1)))
        assert _bits(got).tolist() == _bits(certified.sum_f32(a, 1)).tolist()
        monkeypatch.setitem(fused_module.FUSED_EXACT_LIMITS, "gemm", 160)
        with pytest.raises(RuntimeError, match="fused"):
            _gemm(device, a, b)
        monkeypatch.setitem(fused_module.FUSED_EXACT_LIMITS, "sum", 20)
        with pytest.raises(RuntimeError, match="fused"):
            device.sum(strictxp.asarray(a), 1)


# -------------------------------------------------------------------------- on a GPU
def _cupy_backend() -> Any:
    pytest.importorskip("cupy")
    from ampref import backends

    if not backends.available("cupy"):
        pytest.skip("no CUDA device")
    return backends.get("cupy")


@pytest.mark.clause("BKD-MM-005", "BKD-RED-001")
def test_gpu_fused_exact_kernels_equal_the_oracle_and_the_reference() -> None:
    """Inputs (GPU only): the HARD cases with both signs; random (3, 33, 70) @ (70, 5)
    and (33, 70) @ (3, 70, 5) operands of every kind; row sums over each axis of a
    (4, 33, 3) array. Expected: the rational oracle's fl32 (HARD), the NumPy
    reference's bits (the rest). Pass: bitwise equal."""
    be = _cupy_backend()
    with ampref.use_kernels("compiled"):
        for case in sorted(HARD):
            row, col = HARD[case]
            for sign in (1.0, -1.0):
                a = np.array([row], np.float32) * np.float32(sign)
                b = np.array([col], np.float32).T
                got = np.asarray(be.to_numpy(be.matmul(be.asarray(a), be.asarray(b))))
                _check_against_oracle(got, a, b)
        for seed, kind in enumerate(KINDS):
            for sa, sb in (((3, 33, 70), (70, 5)), ((33, 70), (3, 70, 5))):
                a, b = _data(seed, sa, kind), _data(seed + 50, sb, kind)
                got = np.asarray(be.to_numpy(be.matmul(be.asarray(a), be.asarray(b))))
                assert _bits(got).tolist() == _bits(certified.matmul_f32(a, b)).tolist(), \
                    f"GPU exact GEMM {kind} {sa} @ {sb}"
            x = _data(seed, (4, 33, 3), kind)
            for axis in (None, 0, 1, (0, 2)):
                got = np.asarray(be.to_numpy(be.sum(be.asarray(x), axis)))
                assert _bits(got).tolist() == _bits(certified.sum_f32(x, axis)).tolist(), \
                    f"GPU exact sum {kind} axis={axis}"


@pytest.mark.clause("BKD-RED-002", "ENG-IDX-002")
@settings(deadline=None, max_examples=60)
@given(seed=st.integers(0, 2**32 - 1), kind=st.sampled_from(KINDS),
       counts=st.lists(st.integers(1, 30), min_size=1, max_size=8))
def test_fused_segment_sums_equal_the_specification(device: DeviceBackend, seed: int, kind: str,
                                                    counts: list[int]) -> None:
    """Inputs: hypothesis segments of 1-30 rows of 6 values of six kinds, plus a segment
    of only -0 and one of +0 and -0. Expected: ``certified.segment_sum_f32``'s bits (the
    exact sums rounded once; -0 only for an all -0 segment). Pass: equal shapes, bitwise
    equal."""
    x = _data(seed, (sum(counts), 6), kind)
    x = np.concatenate([x, np.full((2, 6), -0.0, np.float32),
                        np.array([[0.0, -0.0] * 3, [-0.0, 0.0] * 3], np.float32)])
    starts = np.cumsum([0, *counts, 2])
    got = np.asarray(device.to_numpy(device.segment_sum(strictxp.asarray(x),
                                                        strictxp.asarray(starts))))
    with ampref.use_kernels("numpy"):
        want = np.asarray(certified.segment_sum_f32(x, starts))
    assert got.shape == want.shape
    assert _bits(got).tolist() == _bits(want).tolist()
    assert _bits(got)[-2].tolist() == [0x80000000] * 6
    assert _bits(got)[-1].tolist() == [0] * 6


@pytest.mark.clause("BKD-RED-002")
@pytest.mark.parametrize("starts", [[1, 3], [0, 3, 3], [0, 5, 2], [0, 9]])
def test_fused_segment_sums_refuse_what_the_specification_refuses(
        device: DeviceBackend, starts: list[int]) -> None:
    """Inputs: starts not beginning at 0, repeated, decreasing, or past the 6 rows.
    Expected: the specification's ValueError naming the starts. Pass: raised."""
    x = strictxp.asarray(np.ones((6, 2), np.float32))
    with ampref.use_kernels("compiled"), pytest.raises(ValueError, match="segment starts"):
        device.segment_sum(x, strictxp.asarray(np.array(starts)))
