"""Batch norm in eval mode under emulate (``ampref.torch.evalnorm``, TRC-NRM-005): torch's
fused per-channel transform, against torch's CPU results word for word and against an
exact rational oracle of the stated steps; the weight and bias gradients against exact
sums."""

from __future__ import annotations

from fractions import Fraction as Q
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from value_oracles import dec, r32  # noqa: E402

from ampref.testing import assert_bitwise_equal  # noqa: E402
from ampref.torch import emulate  # noqa: E402

CASES = {"BatchNorm2d": ((4, 8, 6, 6), True), "BatchNorm1d on (N, C)": ((6, 5), True),
         "BatchNorm1d on (N, C, L) without affine": ((2, 3, 7), False)}


def _bn(shape: tuple[int, ...], affine: bool, seed: int) -> Any:
    rng = np.random.default_rng(seed)
    C = shape[1]
    bn = (torch.nn.BatchNorm2d if len(shape) == 4 else torch.nn.BatchNorm1d)(C, affine=affine)
    bn.eval()
    with torch.no_grad():
        bn.running_mean.copy_(torch.tensor(rng.standard_normal(C).astype(np.float32)))
        bn.running_var.copy_(torch.tensor(rng.uniform(0.05, 4, C).astype(np.float32)))
        if affine:
            bn.weight.copy_(torch.tensor(rng.standard_normal(C).astype(np.float32)))
            bn.bias.copy_(torch.tensor(rng.standard_normal(C).astype(np.float32)))
    x = (rng.standard_normal(shape) * 3).astype(np.float32)
    g = rng.standard_normal(shape).astype(np.float32)
    return bn, x, g


def _run(bn: Any, x: np.ndarray, g: np.ndarray, emulated: bool) -> list[np.ndarray]:
    tx = torch.tensor(x, requires_grad=True)
    bn.zero_grad()
    if emulated:
        with emulate(bn, fallback="error"):
            y = bn(tx)
            y.backward(torch.tensor(g))
    else:
        y = bn(tx)
        y.backward(torch.tensor(g))
    assert tx.grad is not None
    out = [y.detach().numpy().copy(), tx.grad.numpy().copy()]
    if bn.affine:
        out += [bn.weight.grad.numpy().copy(), bn.bias.grad.numpy().copy()]
    return out


@pytest.mark.clause("TRC-NRM-005")
@pytest.mark.parametrize("name", sorted(CASES))
def test_eval_batch_norm_output_and_input_gradient_are_torchs_word_for_word(name: str) -> None:
    """Inputs: a BatchNorm module in eval mode with random running statistics (and
    affine parameters), random x and upstream gradient. Expected: torch's own output and
    input gradient (its fused transform, one rounding per multiply-add). Pass: equal
    uint32 words."""
    bn, x, g = _bn(*CASES[name], seed=len(name))
    got, want = _run(bn, x, g, True), _run(bn, x, g, False)
    for what, a, b in zip(("output", "input gradient"), got[:2], want[:2], strict=True):
        assert_bitwise_equal(a, b, msg=f"{name} {what}: ")


def _sqrt32(v: Q) -> Q:
    return r32(Q(dec(v).sqrt()))


@pytest.mark.clause("TRC-NRM-005")
def test_eval_batch_norm_follows_its_stated_steps_exactly() -> None:
    """Inputs: BatchNorm2d(8) in eval mode, x (4, 8, 6, 6). Expected per element
    fl32(x alpha + beta), alpha = fl32(invstd w), beta = fl32(b - m alpha), invstd =
    fl32(1 / fl32(sqrt(fl32(v + eps)))), each step exact then rounded (60-digit square
    root); weight gradient fl32(fl32(exact sum fl32(x - m) g) invstd') and bias gradient
    fl32(exact sum g) with invstd' = fl32(1 / sqrt(v + eps)) (double). Pass: equal."""
    bn, x, g = _bn((4, 8, 6, 6), True, seed=7)
    got = _run(bn, x, g, True)
    eps = Q(float(np.float32(bn.eps)))
    for c in range(8):
        m, v = (Q(float(t[c])) for t in (bn.running_mean, bn.running_var))
        w, b = (Q(float(t[c])) for t in (bn.weight.detach(), bn.bias.detach()))
        invstd = r32(1 / _sqrt32(r32(v + eps)))
        alpha = r32(invstd * w)
        beta = r32(b - m * alpha)
        xs = x[:, c].ravel()
        want = [float(r32(Q(float(e)) * alpha + beta)) for e in xs]
        assert got[0][:, c].ravel().tolist() == want, f"channel {c}"
        inv2 = Q(float(np.float32(1.0 / np.sqrt(float(bn.running_var[c]) + bn.eps))))
        gs = g[:, c].ravel()
        dot = r32(sum((r32(Q(float(e)) - m) * Q(float(h)) for e, h in zip(xs, gs,
                                                                          strict=True)), Q(0)))
        assert float(got[2][c]) == float(r32(dot * inv2)), f"weight gradient {c}"
        assert float(got[3][c]) == float(r32(sum((Q(float(h)) for h in gs), Q(0))))


@pytest.mark.clause("TRC-NRM-005", "TRC-EMU-002")
def test_a_cnn_in_eval_mode_runs_emulated_without_fallback() -> None:
    """Inputs: Conv2d - BatchNorm2d - ReLU - AdaptiveAvgPool2d - Linear after one training
    step (so the running statistics are not the initial ones), switched to eval, under
    emulate(model, fallback='error') without gradients. Expected: no UnsupportedOpError,
    every op emulated, logits within 2^-12 of torch's. Pass: all."""
    torch.manual_seed(4)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3, padding=1), torch.nn.BatchNorm2d(4),
                                torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(1),
                                torch.nn.Flatten(), torch.nn.Linear(4, 2))
    model(torch.randn(8, 3, 6, 6)).sum().backward()
    model.eval()
    x = torch.randn(2, 3, 6, 6)
    with torch.no_grad():
        want = model(x)
        with emulate(model, fallback="error") as em:
            got = model(x)
    assert all(r.emulated for r in em.report.rows())
    assert float((got - want).abs().max()) <= 2.0**-12


