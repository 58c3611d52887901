"""The bridge's binary cross entropies and robust regression losses
(``ampref.torch.lossops``, TRC-NN-006): smooth L1 and Huber bit for bit against torch's
vectorised CPU kernels, BCE with logits against an exact oracle, the reductions as the
engine's, and torch's loss modules end to end under emulate without fallback."""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction as Q
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from value_oracles import r32, wide  # noqa: E402

import ampref  # noqa: E402
from ampref import functional as F  # noqa: E402
from ampref.testing import assert_bitwise_equal  # noqa: E402
from ampref.torch import emulate  # noqa: E402

TF = torch.nn.functional
#: a multiple of every vector width (torch's vectorised path for each element), and not a
#: power of two, so the mean's norm fl32(1/N) is inexact and the order of products matters
N = 320


def _words(a: Any) -> list[str]:
    v = np.asarray(a, np.float32).ravel()
    return ["nan" if np.isnan(e) else f"{w:08x}" for e, w in zip(v, v.view(np.uint32),
                                                                   strict=True)]


def _operands(param: float, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """x, y, g with d = x - y on both sides of +-param, at +-param, 0, NaN and inf."""
    rng = np.random.default_rng(seed)
    y = rng.standard_normal(N).astype(np.float32)
    x = (y + rng.standard_normal(N) * 2).astype(np.float32)
    p = np.float32(param)
    x[:6], y[:6] = [p, -p, 0.0, -0.0, np.nan, np.inf], 0.0
    g = rng.standard_normal(N).astype(np.float32)
    return x, y, g


def _both(fn: Callable[[], Any]) -> tuple[Any, Any]:
    with emulate(fallback="error"):
        got = fn()
    return got, fn()


@pytest.mark.clause("TRC-NN-006")
@pytest.mark.parametrize("param", [0.3, 1.0, 1.7])
@pytest.mark.parametrize("loss", ["smooth_l1", "huber"])
def test_smooth_l1_and_huber_are_torchs_kernels_word_for_word(loss: str, param: float) -> None:
    """Inputs: 320 float32 pairs (differences at ±beta, ±0, NaN, inf and random), beta or
    delta 0.3, 1, 1.7; the elementwise loss, and the backward op with per-element
    gradients (reduction none) and with a scalar gradient (reduction mean, norm =
    fl32(1/320)). Expected: torch's CPU kernels (vectorised path). Pass: equal words."""
    x, y, g = _operands(param, seed=int(param * 10))
    tx, ty, tg = (torch.tensor(a) for a in (x, y, g))
    fwd = getattr(TF, f"{loss}_loss")
    key = "beta" if loss == "smooth_l1" else "delta"
    bwd = getattr(torch.ops.aten, f"{loss}_loss_backward")
    cases = {"forward": lambda: fwd(tx, ty, reduction="none", **{key: param}),
             "backward none": lambda: bwd(tg, tx, ty, 0, param),
             "backward mean": lambda: bwd(tg[0], tx, ty, 1, param)}
    for what, fn in cases.items():
        got, want = _both(fn)
        assert _words(got) == _words(want), f"{loss} {param} {what}"


@pytest.mark.clause("TRC-NN-006", "TRC-NN-001")
@pytest.mark.parametrize("reduction", ["mean", "sum"])
@pytest.mark.parametrize("loss", ["smooth_l1_loss", "huber_loss",
                                  "binary_cross_entropy_with_logits"])
def test_a_reduced_loss_is_the_engines_reduction_of_the_elementwise_loss(
        loss: str, reduction: str) -> None:
    """Inputs: 320 random float32 pairs (targets in [0, 1] for BCE with logits), the loss
    under emulate with reduction none and with ``reduction``. Expected: the reduced loss
    equals the engine's exactly rounded mean / sum of the elementwise losses. Pass: equal
    words."""
    rng = np.random.default_rng(3)
    x = torch.tensor(rng.standard_normal(N).astype(np.float32) * 3)
    y = torch.tensor(rng.uniform(0, 1, N).astype(np.float32))
    fn = getattr(TF, loss)
    with emulate(fallback="error"):
        each = fn(x, y, reduction="none")
        got = fn(x, y, reduction=reduction)
    op = F.mean if reduction == "mean" else F.sum
    want = op(ampref.tensor(each.numpy())).numpy()
    assert _words(got.numpy()) == _words(want)


def _log_sigmoid(x: Q) -> Q:
    return wide(lambda d: -(1 + (-d).exp()).ln())(x)


def _bce_logits_oracle(x: Q, t: Q, pw: Q | None, w: Q | None) -> Q:
    ls = _log_sigmoid(x)
    if pw is not None:
        ls = r32(ls * r32(r32(r32(pw - 1) * t) + 1))
    loss = r32(r32(r32(1 - t) * x) - ls)
    return r32(loss * w) if w is not None else loss


@pytest.mark.clause("TRC-NN-006")
@pytest.mark.parametrize("weights", ["none", "pos_weight", "pos_weight and weight"])
def test_bce_with_logits_is_torchs_composite_in_float32_steps(weights: str) -> None:
    """Inputs: 256 logits (normal x 4, with ±0, ±30), targets in [0, 1], pos_weight per
    class (4 classes) and weight per element as named, reduction none, under emulate.
    Expected: torch's composite evaluated exactly step by step: ls = fl32(log sigmoid(x))
    (60-digit value), ls = fl32(ls fl32(fl32(fl32(pw - 1) t) + 1)), loss =
    fl32(fl32(fl32(1 - t) x) - ls), fl32(loss w). Pass: every element equal."""
    rng = np.random.default_rng(9)
    x = (rng.standard_normal((64, 4)) * 4).astype(np.float32)
    x[0] = [0.0, -0.0, 30.0, -30.0]
    t = rng.uniform(0, 1, (64, 4)).astype(np.float32)
    pw = rng.uniform(0.5, 3, 4).astype(np.float32) if weights != "none" else None
    w = rng.uniform(0.1, 2, (64, 4)).astype(np.float32) if "and" in weights else None
    with emulate(fallback="error"):
        got = TF.binary_cross_entropy_with_logits(
            torch.tensor(x), torch.tensor(t), weight=None if w is None else torch.tensor(w),
            pos_weight=None if pw is None else torch.tensor(pw), reduction="none").numpy()
    bad = []
    for i, j in np.ndindex(x.shape):
        want = _bce_logits_oracle(Q(float(x[i, j])), Q(float(t[i, j])),
                                  None if pw is None else Q(float(pw[j])),
                                  None if w is None else Q(float(w[i, j])))
        if Q(float(got[i, j])) != want:
            bad.append((float(x[i, j]), float(got[i, j]), float(want)))
    assert not bad, f"{len(bad)} differ; (x, got, want) {bad[:3]}"


@pytest.mark.clause("TRC-NN-006", "ENG-LOS-001")
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_binary_cross_entropy_under_emulate_is_the_engines(reduction: str) -> None:
    """Inputs: 64 probabilities in (0, 1) with 0 and 1 among them, targets in [0, 1],
    ``reduction``; forward and the input gradient of sum(loss * 0.7). Expected: the
    engine's binary_cross_entropy (torch's definition, logs clamped at -100) and its
    gradient. Pass: equal words."""
    rng = np.random.default_rng(5)
    p = rng.uniform(0, 1, N // 4).astype(np.float32)
    p[:2] = [0.0, 1.0]
    t = rng.uniform(0, 1, N // 4).astype(np.float32)
    tp = torch.tensor(p, requires_grad=True)
    with emulate(fallback="error"):
        loss = TF.binary_cross_entropy(tp, torch.tensor(t), reduction=reduction)
        (loss * 0.7).sum().backward()
    ep = ampref.tensor(p, requires_grad=True)
    el = F.binary_cross_entropy(ep, ampref.tensor(t), reduction=reduction)
    F.sum(F.mul(el, 0.7)).backward()
    assert _words(loss.detach().numpy()) == _words(el.numpy())
    assert ep.grad is not None and tp.grad is not None
    assert _words(tp.grad.numpy()) == _words(np.asarray(ep.grad))


@pytest.mark.clause("TRC-NN-006", "ENG-LOS-001")
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_weighted_binary_cross_entropy_weights_the_engines_loss_in_torchs_order(
        reduction: str) -> None:
    """Inputs: 15 x 4 probabilities (60: dividing by n rounds) in (0, 1) with 0 and 1
    among them, targets in [0, 1], a per-class weight (4,) broadcast over rows,
    ``reduction``; an upstream gradient. Expected: loss fl32(l w) with l the engine's
    elementwise (reduction 'none') loss, then fl32(exact sum) (/ n in float32 for the
    mean); gradient fl32(fl32(gl w) / n) (no division for sum / none) with gl the
    engine's elementwise gradient for the upstream value. Pass: bitwise, loss and
    gradient."""
    rng = np.random.default_rng(15)
    p = rng.uniform(0, 1, (15, 4)).astype(np.float32)
    p[0, :2] = [0.0, 1.0]
    t = rng.uniform(0, 1, (15, 4)).astype(np.float32)
    w = (rng.random(4) * 3).astype(np.float32)
    up = rng.standard_normal((15, 4) if reduction == "none" else ()).astype(np.float32)
    tp = torch.tensor(p, requires_grad=True)
    with emulate(fallback="error"):
        loss = TF.binary_cross_entropy(tp, torch.tensor(t), weight=torch.tensor(w),
                                       reduction=reduction)
        loss.backward(torch.tensor(up))
    ep = ampref.tensor(p, requires_grad=True)
    el = F.binary_cross_entropy(ep, ampref.tensor(t), reduction="none")
    el.backward(ampref.tensor(np.broadcast_to(up, (15, 4)).copy()))
    weighted = (el.numpy() * w).astype(np.float32)
    if reduction == "none":
        want: Any = weighted
    else:
        total = np.float32(float(r32(sum((Q(float(v)) for v in weighted.ravel()), Q(0)))))
        want = total / np.float32(60) if reduction == "mean" else total
    assert_bitwise_equal(loss.detach().numpy(), np.asarray(want, np.float32), msg="loss")
    grad = (np.asarray(ep.grad) * w).astype(np.float32)
    if reduction == "mean":
        grad = grad / np.float32(60)
    assert tp.grad is not None
    assert_bitwise_equal(tp.grad.numpy(), grad, msg="gradient")


LOSS_MODULES: dict[str, Callable[[Any, Any], Any]] = {
    "L1Loss": lambda x, t: torch.nn.L1Loss()(x, t),
    "SmoothL1Loss": lambda x, t: torch.nn.SmoothL1Loss(beta=0.5)(x, t),
    "HuberLoss": lambda x, t: torch.nn.HuberLoss(delta=0.7)(x, t),
    "BCEWithLogitsLoss": lambda x, t: torch.nn.BCEWithLogitsLoss(
        pos_weight=torch.full((8,), 2.0))(x, t.clamp(0, 1)),
    "BCELoss": lambda x, t: torch.nn.BCELoss()(torch.sigmoid(x), t.clamp(0, 1)),
    "KLDivLoss": lambda x, t: torch.nn.KLDivLoss(reduction="batchmean")(
        torch.log_softmax(x, -1), torch.softmax(t, -1)),
    "TripletMarginLoss": lambda x, t: torch.nn.TripletMarginLoss()(x, t, t.flip(0)),
    "PairwiseDistance": lambda x, t: torch.nn.PairwiseDistance()(x, t).sum(),
}


@pytest.mark.clause("TRC-NN-006", "TRC-EMU-002")
@pytest.mark.parametrize("name", sorted(LOSS_MODULES))
def test_torchs_loss_modules_run_emulated_without_fallback(name: str) -> None:
    """Inputs: Linear(8, 8) on a random batch of 4 into the torch.nn loss module (targets
    random; probabilities for the BCEs, a distribution for KLDivLoss), forward and
    backward under emulate(model, fallback='error'). Expected: no UnsupportedOpError,
    every op emulated, the weight gradient within 2^-10 of torch's (roundings only).
    Pass: all."""
    torch.manual_seed(1)
    model = torch.nn.Linear(8, 8)
    x, t = torch.randn(4, 8), torch.rand(4, 8)
    LOSS_MODULES[name](model(x), t).backward()
    want = model.weight.grad.clone()
    model.zero_grad()
    with emulate(model, fallback="error") as em:
        LOSS_MODULES[name](model(x), t).backward()
    assert all(r.emulated for r in em.report.rows())
    assert float((model.weight.grad - want).abs().max()) <= 2.0**-10, name


@pytest.mark.clause("TRC-NN-006")
@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
def test_soft_margin_loss_is_torchs_steps_with_exact_function_values(reduction: str) -> None:
    """Inputs: 70 float32 inputs over 2^-3 .. 2^4 with targets ±1, an upstream gradient.
    Expected: per element fl32(log1p(fl32(exp(fl32(-x y))))) (60-digit function values),
    the reduction the exactly rounded mean / sum; gradient fl32(fl32(fl32(fl32(y z)
    fl32(-norm)) / fl32(z + 1)) g) with z = fl32(exp(fl32(-y x))). Pass: bitwise."""
    rng = np.random.default_rng(71)
    x = (rng.standard_normal(70) * np.exp2(rng.integers(-3, 5, 70))).astype(np.float32)
    y = np.where(rng.random(70) < 0.5, -1.0, 1.0).astype(np.float32)
    g = rng.standard_normal(70 if reduction == "none" else ()).astype(np.float32)
    tx = torch.tensor(x, requires_grad=True)
    with emulate(fallback="error"):
        loss = TF.soft_margin_loss(tx, torch.tensor(y), reduction=reduction)
        loss.backward(torch.tensor(g))
    exp_w = wide(lambda d: d.exp())
    log1p_w = wide(lambda d: (1 + d).ln())
    terms = [log1p_w(exp_w(r32(-Q(float(a)) * Q(float(b))))) for a, b in zip(x, y, strict=True)]
    if reduction == "none":
        want: Any = np.array([float(t) for t in terms], np.float32)
    else:
        s = r32(sum(terms, Q(0)))
        want = np.float32(float(r32(s / 70) if reduction == "mean" else s))
    assert_bitwise_equal(loss.detach().numpy(), want, msg="loss")
    neg_norm = Q(float(np.float32(-1.0 / 70))) if reduction == "mean" else Q(-1)
    grads = []
    for i, (a, b) in enumerate(zip(x, y, strict=True)):
        z = exp_w(r32(-Q(float(b)) * Q(float(a))))
        gi = Q(float(g[i] if reduction == "none" else g))
        grads.append(float(r32(r32(r32(r32(Q(float(b)) * z) * neg_norm) / r32(z + 1)) * gi)))
    assert tx.grad is not None
    assert_bitwise_equal(tx.grad.numpy(), np.array(grads, np.float32), msg="gradient")


@pytest.mark.clause("TRC-NN-006")
@pytest.mark.parametrize("p", [1, 2])
@pytest.mark.parametrize("weighted", [False, True], ids=["", "weighted"])
@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
def test_multi_margin_loss_is_torchs_kernel_with_exact_sums(p: int, weighted: bool,
                                                            reduction: str) -> None:
    """Inputs: 7 rows of 6 wide-exponent float32 scores, targets, margin 0.7, p 1 / 2,
    class weights or none; an upstream gradient. Expected: per row fl32(fl32(exact sum
    over classes d != t with z = fl(fl(m - x_t) + x_d) > 0 of h) / 6), h = z or fl(z z)
    (times fl(h w_t)), reduced by the exactly rounded mean / sum; gradient: g =
    fl32(1/(7*6)) (mean) or fl32(1/6), h' = g or fl(2g z) (times w_t) at live classes,
    -(exact sum of the h') rounded at the target, each times the upstream value.
    Pass: bitwise, loss and gradient."""
    rng = np.random.default_rng(p * 10 + weighted)
    x = (rng.standard_normal((7, 6)) * np.exp2(rng.integers(-4, 3, (7, 6)))).astype(np.float32)
    t = rng.integers(0, 6, 7)
    w = (rng.random(6) + 0.5).astype(np.float32) if weighted else None
    up = rng.standard_normal(7 if reduction == "none" else ()).astype(np.float32)
    tx = torch.tensor(x, requires_grad=True)
    with emulate(fallback="error"):
        loss = TF.multi_margin_loss(tx, torch.tensor(t), p=p, margin=0.7,
                                    weight=None if w is None else torch.tensor(w),
                                    reduction=reduction)
        loss.backward(torch.tensor(up))
    m = Q(float(np.float32(0.7)))
    rows, grad = [], np.zeros((7, 6), np.float32)
    g = Q(float(np.float32(1.0 / 42 if reduction == "mean" else 1.0 / 6)))
    for i in range(7):
        xt = Q(float(x[i, t[i]]))
        hs, hg = [], []
        for d in range(6):
            z = r32(r32(m - xt) + Q(float(x[i, d])))
            if d == t[i] or z <= 0:
                continue
            h, h2 = (z, g) if p == 1 else (r32(z * z), r32(2 * g * z))
            if w is not None:
                h, h2 = r32(h * Q(float(w[t[i]]))), r32(h2 * Q(float(w[t[i]])))
            hs.append(h)
            hg.append((d, h2))
        rows.append(r32(r32(sum(hs, Q(0))) / 6))
        u = Q(float(up[i] if reduction == "none" else up))
        # zeros (dead classes, a target without live ones) times u keep u's sign
        grad[i] = np.float32(0.0) * np.float32(up[i] if reduction == "none" else up)
        for d, h2 in hg:
            grad[i, d] = float(r32(h2 * u))
        if hg:
            grad[i, t[i]] = float(r32(-r32(sum((h2 for _, h2 in hg), Q(0))) * u))
    if reduction == "none":
        want: Any = np.array([float(v) for v in rows], np.float32)
    else:
        s = r32(sum(rows, Q(0)))
        want = np.float32(float(r32(s / 7) if reduction == "mean" else s))
    assert_bitwise_equal(loss.detach().numpy(), want, msg="loss")
    assert tx.grad is not None
    assert_bitwise_equal(tx.grad.numpy(), grad, msg="gradient")


@pytest.mark.clause("TRC-NN-006")
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_multilabel_margin_loss_is_torchs_kernel_with_exact_sums(reduction: str) -> None:
    """Inputs: 6 rows of 7 float32 scores of exponents -30..1, column 5 = -1 + column 6
    (z = fl(1 - x_t) + x_5 cancels, so the rounding of 1 - x_t shows); target lists
    ended by -1 (one
    empty, one full, one listing a class twice, one with entries after its -1 that must
    be ignored); an upstream gradient. Expected: per row fl32(fl32(exact sum over listed
    targets t and non-target classes d with z = fl(fl(1 - x_t) + x_d) > 0 of z) / 7),
    reduced by the exactly rounded mean / sum, is_target 1 at listed classes; gradient:
    g = fl32(1/42) (mean) or fl32(1/7); a non-target gets fl32(+g times its live pairs),
    a target fl32(-g times its live pairs) (+0 without any), each times the upstream
    value. Pass: bitwise, loss, is_target and gradient."""
    rng = np.random.default_rng(61)
    x = (rng.standard_normal((6, 7)) * np.exp2(rng.integers(-30, 2, (6, 7)))).astype(np.float32)
    x[:, 5] = -1 + x[:, 6]  # z = fl(1 - x_t) + x_5 cancels: the rounding of 1 - x_t shows
    t = np.array([[1, 4, -1, 0, 0, 0, 0], [-1, 2, 3, 0, 0, 0, 0], [0, 1, 2, 3, 4, 5, 6],
                  [5, 5, -1, 0, 0, 0, 0], [6, -1, 2, 2, 2, 2, 2], [3, 0, 2, -1, 1, 1, 1]])
    up = rng.standard_normal(6 if reduction == "none" else ()).astype(np.float32)
    tx = torch.tensor(x, requires_grad=True)
    with emulate(fallback="error"):
        loss, marks = torch.ops.aten.multilabel_margin_loss_forward(
            tx, torch.tensor(t), {"none": 0, "mean": 1, "sum": 2}[reduction])
        loss.backward(torch.tensor(up))
    g = Q(float(np.float32(1.0 / 42 if reduction == "mean" else 1.0 / 7)))
    rows, grad = [], np.zeros((6, 7), np.float32)
    want_marks = np.zeros((6, 7), np.float32)
    for i in range(6):
        listed = []
        for c in t[i]:
            if c < 0:
                break
            listed.append(int(c))
        want_marks[i, listed] = 1
        zs, count = [], {c: 0 for c in range(7)}
        for c in listed:
            for d in range(7):
                z = r32(r32(1 - Q(float(x[i, c]))) + Q(float(x[i, d])))
                if d not in listed and z > 0:
                    zs.append(z)
                    count[c] -= 1
                    count[d] += 1
        rows.append(r32(r32(sum(zs, Q(0))) / 7))
        u = Q(float(up[i] if reduction == "none" else up))
        for c in range(7):
            grad[i, c] = float(r32(r32(count[c] * g) * u)) if count[c] else (
                np.float32(0.0) * np.float32(up[i] if reduction == "none" else up))
    if reduction == "none":
        want: Any = np.array([float(v) for v in rows], np.float32)
    else:
        s = r32(sum(rows, Q(0)))
        want = np.float32(float(r32(s / 6) if reduction == "mean" else s))
    assert_bitwise_equal(loss.detach().numpy(), want, msg="loss")
    assert_bitwise_equal(marks.numpy(), want_marks, msg="is_target")
    assert tx.grad is not None
    assert_bitwise_equal(tx.grad.numpy(), grad, msg="gradient")


@pytest.mark.clause("TRC-NN-006")
def test_multilabel_margin_loss_refuses_a_class_index_out_of_range_naming_it() -> None:
    """Inputs: scores (2, 4) with target entry 4 (classes 0..3). Expected: ValueError
    naming 4, the range and -1's meaning, before any arithmetic. Pass: the message."""
    with pytest.raises(ValueError, match=r"target 4 is out of range.*\[0, 4\) or -1"):
        with emulate(fallback="error"):
            TF.multilabel_margin_loss(torch.randn(2, 4), torch.tensor([[0, 4, -1, 0],
                                                                       [1, -1, 0, 0]]))
