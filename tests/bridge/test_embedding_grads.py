"""``nn.Embedding(scale_grad_by_freq=True)``'s gradient under emulate (TRC-IDX-001):
each row the exact sum of its occurrences' gradients times fl32(1 / count), rounded
once. Oracle: exact rationals; torch itself where a row is used once."""

from __future__ import annotations

from fractions import Fraction as Q
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from value_oracles import r32  # noqa: E402

from ampref.testing import assert_bitwise_equal  # noqa: E402
from ampref.torch import emulate  # noqa: E402

#: counts: 3 and 5 three times each (1/3 is not a power of two: the products round), the
#: padding index 0 twice, 1 and 6 once, 2 and 4 never
IDS = torch.tensor([[3, 1, 3, 5, 0], [3, 5, 5, 6, 0]])


def _grad(g: Any, padding_idx: int | None = 0) -> Any:
    emb = torch.nn.Embedding(7, g.shape[-1], padding_idx=padding_idx, scale_grad_by_freq=True)
    with emulate(fallback="error") as em:
        emb(IDS).backward(g)
    assert em.report.not_emulated() == []
    assert emb.weight.grad is not None
    return emb.weight.grad


def _oracle(g: Any, padding_idx: int | None = 0) -> np.ndarray:
    """Row k: r32(exact sum over occurrences i of k of g_i * fl32(1 / count_k))."""
    ids = IDS.reshape(-1).tolist()
    rows = g.reshape(len(ids), -1).tolist()
    want = np.zeros((7, len(rows[0])), np.float32)
    for k in set(ids):
        if k == padding_idx:
            continue
        s = Q(float(np.float32(1.0 / ids.count(k))))
        for d in range(len(rows[0])):
            want[k, d] = float(r32(sum((Q(rows[i][d]) * s for i in range(len(ids))
                                        if ids[i] == k), Q(0))))
    return want


@pytest.mark.clause("TRC-IDX-001")
def test_frequency_scaled_rows_are_exact_sums_of_scaled_gradients_rounded_once() -> None:
    """Inputs: ids [[3, 1, 3, 5, 0], [3, 5, 5, 6, 0]] (indices 3 and 5 three times, the
    padding index 0 twice), upstream gradients spread over 2^-20 .. 2^20 (width 6).
    Expected: row k = fl32(exact sum of g_i fl32(1 / count_k)), the padding row +0,
    unused rows +0. Pass: bitwise."""
    rng = np.random.default_rng(5)
    g = torch.tensor((rng.standard_normal((2, 5, 6)) * 2.0 ** rng.integers(-20, 21, (2, 5, 6))
                      ).astype(np.float32))
    assert_bitwise_equal(_grad(g).numpy(), _oracle(g))


@pytest.mark.clause("TRC-IDX-001")
def test_products_below_float32s_range_are_still_rounded_once() -> None:
    """Inputs: the same ids, gradients about 2^-132 .. 2^-125 (their products with
    fl32(1/3) have remainders with bits below 2^-149, the split's rare path; with this
    seed, rounding those remainders to float32 would move 4 of the 6 summed elements
    by an ulp) mixed with values near 1 in other columns. Expected: as above,
    fl32(exact sum). Pass: bitwise."""
    rng = np.random.default_rng(6)
    tiny = rng.standard_normal((2, 5, 3)) * 2.0 ** rng.integers(-132, -124, (2, 5, 3))
    g = torch.tensor(np.concatenate([tiny, rng.standard_normal((2, 5, 3))], -1
                                    ).astype(np.float32))
    assert_bitwise_equal(_grad(g).numpy(), _oracle(g))


@pytest.mark.clause("TRC-IDX-001")
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
def test_a_row_used_once_is_torchs_word_and_nan_inf_propagate(dtype: str) -> None:
    """Inputs: seeded normal gradients in the dtype, one NaN at an occurrence of index
    3 and an inf at one of index 5; no padding index. Expected: rows 1 and 6 (used
    once: one exact addition in torch too) equal torch's words; row 3 NaN; row 5 inf
    (inf plus finite terms). Pass: bitwise on rows 1, 6; NaN and inf where stated."""
    dt = getattr(torch, dtype)
    g = torch.randn(2, 5, 4, generator=torch.Generator().manual_seed(2)).to(dt)
    g[0, 0, 1], g[0, 3, 2] = float("nan"), float("inf")
    ours = _grad(g, padding_idx=None)
    emb = torch.nn.Embedding(7, 4, scale_grad_by_freq=True)
    emb(IDS).backward(g)
    assert emb.weight.grad is not None
    theirs = emb.weight.grad
    assert_bitwise_equal(ours[[1, 6]].float().numpy(), theirs[[1, 6]].float().numpy())
    assert bool(ours[3, 1].isnan()) and float(ours[5, 2]) == float("inf")
