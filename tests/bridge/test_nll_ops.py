"""Negative log-likelihood with class weights and over images (``ampref.torch.nllops``,
TRC-NN-003) against exact rational oracles (each term one float32 product, the sums
exact and rounded once, torch's float32 division by the total weight; the backward's
float32 steps), and against torch itself on values where its summation order cannot
matter. Segmentation-style cross entropy end to end under emulated CUDA autocast."""

from __future__ import annotations

from fractions import Fraction as Q
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from value_oracles import r32  # noqa: E402

from ampref.testing import assert_bitwise_equal  # noqa: E402
from ampref.torch import autocast, emulate  # noqa: E402

TF = torch.nn.functional
WEIGHT = np.array([1.0, 2.5, 0.3, 0.25, 3.0], np.float32)


def _oracle(lp: np.ndarray, t: np.ndarray, w: np.ndarray | None, reduction: str,
            g: np.ndarray, ignore: int = -100) -> tuple[np.ndarray, np.ndarray]:
    """Loss and input gradient by explicit loops over rows (class axis last)."""
    rows = lp.reshape(-1, lp.shape[-1])
    tt = t.reshape(-1)
    terms, weights = [], []
    for i, c in enumerate(tt):
        if c == ignore:
            terms.append(Q(0))
            continue
        wc = Q(float(w[c])) if w is not None else Q(1)
        terms.append(r32(-Q(float(rows[i, c])) * wc))
        weights.append(wc)
    total = r32(sum(weights, Q(0)))
    grad = np.zeros(rows.shape, np.float32)
    if reduction == "none":
        loss = np.array([float(v) for v in terms], np.float32).reshape(t.shape)
        for i, c in enumerate(tt):
            if c != ignore:
                wc = Q(float(w[c])) if w is not None else Q(1)
                grad[i, c] = float(r32(-wc * Q(float(g.reshape(-1)[i]))))
        return loss, grad
    s = r32(sum(terms, Q(0)))
    loss = np.float32(float(r32(s / total)) if reduction == "mean" else float(s))
    step = r32(-(Q(float(g)) / total)) if reduction == "mean" else -Q(float(g))
    for i, c in enumerate(tt):
        if c != ignore:
            wc = Q(float(w[c])) if w is not None else Q(1)
            grad[i, c] = float(r32(wc * step))
    return loss, grad


