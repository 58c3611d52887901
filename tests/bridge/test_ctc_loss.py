"""CTC loss under emulate (``ampref.torch.ctcops``, TRC-NN-011) against a brute-force
oracle: every alignment of a short input enumerated, its probability a product of
60-digit exponentials (mpmath), the loss -log of the sum over alignments that collapse
to the target, and torch's gradient formula (p_t(c) - the share of the likelihood of
alignments emitting c at t) times the upstream value. Values within 2^-40 (relative)
of a float32 rounding boundary are exempt (the float64 recursion's error) and counted."""

from __future__ import annotations

import itertools
import re
from fractions import Fraction as Q
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")
mp = pytest.importorskip("mpmath")

from value_oracles import r32_near  # noqa: E402

from ampref.testing import assert_bitwise_equal  # noqa: E402
from ampref.torch import emulate  # noqa: E402

mp.mp.dps = 60
TF = torch.nn.functional


def _q(v: Any) -> Q:
    sign, man, exp, _ = v._mpf_
    return (-1 if sign else 1) * Q(int(man)) * Q(2) ** int(exp)


def _collapse(path: tuple[int, ...], blank: int) -> tuple[int, ...]:
    out = [c for i, c in enumerate(path) if c != blank and (i == 0 or c != path[i - 1])]
    return tuple(out)


def _oracle(lp: np.ndarray, target: list[int], length: int, up: float,
            blank: int = 0) -> tuple[Any, np.ndarray]:
    """(60-digit nll, (T, C) 60-digit gradient) of one sample by enumeration."""
    T, C = lp.shape
    p = [[mp.exp(mp.mpf(float(lp[t, c]))) for c in range(C)] for t in range(T)]
    total = mp.mpf(0)
    through = [[mp.mpf(0)] * C for _ in range(T)]
    for path in itertools.product(range(C), repeat=length):
        if _collapse(path, blank) != tuple(target):
            continue
        prob = mp.fprod(p[t][c] for t, c in enumerate(path))
        total += prob
        for t, c in enumerate(path):
            through[t][c] += prob
    nll = -mp.log(total) if total else mp.inf
    grad = np.zeros((T, C), dtype=object)
    for t in range(T):
        for c in range(C):
            grad[t, c] = (p[t][c] - through[t][c] / total) * up if t < length else mp.mpf(0)
    return nll, grad


@pytest.mark.clause("TRC-NN-011")
@pytest.mark.parametrize("layout", ["padded", "concatenated"])
def test_ctc_loss_and_gradient_are_the_sums_over_alignments(layout: str) -> None:
    """Inputs: log-softmax scores (T 6, N 3, C 3), targets [1, 1] (a repeat: a blank
    must separate), [2, 1, 2] and [2] with input lengths 6, 6, 4, reduction 'none', an
    upstream gradient; targets padded (N, S) or concatenated. Expected: each nll and
    every gradient element fl32 of the enumeration oracle (gradient 0 past the input's
    length), exempt values fewer than 2 %. Pass: bitwise on the others."""
    rng = np.random.default_rng(6)
    raw = rng.standard_normal((6, 3, 3)) * 2
    lp = (raw - np.log(np.exp(raw).sum(-1, keepdims=True))).astype(np.float32)
    targets, lengths = [[1, 1], [2, 1, 2], [2]], [6, 6, 4]
    up = np.array([0.75, -1.5, 2.0], np.float32)
    if layout == "padded":
        tg = torch.tensor([t + [0] * (3 - len(t)) for t in targets])
    else:
        tg = torch.tensor([c for t in targets for c in t])
    x = torch.tensor(lp, requires_grad=True)
    with emulate(fallback="error"):
        loss = TF.ctc_loss(x, tg, torch.tensor(lengths), torch.tensor([len(t) for t in targets]),
                           reduction="none")
        loss.backward(torch.tensor(up))
    got_g = x.grad.numpy() if x.grad is not None else None
    assert got_g is not None
    wants, nears, gwant, gnear = [], [], np.zeros_like(lp), np.zeros(lp.shape, bool)
    for n in range(3):
        nll, grad = _oracle(lp[:, n].astype(np.float64), targets[n], lengths[n], float(up[n]))
        r, near = r32_near(_q(nll), Q(1, 2**40))
        wants.append(float(r))
        nears.append(near)
        for t, c in np.ndindex(6, 3):
            if grad[t, c] == 0:
                continue
            r, gnear[t, n, c] = r32_near(_q(grad[t, c]), Q(1, 2**40))
            gwant[t, n, c] = float(r)
    assert not any(nears)
    assert_bitwise_equal(loss.detach().numpy(), np.array(wants, np.float32), msg="nll")
    assert gnear.mean() < 0.02
    assert_bitwise_equal(got_g[~gnear], gwant[~gnear], msg="gradient")


