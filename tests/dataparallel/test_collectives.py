"""Sums across ranks. Oracles: gloo's own all-reduce (recorded by
scripts/record_dp_traces.py for 3 and 4 ranks, lengths 1..4099, three dtypes), hand-derived
float32 cases whose order shows in the bits, and float64 sums that are exact for the
operands chosen (then rounded once by ml_dtypes/NumPy)."""

from __future__ import annotations

import importlib.util
from types import ModuleType

import ml_dtypes
import numpy as np
import pytest

from ampref.distributed import all_reduce, ring_chunks
from ampref.testing import assert_bitwise_equal
from paths import DATA, ROOT

TRACES = np.load(DATA / "dp_traces.npz")
_spec_path = ROOT / "scripts" / "record_dp_traces.py"


def recorder_inputs() -> ModuleType:
    """The recording script, for the inputs it fed gloo (not for any ampref code)."""
    spec = importlib.util.spec_from_file_location("record_dp_traces_inputs", _spec_path)
    mod = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return mod


REC = recorder_inputs()
AR = [(ranks, n, dtype) for ranks in REC.AR_RANKS for n in REC.AR_LENGTHS
      for dtype in REC.AR_DTYPES]


@pytest.mark.clause("DPL-RED-001", "DPL-RED-002", "DPL-CNF-001")
@pytest.mark.parametrize("ranks,n,dtype", AR)
def test_the_ring_order_equals_gloos_all_reduce(ranks: int, n: int, dtype: str) -> None:
    """Inputs: the recorder's per-rank inputs for each (ranks, n, dtype) case. Expected:
    the all-reduce results recorded from gloo (tests/data/dp_traces.npz). Pass: bitwise
    equal."""
    stack = np.stack([REC.allreduce_input(r, n, dtype) for r in range(ranks)])
    got = np.asarray(all_reduce(stack, order="ring", dtype=dtype)).astype(np.float32)
    assert_bitwise_equal(got, TRACES[f"allreduce/{ranks}/{n}/{dtype}"],
                         msg=f"{ranks} ranks, n={n}, {dtype}")


@pytest.mark.clause("DPL-RED-001")
def test_ring_chunks_follow_gloos_segment_grid() -> None:
    """Inputs: n = 10, 676, 1 floats over 4, 4, 2 ranks. Expected: chunk bounds from gloo's
    segment formula (worked in the comments). Pass: equal lists."""
    # n=10 floats, 4 ranks: 40 bytes, segments of roundUp(ceil(40/8), 4) = 8 bytes (2
    # floats), 8 segments, 2 per chunk: chunks of 4, 4, 2 and 0 elements
    assert ring_chunks(10, 4, 4) == [(0, 4), (4, 8), (8, 10), (10, 10)]
    # 676 floats, 4 ranks: segments of 340 bytes (85 floats), 8 of them: chunks of 170
    assert ring_chunks(676, 4, 4) == [(0, 170), (170, 340), (340, 510), (510, 676)]
    assert ring_chunks(1, 2, 4) == [(0, 1), (1, 1)]


@pytest.mark.clause("DPL-RED-001")
def test_a_segment_cap_makes_more_segments_than_twice_the_ranks() -> None:
    """Inputs: 100 floats over 2 ranks with segments capped at 32 bytes; 1,000 floats over
    3 ranks capped at 100 bytes; 100 floats over 2 ranks capped at 30 bytes (not a whole
    number of floats). Expected: chunk bounds from gloo's segment formula with the cap
    (worked in the comments): the segment count then exceeds 2N, the case the other
    grids never reach. Pass: equal lists."""
    # 400 bytes: min(ceil(400/4), 32) = 32-byte segments (8 floats); max(ceil(400/32), 4) =
    # 13 segments, rounded up to 14 = 7 per rank: chunks of 56 floats, the last short
    assert ring_chunks(100, 2, 4, max_segment_bytes=32) == [(0, 56), (56, 100)]
    # 4,000 bytes: min(667, 100) = 100-byte segments (25 floats); max(40, 6) = 40, rounded
    # up to 42 = 14 per rank: chunks of 350 floats
    assert ring_chunks(1000, 3, 4, max_segment_bytes=100) == [(0, 350), (350, 700),
                                                                (700, 1000)]
    # the cap is cut to whole floats, 28 bytes (7 floats): max(ceil(400/28), 4) = 15,
    # rounded up to 16 = 8 per rank: chunks of 56 floats
    assert ring_chunks(100, 2, 4, max_segment_bytes=30) == [(0, 56), (56, 100)]


