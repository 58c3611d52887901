"""``out=`` overloads under the modes (TRC-EMU-006), the optimizers and parametrizations
that call them, and ops of the same survey: ``vdot`` (TRC-NN-001), the step function and
row copies (exact, TRC-EMU-001), and CUDA autocast's float32 ``norm`` with a defaulted
``keepdim`` (TRC-AUT-001)."""

from __future__ import annotations

from fractions import Fraction as Q
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from value_oracles import r32  # noqa: E402

from ampref.testing import assert_bitwise_equal  # noqa: E402
from ampref.torch import autocast, emulate, shadow  # noqa: E402


@pytest.mark.clause("TRC-EMU-006")
@pytest.mark.parametrize("call", ["maximum", "div_mode", "add_alpha", "sum_dim"])
def test_an_out_overload_writes_the_functional_result_into_the_given_tensor(
        call: str) -> None:
    """Inputs: a (3, 4) pair of float32 tensors, an ``out`` tensor of the wrong shape
    (2,) and one of the right shape: maximum, div with rounding_mode='floor', add with
    alpha=0.5, sum over dim 1. Expected: the returned tensor is the given one, resized
    to the result's shape, holding the functional call's emulated values. Pass: identity,
    shape, and values bitwise."""
    rng = np.random.default_rng(9)
    a = torch.tensor(rng.standard_normal((3, 4)).astype(np.float32))
    b = torch.tensor(rng.standard_normal((3, 4)).astype(np.float32))
    fns = {"maximum": (lambda o: torch.maximum(a, b, out=o), lambda: torch.maximum(a, b)),
           "div_mode": (lambda o: torch.div(a, b, rounding_mode="floor", out=o),
                        lambda: torch.div(a, b, rounding_mode="floor")),
           "add_alpha": (lambda o: torch.add(a, b, alpha=0.5, out=o),
                         lambda: torch.add(a, b, alpha=0.5)),
           "sum_dim": (lambda o: torch.sum(a, 1, out=o), lambda: torch.sum(a, 1))}
    with_out, functional = fns[call]
    for given in (torch.empty(2), torch.empty(functional().shape)):
        with emulate(fallback="error"):
            got = with_out(given)
            want = functional()
        assert got is given
        assert got.shape == want.shape
        assert_bitwise_equal(got.numpy(), want.numpy(), msg=call)


@pytest.mark.clause("TRC-EMU-006")
def test_shadow_compares_an_out_overload_with_its_functional_twin() -> None:
    """Inputs: ``torch.maximum(a, b, out=c)`` under ``shadow``. Expected: torch's own
    result in ``c``, the op recorded as emulated with no mismatch (a maximum is exact).
    Pass: values equal torch's, record clean."""
    a, b = torch.randn(5), torch.randn(5)
    c = torch.empty(5)
    with shadow(fallback="error") as sh:
        torch.maximum(a, b, out=c)
    assert torch.equal(c, torch.maximum(a, b))
    recs = [r for r in sh.report.rows() if r.op == "maximum"]
    assert recs and all(r.emulated and r.mismatches == 0 for r in recs)


def _train(opt: Any, emulated: bool) -> list[np.ndarray]:
    torch.manual_seed(3)
    m = torch.nn.Linear(4, 3)
    o = opt(m.parameters())
    xs = [torch.randn(5, 4) for _ in range(3)]
    with emulate(fallback="error") if emulated else _null():
        for x in xs:
            o.zero_grad()
            (m(x) ** 2).mean().backward()
            o.step()
    return [p.detach().numpy().copy() for p in m.parameters()]


class _null:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: Any) -> None:
        return None


@pytest.mark.clause("TRC-EMU-006", "TRC-EMU-001")
@pytest.mark.parametrize("name", ["Adamax", "Adam-amsgrad"])
def test_optimizers_that_write_out_tensors_run_emulated_and_give_torchs_parameters(
        name: str) -> None:
    """Inputs: a Linear(4, 3) trained 3 steps with Adamax (``torch.maximum(..., out=)``)
    or Adam with amsgrad (``torch.maximum(..., out=)``), single-tensor path, the same
    seeds, once in torch and once under emulate. Expected: the emulated run completes
    (it raised NumPy's TypeError before) and its parameters are within 4 float32 ulps of
    torch's (the forward and backward GEMMs are exact in ampref, cascaded in torch; the
    optimizer's own pointwise steps are torch's float32 operations; measured: 1 ulp).
    Pass: the bound."""
    opts = {"Adamax": lambda ps: torch.optim.Adamax(ps, lr=0.01, foreach=False),
            "Adam-amsgrad": lambda ps: torch.optim.Adam(ps, lr=0.01, amsgrad=True,
                                                        foreach=False)}
    ours, theirs = _train(opts[name], True), _train(opts[name], False)
    for p, q in zip(ours, theirs, strict=True):
        assert np.all(np.abs(p - q) <= 4 * np.spacing(np.abs(q))), (p - q)


