"""Weight normalisation under emulate (``ampref.torch.weightnorm``, TRC-NN-013) against an
exact rational oracle of its formulas, and its backward against torch's own kernel given
torch's own norms."""

from __future__ import annotations

import math
from fractions import Fraction as Q
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from value_oracles import r32  # noqa: E402

from ampref.testing import assert_bitwise_equal  # noqa: E402
from ampref.torch import emulate  # noqa: E402

aten = torch.ops.aten


def _inputs(dim: int, seed: int) -> tuple[Any, Any, Any]:
    """v (5, 3, 4) of wide exponents, g in the kept dimension's shape, an upstream grad."""
    rng = np.random.default_rng(seed)
    v = (rng.standard_normal((5, 3, 4)) * np.exp2(rng.integers(-6, 7, (5, 3, 4)))
         ).astype(np.float32)
    gshape = (5, 1, 1) if dim == 0 else (1, 1, 4)
    g = rng.standard_normal(gshape).astype(np.float32)
    up = rng.standard_normal((5, 3, 4)).astype(np.float32)
    return v, g, up


def _lines(x: np.ndarray, dim: int) -> list[tuple[Any, list[tuple[int, ...]]]]:
    """(kept index, the positions over which its norm runs) for each norm."""
    idx = list(np.ndindex(x.shape))
    keep = 0 if dim == 0 else x.ndim - 1
    return [(k, [p for p in idx if p[keep] == k]) for k in range(x.shape[keep])]


@pytest.mark.clause("TRC-NN-013")
@pytest.mark.parametrize("dim", [0, -1])
def test_weight_norm_forward_and_backward_are_the_exact_formulas(dim: int) -> None:
    """Inputs: v (5, 3, 4) of exponents -6..6, g over the first (dim 0) or last (dim -1)
    dimension, an upstream gradient. Expected, per norm over the other dimensions:
    norm = fl32(sqrt(fl32(exact sum v^2))), w = fl32(v fl32(g / norm)); s = fl32(exact
    sum grad_w v), grad_g = fl32(s / norm), b = fl32(fl32(a grad_g) / norm) with a =
    fl32(g / norm), grad_v = fl32(fl32(a grad_w) - exact b v). Pass: bitwise."""
    v, g, up = _inputs(dim, 3 + dim)
    tv, tg = torch.tensor(v), torch.tensor(g)
    with emulate(fallback="error"):
        w, norms = aten._weight_norm_interface(tv, tg, dim % 3)
        gv, gg = aten._weight_norm_interface_backward(torch.tensor(up), tv, tg, norms,
                                                      dim % 3)
    want_w, want_gv = np.empty_like(v), np.empty_like(v)
    want_n, want_gg = np.empty(g.size, np.float32), np.empty(g.size, np.float32)
    for k, pos in _lines(v, dim % 3):
        n = np.float32(math.sqrt(float(r32(sum((Q(float(v[p])) ** 2 for p in pos), Q(0))))))
        gk = Q(float(g.reshape(-1)[k]))
        a = r32(gk / Q(float(n)))
        s = r32(sum((Q(float(up[p])) * Q(float(v[p])) for p in pos), Q(0)))
        ggk = r32(s / Q(float(n)))
        b = r32(r32(a * ggk) / Q(float(n)))
        for p in pos:
            want_w[p] = float(r32(Q(float(v[p])) * a))
            want_gv[p] = float(r32(r32(a * Q(float(up[p]))) - b * Q(float(v[p]))))
        want_n[k], want_gg[k] = n, float(ggk)
    assert_bitwise_equal(norms.numpy().reshape(-1), want_n, msg="norms")
    assert_bitwise_equal(w.numpy(), want_w, msg="w")
    assert_bitwise_equal(gg.numpy().reshape(-1), want_gg, msg="grad_g")
    assert_bitwise_equal(gv.numpy(), want_gv, msg="grad_v")


