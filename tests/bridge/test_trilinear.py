"""``nn.Bilinear`` under emulate (``ampref.torch.trilinear``, TRC-NN-010): its forward
and all three gradients against exact rationals, each element the exact sum of its
triple products rounded once to float32 (the bias added in float32)."""

from __future__ import annotations

from fractions import Fraction as Q

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from value_oracles import r32  # noqa: E402

from ampref.testing import assert_bitwise_equal  # noqa: E402
from ampref.torch import emulate  # noqa: E402


def _wide(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    return (rng.standard_normal(shape) * np.exp2(rng.integers(-8, 9, shape))).astype(np.float32)


@pytest.mark.clause("TRC-NN-010", "ACC-EXA-003")
def test_bilinear_forward_and_gradients_are_exact_triple_sums_rounded_once() -> None:
    """Inputs: nn.Bilinear(3, 4, 2) with wide-exponent weight and bias, x1 (5, 3), x2
    (5, 4), an upstream gradient g (5, 2); forward and backward under emulate without
    fallback. Expected: y[n, o] = fl32(fl32(exact sum_ij x1 W x2) + b); x1's gradient
    fl32(exact sum_oj g W x2), x2's fl32(exact sum_oi g x1 W), W's fl32(exact sum_n g
    x1 x2). Pass: bitwise, all four."""
    rng = np.random.default_rng(19)
    x1, x2, w, b, g = (_wide(rng, s) for s in ((5, 3), (5, 4), (2, 3, 4), (2,), (5, 2)))
    m = torch.nn.Bilinear(3, 4, 2)
    with torch.no_grad():
        m.weight.copy_(torch.tensor(w))
        m.bias.copy_(torch.tensor(b))
    t1, t2 = torch.tensor(x1, requires_grad=True), torch.tensor(x2, requires_grad=True)
    with emulate(m, fallback="error"):
        y = m(t1, t2)
        y.backward(torch.tensor(g))
    q = {k: np.vectorize(lambda v: Q(float(v)), otypes=[object])(a)
         for k, a in (("x1", x1), ("x2", x2), ("w", w), ("g", g))}
    want_y = np.array([[float(r32(r32(sum(q["x1"][n, i] * q["w"][o, i, j] * q["x2"][n, j]
                                          for i in range(3) for j in range(4))) + Q(float(b[o]))))
                        for o in range(2)] for n in range(5)], np.float32)
    want_1 = np.array([[float(r32(sum(q["g"][n, o] * q["w"][o, i, j] * q["x2"][n, j]
                                      for o in range(2) for j in range(4))))
                        for i in range(3)] for n in range(5)], np.float32)
    want_2 = np.array([[float(r32(sum(q["g"][n, o] * q["x1"][n, i] * q["w"][o, i, j]
                                      for o in range(2) for i in range(3))))
                        for j in range(4)] for n in range(5)], np.float32)
    want_w = np.array([[[float(r32(sum(q["g"][n, o] * q["x1"][n, i] * q["x2"][n, j]
                                       for n in range(5))))
                         for j in range(4)] for i in range(3)] for o in range(2)], np.float32)
    assert_bitwise_equal(y.detach().numpy(), want_y, msg="forward")
    assert t1.grad is not None and t2.grad is not None and m.weight.grad is not None
    assert_bitwise_equal(t1.grad.numpy(), want_1, msg="x1 gradient")
    assert_bitwise_equal(t2.grad.numpy(), want_2, msg="x2 gradient")
    assert_bitwise_equal(m.weight.grad.numpy(), want_w, msg="weight gradient")


@pytest.mark.clause("TRC-NN-010")
def test_bilinear_under_cuda_autocast_runs_without_fallback() -> None:
    """Inputs: nn.Bilinear(6, 5, 3) inside emulated fp16 CUDA autocast, forward and
    backward. Expected: no op left to torch; finite gradients. Pass: both."""
    from ampref.torch import autocast
    torch.manual_seed(0)
    m = torch.nn.Bilinear(6, 5, 3)
    x1, x2 = torch.randn(4, 6), torch.randn(4, 5)
    with emulate(m, fallback="error") as em:
        with autocast("cuda", dtype=torch.float16):
            y = m(x1, x2)
        y.float().sum().backward()
    assert em.report.not_emulated() == []
    assert m.weight.grad is not None and torch.isfinite(m.weight.grad).all()