@pytest.mark.clause("TRC-NN-001")
def test_vdot_of_real_vectors_is_the_exact_dot_rounded_once() -> None:
    """Inputs: two 300-element float32 vectors of exponents -20..19. Expected: ``vdot``
    under emulate is fl32 of the exact sum of products (a Fraction oracle), and spectral
    norm's power iteration runs without fallback. Pass: bitwise; no op left to torch."""
    rng = np.random.default_rng(5)
    a, b = ((rng.standard_normal(300) * np.exp2(rng.integers(-20, 20, 300))).astype(np.float32)
            for _ in range(2))
    layer = torch.nn.utils.parametrizations.spectral_norm(torch.nn.Linear(4, 3))
    with emulate(fallback="error") as em:
        got = torch.vdot(torch.tensor(a), torch.tensor(b))
        layer(torch.randn(2, 4)).sum().backward()
    exact = sum((Q(float(x)) * Q(float(y)) for x, y in zip(a, b, strict=True)), Q(0))
    assert_bitwise_equal(got.numpy(), np.array(float(r32(exact)), np.float32), msg="vdot")
    assert em.report.not_emulated() == []


@pytest.mark.clause("TRC-EMU-001")
def test_the_step_function_and_row_copies_run_in_torch_unchanged() -> None:
    """Inputs: ``heaviside`` of values including -0, +0, NaN and infinities with a
    float32 value tensor; ``index_copy`` of rows (AdaptiveLogSoftmaxWithLoss uses it).
    Expected: torch's own results (each output is one of the inputs' values). Pass:
    bitwise (NaN any)."""
    x = torch.tensor([-2.0, -0.0, 0.0, 3.0, float("nan"), float("inf"), -float("inf")])
    vals = torch.tensor([0.25])
    src, idx = torch.randn(2, 3), torch.tensor([2, 0])
    with emulate(fallback="error"):
        h = torch.heaviside(x, vals)
        c = torch.zeros(4, 3).index_copy(0, idx, src)
    assert_bitwise_equal(h.numpy(), torch.heaviside(x, vals).numpy(), nan="any")
    assert_bitwise_equal(c.numpy(), torch.zeros(4, 3).index_copy(0, idx, src).numpy())


@pytest.mark.clause("TRC-AUT-001", "TRC-AUT-002")
def test_cuda_autocast_norm_with_a_defaulted_keepdim_is_float32_as_torchs_redispatch() -> None:
    """Inputs: under ampref's CUDA fp16 autocast, ``torch.norm(x16, 2, dim=1)`` (keepdim
    left out, as ``pairwise_distance`` calls it) and ``F.pairwise_distance`` of float32
    inputs. Expected: torch's fp32_append_dtype redispatch, ``norm(x16, 2, [1], False,
    dtype=float32)`` in plain torch; pairwise_distance's float32 result. Pass: dtype
    float32 and values bitwise; before the fix the dtype landed in keepdim's place and
    torch raised."""
    x16 = torch.randn(4, 6).half()
    y, z = torch.randn(4, 6), torch.randn(4, 6)
    with autocast("cuda", torch.float16):
        n = torch.norm(x16, 2, dim=1)
        d = torch.nn.functional.pairwise_distance(y, z)
    want = torch.ops.aten.norm.ScalarOpt_dim_dtype(x16, 2, [1], False, dtype=torch.float32)
    assert n.dtype == torch.float32
    assert_bitwise_equal(n.numpy(), want.numpy(), msg="norm")
    assert d.dtype == torch.float32
    assert_bitwise_equal(d.numpy(), torch.nn.functional.pairwise_distance(y, z).numpy())
