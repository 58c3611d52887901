"""One emulated data-parallel step. Oracles: cases derived by hand from the frameworks'
rules (which rank owns which element, what each agreement gives), float64 arithmetic that
is exact for the operands chosen (a product of two float32 values, a quotient rounded
twice innocuously), and the identity of one rank."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from ampref.distributed import DP_PROFILES, buckets, data_parallel_step, divide_factors, get_dp
from ampref.testing import assert_bitwise_equal


def grads(*values: list[float]) -> list[np.ndarray]:
    return [np.asarray(v, dtype=np.float32) for v in values]


def eight_elements(planted: dict[int, float] | None = None) -> list[np.ndarray]:
    """Two parameters of 4 elements; flat shards of 2 on 4 ranks."""
    w = np.arange(1, 9, dtype=np.float32)
    for i, v in (planted or {}).items():
        w[i] = v
    return [w[:4].copy(), w[4:].copy()]


@pytest.mark.clause("DPL-TRN-002")
@pytest.mark.parametrize("name", sorted(DP_PROFILES))
def test_one_rank_gets_its_own_gradient_back_bit_for_bit(name: str) -> None:
    """Inputs: one rank's gradients at 1e-30 and 1e30 scales, every data-parallel profile.
    Expected: the reduced gradients equal the rank's own, found_inf 0, no skip. Pass:
    bitwise equal."""
    g = np.random.default_rng(1)
    local = [(g.standard_normal((5, 3)) * 1e-30).astype(np.float32),
             (g.standard_normal(7) * 1e30).astype(np.float32)]
    res = data_parallel_step([local], get_dp(name))
    for got, want in zip(res.reduced, local, strict=True):
        assert_bitwise_equal(got, want)
    assert res.found_inf == (0.0,) and not res.skip


@pytest.mark.clause("DPL-INF-002", "DPL-LAY-002")
def test_sum_agreement_counts_ranks_by_where_the_inf_lands_not_who_planted_it() -> None:
    """Inputs: four FSDP1 ranks; ranks 0, 1, 2 plant inf at flat 7, 0, 6 (shards of ranks
    3, 0, 3). Expected: triggered_by [0, 1, 2], flagged_by [0, 3], found_inf 2 on every
    rank, skip. Pass: all."""
    # rank 0 plants at flat 7 (owned by rank 3), rank 1 at flat 0 (rank 0), rank 2 at flat 6
    # (rank 3 again): two shards hold an inf
    per_rank = [eight_elements({7: np.inf}), eight_elements({0: np.inf}),
                eight_elements({6: -np.inf}), eight_elements()]
    res = data_parallel_step(per_rank, get_dp("torch-fsdp1"))
    assert res.triggered_by == [0, 1, 2] and res.flagged_by == [0, 3]
    assert res.found_inf == (2.0,) * 4 and res.skip


@pytest.mark.clause("DPL-INF-004")
@pytest.mark.parametrize("name", ["torch-fsdp2", "megatron", "deepspeed"])
def test_max_agreement_gives_one_on_every_rank(name: str) -> None:
    """Inputs: four ranks, an inf at flat 7 and a NaN at flat 0, under fsdp2, megatron,
    deepspeed. Expected: flagged_by [0, 3] and found_inf 1 everywhere. Pass: both."""
    per_rank = [eight_elements({7: np.inf}), eight_elements({0: np.nan}), eight_elements(),
                eight_elements()]
    res = data_parallel_step(per_rank, get_dp(name))
    assert res.flagged_by == [0, 3] and res.found_inf == (1.0,) * 4


@pytest.mark.clause("DPL-INF-001")
def test_a_full_check_flags_every_rank_and_keeps_each_ranks_own_value() -> None:
    """Inputs: four DDP ranks, a NaN planted by rank 2. Expected: triggered_by [2]; every
    rank flagged (the full reduced gradient holds the NaN); found_inf 1 on each. Pass: all."""
    per_rank = [eight_elements(), eight_elements(), eight_elements({3: np.nan}), eight_elements()]
    res = data_parallel_step(per_rank, get_dp("torch-ddp"))
    assert res.triggered_by == [2] and res.flagged_by == [0, 1, 2, 3]
    assert res.found_inf == (1.0,) * 4


@pytest.mark.clause("DPL-INF-001", "DPL-DIV-001")
def test_a_post_divided_sum_can_overflow_where_a_pre_divided_one_does_not() -> None:
    """Inputs: two ranks with 3e38 each, DDP (pre-divide) and apex (post-divide). Expected:
    DDP reduces to 3e38 without skipping; apex's sum overflows to inf and skips with no
    rank having triggered. Pass: all."""
    big = float(np.float32(3e38))
    per_rank = [grads([big]), grads([big])]
    pre = data_parallel_step(per_rank, get_dp("torch-ddp"))     # 1.5e38 + 1.5e38 = 3e38
    post = data_parallel_step(per_rank, get_dp("apex"))         # 3e38 + 3e38 = inf, / 2
    assert float(pre.reduced[0][0]) == big and not pre.skip
    assert post.reduced[0][0] == np.inf and post.skip and post.triggered_by == []


@pytest.mark.clause("DPL-INF-005")
def test_deepspeeds_sum_test_fires_on_finite_gradients_whose_sum_overflows() -> None:
    """Inputs: finite gradients [2e38, 2e38] (sum overflows float32) and [2e38, -2e38].
    Expected: deepspeed skips the first only; megatron never. Pass: each."""
    local = grads([2e38, 2e38], [1.0])  # finite; the float32 sum 4e38 is not
    assert data_parallel_step([local], get_dp("deepspeed")).skip
    assert not data_parallel_step([local], get_dp("megatron")).skip
    assert not data_parallel_step([grads([2e38, -2e38])], get_dp("deepspeed")).skip


@pytest.mark.clause("DPL-DIV-001")
def test_three_ranks_multiply_by_a_rounded_third_or_divide_by_three() -> None:
    """Inputs: three ranks, two zero; DDP averaging by multiplying with fl32(1/3) and by
    dividing by 3. Expected: x * fl32(1/3) rounded once, and x / 3 rounded once (float64
    oracle), differing somewhere. Pass: bitwise equal to each, and some element differs."""
    g = np.random.default_rng(5)
    per_rank = [[g.standard_normal(4000).astype(np.float32)] for _ in range(3)]
    zero = [[np.zeros(4000, np.float32)] for _ in range(2)]
    x = per_rank[0][0]
    # one nonzero rank: the sum is x itself, so the average is x times (or over) 3
    mul = data_parallel_step([per_rank[0], *zero], get_dp("torch-ddp")).reduced[0]
    third = np.float64(np.float32(1 / 3))
    assert_bitwise_equal(mul, (x.astype(np.float64) * third).astype(np.float32))  # exact product
    div = data_parallel_step([per_rank[0], *zero], replace(get_dp("torch-ddp"),
                                                         divide_op="div")).reduced[0]
    assert_bitwise_equal(div, (x.astype(np.float64) / 3).astype(np.float32))
    assert (mul != div).any()  # the two arithmetics are different rules


@pytest.mark.clause("DPL-DIV-001")
def test_divide_factors_per_semantics() -> None:
    """Inputs: rank counts 3, 4, 8 and reduce dtypes under ddp, apex, fsdp1, fsdp2.
    Expected: (pre, post) = (4, 1), (1, 4), (2, 2), (2, 1.5), (1, 8) bf16, (4, 2) fp16.
    Pass: equal."""
    assert divide_factors(get_dp("torch-ddp"), 4, "float32") == (4.0, 1.0)
    assert divide_factors(get_dp("apex"), 4, "float32") == (1.0, 4.0)
    assert divide_factors(get_dp("torch-fsdp1"), 4, "float32") == (2.0, 2.0)
    assert divide_factors(get_dp("torch-fsdp1"), 3, "float32") == (2.0, 1.5)
    assert divide_factors(get_dp("torch-fsdp2"), 8, "bfloat16") == (1.0, 8.0)
    assert divide_factors(get_dp("torch-fsdp2"), 8, "float16") == (4.0, 2.0)


@pytest.mark.clause("DPL-LAY-001")
def test_ddp_buckets_close_at_the_cap_in_registration_then_reverse_order() -> None:
    """Inputs: sizes 300,000, 10, 300,000 floats with caps 1 MiB and 25 MiB; two tiny
    parameters. Expected: [[0], [1, 2]] on the first iteration, [[2], [1, 0]] rebuilt, [[1,
    0]]. Pass: equal."""
    caps = (1 << 20, 25 << 20)
    sizes = [300_000, 10, 300_000]  # 1.2 MB, 40 B, 1.2 MB of float32
    assert buckets(sizes, caps, rebuilt=False) == [[0], [1, 2]]
    assert buckets(sizes, caps, rebuilt=True) == [[2], [1, 0]]
    assert buckets([5, 5], caps) == [[1, 0]]


@pytest.mark.clause("DPL-ERR-001")
def test_no_ranks_mismatched_shapes_and_unknown_dtypes_are_refused() -> None:
    """Inputs: no ranks; ranks with different shapes; reduce dtype float64. Expected:
    ValueError naming each problem and the allowed dtypes. Pass: each."""
    with pytest.raises(ValueError, match="at least one rank"):
        data_parallel_step([], get_dp("torch-ddp"))
    with pytest.raises(ValueError, match=r"rank 1's gradients have shapes \[\(3,\)\]"):
        data_parallel_step([grads([1, 2]), grads([1, 2, 3])], get_dp("torch-ddp"))
    with pytest.raises(ValueError, match="float64.*float32, bfloat16, float16"):
        data_parallel_step([grads([1.0])], get_dp("torch-ddp"), reduce_dtype="float64")


@pytest.mark.clause("DPL-ERR-001")
def test_counts_and_caps_are_checked_before_any_arithmetic() -> None:
    """Inputs: ring_chunks with 0 ranks and 2.5 elements; divide_factors with 0 ranks;
    buckets with no cap and a zero cap. Expected: ValueError/TypeError naming the value.
    Pass: each."""
    from ampref.distributed import ring_chunks

    with pytest.raises(ValueError, match="ranks must be an int >= 1, got 0"):
        ring_chunks(10, 0, 4)
    with pytest.raises(TypeError, match="n must be an int >= 0, got float: 2.5"):
        ring_chunks(2.5, 2, 4)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="ranks must be an int >= 1, got 0"):
        divide_factors(get_dp("torch-ddp"), 0, "float32")
    with pytest.raises(ValueError, match="at least one byte cap"):
        buckets([4, 4], ())
    with pytest.raises(ValueError, match="bucket cap must be an int >= 1, got 0"):
        buckets([4, 4], (0,))