@pytest.mark.clause("TRC-NN-013")
@pytest.mark.parametrize("dim", [0, 1])
def test_weight_norm_backward_equals_torchs_kernel_when_its_sums_are_exact(dim: int) -> None:
    """Inputs: 20 seeded draws of v and grad_w (7, 19) of integers -8..8, so every sum
    of products is exact in float32 and torch's vectorised order rounds nothing, and
    random float32 g (so a = g / norm and b are full-width); torch's own forward gives
    the saved norms, which both backward runs receive. Expected: torch's own
    ``_weight_norm_interface_backward``, grad_g and grad_v (torch's compiled kernel
    fuses b v into the subtraction: unfused differs on about 12 % of words). Pass:
    bitwise."""
    rng = np.random.default_rng(50 + dim)
    for _ in range(20):
        v = torch.tensor(rng.integers(-8, 9, (7, 19)).astype(np.float32))
        g = torch.tensor(rng.standard_normal((7, 1) if dim == 0 else (1, 19))
                         .astype(np.float32))
        up = torch.tensor(rng.integers(-8, 9, (7, 19)).astype(np.float32))
        _, norms = aten._weight_norm_interface(v, g, dim)
        tgv, tgg = aten._weight_norm_interface_backward(up, v, g, norms, dim)
        with emulate(fallback="error"):
            egv, egg = aten._weight_norm_interface_backward(up, v, g, norms, dim)
        assert_bitwise_equal(egg.numpy(), tgg.numpy(), msg="grad_g")
        assert_bitwise_equal(egv.numpy(), tgv.numpy(), msg="grad_v")


@pytest.mark.clause("TRC-NN-013", "TRC-EMU-001")
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.filterwarnings("ignore:`torch.nn.utils.weight_norm` is deprecated:FutureWarning")
def test_weight_normed_layers_train_under_emulate_without_fallback(dtype: Any) -> None:
    """Inputs: a Linear under ``parametrizations.weight_norm`` and a Conv1d under the old
    ``nn.utils.weight_norm`` (HiFi-GAN's style), one forward and backward, in float32 and
    bfloat16. Expected: no op left to torch; the Linear's weight equals
    fl(fl32(v fl32(g / norm))) with norm = fl32(sqrt(exact sum of squares)) per output
    row. Pass: runs with fallback='error'; the weight bitwise."""
    torch.manual_seed(4)
    lin = torch.nn.utils.parametrizations.weight_norm(torch.nn.Linear(6, 3)).to(dtype)
    conv = torch.nn.utils.weight_norm(torch.nn.Conv1d(3, 2, 3)).to(dtype)
    with emulate(fallback="error") as em:
        out = conv(lin(torch.randn(4, 5, 6, dtype=dtype)).transpose(1, 2))
        out.float().sum().backward()
        weight = lin.weight.detach()
    assert em.report.not_emulated() == []
    v = lin.parametrizations.weight.original1.detach().float().numpy()
    g = lin.parametrizations.weight.original0.detach().float().numpy()
    want = []
    for i in range(3):
        n = math.sqrt(float(r32(sum((Q(float(x)) ** 2 for x in v[i]), Q(0)))))
        a = r32(Q(float(g[i, 0])) / Q(float(np.float32(n))))
        want.append([float(r32(Q(float(x)) * a)) for x in v[i]])
    expect = torch.tensor(np.array(want, np.float32)).to(dtype)
    assert_bitwise_equal(weight.float().numpy(), expect.float().numpy(), msg="weight")
    assert lin.parametrizations.weight.original1.grad is not None


@pytest.mark.clause("TRC-NN-013")
def test_weight_norm_in_float64_or_a_middle_dimension_is_refused_by_name() -> None:
    """Inputs: the fused op on float64 tensors, and on dim 1 of a 3-d tensor (torch's own
    composite handles that dimension, never this op). Expected: UnsupportedOpError naming
    float64 / the dimension. Pass: raised with that text."""
    from ampref.torch import UnsupportedOpError
    v, g = torch.randn(3, 4, dtype=torch.float64), torch.randn(3, 1, dtype=torch.float64)
    with emulate(fallback="error"), pytest.raises(UnsupportedOpError, match="float64"):
        aten._weight_norm_interface(v, g, 0)
    v3, g3 = torch.randn(2, 3, 4), torch.randn(1, 3, 1)
    with emulate(fallback="error"), pytest.raises(UnsupportedOpError, match="dim 1"):
        aten._weight_norm_interface(v3, g3, 1)
