"""``nn.EmbeddingBag`` under emulate (``ampref.torch.bagops``, TRC-IDX-002) against an
exact rational oracle: bags from the offsets by explicit loops, sums exact and rounded
once, ``mean`` divided in float32, per-sample weights multiplied first in float32;
``max`` and its gradient against torch (selections, no rounding)."""

from __future__ import annotations

import math
from fractions import Fraction as Q
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from oracle import round_value  # noqa: E402
from value_oracles import r32  # noqa: E402

import ampref  # noqa: E402

from ampref.testing import assert_bitwise_equal  # noqa: E402
from ampref.torch import emulate  # noqa: E402

IDS = [1, 2, 4, 5, 4, 3, 2, 9, 1, 1, 7, 7, 7]
OFFSETS = [0, 4, 4, 7]  # bag 1 is empty


def _bags(n: int, offsets: list[int]) -> list[list[int]]:
    """Positions of each bag: from its offset up to the next (the last to the end)."""
    ends = offsets[1:] + [n]
    return [list(range(a, b)) for a, b in zip(offsets, ends, strict=True)]


def _weight(seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((10, 3)) * 2.0 ** rng.integers(-24, 2, (10, 3))
            ).astype(np.float32)


def _run(w: np.ndarray, mode: str, pad: Any, psw: Any, g: np.ndarray) -> tuple[Any, Any]:
    bag = torch.nn.EmbeddingBag(10, 3, mode=mode, padding_idx=pad)
    with torch.no_grad():
        bag.weight.copy_(torch.tensor(w))
    with emulate(bag, fallback="error"):
        y = bag(torch.tensor(IDS), torch.tensor(OFFSETS), per_sample_weights=psw)
        y.backward(torch.tensor(g))
    assert bag.weight.grad is not None
    return y.detach().numpy(), bag.weight.grad.numpy()


@pytest.mark.clause("TRC-IDX-002")
@pytest.mark.parametrize("case", ["sum", "mean", "sum weighted", "mean padding 7",
                                  "sum padding 1"])
def test_embedding_bag_sums_are_exact_and_gradients_exact_sums(case: str) -> None:
    """Inputs: a (10, 3) weight of values over 2^-24 .. 2, 13 ids in 4 bags (one empty,
    repeated ids), mode sum / mean, per-sample weights or a padding index; an upstream
    gradient of spread values. Expected: per bag fl32(exact sum of its (weighted) rows
    without padding), mean fl32(that / count), empty bags +0; each weight row's
    gradient fl32(exact sum over its occurrences of g_bag (fl32(g / count) for mean,
    fl32(g w) weighted)). Pass: bitwise, output and gradient."""
    mode = case.split()[0]
    pad = int(case.split()[-1]) if "padding" in case else None
    rng = np.random.default_rng(len(case))
    w = _weight(len(case) + 1)
    psw_np = rng.random(len(IDS)).astype(np.float32) if "weighted" in case else None
    psw = None if psw_np is None else torch.tensor(psw_np)
    g = (rng.standard_normal((4, 3)) * 2.0 ** rng.integers(-10, 3, (4, 3))).astype(np.float32)
    y, grad = _run(w, mode, pad, psw, g)
    want_y = np.zeros((4, 3), np.float32)
    want_g: dict[tuple[int, int], Q] = {}
    for b, pos in enumerate(_bags(len(IDS), OFFSETS)):
        kept = [p for p in pos if IDS[p] != pad]
        for c in range(3):
            terms = [Q(float(w[IDS[p], c])) if psw_np is None else
                     r32(Q(float(w[IDS[p], c])) * Q(float(psw_np[p]))) for p in kept]
            s = r32(sum(terms, Q(0)))
            want_y[b, c] = float(r32(s / len(kept))) if mode == "mean" and kept else float(s)
            for p in kept:
                gc = Q(float(g[b, c]))
                part = r32(gc / len(kept)) if mode == "mean" else (
                    r32(gc * Q(float(psw_np[p]))) if psw_np is not None else gc)
                want_g[(IDS[p], c)] = want_g.get((IDS[p], c), Q(0)) + part
    assert_bitwise_equal(y, want_y, msg=f"{case} output")
    wg = np.zeros((10, 3), np.float32)
    for k, v in want_g.items():
        wg[k] = float(r32(v))
    assert_bitwise_equal(grad, wg, msg=f"{case} gradient")


