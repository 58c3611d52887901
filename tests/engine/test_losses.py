"""The engine's losses against torch itself (ENG-LOS-001): forward values and input
gradients as words, on the NumPy backend and on the device backend (strict CuPy
stand-in, host-built kernels), in every reduction, at the points where a loss's
definition decides (ignored targets, signed zeros, probabilities 0 and 1)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from strict_kernels import strict_device

import ampref
import ampref.engine.functional as F
from ampref import backends
from ampref.backends.device import DeviceBackend

torch = pytest.importorskip("torch")
DEVICE = "cupy-host-losses"


@pytest.fixture(scope="module")
def device() -> DeviceBackend:
    return strict_device(DEVICE)


def _words(a: Any) -> list[str]:
    return [f"{w:08x}" for w in np.asarray(a, np.float32).view(np.uint32).ravel()]


#: (log-probabilities, targets): few-bit dyadic values (every sum exact in float32, so
#: torch's summation order cannot matter) with two ignored rows; +0 and -0 at the
#: targets (a zero sum); every target ignored
NLL_CASES = {
    "dyadic": (-np.arange(1, 25, dtype=np.float32).reshape(6, 4) / 8,
               np.array([2, -1, 0, 3, -1, 1])),
    "signed zeros": (np.array([[0.0, -1], [-0.0, -2], [0.0, -3]], np.float32),
                     np.array([0, 0, -1])),
    "all ignored": (np.full((3, 2), -0.5, np.float32), np.array([-1, -1, -1]))}


@pytest.mark.clause("ENG-LOS-001", "ENG-RED-001")
@pytest.mark.parametrize("case", sorted(NLL_CASES))
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("be", ["numpy", DEVICE])
def test_nll_loss_with_ignored_targets_is_torchs_in_every_reduction(
        device: Any, be: str, reduction: str, case: str) -> None:
    """Inputs: each NLL_CASES case (ignore_index -1), each reduction, on the NumPy
    backend and the device backend (host targets); backward with an upstream gradient
    of 1 (``none``: 1/2, 1, 3/2, ... per row). Expected: torch's ``nll_loss`` forward
    (ignored rows +0, a zero sum +0, NaN for the mean of nothing) and its input gradient
    (float32, CPU). Pass: equal uint32 words."""
    logp, target = NLL_CASES[case]
    up = (np.arange(1, len(target) + 1, dtype=np.float32) / 2 if reduction == "none"
          else np.float32(1))
    x = ampref.tensor(logp, requires_grad=True, backend=be)
    out = F.nll_loss(x, target, ignore_index=-1, reduction=reduction)
    F.sum(F.mul(out, ampref.tensor(up, backend=be))).backward()
    tx = torch.tensor(logp, requires_grad=True)
    tout = torch.nn.functional.nll_loss(tx, torch.tensor(target), ignore_index=-1,
                                        reduction=reduction)
    (tout * torch.tensor(up)).sum().backward()
    b = backends.get(be)
    for what, got, want in (("loss", b.to_numpy(out.data), tout.detach().numpy()),
                            ("grad", b.to_numpy(x.grad.data), tx.grad.numpy())):
        gw = np.asarray(got, np.float32).view(np.uint32).ravel()
        ww = np.asarray(want, np.float32).view(np.uint32).ravel()
        assert gw.tolist() == ww.tolist(), (f"{be} {reduction} {case} {what}: "
                                            f"{[f'{w:08x}' for w in gw]} want "
                                            f"{[f'{w:08x}' for w in ww]}")


#: (probabilities, labels): the saturated points where torch's -100 clamp decides
#: (p = 0 or 1 against labels 0 and 1), interior points, soft labels, p = 1 - 2^-24
BCE_P = np.array([0, 1, 0, 1, 0.25, 0.75, 0.5, 0.1, 1 - 2**-24, 2**-20], np.float32)
BCE_Y = np.array([0, 1, 1, 0, 1, 0, 0.3, 0.7, 0.2, 1], np.float32)


@pytest.mark.clause("ENG-LOS-001")
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("be", ["numpy", DEVICE])
def test_binary_cross_entropy_is_torchs_with_its_log_clamp_and_backward(
        device: Any, be: str, reduction: str) -> None:
    """Inputs: BCE_P against BCE_Y (both requiring gradients), each reduction, on the
    NumPy and device backends; backward of sum(output * w), w = 0.3..2.1 per element
    (``none``) or 0.7. Expected: torch's
    ``binary_cross_entropy`` in float32 on the CPU: losses 0, -0, 100, 100 at the
    saturated points (torch clamps its logs at -100), its input gradient
    g (p - y) / max((1 - p) p, 1e-12) (/ n for the mean) and target gradient -g logit(p)
    (±inf at 0 and 1). Pass: equal words (these inputs' logs are correctly rounded in
    torch's libm, so bitwise is the claim here; the general bound is the last bit of
    each log)."""
    P = ampref.tensor(BCE_P, requires_grad=True, backend=be)
    Y = ampref.tensor(BCE_Y, requires_grad=True, backend=be)
    # an upstream gradient other than 1, so the backward's operation order shows
    up = np.linspace(0.3, 2.1, BCE_P.size, dtype=np.float32) if reduction == "none" \
        else np.float32(0.7)
    out = F.binary_cross_entropy(P, Y, reduction=reduction)
    F.sum(F.mul(out, ampref.tensor(up, backend=be))).backward()
    tp = torch.tensor(BCE_P, requires_grad=True)
    ty = torch.tensor(BCE_Y, requires_grad=True)
    tout = torch.nn.functional.binary_cross_entropy(tp, ty, reduction=reduction)
    (tout * torch.tensor(up)).sum().backward()
    b = backends.get(be)
    for what, got, want in (("loss", out.data, tout.detach().numpy()),
                            ("input grad", P.grad.data, tp.grad.numpy()),
                            ("target grad", Y.grad.data, ty.grad.numpy())):
        assert _words(b.to_numpy(got)) == _words(want), (
            f"{be} {reduction} {what}: {_words(b.to_numpy(got))} want {_words(want)}")


@pytest.mark.clause("ENG-LOS-001")
def test_binary_cross_entropy_refuses_a_target_of_another_shape() -> None:
    """Inputs: p of shape (4,) against a target of shape (2, 2). Expected: ValueError
    naming both shapes (torch refuses different sizes). Pass: message matches."""
    with pytest.raises(ValueError,
                       match=r"target shape \(2, 2\) must equal the input shape \(4,\)"):
        F.binary_cross_entropy(ampref.tensor(np.full(4, 0.5)), ampref.tensor(np.ones((2, 2))))


#: inputs and targets of few-bit dyadic values (every square and every sum exact, so
#: torch's summation order cannot decide), with a signed zero and equal pairs
MSE_X = np.array([0.5, -1.25, 3, 0, -0.0, 2.5, -4, 0.75], np.float32)
MSE_Y = np.array([0.25, -1.25, -1, -0.0, 0, 0.5, 1, 0.75], np.float32)


@pytest.mark.clause("ENG-LOS-001")
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("be", ["numpy", DEVICE])
def test_mse_loss_and_its_gradients_are_torchs(device: Any, be: str, reduction: str) -> None:
    """Inputs: MSE_X against MSE_Y (both requiring gradients), each reduction, on the
    NumPy and device backends; backward of sum(output * w), w = 0.3..2.1 per element
    (``none``) or 0.7, and on 1,000 random normal pairs. Expected: torch's ``mse_loss``
    in float32 on the CPU: losses, input gradient fl(fl(c (x - y)) g) and target gradient
    with (y - x), c = fl32(2 / n) for the mean. Pass: equal words on the dyadic values;
    on the random ones equal gradient words (forward sums may differ from torch's
    summation order there, so only the gradients are compared)."""
    rng = np.random.default_rng(5)
    for x, y, whole in ((MSE_X, MSE_Y, True),
                        (rng.standard_normal(1000).astype(np.float32),
                         rng.standard_normal(1000).astype(np.float32), False)):
        up = np.linspace(0.3, 2.1, x.size, dtype=np.float32) if reduction == "none" \
            else np.float32(0.7)
        X = ampref.tensor(x, requires_grad=True, backend=be)
        Y = ampref.tensor(y, requires_grad=True, backend=be)
        out = F.mse_loss(X, Y, reduction=reduction)
        F.sum(F.mul(out, ampref.tensor(up, backend=be))).backward()
        tx, ty = torch.tensor(x, requires_grad=True), torch.tensor(y, requires_grad=True)
        tout = torch.nn.functional.mse_loss(tx, ty, reduction=reduction)
        (tout * torch.tensor(up)).sum().backward()
        b = backends.get(be)
        pairs = [("input grad", X.grad.data, tx.grad.numpy()),
                 ("target grad", Y.grad.data, ty.grad.numpy())]
        if whole:
            pairs.append(("loss", out.data, tout.detach().numpy()))
        for what, got, want in pairs:
            assert _words(b.to_numpy(got)) == _words(want), (
                f"{be} {reduction} {what}: {_words(b.to_numpy(got))[:6]} want "
                f"{_words(want)[:6]}")
