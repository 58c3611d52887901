"""Certified float64 BLAS gives the exactly rounded float32 dot products and sums
(ENG-MM-001, ENG-RED-001), checked against integer arithmetic on random, tie-heavy,
wide-range and subnormal inputs."""

from __future__ import annotations

from fractions import Fraction

from typing import Any

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from oracle import round_scalar

import ampref
from ampref.accumulation import certified, certify
from ampref.kernels import compiled_available


def _exact_f32(terms: np.ndarray) -> Any:
    total = sum((Fraction(float(t)) for t in terms), Fraction(0))
    return np.array(round_scalar(total, ampref.float32, "nearest_even"),
                    np.uint32).view(np.float32)[()]


def _exact_sum_f32(terms: np.ndarray) -> Any:
    """A segment sum's exact value rounded once, with IEEE 754's sign of an exact zero
    sum under round-to-nearest, as ``segment_sum_f32`` documents: -0 when every term is
    -0 (a lone -0 included), +0 otherwise. (``sum_f32`` gives +0 there, as torch's sum.)"""
    if terms.size and bool(np.all((terms == 0) & np.signbit(terms))):
        return np.float32(-0.0)
    return _exact_f32(terms)


def _data(seed: int, shape: tuple[int, ...], kind: str) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape)
    if kind == "wide":
        x = x * 2.0 ** rng.integers(-60, 60, shape)
    elif kind == "subnormal":
        x = x * 2.0**-140
    elif kind == "ints":  # exact float32 ties are common
        x = rng.integers(-(2**13), 2**13, shape) * 2.0 ** rng.integers(0, 12, shape)
    fmt = {"wide": "float32", "subnormal": "float32", "ints": "float32", "bf16": "bfloat16",
           "fp16": "float16", "plain": "float32"}[kind]
    return ampref.quantize(x.astype(np.float32), fmt)


KINDS = ["plain", "wide", "subnormal", "ints", "bf16", "fp16"]


@pytest.mark.clause("ENG-MM-001")
@given(seed=st.integers(0, 2**32 - 1), kind=st.sampled_from(KINDS),
       m=st.integers(1, 6), k=st.integers(0, 70), n=st.integers(1, 6))
def test_matmul_equals_the_integer_oracle_bit_for_bit(seed: int, kind: str, m: int, k: int,
                                                      n: int) -> None:
    """Inputs: hypothesis m x k @ k x n float32 data of several kinds (k up to 70).
    Expected: each entry the exact dot product rounded once (integer oracle). Pass: bitwise
    equal."""
    a = _data(seed, (m, k), kind)
    b = _data(seed + 1, (k, n), kind)
    got = certified.matmul_f32(a, b, {"bf16": 8, "fp16": 11}.get(kind, 24))
    A, B = a.astype(np.float64), b.astype(np.float64)
    for i in range(m):
        for j in range(n):
            want = _exact_f32(A[i] * B[:, j]) if k else np.float32(0)
            assert got[i, j].view(np.uint32) == want.view(np.uint32), \
                f"[{i},{j}] {got[i, j].view(np.uint32):08x} != {want.view(np.uint32):08x}"


@pytest.mark.clause("ENG-RED-001")
@given(seed=st.integers(0, 2**32 - 1), kind=st.sampled_from(KINDS), n=st.integers(1, 200))
@example(seed=117, kind="subnormal", n=1)  # row 0 a lone -0 (underflowed): sums to +0
def test_sum_equals_the_integer_oracle_bit_for_bit(seed: int, kind: str, n: int) -> None:
    """Inputs: hypothesis rows of up to 200 values of several kinds. Expected: the exact
    sum rounded once. Pass: bitwise equal."""
    x = _data(seed, (3, n), kind)
    got = certified.sum_f32(x, 1)
    for i in range(3):
        want = _exact_f32(x[i].astype(np.float64))  # an exact zero is +0, as torch's sum
        assert got[i].view(np.uint32) == want.view(np.uint32), \
            f"row {i}: {got[i].view(np.uint32):08x} != {want.view(np.uint32):08x}"