def _emulated(fn: Any, lp: np.ndarray, g: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    x = torch.tensor(lp, requires_grad=True)
    with emulate(fallback="error"):
        y = fn(x)
        y.backward(torch.tensor(g).reshape(y.shape))
    assert x.grad is not None
    return y.detach().numpy(), x.grad.numpy()


@pytest.mark.clause("TRC-NN-003")
@pytest.mark.parametrize("weighted", [True, False], ids=["class weights", "no weights"])
@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
def test_nll_loss_with_class_weights_is_exact_sums_of_weighted_terms(
        weighted: bool, reduction: str) -> None:
    """Inputs: 40 rows of 5 random log-probabilities, targets with 4 ignored (-100),
    class weights [1, 2.5, 0.3, 0.25, 3] or none, each reduction; a random upstream
    gradient. Expected: loss and gradient of the oracle (terms fl32(-lp w), exact sums
    rounded once, mean fl32(S / W), gradient w fl32(-g / W) / w (-g) / fl32(-w g_i)).
    Pass: bitwise, loss and gradient."""
    rng = np.random.default_rng(29)
    lp = np.log(rng.dirichlet(np.ones(5), 40)).astype(np.float32)
    t = rng.integers(0, 5, 40)
    t[[3, 11, 12, 30]] = -100
    w = WEIGHT if weighted else None
    g = rng.standard_normal(40 if reduction == "none" else ()).astype(np.float32)
    wt = None if w is None else torch.tensor(w)
    got = _emulated(lambda x: TF.nll_loss(x, torch.tensor(t), weight=wt,
                                          reduction=reduction), lp, g)
    want = _oracle(lp, t, w, reduction, g)
    assert_bitwise_equal(got[0], want[0], msg=f"loss {reduction}")
    assert_bitwise_equal(got[1], want[1], msg=f"gradient {reduction}")


@pytest.mark.clause("TRC-NN-003")
@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
def test_nll_loss_over_images_takes_the_class_axis_second(reduction: str) -> None:
    """Inputs: log-probabilities (2, 5, 3, 4) (class axis 1, segmentation), targets
    (2, 3, 4) with 2 ignored, class weights, each reduction. Expected: the oracle on the
    class axis moved last (gradient moved back). Pass: bitwise, loss and gradient."""
    rng = np.random.default_rng(31)
    lp = np.log(rng.dirichlet(np.ones(5), (2, 3, 4))).astype(np.float32)  # (2, 3, 4, 5)
    t = rng.integers(0, 5, (2, 3, 4))
    t[0, 1, 2] = t[1, 2, 3] = -100
    g = rng.standard_normal(t.shape if reduction == "none" else ()).astype(np.float32)
    got = _emulated(lambda x: TF.nll_loss(x, torch.tensor(t), weight=torch.tensor(WEIGHT),
                                          reduction=reduction),
                    np.ascontiguousarray(np.moveaxis(lp, -1, 1)), g)
    loss, grad = _oracle(lp, t, WEIGHT, reduction, g)
    assert_bitwise_equal(got[0], loss, msg=f"loss {reduction}")
    assert_bitwise_equal(got[1], np.moveaxis(grad.reshape(lp.shape), -1, 1),
                         msg=f"gradient {reduction}")


@pytest.mark.clause("TRC-NN-003")
@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
def test_weighted_nll_equals_torch_where_its_sums_are_exact(reduction: str) -> None:
    """Inputs: 16 rows of log-probabilities -k/8 (k = 0..40), power-of-two class
    weights, 3 ignored targets: every product and partial sum exact, so torch's cascade
    order cannot matter. Expected: torch's CPU loss, total weight and gradient.
    Pass: bitwise."""
    rng = np.random.default_rng(37)
    lp = (-rng.integers(0, 41, (16, 5)) / 8).astype(np.float32)
    t = torch.tensor(rng.integers(0, 5, 16))
    t[[2, 7, 9]] = -100
    w = torch.tensor([1.0, 2.0, 0.5, 0.25, 4.0])
    g = torch.tensor(rng.standard_normal(16 if reduction == "none" else ()).astype(np.float32))
    got = _emulated(lambda x: TF.nll_loss(x, t, weight=w, reduction=reduction), lp,
                    g.numpy())
    x = torch.tensor(lp, requires_grad=True)
    y = TF.nll_loss(x, t, weight=w, reduction=reduction)
    y.backward(g)
    assert x.grad is not None
    assert_bitwise_equal(got[0], y.detach().numpy(), msg="loss")
    assert_bitwise_equal(got[1], x.grad.numpy(), msg="gradient")
    _, total = torch.ops.aten.nll_loss_forward(x.detach(), t, w, 1, -100)
    with emulate(fallback="error"):
        _, total_e = torch.ops.aten.nll_loss_forward(x.detach(), t, w, 1, -100)
    assert_bitwise_equal(total_e.numpy(), total.numpy(), msg="total weight")


@pytest.mark.clause("TRC-NN-003", "TRC-EMU-001")
def test_a_segmentation_head_trains_under_cuda_autocast_with_weighted_pixel_loss() -> None:
    """Inputs: a 1x1-conv segmentation head on (2, 3, 8, 8) images, per-pixel classes
    (4) with ignored pixels and class weights, fp16 CUDA autocast emulated, one step.
    Expected: no op left to torch, a finite loss within 5 % of torch's float32 loss,
    gradients for every parameter. Pass: all."""
    torch.manual_seed(0)
    head = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU(),
                               torch.nn.Conv2d(8, 4, 1))
    x = torch.randn(2, 3, 8, 8)
    t = torch.randint(0, 4, (2, 8, 8))
    t[:, :2, :2] = 255
    w = torch.tensor([0.5, 1.0, 2.0, 1.5])
    want = float(TF.cross_entropy(head(x), t, weight=w, ignore_index=255).detach())
    with emulate(head, fallback="error") as em:
        with autocast("cuda", dtype=torch.float16):
            loss = TF.cross_entropy(head(x), t, weight=w, ignore_index=255)
        loss.backward()
    assert em.report.not_emulated() == []
    got = float(loss.detach())
    assert np.isfinite(got) and abs(got - want) <= 0.05 * abs(want), (got, want)
    assert all(p.grad is not None for p in head.parameters())


@pytest.mark.clause("TRC-NN-003")
def test_float64_nll_is_computed_in_float64() -> None:
    """Inputs: float64 log-probabilities (12 rows, 7 classes, one ignored target) and
    class weights, ``nll_loss`` mean, sum and weighted mean under emulate. Expected:
    fl64(fl64(exact sum of the terms) / n) (the weighted mean's terms
    fl64(-logp w) and its divisor fl64(exact sum of weights)), from Fraction oracles
    (before, every step was float32). Pass: bitwise."""
    rng = np.random.default_rng(23)
    logp = torch.from_numpy(-rng.random((12, 7)) * 2.0 ** rng.integers(-20, 5, (12, 7)))
    target = torch.from_numpy(rng.integers(0, 7, 12))
    target[3] = -100
    w = torch.from_numpy(rng.random(7) + 0.5)
    with emulate(fallback="error"):
        nll = torch.nn.functional.nll_loss
        mean, total = nll(logp, target), nll(logp, target, reduction="sum")
        weighted = nll(logp, target, weight=w)
    kept = [i for i in range(12) if int(target[i]) != -100]
    picked = [float(logp[i, int(target[i])]) for i in kept]
    s = float(sum((-Q(v) for v in picked), Q(0)))
    terms = [-v * float(w[int(target[i])]) for v, i in zip(picked, kept, strict=True)]
    ws = float(sum((Q(float(w[int(target[i])])) for i in kept), Q(0)))
    want = [s / len(kept), s, float(sum((Q(t) for t in terms), Q(0))) / ws]
    for name, got, exp in zip(("mean", "sum", "weighted"), (mean, total, weighted), want,
                              strict=True):
        assert_bitwise_equal(got.numpy().reshape(1), np.array([exp]), msg=name)
