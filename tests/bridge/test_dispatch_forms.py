"""The forms in which aten ops reach emulate and shadow besides the plain functional
call (TRC-EMU-007): composites arriving whole (``torch.inference_mode``), torch's fused
attention fast path, in-place overloads without a handler of their own, ``_foreach_``
ops, and ops that return nothing but write floating tensors."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import nullcontext
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from ampref.testing import assert_bitwise_equal  # noqa: E402
from ampref.torch import UnsupportedOpError, autocast, emulate, shadow  # noqa: E402
from ampref.torch.base import unsupported_reason  # noqa: E402

nn = torch.nn

#: eval-mode models as people evaluate them, and their inputs' shapes
MODELS: dict[str, tuple[Callable[[], Any], tuple[int, ...]]] = {
    "MLP": (lambda: nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 3)), (5, 8)),
    "transformer encoder": (lambda: nn.TransformerEncoder(nn.TransformerEncoderLayer(
        8, 2, 16, dropout=0.0, batch_first=True), 2), (2, 3, 8)),
    "attention": (lambda: nn.MultiheadAttention(8, 2, batch_first=True), (2, 3, 8)),
    "LSTM": (lambda: nn.LSTM(8, 4, num_layers=2, bidirectional=True, batch_first=True),
             (2, 3, 8)),
    "GRU": (lambda: nn.GRU(8, 4, batch_first=True), (2, 3, 8)),
    "RNN": (lambda: nn.RNN(8, 4, batch_first=True), (2, 3, 8)),
    "CNN": (lambda: nn.Sequential(nn.Conv2d(2, 4, 3), nn.BatchNorm2d(4), nn.ReLU(),
                                  nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4, 3)),
            (2, 2, 6, 6)),
}


def _bits(t: Any) -> Any:
    """The words of a float tensor (widened exactly to float32 / float64)."""
    wide = t.detach().to(torch.float64 if t.dtype == torch.float64 else torch.float32)
    return wide.contiguous().numpy().view(np.uint64 if wide.dtype == torch.float64
                                          else np.uint32)


def _run(name: str, grad_mode: Any, cast: bool) -> tuple[Any, Any]:
    """The first output of MODELS[name] in eval mode under emulate (no fallback), in
    ``grad_mode``, with emulated CUDA fp16 autocast if ``cast``; and the report."""
    make, shape = MODELS[name]
    torch.manual_seed(0)
    model = make().eval()
    x = torch.randn(*shape)
    with emulate(fallback="error") as mode, grad_mode(), (
            autocast("cuda", torch.float16) if cast else nullcontext()):
        out = model(x, x, x) if name == "attention" else model(x)
    return (out[0] if isinstance(out, tuple) else out), mode.report


@pytest.mark.clause("TRC-EMU-007")
@pytest.mark.parametrize("cast", [False, True], ids=["float32", "fp16 autocast"])
@pytest.mark.parametrize("name", sorted(MODELS))
def test_an_eval_forward_is_the_same_in_inference_mode_no_grad_and_with_autograd(
        name: str, cast: bool) -> None:
    """Inputs: each eval-mode model of MODELS on seeded inputs under emulate without
    fallback, once in ``torch.inference_mode()``, once in ``torch.no_grad()`` and once
    with autograd on, in float32 and under emulated CUDA fp16 autocast. Expected: all
    three run (before TRC-EMU-007: ``inference_mode`` raised UnsupportedOpError for
    ``linear``, ``to`` and ``lstm``, which reach the mode whole; eval-mode attention
    raised it in all three for torch's fused fast path), nothing left to torch, and
    the same output dtype and words (before, inference-mode composites met no autocast:
    an RNN's output was float32 instead of float16). Pass: bitwise."""
    runs = [_run(name, g, cast) for g in (torch.inference_mode, torch.no_grad,
                                          torch.enable_grad)]
    for out, report in runs:
        assert not report.not_emulated(), report.not_emulated()
        assert out.dtype == runs[1][0].dtype, (out.dtype, runs[1][0].dtype)
    for (out, _), mode in zip(runs[::2], ("inference_mode", "enable_grad"), strict=True):
        assert_bitwise_equal(_bits(out), _bits(runs[1][0]), msg=f"{name} {mode} vs no_grad")


@pytest.mark.clause("TRC-EMU-007")
def test_the_attention_fast_path_is_off_inside_the_modes_and_restored_after() -> None:
    """Inputs: torch's MHA fast-path switch before, inside and after emulate and shadow,
    from both of its states. Expected: off inside, the previous state after. Pass:
    equality."""
    before = torch.backends.mha.get_fastpath_enabled()
    try:
        for state in (True, False):
            torch.backends.mha.set_fastpath_enabled(state)
            for mode in (emulate(), shadow()):
                with mode:
                    assert torch.backends.mha.get_fastpath_enabled() is False
                assert torch.backends.mha.get_fastpath_enabled() is state
    finally:
        torch.backends.mha.set_fastpath_enabled(before)


def _exactly(fn: Callable[[], Any]) -> Any:
    """``fn()`` under emulate without fallback."""
    with emulate(fallback="error"):
        return fn()


#: in-place calls without a handler of their own and the functional call whose result
#: they must hold; operands are drawn in the test (``a`` 4x5, ``b`` 4x3, ``c`` 3x5,
#: ``v`` 5, ``w`` 4, ``h`` float16 4x5)
INPLACE: dict[str, tuple[Callable[..., Any], Callable[..., Any]]] = {
    "addmm_": (lambda a, b, c, v, w, h: a.clone().addmm_(b, c, beta=0.5, alpha=3.0),
               lambda a, b, c, v, w, h: torch.addmm(a, b, c, beta=0.5, alpha=3.0)),
    "addmv_": (lambda a, b, c, v, w, h: w.clone().addmv_(a, v, alpha=2.0),
               lambda a, b, c, v, w, h: torch.addmv(w, a, v, alpha=2.0)),
    "addr_": (lambda a, b, c, v, w, h: a.clone().addr_(w, v),
              lambda a, b, c, v, w, h: torch.addr(a, w, v)),
    "baddbmm_": (lambda a, b, c, v, w, h: a[None].clone().baddbmm_(b[None], c[None]),
                 lambda a, b, c, v, w, h: torch.baddbmm(a[None], b[None], c[None])),
    "cumsum_": (lambda a, b, c, v, w, h: a.clone().cumsum_(1),
                lambda a, b, c, v, w, h: torch.cumsum(a, 1)),
    "cumsum_ float16": (lambda a, b, c, v, w, h: h.clone().cumsum_(0),
                        lambda a, b, c, v, w, h: torch.cumsum(h, 0)),
    "cumprod_": (lambda a, b, c, v, w, h: a.clone().cumprod_(1),
                 lambda a, b, c, v, w, h: torch.cumprod(a, 1)),
}


@pytest.mark.clause("TRC-EMU-007", "TRC-EMU-006")
@pytest.mark.parametrize("name", sorted(INPLACE))
def test_an_in_place_form_holds_its_functional_forms_result(name: str) -> None:
    """Inputs: seeded float32 (and float16) operands; an in-place call whose packet has
    no handler of its own (``addmm_``, ``cumsum_``, ...) and its functional call, both
    under emulate without fallback. Expected: the in-place call runs (before: it raised
    UnsupportedOpError) and its tensor holds the functional call's words, in its own
    dtype. Pass: bitwise."""
    gen = torch.Generator().manual_seed(3)
    ops = [torch.randn(s, generator=gen) for s in ((4, 5), (4, 3), (3, 5), (5,), (4,))]
    ops.append(torch.randn(4, 5, generator=gen).half())
    inplace, functional = INPLACE[name]
    ours, want = _exactly(lambda: inplace(*ops)), _exactly(lambda: functional(*ops))
    assert ours.dtype == want.dtype
    assert_bitwise_equal(_bits(ours), _bits(want), msg=name)


#: in-place forms of ops without rounding: torch computes them, word for word
EXACT_INPLACE: dict[str, Callable[[Any], Any]] = {
    "triu_ of a -inf mask": lambda x: torch.full((4, 4), float("-inf")).triu_(1),
    "tril_": lambda x: x.clone().tril_(-1),
    "scatter_ value": lambda x: x.clone().scatter_(1, torch.tensor([[0], [2], [1], [4]]), 1.0),
    "scatter_ src": lambda x: x.clone().scatter_(0, torch.tensor([[1, 0, 2, 3, 0]]), x[:1]),
    "sign_": lambda x: x.clone().sign_(),
    "gt_": lambda x: x.clone().gt_(0.25),
}


@pytest.mark.clause("TRC-EMU-007", "TRC-EMU-001")
@pytest.mark.parametrize("name", sorted(EXACT_INPLACE))
def test_an_in_place_form_of_an_op_without_rounding_is_torchs(name: str) -> None:
    """Inputs: a seeded float32 4x5 tensor; in-place forms of ops without rounding
    (``triu_`` as attention masks are built, ``scatter_`` as Gumbel-softmax's hard
    sample is). Expected: under emulate without fallback they run (before: the
    UnsupportedOpError of ``triu_``, ``scatter_``) with torch's words. Pass: bitwise."""
    x = torch.randn(4, 5, generator=torch.Generator().manual_seed(5))
    fn = EXACT_INPLACE[name]
    assert_bitwise_equal(_bits(_exactly(lambda: fn(x))), _bits(fn(x)), msg=name)


#: _foreach_ calls (on lists of two tensors) and the per-tensor op each stands for
FOREACH: dict[str, tuple[Callable[..., Any], Callable[..., Any] | None]] = {
    "sigmoid": (torch._foreach_sigmoid, torch.sigmoid),
    "tanh_": (torch._foreach_tanh_, torch.Tensor.tanh_),
    "log1p": (torch._foreach_log1p, torch.log1p),
    "rsqrt": (torch._foreach_rsqrt, torch.rsqrt),
    "erf": (torch._foreach_erf, torch.erf),
    "pow scalar": (lambda xs: torch._foreach_pow(xs, 3), lambda x: torch.pow(x, 3)),
    "pow_ list": (lambda xs: torch._foreach_pow_(xs, [xs[1].abs(), xs[0].abs()]), None),
    "minimum_ list": (lambda xs: torch._foreach_minimum_(xs, [xs[1], xs[0]]), None),
    "maximum_ list": (lambda xs: torch._foreach_maximum_(xs, [xs[1], xs[0]]), None),
    "sign_": (torch._foreach_sign_, torch.Tensor.sign_),
    "floor": (torch._foreach_floor, torch.floor),
    "copy_": (lambda xs: torch._foreach_copy_(xs, [xs[1] * 2, xs[0] * 3]), None),
}


def _operands() -> list[Any]:
    """Two seeded float32 3x4 tensors (shifted off 0, so log1p and rsqrt see both signs
    and no exact zero)."""
    gen = torch.Generator().manual_seed(11)
    return [torch.randn(3, 4, generator=gen) + 0.1 for _ in range(2)]


def _foreach_case(name: str, emulated: bool) -> list[Any]:
    """FOREACH[name] on the two tensors: the list after the call (the in-place ones) or
    returned, under emulate if ``emulated``."""
    xs = _operands()
    with emulate(fallback="error") if emulated else nullcontext():
        out = FOREACH[name][0](xs)
    return xs if out is None else list(out)


def _per_tensor_case(name: str) -> list[Any]:
    """The per-tensor op of FOREACH[name] on each tensor, under emulate."""
    single = FOREACH[name][1]
    assert single is not None
    with emulate(fallback="error"):
        return [single(x) for x in _operands()]


@pytest.mark.clause("TRC-EMU-007")
@pytest.mark.parametrize("name", sorted(FOREACH))
def test_a_foreach_op_is_its_per_tensor_op_on_each_tensor(name: str) -> None:
    """Inputs: the two tensors of ``_operands``; ``_foreach_`` calls ampref had no handler
    for (before: UnsupportedOpError, and the in-place ones, which return nothing, ran in
    torch unreported). Expected: under emulate without fallback, each tensor holds the
    per-tensor op's emulated words (where FOREACH names one) and, for ops without
    rounding or equal in torch (floor, sign, minimum, maximum, copy), torch's own
    multi-tensor result. Pass: bitwise."""
    ours = _foreach_case(name, True)
    if FOREACH[name][1] is not None:
        for k, (a, b) in enumerate(zip(ours, _per_tensor_case(name), strict=True)):
            assert_bitwise_equal(_bits(a), _bits(b), msg=f"{name} tensor {k}")
    if name.split()[0].rstrip("_") in ("floor", "sign", "minimum", "maximum", "copy"):
        for k, (a, b) in enumerate(zip(ours, _foreach_case(name, False), strict=True)):
            assert_bitwise_equal(_bits(a), _bits(b), msg=f"{name} tensor {k} vs torch")


@pytest.mark.clause("TRC-EMU-007")
def test_an_op_that_returns_nothing_but_writes_floats_is_emulated() -> None:
    """Inputs: ``_foreach_tanh_`` (no handler of its own; returns nothing) under
    emulate. Expected: tanh is computed by ampref: the report lists ``tanh_`` twice and
    the words equal emulated ``tanh`` (before, it ran in torch, unreported: an op
    without outputs was judged to have no floating output; so did torch's fused
    optimizers, now TRC-OPT-001). Pass: equality."""
    xs = [torch.linspace(-3, 3, 7), torch.linspace(-1, 2, 7)]
    with emulate(fallback="error") as mode:
        torch._foreach_tanh_(xs)
    assert [r.calls for r in mode.report.rows() if r.op == "tanh_"] == [2]
    with emulate(fallback="error"):
        want = [torch.tanh(torch.linspace(-3, 3, 7)), torch.tanh(torch.linspace(-1, 2, 7))]
    for a, b in zip(xs, want, strict=True):
        assert_bitwise_equal(_bits(a), _bits(b), msg="_foreach_tanh_")


#: activations whose double backward a gradient penalty (WGAN-GP, R1) runs through;
#: Softsign's issues autograd's zero tensor (``_efficientzerotensor``)
PENALIZED = {"LeakyReLU": lambda: nn.LeakyReLU(0.2), "Tanh": nn.Tanh, "Softplus": nn.Softplus,
             "GELU": nn.GELU, "SiLU": nn.SiLU, "Mish": nn.Mish, "Softsign": nn.Softsign,
             "PReLU": nn.PReLU, "LayerNorm": lambda: nn.LayerNorm(8)}


def _penalty_grads(make: Callable[[], Any], emulated: bool) -> list[Any]:
    """A critic Linear(4, 8) -> act -> Linear(8, 1) on seeded inputs: the gradient
    penalty ``mean((|d out / d x| - 1)^2)`` and the gradients it gives the parameters
    and the input (``create_graph=True``, then backward)."""
    torch.manual_seed(0)
    critic = nn.Sequential(nn.Linear(4, 8), make(), nn.Linear(8, 1))
    x = torch.randn(5, 4, requires_grad=True)
    with emulate(fallback="error") if emulated else nullcontext():
        g, = torch.autograd.grad(critic(x).sum(), x, create_graph=True)
        loss = ((g.norm(2, dim=1) - 1) ** 2).mean()
        loss.backward()
    return [loss.detach(), x.grad] + [p.grad for p in critic.parameters() if p.grad is not None]


@pytest.mark.clause("TRC-EMU-007", "TRC-EMU-001")
@pytest.mark.parametrize("name", sorted(PENALIZED))
def test_a_gradient_penalty_runs_through_double_backward_under_emulate(name: str) -> None:
    """Inputs: a critic with each activation of PENALIZED, a gradient penalty and its
    backward (second derivatives), under emulate without fallback and in torch.
    Expected: it runs (before: Softsign's zero tensor reached a handler, whose NumPy
    copy of it came back on the meta device), the same gradients exist, and they agree
    with torch's float32 ones within 1e-3 relative to each tensor's largest (a coverage
    check: each op's exactness is tested where it is defined; measured at most 7e-5).
    Pass: the bound."""
    ours, theirs = _penalty_grads(PENALIZED[name], True), _penalty_grads(PENALIZED[name], False)
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs, strict=True):
        scale = float(b.abs().max()) or 1.0
        assert float((a - b).abs().max()) <= 1e-3 * scale, (name, a, b)


@pytest.mark.clause("TRC-EMU-001")
def test_ops_on_autograd_zero_tensors_and_meta_tensors_are_torchs() -> None:
    """Inputs: ``_efficientzerotensor`` plus a tensor, a zero tensor's cast, and a cast
    to the meta device, under emulate without fallback. Expected: torch's results (the
    other operand; zeros; a meta tensor of the shape); before, the cast handler read the
    zero tensor's values and returned a meta tensor. Pass: bitwise / equality."""
    y = torch.linspace(-1, 1, 5)
    with emulate(fallback="error"):
        z = torch._efficientzerotensor(5)
        added, cast = torch.add(z, y), z.to(torch.float64)
        moved = y.to("meta")
    assert_bitwise_equal(_bits(added), _bits(y), msg="zero + y")
    assert cast.dtype == torch.float64 and not bool(cast.any())
    assert moved.is_meta and tuple(moved.shape) == (5,)


@pytest.mark.clause("TRC-EMU-002", "TRC-EMU-001")
def test_complex_arithmetic_is_refused_and_complex_views_are_torchs() -> None:
    """Inputs: rotary codes written with complex numbers (Meta's Llama reference code):
    ``view_as_complex``, a complex product, ``view_as_real``. Expected: the views run
    in torch, the product raises UnsupportedOpError saying complex arithmetic has no
    reference, and with fallback="torch" the report lists it as not emulated (before,
    a complex output counted as not floating, so the product ran in torch unreported).
    Pass: equality."""
    x = torch.randn(2, 4, 4, 2, generator=torch.Generator().manual_seed(2))
    freqs = torch.polar(torch.ones(4, 4), torch.linspace(0, 3, 16).reshape(4, 4))
    with emulate(fallback="error"):
        xc = torch.view_as_complex(x)
        assert_bitwise_equal(_bits(torch.view_as_real(xc)), _bits(x), msg="views")
    with pytest.raises(UnsupportedOpError, match="complex arithmetic"):
        with emulate(fallback="error"):
            torch.view_as_real(torch.view_as_complex(x) * freqs)
    with emulate(fallback="torch") as mode:
        torch.view_as_real(torch.view_as_complex(x) * freqs)
    assert [r.op for r in mode.report.not_emulated()] == ["mul"]


@pytest.mark.clause("TRC-EMU-002")
def test_the_refusal_names_complex_operands_passed_by_keyword_or_without_kwargs() -> None:
    """Inputs: ``unsupported_reason`` for an op without a handler, given a complex tensor
    only among its keyword operands (an ``out=``), only among its positional operands
    with ``kwargs=None`` (the default), and real operands only. Expected: the first two
    say complex arithmetic has no reference, the third says no reference implementation.
    Pass: equality of the strings (a planted ``kwargs and {}`` missed the keyword one and
    raised AttributeError on None)."""
    real, cplx = torch.ones(2), torch.ones(2, dtype=torch.complex64)
    complex_reason = "complex arithmetic has no reference (complex views run in torch)"
    assert unsupported_reason("fft_c2c", (real,), {"out": cplx}) == complex_reason
    assert unsupported_reason("fft_c2c", ([real, cplx],), None) == complex_reason
    assert unsupported_reason("fft_c2c", (real,), {"norm": 1}) == "no reference implementation"


@pytest.mark.clause("TRC-EMU-001")
def test_distribution_samples_are_torchs_draws() -> None:
    """Inputs: Beta (Dirichlet), Gamma, Poisson and Binomial samples from a seeded
    generator state, under emulate without fallback and in torch (mixup's
    ``Beta(a, a).sample()``). Expected: torch's draws (random draws run in torch; before:
    UnsupportedOpError for ``_sample_dirichlet``). Pass: bitwise."""
    def draws() -> list[Any]:
        torch.manual_seed(9)
        dist = torch.distributions
        return [dist.Beta(torch.tensor([0.4]), torch.tensor([0.4])).sample((5,)),
                dist.Gamma(torch.tensor([2.0]), torch.tensor([1.5])).sample((5,)),
                torch.poisson(torch.full((5,), 3.0)),
                dist.Binomial(10, torch.tensor([0.3])).sample((5,))]
    with emulate(fallback="error"):
        ours = draws()
    for k, (a, b) in enumerate(zip(ours, draws(), strict=True)):
        assert_bitwise_equal(_bits(a), _bits(b), msg=f"draw {k}")