ONE, TINY = np.float32(1.0), np.float32(2.0**-24)


@pytest.mark.clause("DPL-RED-003")
@pytest.mark.parametrize("order,want", [
    ("rank", 1.0),              # 2^-24 + 1 ties to 1, and twice more
    ("tree", 1.0 + 2.0**-23),   # (2^-24 + 1) + (2^-24 + 2^-24) = 1 + 2^-23
    ("exact", 1.0 + 2.0**-22),  # 1 + 3 * 2^-24 is a tie between 1 + 2^-23 (odd) and
                                # 1 + 2^-22 (even)
    ("ring", 1.0 + 2.0**-22),   # ranks 3, 2, 1, 0: 2^-23, 1 + 2^-23, then the same tie
])
def test_orders_round_each_addition_where_they_say(order: str, want: float) -> None:
    """Inputs: four ranks holding 2^-24, 1, 2^-24, 2^-24 in float32, orders rank, tree,
    exact, ring. Expected: 1, 1 + 2^-23, 1 + 2^-22, 1 + 2^-22 (each derived in the
    parameter comments). Pass: equal."""
    stack = np.array([[TINY], [ONE], [TINY], [TINY]], dtype=np.float32)
    got = all_reduce(stack, order=order)
    assert got.dtype == np.float32 and float(got[0]) == want


@pytest.mark.clause("DPL-RED-003")
def test_the_tree_pairs_neighbouring_ranks_and_carries_the_odd_last_one_up() -> None:
    """Inputs: float32 ranks (1, 2^-24, -1, 0) and (1, 2^-24, -1, 0, 2^-24), order tree.
    Expected: pairs (x0 + x1) + (x2 + x3): 1 + 2^-24 ties to 1, -1 + 0 = -1, so +0 (any
    other pairing, as (x0 + x3) + (x2 + x1), keeps 2^-24); five ranks: the fifth waits
    unchanged for the last level, 0 + 2^-24 = 2^-24 (adding it to -1 early gives +0).
    Pass: equal bit patterns."""
    four = np.array([[ONE], [TINY], [-ONE], [0.0]], dtype=np.float32)
    got = all_reduce(four, order="tree")
    assert got.view(np.uint32)[0] == 0, hex(int(got.view(np.uint32)[0]))
    five = np.vstack([four, [[TINY]]]).astype(np.float32)
    got = all_reduce(five, order="tree")
    assert got.view(np.uint32)[0] == np.float32(TINY).view(np.uint32), \
        hex(int(got.view(np.uint32)[0]))


@pytest.mark.clause("DPL-RED-001")
def test_the_ring_starts_each_chunk_one_rank_below_its_owner() -> None:
    """Inputs: one element over 3 ranks as (1, 2^-24, 2^-24) and (2^-24, 2^-24, 1), ring
    and rank orders. Expected: 1 + 2^-23 vs 1, and 1 vs 1 + 2^-23 (the ring starts one rank
    below the owner). Pass: each."""
    # one element, 3 ranks: chunk 0 starts at rank 2, then rank 1, then rank 0
    x = np.array([[ONE], [TINY], [TINY]], dtype=np.float32)
    assert float(all_reduce(x, order="ring")[0]) == 1.0 + 2.0**-23  # 2^-24 + 2^-24 first
    assert float(all_reduce(x, order="rank")[0]) == 1.0  # 1 + 2^-24 ties to 1, twice
    y = np.array([[TINY], [TINY], [ONE]], dtype=np.float32)
    assert float(all_reduce(y, order="ring")[0]) == 1.0
    assert float(all_reduce(y, order="rank")[0]) == 1.0 + 2.0**-23