@pytest.mark.clause("ENG-RED-001")
@pytest.mark.parametrize("kernels", ["numpy"] + (["compiled"] if compiled_available() else []))
@pytest.mark.parametrize("shape,axis", [((0,), None), ((0,), 0), ((3, 0), 1), ((0, 3), 0),
                                        ((0, 3), 1), ((2, 0, 3), (0, 1)), ((4, 0), None)])
def test_a_sum_over_no_elements_is_positive_zero_in_numpys_shape(
        shape: tuple[int, ...], axis: Any, kernels: str) -> None:
    """Inputs: float32 zeros of an empty shape summed over the axes given (every one an
    empty axis or an empty result), on the specification and on the compiled kernels.
    Expected: NumPy's result shape, every element +0 (0x00000000, torch's empty sum).
    Pass: shape equal, words equal."""
    x = np.zeros(shape, np.float32)
    with ampref.use_kernels(kernels):
        got = certified.sum_f32(x, axis)
    want = np.sum(x, axis=axis).astype(np.float32)
    assert got.shape == want.shape
    assert got.view(np.uint32).tolist() == np.zeros(want.shape, np.uint32).tolist()


@pytest.mark.clause("ENG-MM-001")
@pytest.mark.parametrize("kernels", ["numpy"] + (["compiled"] if compiled_available() else []))
@pytest.mark.parametrize("a_shape,b_shape", [((0, 2, 3), (3, 4)), ((2, 0, 3), (3, 4)),
                                             ((2, 3), (0, 3, 4)), ((2, 2, 0), (2, 0, 4)),
                                             ((1, 2, 3), (0, 3, 4))])
def test_a_product_with_an_empty_batch_or_matrix_is_positive_zero_in_numpys_shape(
        a_shape: tuple[int, ...], b_shape: tuple[int, ...], kernels: str) -> None:
    """Inputs: float32 ones with an empty batch, an empty M, or K = 0 (a sum of no
    products), broadcast like numpy.matmul, on the specification and the compiled
    kernels. Expected: numpy.matmul's shape, every element +0 (0x00000000). Pass: shape
    equal, words equal (a product over an empty batch divided by it before)."""
    a, b = np.ones(a_shape, np.float32), np.ones(b_shape, np.float32)
    with ampref.use_kernels(kernels):
        got = certified.matmul_f32(a, b)
    want = np.matmul(a, b) * 0
    assert got.shape == want.shape
    assert got.view(np.uint32).tolist() == np.zeros(want.shape, np.uint32).tolist()