@pytest.mark.clause("TRC-NN-011")
@pytest.mark.parametrize("zero_infinity", [False, True])
def test_an_impossible_target_gives_inf_or_zero_with_zero_infinity(zero_infinity: bool) -> None:
    """Inputs: 3 frames and the target [1, 1, 1] (needs 5 frames: blanks between
    repeats), mean reduction. Expected: loss +inf and the gradient torch's own (NaN where
    torch's formula meets inf - inf); with zero_infinity loss 0 and gradient all +0.
    Pass: bitwise (NaN any)."""
    raw = np.random.default_rng(2).standard_normal((3, 1, 4))
    lp = (raw - np.log(np.exp(raw).sum(-1, keepdims=True))).astype(np.float32)
    args = (torch.tensor([[1, 1, 1]]), torch.tensor([3]), torch.tensor([3]))
    runs = []
    for emulated in (True, False):
        x = torch.tensor(lp, requires_grad=True)
        if emulated:
            with emulate(fallback="error"):
                loss = TF.ctc_loss(x, *args, zero_infinity=zero_infinity)
                loss.backward()
        else:
            loss = TF.ctc_loss(x, *args, zero_infinity=zero_infinity)
            loss.backward()
        assert x.grad is not None
        runs.append((loss.detach().numpy(), x.grad.numpy()))
    assert float(runs[0][0]) == (0.0 if zero_infinity else np.inf)
    assert_bitwise_equal(runs[0][0], runs[1][0], nan="any", msg="loss")
    assert_bitwise_equal(runs[0][1], runs[1][1], nan="any", msg="gradient")


@pytest.mark.clause("TRC-NN-011")
@pytest.mark.parametrize(("targets", "in_len", "tg_len", "blank", "named"), [
    ([[1, 4, 2]], [5], [3], 0, "target label 4 of sample 0"),
    ([[1, -1, 2]], [5], [3], 0, "target label -1 of sample 0"),
    ([[1, 2, 3]], [5], [3], 4, "blank 4"),
    ([[1, 2, 3]], [6], [3], 0, "input_lengths value 6"),
    ([[1, 2, 3]], [5], [4], 0, "target_lengths value 4"),
    ([[1, 2, 3]], [5, 5], [3], 0, "input_lengths has 2 entries"),
    ([1, 2, 3], [5], [3], 7, "blank 7"),
])
def test_a_label_or_length_outside_its_range_is_a_value_error_naming_it(
        targets: list[Any], in_len: list[int], tg_len: list[int], blank: int,
        named: str) -> None:
    """Inputs: log-probabilities over 5 frames, 1 sample and 4 classes, with one bad
    argument each (a label >= or < 0 of the class count, blank outside the classes, an
    input length past the frames, a target length past the padded targets, a length count
    that is not the batch). Expected: ValueError naming the bad value (torch's CPU kernel
    reads out of bounds for labels). Pass: the message contains it."""
    lp = torch.log_softmax(torch.zeros(5, 1, 4), -1)
    with emulate(fallback="error"), pytest.raises(ValueError, match=re.escape(named)):
        TF.ctc_loss(lp, torch.tensor(targets), torch.tensor(in_len), torch.tensor(tg_len),
                    blank=blank)


@pytest.mark.clause("TRC-NN-011")
def test_log_alpha_is_as_wide_as_the_longest_target_when_padded_targets_are_wider() -> None:
    """Inputs: log-softmax scores (T 6, N 2, C 4), targets padded to width 5 holding
    lengths 3 and 2, through aten._ctc_loss under emulate and natively. Expected:
    torch's outputs' shapes and strides, log_alpha (2, 6, 7) = 2 * 3 + 1 (not 2 * 5 + 1);
    inside each sample's lengths (t below its input length, s below 2 L + 1; torch leaves
    the rest of its buffer unwritten) the same -inf positions and finite entries within
    1e-5 of torch's (float32 recursions in another order; exact agreement is not
    claimed for log_alpha). Pass: as stated."""
    raw = np.random.default_rng(4).standard_normal((6, 2, 4))
    lp = torch.tensor((raw - np.log(np.exp(raw).sum(-1, keepdims=True))).astype(np.float32))
    tg = torch.tensor([[1, 2, 1, 0, 0], [3, 3, 0, 0, 0]])
    call = (lp, tg, torch.tensor([6, 5]), torch.tensor([3, 2]), 0, False)
    want = torch.ops.aten._ctc_loss.Tensor(*call)
    with emulate(fallback="error"):
        got = torch.ops.aten._ctc_loss.Tensor(*call)
    assert [(tuple(t.shape), t.stride()) for t in got] == \
        [(tuple(t.shape), t.stride()) for t in want]
    assert tuple(got[1].shape) == (2, 6, 7)
    for n, (t_len, l_len) in enumerate(((6, 3), (5, 2))):
        a = got[1].numpy()[n, :t_len, :2 * l_len + 1]
        b = want[1].numpy()[n, :t_len, :2 * l_len + 1]
        assert np.array_equal(np.isneginf(a), np.isneginf(b)), n
        fin = np.isfinite(b)
        assert np.max(np.abs(a[fin] - b[fin])) <= 1e-5, n