@pytest.mark.clause("TRC-IDX-002")
def test_max_bags_and_their_gradient_are_torchs_selections() -> None:
    """Inputs: mode max on the bags above (one empty), an upstream gradient. Expected:
    torch's output and weight gradient (selections: each bag's gradient to its argmax
    rows, none from the empty bag). Pass: bitwise."""
    w, g = _weight(3), np.arange(12, dtype=np.float32).reshape(4, 3) + 1
    y, grad = _run(w, "max", None, None, g)
    bag = torch.nn.EmbeddingBag(10, 3, mode="max")
    with torch.no_grad():
        bag.weight.copy_(torch.tensor(w))
    y2 = bag(torch.tensor(IDS), torch.tensor(OFFSETS))
    y2.backward(torch.tensor(g))
    assert bag.weight.grad is not None
    assert_bitwise_equal(y, y2.detach().numpy(), msg="output")
    assert_bitwise_equal(grad, bag.weight.grad.numpy(), msg="gradient")


@pytest.mark.clause("TRC-IDX-002", "TRC-EMU-001")
def test_a_recommendation_model_with_bags_trains_under_cuda_autocast() -> None:
    """Inputs: two EmbeddingBag tables (sum and mean, 2-D id batches and include_last_
    offset), concatenated into an MLP, BCE-with-logits loss, fp16 CUDA autocast
    emulated, one step. Expected: no op left to torch, a finite loss, gradients for
    every parameter. Pass: all."""
    torch.manual_seed(0)
    a, b = torch.nn.EmbeddingBag(20, 4, mode="sum"), torch.nn.EmbeddingBag(30, 4, mode="mean")
    mlp = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
    model = torch.nn.ModuleList([a, b, mlp])
    ids_a = torch.randint(0, 20, (5, 3))
    ids_b, off_b = torch.randint(0, 30, (9,)), torch.tensor([0, 2, 4, 6, 7, 9])
    from ampref.torch import autocast

    with emulate(model, fallback="error") as em:
        with autocast("cuda", dtype=torch.float16):
            pooled = torch.nn.functional.embedding_bag(ids_b, b.weight, off_b, mode="mean",
                                                       include_last_offset=True)
            z = torch.cat([a(ids_a), pooled], -1)
            loss = torch.nn.functional.binary_cross_entropy_with_logits(
                mlp(z).float().squeeze(-1), torch.ones(5))
        loss.backward()
    assert em.report.not_emulated() == []
    assert np.isfinite(float(loss.detach()))
    assert all(p.grad is not None for p in model.parameters())


@pytest.mark.clause("TRC-IDX-002")
@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("norm_type", [2.0, 1.0])
def test_embedding_max_norm_rescales_the_named_rows_from_their_exact_norms(
        dtype: str, norm_type: float) -> None:
    """Inputs: nn.Embedding(12, 5, max_norm=1.3, norm_type) in float32 / float16 with
    rows of norm 0.3 .. 4, indices naming rows 1, 3 (twice), 7, 0, 9 (twice); forward and
    backward under emulate. Expected: each named row whose norm (p 2:
    fl32(sqrt(fl32(exact sum x^2))), p 1: fl32(exact sum |x|), then rounded to the dtype)
    exceeds 1.3 becomes fl_dtype(fl32(x fl32(1.3 / (norm + 1e-7)))) (the quotient in
    float64), the others and the unnamed rows keep their bits; the lookup returns the
    rescaled rows. Pass: bitwise."""
    tdt = getattr(torch, dtype)
    fmt = ampref.get_format(dtype)
    rng = np.random.default_rng(int(norm_type) * 3 + len(dtype))
    raw = rng.standard_normal((12, 5)) * rng.uniform(0.15, 2.0, (12, 1))
    w0 = ampref.quantize(raw, dtype).astype(np.float32)
    emb = torch.nn.Embedding(12, 5, max_norm=1.3, norm_type=norm_type).to(tdt)
    with torch.no_grad():
        emb.weight.copy_(torch.tensor(w0).to(tdt))
    idx = torch.tensor([[1, 3, 3, 7], [0, 1, 9, 9]])
    with emulate(emb, fallback="error"):
        y = emb(idx)
        y.float().sum().backward()
    want = w0.copy()
    for r in sorted({1, 3, 7, 0, 9}):
        xs = [Q(float(v)) for v in w0[r]]
        if norm_type == 2.0:
            norm = math.sqrt(float(r32(sum((v * v for v in xs), Q(0)))))
        else:
            norm = float(r32(sum((abs(v) for v in xs), Q(0))))
        norm = float(round_value(Q(float(np.float32(norm))), fmt))
        if norm > 1.3:
            scale = Q(float(np.float32(1.3 / (norm + 1e-7))))
            want[r] = [float(round_value(r32(v * scale), fmt)) for v in xs]
    got = emb.weight.detach().float().numpy()
    assert_bitwise_equal(got, want, msg=f"{dtype} p={norm_type}")
    assert_bitwise_equal(y.detach().float().numpy(), want[idx.numpy()], msg="lookup")
    assert int((np.abs(want - w0) > 0).any(axis=1).sum()) >= 2, "the case rescales no row"