@pytest.mark.clause("ENG-MM-001")
def test_matmul_takes_the_gemm_bound_where_the_norm_bound_is_loose_and_stays_exact(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Inputs: one-hot rows against columns of sums of same-binade values (norm bound
    loose). Expected: the |A||B| bound is used, and both kernels give the exact dot
    products rounded once. Pass: bound called and bitwise equal."""
    # one-hot rows against float32 columns of sums of two same-binade values: the norm
    # bound spans the whole column, so most elements stay undecided and the |A| @ |B|
    # bound (and then the exact fallback for the ties) must take over
    rng = np.random.default_rng(8)
    a = np.zeros((40, 64), np.float32)
    a[np.arange(40), rng.integers(0, 64, 40)] = 1.0
    a[np.arange(40), rng.integers(0, 64, 40)] += 1.0
    b = ((1.0 + rng.integers(0, 2**23, (64, 48)) * 2.0**-23)
         * 2.0 ** rng.integers(-40, 40, (64, 48))).astype(np.float32)
    calls: list[int] = []
    tight = certify.tight_bound

    def counted(*args: Any, **kw: Any) -> Any:
        calls.append(1)
        return tight(*args, **kw)
    monkeypatch.setattr(certified, "tight_bound", counted)
    with ampref.use_kernels("numpy"):  # the specification's phases
        got = certified.matmul_f32(a, b)
    assert calls, "the GEMM bound was not needed: the test no longer covers it"
    A, B = a.astype(np.float64), b.astype(np.float64)
    want = np.array([[_exact_f32(A[i] * B[:, j]) for j in range(48)] for i in range(40)])
    fast = certified.matmul_f32(a, b)  # the compiled kernels' exact fallback on the same
    for result in (got, fast):
        assert np.array_equal(result.view(np.uint32), want.view(np.uint32)), [
            f"{x:08x}" for x in result.view(np.uint32)[result.view(np.uint32)
                                                        != want.view(np.uint32)]]


@pytest.mark.clause("ENG-IDX-002", "ENG-RED-001")
@given(seed=st.integers(0, 2**32 - 1), kind=st.sampled_from(KINDS),
       counts=st.lists(st.integers(1, 40), min_size=1, max_size=6))
@example(seed=117, kind="subnormal", counts=[1])  # a lone -0 (underflowed): its sum is -0
def test_segment_sums_equal_the_integer_oracle_bit_for_bit(seed: int, kind: str,
                                                          counts: list[int]) -> None:
    """Inputs: hypothesis segments of 1-40 rows of 3 columns. Expected: each segment's
    exact sum rounded once. Pass: bitwise equal."""
    x = _data(seed, (sum(counts), 3), kind)
    starts = np.cumsum([0, *counts[:-1]])
    got = certified.segment_sum_f32(x, starts)
    for i, (s0, c) in enumerate(zip(starts, counts, strict=True)):
        for j in range(3):
            want = _exact_sum_f32(x[s0:s0 + c, j].astype(np.float64))
            assert got[i, j].view(np.uint32) == want.view(np.uint32), \
                f"[{i},{j}] {got[i, j].view(np.uint32):08x} != {want.view(np.uint32):08x}"


@pytest.mark.clause("ENG-IDX-002")
def test_segment_sums_resolve_many_float32_ties_exactly() -> None:
    """Inputs: 200 segments of two same-binade values (float32 ties half the time).
    Expected: exact sums rounded once (ties to even). Pass: bitwise equal."""
    # sums of two same-sign float32 values of one binade are float32 ties half the time:
    # about a quarter of the elements fail the certificate and take the exact fallback
    rng = np.random.default_rng(3)
    x = (1.0 + rng.integers(0, 2**23, (400, 64)) * 2.0**-23).astype(np.float32)
    x *= rng.choice([-1.0, 1.0], x.shape).astype(np.float32)
    starts = np.arange(0, 400, 2)
    got = certified.segment_sum_f32(x, starts)
    want = np.array([[_exact_f32(x[s:s + 2, j].astype(np.float64)) for j in range(64)]
                     for s in starts])
    diff = got.view(np.uint32) != want.view(np.uint32)
    assert not diff.any(), [f"{g:08x} != {w:08x}" for g, w in
                            zip(got.view(np.uint32)[diff], want.view(np.uint32)[diff],
                                strict=True)][:5]


@pytest.mark.clause("ENG-IDX-002")
@pytest.mark.parametrize("starts", [[1, 3], [0, 3, 3], [0, 5, 2], [0, 9], [], [[0, 2]],
                                    [0.0, 2.0]])
def test_segment_sums_refuse_starts_that_are_not_segments(starts: list) -> None:
    """Inputs: starts not from 0, repeated, decreasing, beyond the end, empty, 2-D, floats.
    Expected: ValueError 'segment starts must'. Pass: raised for each."""
    x = np.ones((6, 2), np.float32)
    with pytest.raises(ValueError, match="segment starts must"):
        certified.segment_sum_f32(x, np.asarray(starts))


@pytest.mark.clause("ENG-MM-001", "ENG-SPC-001")
def test_non_finite_inputs_follow_ieee_and_overflow_gives_inf() -> None:
    """Inputs: rows with inf, NaN and 3e38 + 3e38. Expected: inf, NaN, inf. Pass: each."""
    a = np.array([[np.inf, 1.0], [np.nan, 0.0], [3e38, 3e38]], np.float32)
    b = np.array([[1.0], [-1.0]], np.float32) * np.array([[1.0], [1.0]], np.float32)
    got = certified.matmul_f32(a, np.abs(b))
    assert got[0, 0] == np.inf and np.isnan(got[1, 0]) and got[2, 0] == np.inf


#: dot products whose exact value lies strictly between -2^-150 and 2^-150 after
#: cancellation (products of float32 values reach 2^-298): fl32 is a zero of the exact
#: value's sign, while float64 BLAS cancels the big terms to +0 or keeps a tiny term
ZERO_STRADDLE = [
    ([2.0**-55, 2.0**-149, 2.0**-55], [2.0**-55, -(2.0**-149), -(2.0**-55)]),   # -2^-298
    ([2.0**-55, 2.0**-149, 2.0**-55], [2.0**-55, 2.0**-149, -(2.0**-55)]),      # +2^-298
    ([-(2.0**-60), 2.0**-100, 2.0**-60], [2.0**-60, -(2.0**-60), 2.0**-60]),    # -2^-160
    ([2.0**-149, 2.0**-149, 2.0**-149], [-(2.0**-20), 2.0**-21, 2.0**-22]),      # -2^-171
    ([1.5 * 2.0**-75, -(2.0**-75), 2.0**-140], [2.0**-75, 1.5 * 2.0**-75, -(2.0**-12)]),
]


@pytest.mark.clause("ENG-MM-001", "ENG-SPC-001")
@pytest.mark.parametrize("kernels", ["numpy", "compiled"])
@pytest.mark.parametrize("a_row,b_col", ZERO_STRADDLE)
def test_an_exact_dot_below_half_the_smallest_subnormal_rounds_to_a_zero_of_its_sign(
        kernels: str, a_row: list[float], b_col: list[float]) -> None:
    """Inputs: 1 x 3 @ 3 x 1 (and a batch of two) whose exact dot product is nonzero but
    below 2^-150 in magnitude, its terms cancelling; the NumPy and compiled kernels.
    Expected: the integer oracle's fl32, a zero of the exact value's sign (-0 for a
    negative sum: the certificate's interval straddles zero, so its two float32 ends
    are -0 and +0, which compare equal as floats but are different results). Pass:
    bitwise equal."""
    a = np.array([a_row], np.float32)
    b = np.array([b_col], np.float32).T
    want = _exact_f32(a[0].astype(np.float64) * b[:, 0].astype(np.float64))
    with ampref.use_kernels(kernels):
        got = certified.matmul_f32(a, b)
        batched = certified.matmul_f32(np.stack([a, -a]), b)
    w = f"{want.view(np.uint32):08x}"
    assert f"{got[0, 0].view(np.uint32):08x}" == w
    assert f"{batched[0, 0, 0].view(np.uint32):08x}" == w
    assert f"{batched[1, 0, 0].view(np.uint32):08x}" == f"{(-want).view(np.uint32):08x}"


@pytest.mark.clause("ENG-IDX-002", "ENG-RED-001")
@pytest.mark.parametrize("kernels", ["numpy", "compiled"])
def test_a_segment_of_negative_zeros_sums_to_negative_zero_and_a_mixed_one_to_plus_zero(
        kernels: str) -> None:
    """Inputs: segments [-0, -0], [+0, -0], [-0] of two columns. Expected: -0, +0, -0 (a
    segment sum keeps the float64 sum's zero: -0 only when every term is -0; the
    certificate's zero-width interval [-0 - 0, -0 + 0] has ends of two signs and is
    still decided). Pass: bitwise equal."""
    x = np.array([[-0.0, -0.0], [-0.0, -0.0], [0.0, 0.0], [-0.0, -0.0], [-0.0, -0.0]],
                 np.float32)
    with ampref.use_kernels(kernels):
        got = certified.segment_sum_f32(x, np.array([0, 2, 4]))
    assert [f"{v:08x}" for v in got.view(np.uint32).reshape(-1)] == \
        ["80000000"] * 2 + ["00000000"] * 2 + ["80000000"] * 2


def _tiled_generic(monkeypatch: pytest.MonkeyPatch) -> None:
    """The generic (xp) exact GEMM with the smallest tiles: one row per tile, one
    undecided element per batch, so every tiling path runs on small shapes."""
    monkeypatch.setattr(certified, "MIN_TILE", 1)
    monkeypatch.setattr(certified, "TILE_SHARE", 10**9)


@pytest.mark.clause("ENG-MM-003")
@pytest.mark.parametrize("dim", ["M", "K", "N"])
def test_the_tiled_exact_gemm_equals_the_integer_oracle_for_every_size_1_to_130(
        dim: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Input: one dimension swept over 1..130 (the others 3), tie-heavy and wide-range
    float32 operands, the generic path with one-row tiles and one-element batches.
    Expected: every element the exactly rounded value (Fraction oracle), as the
    compiled path gives it. Pass: bitwise equality for all 130 shapes."""
    _tiled_generic(monkeypatch)
    for size in range(1, 131):
        m, k, n = (size if dim == d else 3 for d in "MKN")
        a = _data(size, (m, k), "ints" if size % 2 else "wide")
        b = _data(size + 7, (k, n), "ints" if size % 2 else "wide")
        with ampref.use_kernels("numpy"):
            got = certified.matmul_f32(a, b)
        fast = certified.matmul_f32(a, b)
        A, B = a.astype(np.float64), b.astype(np.float64)
        want = np.array([[_exact_f32(A[i] * B[:, j]) for j in range(n)] for i in range(m)],
                        np.float32)
        for res, what in ((got, "tiled"), (fast, "compiled")):
            bad = res.view(np.uint32) != want.view(np.uint32)
            assert not bad.any(), f"{what} {m}x{k}x{n}: {np.argwhere(bad)[:3].tolist()}"


@pytest.mark.clause("ENG-MM-003")
@given(seed=st.integers(0, 2**32 - 1), kind=st.sampled_from(KINDS),
       lead=st.sampled_from([(), (2,), (3, 1)]), m=st.integers(1, 9), k=st.integers(1, 40),
       n=st.integers(1, 9))
def test_tiling_never_changes_a_bit_of_a_batched_gemm(seed: int, kind: str, lead: tuple[int, ...],
                                                      m: int, k: int, n: int) -> None:
    """Input: hypothesis batched operands (broadcast leading dims) of every kind. Expected:
    the generic path with default tiles, with one-row tiles and with the compiled kernels
    give the same words. Pass: bitwise equality of the three."""
    a = _data(seed, lead + (m, k), kind)
    b = _data(seed + 1, (k, n), kind)
    with ampref.use_kernels("numpy"):
        whole = certified.matmul_f32(a, b)
        mp = pytest.MonkeyPatch()
        try:
            _tiled_generic(mp)
            tiled = certified.matmul_f32(a, b)
        finally:
            mp.undo()
    fast = certified.matmul_f32(a, b)
    assert whole.tobytes() == tiled.tobytes() == fast.tobytes()


@pytest.mark.clause("ENG-MM-003")
@pytest.mark.parametrize("n", [256, 512])
def test_the_exact_gemms_working_memory_is_a_fixed_multiple_of_its_operands(n: int) -> None:
    """Input: n x n x n float32 GEMMs through the generic path: random operands (decided
    by the bounds) and one-hot rows against wide-range columns (the |A| @ |B| bound and
    thousands of exact fallbacks). Expected: the peak traced memory (tracemalloc) at most
    4x the bytes of operands and output. Pass: both kinds under 4x."""
    import tracemalloc

    rng = np.random.default_rng(n)
    spiky = np.zeros((n, n), np.float32)
    spiky[np.arange(n), rng.integers(0, n, n)] = 1.0
    spiky[np.arange(n), rng.integers(0, n, n)] += 1.0
    wide = ((1.0 + rng.integers(0, 2**23, (n, n)) * 2.0**-23)
            * 2.0 ** rng.integers(-40, 40, (n, n))).astype(np.float32)
    for a, b in ((rng.standard_normal((n, n)).astype(np.float32),
                  rng.standard_normal((n, n)).astype(np.float32)), (spiky, wide)):
        base = a.nbytes + b.nbytes + 4 * n * n
        with ampref.use_kernels("numpy"):
            tracemalloc.start()
            try:
                certified.matmul_f32(a, b)
                peak = tracemalloc.get_traced_memory()[1]
            finally:
                tracemalloc.stop()
        assert peak <= 4 * base, f"peak {peak / base:.2f}x operands + output"
