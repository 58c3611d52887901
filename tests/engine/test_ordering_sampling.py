"""sort, topk (ENG-ORD-001), multinomial (ENG-SMP-001) and integer cat: what sampling
text from a trained model asks of the engine, compared with torch."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

import ampref
from ampref.testing import assert_bitwise_equal

#: rows with ties, signed zeros, ±inf and NaN
SPECIAL = np.array([[3.0, np.nan, -1.0, 3.0, -0.0, 0.0, np.inf, -np.inf],
                    [0.5, 0.25, 0.5, np.nan, np.nan, -2.0, 1e-40, 7.0]], np.float32)


@pytest.mark.clause("ENG-ORD-001")
@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_sort_equals_torchs_stable_sort_with_ties_nan_and_signed_zeros(descending: bool,
                                                                      dim: int) -> None:
    """Inputs: SPECIAL (ties, -0.0 beside +0.0, ±inf, NaN, a subnormal) sorted along each
    dim both ways. Expected: torch.sort(stable=True)'s values (bits; NaN any) and
    indices. Pass: equal."""
    torch = pytest.importorskip("torch")
    ours = ampref.tensor(SPECIAL).sort(dim, descending=descending)
    theirs = torch.tensor(SPECIAL).sort(dim=dim, descending=descending, stable=True)
    assert_bitwise_equal(ours.values.numpy(), theirs.values.numpy(), nan="any")
    assert ours.indices.tolist() == theirs.indices.tolist()


@pytest.mark.clause("ENG-ORD-001")
@pytest.mark.parametrize("k, largest", [(1, True), (3, True), (8, True), (0, True),
                                        (2, False), (5, False)])
def test_topk_is_the_head_of_the_stable_order_and_torchs_on_distinct_values(
        k: int, largest: bool) -> None:
    """Inputs: SPECIAL rows (ties included) and a 4x50 tensor of distinct random values.
    Expected: SPECIAL's topk = the first k of torch's stable sort (values and indices:
    torch's own topk may order ties otherwise); on distinct values torch.topk's values
    and indices. Pass: equal."""
    torch = pytest.importorskip("torch")
    ours = ampref.tensor(SPECIAL).topk(k, largest=largest)
    ref = torch.tensor(SPECIAL).sort(dim=-1, descending=largest, stable=True)
    assert_bitwise_equal(ours.values.numpy(), ref.values[:, :k].numpy(), nan="any")
    assert ours.indices.tolist() == ref.indices[:, :k].tolist()
    x = np.random.default_rng(3).permutation(200).reshape(4, 50).astype(np.float32) / 7
    got, want = ampref.topk(ampref.tensor(x), k, largest=largest), torch.topk(
        torch.tensor(x), k, largest=largest)
    assert_bitwise_equal(got.values.numpy(), want.values.numpy())
    assert got.indices.tolist() == want.indices.tolist()


@pytest.mark.clause("ENG-ORD-001", "ENG-BWD-001")
def test_the_gradient_of_sorted_values_returns_to_their_positions() -> None:
    """Inputs: x = [[2, -1, 5], [0, 3, 3]] requiring grad; loss = sum(topk(x, 2).values *
    [[10, 20]]). Expected: x.grad = [[20, 0, 10], [0, 10, 20]] (the tie's first position
    is first). Pass: exact."""
    x = ampref.tensor([[2.0, -1.0, 5.0], [0.0, 3.0, 3.0]], requires_grad=True)
    (x.topk(2).values * ampref.tensor([[10.0, 20.0]])).sum().backward()
    assert np.asarray(x.grad).tolist() == [[20.0, 0.0, 10.0], [0.0, 10.0, 20.0]]


@pytest.mark.clause("ENG-ORD-001", "API-ERR-001")
@pytest.mark.parametrize("call, error, match", [
    (lambda x: x.topk(4), ValueError, r"k = 4 is outside \[0, 3\]"),
    (lambda x: x.topk(-1), ValueError, "outside"),
    (lambda x: x.topk(1.5), TypeError, "k must be an int"),
    (lambda x: x.sort(2), ValueError, "dim"),
    (lambda x: x.sort(descending="yes"), TypeError, "descending"),
    (lambda x: ampref.sort(ampref.tensor([3, 1])), TypeError, "sort"),
])
def test_bad_order_arguments_are_refused(call: Any, error: Any, match: str) -> None:
    """Inputs: k past the dim or negative or not an int, a dim out of range, a non-bool
    flag, an integer tensor. Expected: the error naming it. Pass: raises."""
    with pytest.raises(error, match=match):
        call(ampref.ones(2, 3))


@pytest.mark.clause("ENG-SMP-001", "ENG-RNG-001")
def test_multinomial_draws_the_weights_distribution_and_repeats_under_a_seed() -> None:
    """Inputs: weights [1, 0, 3, 4] (a zero weight), 40,000 draws with replacement from
    Generator(9), twice. Expected: the same indices both times; category 1 never; the
    others' frequencies within 5 binomial sigmas of 1/8, 3/8, 4/8. Pass: all."""
    w = ampref.tensor([1.0, 0.0, 3.0, 4.0])
    a = ampref.multinomial(w, 40_000, replacement=True, generator=ampref.Generator(9))
    b = ampref.multinomial(w, 40_000, replacement=True, generator=ampref.Generator(9))
    assert a.tolist() == b.tolist() and a.dtype == "int64" and a.shape == (40_000,)
    counts = np.bincount(np.asarray(a.tolist()), minlength=4)
    assert counts[1] == 0
    for i, p in ((0, 1 / 8), (2, 3 / 8), (3, 4 / 8)):
        assert abs(counts[i] / 40_000 - p) < 5 * math.sqrt(p * (1 - p) / 40_000), (i, counts)


@pytest.mark.clause("ENG-SMP-001")
def test_multinomial_without_replacement_draws_each_nonzero_category_once() -> None:
    """Inputs: two rows of weights with 3 nonzero entries each, 3 draws per row without
    replacement, 50 seeds. Expected: each row's draws are its 3 nonzero categories in
    some order; shape (2, 3). Pass: all."""
    w = ampref.tensor([[0.0, 1.0, 2.0, 0.0, 5.0], [3.0, 0.0, 0.0, 1e-30, 1.0]])
    for seed in range(50):
        got = ampref.multinomial(w, 3, generator=ampref.Generator(seed)).tolist()
        assert sorted(got[0]) == [1, 2, 4] and sorted(got[1]) == [0, 3, 4]


@pytest.mark.clause("ENG-SMP-001", "API-ERR-001")
@pytest.mark.parametrize("weights, n, kw, error, match", [
    ([1.0, -1.0], 1, {}, ValueError, "finite and >= 0"),
    ([1.0, np.nan], 1, {}, ValueError, "finite"),
    ([0.0, 0.0], 1, {}, ValueError, "sums to 0"),
    ([1.0, 0.0], 2, {}, ValueError, "without replacement"),
    ([1.0, 2.0], 0, {}, ValueError, "num_samples must be >= 1"),
    ([1.0, 2.0], 1.0, {}, TypeError, "num_samples must be an int"),
    ([[[1.0]]], 1, {}, ValueError, "1-D or 2-D"),
    ([1.0, 2.0], 1, {"generator": 3}, TypeError, "Generator"),
])
def test_bad_multinomial_calls_are_refused_as_torch_refuses_them(
        weights: Any, n: Any, kw: dict[str, Any], error: Any, match: str) -> None:
    """Inputs: a negative, NaN or all-zero weight, too many draws without replacement,
    zero or non-int draws, 3-D weights, a non-Generator. Expected: the error named (torch
    raises RuntimeError for the same weights and counts). Pass: raises."""
    with pytest.raises(error, match=match):
        ampref.multinomial(ampref.tensor(weights), n, **kw)


@pytest.mark.clause("ENG-INT-001")
def test_integer_tensors_concatenate_as_torchs() -> None:
    """Inputs: int64 ids (2x2) with a sampled int64 column, bool with bool, bool with
    int64. Expected: torch.cat's values and dtypes (int64, bool, int64); a shape
    mismatch is refused naming the shapes. Pass: equal, raises."""
    torch = pytest.importorskip("torch")
    ids, col = [[1, 2], [3, 4]], [[5], [6]]
    m, n = [[True, False]], [[False, False]]
    for a, b in ((ids, col), (m, n), (m, [[7, 8]])):
        dim = 1 if b is col else 0
        ours = ampref.cat((ampref.tensor(a), ampref.tensor(b)), dim=dim)
        theirs = torch.cat((torch.tensor(a), torch.tensor(b)), dim=dim)
        assert ours.tolist() == theirs.tolist()
        assert ours.dtype == str(theirs.dtype).removeprefix("torch.")
    with pytest.raises(ValueError, match=r"shapes \[\(2, 2\), \(2, 1\)\] do not join"):
        ampref.cat((ampref.tensor(ids), ampref.tensor(col)), dim=0)


GENERATE = '''
@torch.no_grad()
def generate(model, idx, steps, top_k):
    for _ in range(steps):
        logits = model(idx)[:, -1, :] / 0.8
        v, _ = torch.topk(logits, min(top_k, logits.size(-1)))
        logits = logits.masked_fill(logits < v[:, [-1]], -float("inf"))
        probs = F.softmax(logits, dim=-1)
        idx = torch.cat((idx, torch.multinomial(probs, num_samples=1)), dim=1)
    return idx
'''


@pytest.mark.clause("ENG-ORD-001", "ENG-SMP-001")
def test_nanogpt_style_generation_runs_and_samples_only_the_top_k() -> None:
    """Inputs: nanoGPT's sampling loop (temperature, topk, masking below the k-th value,
    softmax, multinomial, cat) over an embedding + linear model, 6 steps, top_k 2, from
    a seed. Expected: ids of shape (2, 3 + 6), each new id among the 2 largest logits at
    its step, and the same ids again under the same seed. Pass: all."""
    ns: dict[str, Any] = {"torch": ampref, "F": ampref.functional}
    exec(GENERATE, ns)  # noqa: S102 - the script text a user would write
    ampref.manual_seed(4)
    model = ampref.nn.Sequential(ampref.nn.Embedding(9, 8), ampref.nn.Linear(8, 9))
    start = ampref.tensor([[1, 2, 3], [4, 5, 6]])
    ampref.manual_seed(4)
    out = ns["generate"](model, start, 6, 2)
    assert out.shape == (2, 9)
    for t in range(3, 9):
        logits = model(ampref.tensor(out.tolist())[:, :t])[:, -1, :].numpy()
        top2 = np.argsort(-logits, axis=-1, kind="stable")[:, :2]
        assert all(out.tolist()[r][t] in top2[r] for r in range(2))
    ampref.manual_seed(4)
    assert ns["generate"](model, start, 6, 2).tolist() == out.tolist()