@pytest.mark.clause("DPL-RED-002")
@pytest.mark.parametrize("dtype,np_dtype", [("bfloat16", ml_dtypes.bfloat16),
                                            ("float16", np.float16)])
def test_a_low_precision_addition_is_one_rounding_of_the_exact_sum(dtype: str,
                                                                   np_dtype: type) -> None:
    """Inputs: 50,000 bf16/fp16 pairs with exponents within 20. Expected: the float64 sum
    (exact) cast once. Pass: bitwise equal, same dtype."""
    g = np.random.default_rng(7)
    # operands already in the format, exponents within 20 of each other: their float64
    # sum is exact, so one cast of it is the exactly rounded sum
    def draw() -> np.ndarray:
        return np.asarray(g.standard_normal(50_000) * 2.0 ** g.integers(-10, 10, 50_000),
                          dtype=np_dtype)

    a, b = draw(), draw()
    want: np.ndarray = (a.astype(np.float64) + b.astype(np.float64)).astype(np_dtype)
    got = all_reduce(np.stack([a, b]), order="rank", dtype=dtype)
    assert got.dtype == want.dtype
    assert_bitwise_equal(got.view(np.uint16), want.view(np.uint16))


@pytest.mark.clause("DPL-RED-002")
def test_infinities_and_nans_propagate_and_a_sum_beyond_range_is_inf() -> None:
    """Inputs: two ranks with inf+1, inf-inf, NaN+1, 3e38+3e38, 60000+60000, in float32 and
    float16. Expected: inf, NaN, NaN, inf; 120000 in fp16 is inf. Pass: each."""
    big = np.float32(3e38)
    stack = np.array([[np.inf, np.inf, np.nan, big, 60000.0],
                      [1.0, -np.inf, 1.0, big, 60000.0]], dtype=np.float32)
    f32 = all_reduce(stack, order="ring")
    assert f32[0] == np.inf and np.isnan(f32[1]) and np.isnan(f32[2]) and f32[3] == np.inf
    f16 = all_reduce(stack, order="ring", dtype="float16")
    assert f16[4] == np.inf  # 120000 is beyond float16's 65504


@pytest.mark.clause("DPL-RED-003")
def test_exact_float16_sums_are_the_exactly_rounded_sum() -> None:
    """Inputs: four fp16 ranks of 5000 values over 2^-20..2^9. Expected: the exact float64
    sum cast once to fp16. Pass: bitwise equal."""
    g = np.random.default_rng(3)
    x = (g.standard_normal((4, 5000)) * 2.0 ** g.integers(-20, 10, (4, 5000))).astype(np.float16)
    want = x.astype(np.float64).sum(axis=0).astype(np.float16)  # exact in float64
    assert_bitwise_equal(all_reduce(x, order="exact", dtype="float16"), want)


@pytest.mark.clause("DPL-ERR-001")
@pytest.mark.parametrize("kwargs,words", [
    ({"order": "butterfly"}, ["butterfly", "ring", "rank", "tree", "exact"]),
    ({"dtype": "float64"}, ["float64", "float32", "bfloat16", "float16"]),
    ({"order": "exact", "dtype": "bfloat16"}, ["exact", "bfloat16"]),
])
def test_unknown_orders_and_dtypes_are_named_with_the_choices(kwargs: dict[str, str],
                                                              words: list[str]) -> None:
    """Inputs: order 'butterfly', dtype float64, exact order with bf16. Expected:
    ValueError naming the value and the choices. Pass: all words present."""
    with pytest.raises(ValueError) as e:
        all_reduce(np.zeros((2, 3), np.float32), **kwargs)
    assert all(w in str(e.value) for w in words)


@pytest.mark.clause("DPL-ERR-001")
def test_a_stack_that_is_not_ranks_by_elements_is_refused() -> None:
    """Inputs: a 1-D stack. Expected: ValueError asking for (ranks, n) and showing the
    shape. Pass: raised."""
    with pytest.raises(ValueError, match=r"\(ranks, n\).*shape \(3,\)"):
        all_reduce(np.zeros(3, np.float32))
