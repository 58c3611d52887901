"""ampref.torch op by op: each emulated aten op against the engine op of the same
definition (or a float64 oracle where the engine has none), accumulation models, the
unsupported-op error and fallback, shadow's report on a planted hazard, and autocast on
CPU tensors against the recorded torch autocast table (TRC-*)."""

from __future__ import annotations

import contextlib
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ampref
from ampref import functional as F
from ampref.testing import assert_bitwise_equal, hard_cases
from paths import DATA, script

torch = pytest.importorskip("torch")
at = pytest.importorskip("ampref.torch")

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def _values(data: st.DataObject, fmt: str, n: int = 16) -> np.ndarray:
    vals = data.draw(st.lists(hard_cases(fmt), min_size=n, max_size=n))
    x = ampref.quantize(np.array(vals, np.float32), fmt)
    return np.where(np.isfinite(x) & (np.abs(x) < 1e30), x, np.float32(0.5)).astype(np.float32)


def _emulated(fn: Any, *xs: np.ndarray, dtype: Any) -> np.ndarray:
    ts = [torch.from_numpy(x).to(dtype) for x in xs]
    with at.emulate(fallback="error"):
        out = fn(*ts)
    return out.float().numpy()


UNARY = {"exp": (torch.exp, F.exp), "tanh": (torch.tanh, F.tanh),
         "sigmoid": (torch.sigmoid, F.sigmoid), "relu": (torch.relu, F.relu),
         "gelu": (torch.nn.functional.gelu, F.gelu), "neg": (torch.neg, F.neg)}
BINARY = {"add": (torch.add, F.add), "sub": (torch.sub, F.sub), "mul": (torch.mul, F.mul),
          "div": (torch.div, F.div)}


@pytest.mark.clause("TRC-PWO-001")
@settings(max_examples=60)
@given(data=st.data())
def test_pointwise_ops_equal_the_engine_ops_bit_for_bit(data: st.DataObject) -> None:
    """Inputs: hypothesis values (hard cases included) in fp16/bf16/fp32 through exp, tanh,
    sigmoid, relu, gelu, neg, add, sub, mul, div as torch ops under emulate. Expected: the
    engine op's bits on the same values. Pass: bitwise equal."""
    fmt = data.draw(st.sampled_from(list(DTYPES)), label="dtype")
    name = data.draw(st.sampled_from(sorted(UNARY) + sorted(BINARY)), label="op")
    t_fn: Any
    e_fn: Any
    if name in UNARY:
        t_fn, e_fn = UNARY[name]
        xs = [_values(data, fmt)]
    else:
        t_fn, e_fn = BINARY[name]
        xs = [_values(data, fmt), _values(data, fmt)]
    got = _emulated(t_fn, *xs, dtype=DTYPES[fmt])
    want = e_fn(*(ampref.tensor(x, fmt) for x in xs)).numpy()
    assert_bitwise_equal(got, want, msg=f"{name} {fmt}: ")


@pytest.mark.clause("TRC-PWO-001")
def test_sqrt_and_reciprocal_round_the_exact_value_once() -> None:
    """Inputs: 500 float32 values in [1e-3, 1e3] through torch.sqrt and torch.reciprocal
    under emulate. Expected: fl32 of the float64 sqrt (exact enough to round correctly) and
    the IEEE float32 reciprocal. Pass: bitwise equal."""
    x = np.float32(np.random.default_rng(1).uniform(1e-3, 1e3, 500))
    got_sqrt = _emulated(torch.sqrt, x, dtype=torch.float32)
    want = np.array([np.float32(math.sqrt(float(v))) for v in x])  # float64 sqrt: safe
    assert_bitwise_equal(got_sqrt, want)
    assert_bitwise_equal(_emulated(torch.reciprocal, x, dtype=torch.float32),
                         np.float32(1.0) / x)


@pytest.mark.clause("TRC-NN-001")
@pytest.mark.parametrize("model", ["exact", "tensorcore:h100", "sequential"])
def test_matmuls_follow_the_chosen_accumulation_model(model: str) -> None:
    """Inputs: a 9x40 @ 40x7 fp16 matmul under emulate with exact, tensorcore:h100 and
    sequential. Expected: the engine's matmul under the same model. Pass: bitwise equal."""
    rng = np.random.default_rng(2)
    a = ampref.quantize(rng.standard_normal((9, 40)).astype(np.float32), "float16")
    b = ampref.quantize(rng.standard_normal((40, 7)).astype(np.float32), "float16")
    with at.emulate(accumulation=model):
        got = torch.from_numpy(a).half() @ torch.from_numpy(b).half()
    want = F.matmul(ampref.tensor(a, "float16"), ampref.tensor(b, "float16"),
                    accumulation=model).numpy()
    assert_bitwise_equal(got.float().numpy(), want, msg=f"{model}: ")


@pytest.mark.clause("TRC-NN-001", "TRC-NN-002")
def test_layer_norm_softmax_and_attention_equal_the_engine() -> None:
    """Inputs: a (2, 3, 5, 8) float32 tensor through layer_norm, softmax and causal SDPA
    under emulate. Expected: the engine's ops on the same values. Pass: bitwise equal for
    each."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 3, 5, 8)).astype(np.float32)
    tx = torch.from_numpy(x)
    with at.emulate():
        ln = torch.nn.functional.layer_norm(tx, (8,))
        sm = torch.softmax(tx, -1)
        att = torch.nn.functional.scaled_dot_product_attention(tx, tx, tx, is_causal=True)
    ex = ampref.tensor(x)
    assert_bitwise_equal(ln.numpy(), F.layer_norm(ex, (8,)).numpy(), msg="layer_norm: ")
    assert_bitwise_equal(sm.numpy(), F.softmax(ex, -1).numpy(), msg="softmax: ")
    assert_bitwise_equal(att.numpy(), F.scaled_dot_product_attention(
        ex, ex, ex, is_causal=True).numpy(), msg="attention: ")


@pytest.mark.clause("TRC-NN-003")
def test_cross_entropy_ignores_the_ignore_index_as_torch_does() -> None:
    """Inputs: 6x5 logits with targets including two ignore_index (-1) rows. Expected: the
    engine's cross_entropy over the four kept rows. Pass: bitwise equal."""
    rng = np.random.default_rng(4)
    logits = torch.from_numpy(rng.standard_normal((6, 5)).astype(np.float32))
    target = torch.tensor([0, -1, 3, 4, -1, 1])
    with at.emulate():
        got = torch.nn.functional.cross_entropy(logits, target, ignore_index=-1)
    keep = (target != -1).numpy()
    want = F.cross_entropy(ampref.tensor(logits.numpy()[keep]), target.numpy()[keep])
    assert_bitwise_equal(np.float32(got.item()), want.numpy())


@pytest.mark.clause("TRC-EMU-001")
@pytest.mark.parametrize("name", ["sum", "sum of a mask", "mm", "add", "mul", "mean of counts"])
def test_ops_without_a_floating_output_are_torchs_even_where_ampref_has_a_handler(
        name: str) -> None:
    """Inputs: integer and bool tensors (values past 2^53, where a float64 detour rounds)
    through ops ampref handles for floating tensors, under emulate(fallback='error').
    Expected: torch's own result and dtype (no rounding is involved). Pass: torch.equal
    and equal dtypes."""
    a = torch.tensor([2**62 + 1, 3, -5])
    m = torch.tensor([True, False, True])
    ops = {"sum": lambda: a.sum(), "sum of a mask": lambda: m.sum(),
           "mm": lambda: a[None] @ a[:, None] // 2**40, "add": lambda: a + 1,
           "mul": lambda: a * 3, "mean of counts": lambda: m.sum().float().mean()}
    want = ops[name]()
    with at.emulate(fallback="error"):
        got = ops[name]()
    assert got.dtype == want.dtype and torch.equal(got, want), f"{name}: {got} want {want}"


@pytest.mark.clause("TRC-EMU-001", "TRC-NN-003")
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_with_label_smoothing_is_emulated_and_near_torch(
        reduction: str) -> None:
    """Inputs: 6x5 random logits, targets with one ignore_index row, label_smoothing 0.1,
    each reduction, loss and input gradient of sum(loss), under emulate(fallback='error')
    (torch counts the kept targets with an integer sum: it used to raise TypeError).
    Expected: every op emulated; each value within 4 float32 ulps of the array's largest
    magnitude of torch's (the two differ only in the roundings of the class sums and the
    softmax, relative to the terms summed, not to a gradient that cancels). Pass: all."""
    rng = np.random.default_rng(11)
    x = rng.standard_normal((6, 5)).astype(np.float32)
    target = torch.tensor([0, 1, 4, 2, -100, 3])
    outs = []
    for emulated in (True, False):
        tx = torch.tensor(x, requires_grad=True)
        with at.emulate(fallback="error") if emulated else contextlib.nullcontext():
            loss = torch.nn.functional.cross_entropy(tx, target, label_smoothing=0.1,
                                                     reduction=reduction)
            loss.sum().backward()
        outs.append((loss.detach().numpy(), tx.grad.numpy()))
    for got, want in zip(outs[0], outs[1], strict=True):
        ulps = np.abs(got.astype(np.float64) - want) / np.spacing(np.abs(want).max())
        assert ulps.max() <= 4, f"{reduction}: {got} want {want}, {ulps.max()} ulps"


@pytest.mark.clause("TRC-NN-003")
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("logp, target", [
    (np.array([[0.0, -1], [-0.0, -2], [0.0, -3]], np.float32), [0, 0, -1]),
    (np.full((3, 2), -0.5, np.float32), [-1, -1, -1]),
    (-np.arange(1, 13, dtype=np.float32).reshape(4, 3) / 8, [2, -1, 0, 1])],
    ids=["signed zeros", "all ignored", "dyadic"])
def test_nll_loss_zeros_and_ignored_rows_are_torchs(logp: np.ndarray, target: list[int],
                                                   reduction: str) -> None:
    """Inputs: log-probabilities with +0/-0 at the targets, only ignored targets, and
    few-bit dyadic values (sums exact in any order), ignore_index -1, each reduction,
    under emulate. Expected: torch's own nll_loss: ignored rows +0, exact negations,
    a zero sum +0, the mean of nothing NaN. Pass: equal uint32 words."""
    tl, tt = torch.from_numpy(logp), torch.tensor(target)
    want = torch.nn.functional.nll_loss(tl, tt, ignore_index=-1, reduction=reduction)
    with at.emulate():
        got = torch.nn.functional.nll_loss(tl, tt, ignore_index=-1, reduction=reduction)
    g, w = (np.asarray(v.numpy(), np.float32).view(np.uint32).ravel().tolist()
            for v in (got, want))
    assert g == w, f"{[f'{x:08x}' for x in g]} want {[f'{x:08x}' for x in w]}"


@pytest.mark.clause("TRC-NN-005", "ENG-LOS-001")
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_mse_loss_under_emulate_is_torchs_in_every_reduction(reduction: str) -> None:
    """Inputs: 8 few-bit dyadic inputs (exact squares and sums) against targets, each
    reduction, forward and the input gradient of sum(loss * w) (w = 0.3..2.1 or 0.7),
    under emulate and in torch. Expected: equal. Pass: equal uint32 words."""
    x = np.array([0.5, -1.25, 3, 0, -0.0, 2.5, -4, 0.75], np.float32)
    y = np.array([0.25, -1.25, -1, -0.0, 0, 0.5, 1, 0.75], np.float32)
    up = torch.tensor(np.linspace(0.3, 2.1, 8, dtype=np.float32) if reduction == "none"
                      else np.float32(0.7))
    got: list[list[int]] = []
    want: list[list[int]] = []
    for out, ctx in ((got, at.emulate()), (want, None)):
        tx = torch.tensor(x, requires_grad=True)
        if ctx is not None:
            with ctx:
                loss = torch.nn.functional.mse_loss(tx, torch.tensor(y), reduction=reduction)
                (loss * up).sum().backward()
        else:
            loss = torch.nn.functional.mse_loss(tx, torch.tensor(y), reduction=reduction)
            (loss * up).sum().backward()
        out += [np.asarray(v, np.float32).view(np.uint32).ravel().tolist()
                for v in (loss.detach().numpy(), tx.grad.numpy())]
    assert got == want, f"{reduction}: {got} want {want}"


class Zeta(torch.nn.Module):  # type: ignore[misc,name-defined]
    def __init__(self) -> None:
        super().__init__()
        self.inner = torch.nn.Linear(4, 4)

    def forward(self, x: Any) -> Any:
        return torch.special.zeta(self.inner(x).abs() + 1.5, 2.0)


@pytest.mark.clause("TRC-EMU-002")
def test_an_op_without_a_reference_names_itself_and_its_module() -> None:
    """Inputs: a module calling the Hurwitz zeta function (no reference in ampref) under
    emulate(model) with fallback='error'. Expected: UnsupportedOpError naming
    special_zeta, the module path and the fallback. Pass: raised."""
    model = torch.nn.Sequential(Zeta())
    with pytest.raises(at.UnsupportedOpError,
                       match=r"special_zeta.*module Sequential\.0.*fallback"):
        with at.emulate(model):
            model(torch.randn(3, 4))


@pytest.mark.clause("TRC-EMU-002")
def test_fallback_torch_computes_it_and_the_report_lists_it_as_not_emulated() -> None:
    """Inputs: zeta(|x * 2| + 1.5, 2) (no reference in ampref) under
    emulate(fallback='torch'). Expected: torch's value; the report lists special_zeta
    once as not emulated and mul as emulated. Pass: all."""
    x = torch.randn(3, 4)
    with at.emulate(fallback="torch") as em:
        got = torch.special.zeta((x * 2.0).abs() + 1.5, 2.0)
    assert torch.equal(got, torch.special.zeta((x * 2.0).abs() + 1.5, 2.0))
    missing = em.report.not_emulated()
    assert [r.op for r in missing] == ["special_zeta"] and missing[0].calls == 1
    assert any(r.op == "mul" and r.emulated for r in em.report.rows())


@pytest.mark.clause("TRC-EMU-003")
def test_bad_arguments_are_refused_with_the_choices() -> None:
    """Inputs: accumulation 'fast', fallback 'numpy', shadow('model'), autocast with a
    string dtype. Expected: ValueError/TypeError naming the value and the choices. Pass:
    each."""
    with pytest.raises(ValueError, match="accumulation model"):
        at.emulate(accumulation="fast")
    with pytest.raises(ValueError, match="fallback must be 'error' or 'torch'"):
        at.emulate(fallback="numpy")
    with pytest.raises(TypeError, match="model must be a torch.nn.Module"):
        at.shadow("model")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="dtype must be a torch floating dtype"):
        with at.autocast("cuda", "float16"):  # type: ignore[arg-type]
            pass


class Hazard(torch.nn.Module):  # type: ignore[misc,name-defined]
    """A small model whose fp16 square overflows (the planted hazard)."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)

    def forward(self, x: Any) -> Any:
        h = self.lin(x)
        return (h.half() * 300.0).pow(2).float().mean()


@pytest.mark.clause("TRC-SHD-001", "TRC-SHD-002")
def test_shadow_puts_the_planted_fp16_overflow_first(tmp_path: Path) -> None:
    """Inputs: a model with a planted fp16 overflow in pow, shadowed through a backward
    pass. Expected: the first report row is pow in Hazard with non-finite-from-finite
    outputs; a mismatch row shows index and hex values; JSON, table and plot carry it.
    Pass: all."""
    torch.manual_seed(0)
    model = Hazard()
    with at.shadow(model) as sh:
        model(torch.randn(16, 8) * 3).backward()
    first = sh.report.rows()[0]
    assert first.op == "pow" and first.module == "Hazard" and first.nonfinite_from_finite > 0
    assert any(r.mismatches for r in sh.report.rows())  # torch's float32 GEMMs vs exact
    r = next(r for r in sh.report.rows() if r.mismatches)
    assert {"index", "torch", "ampref"} <= set(r.first) and "0x" in r.first["torch"]
    sh.report.to_json(tmp_path / "shadow.json")
    rows = json.loads((tmp_path / "shadow.json").read_text())["ops"]
    assert rows[0]["op"] == "pow"
    assert "| Hazard | pow |" in sh.report.table()
    pytest.importorskip("matplotlib")
    sh.report.plot(tmp_path / "shadow.png")
    assert (tmp_path / "shadow.png").stat().st_size > 1000


def _recorder() -> Any:
    return script("record_autocast_table")


@pytest.mark.clause("TRC-AUT-001")
def test_autocast_on_cpu_gives_torchs_recorded_cpu_autocast_dtypes() -> None:
    """Inputs: every row recorded from torch.autocast('cpu') run through
    ampref.torch.autocast. Expected: the recorded output dtype (any error equals any
    error). Pass: no row differs."""
    rec = _recorder()
    rows = json.loads((DATA / "autocast_torch.json").read_text())["rows"]
    cases = rec.cases()
    bad = []
    for row in rows:
        n, fn = cases[row["op"]]
        args = [rec.t((4, 4), d, pos=row["op"] == "log") for d in row["inputs"]]
        with at.autocast("cpu", DTYPES[row["dtype"]]):
            try:
                got = str(fn(*args).dtype).replace("torch.", "")
            except (RuntimeError, TypeError) as e:
                got = f"error: {e}"
        if got != row["output"] and not (got.startswith("error") and
                                         row["output"].startswith("error")):
            bad.append((row["op"], row["dtype"], row["inputs"], row["output"], got))
    assert not bad, f"{len(bad)} of {len(rows)} differ, first {bad[:5]}"


@pytest.mark.clause("TRC-AUT-002")
def test_cuda_lists_apply_to_cpu_tensors() -> None:
    """Inputs: linear, softmax and exp on CPU tensors under autocast('cuda', float16).
    Expected: float16, float32, float32 (the CUDA lists). Pass: equal."""
    x, w = torch.randn(4, 8), torch.randn(3, 8)
    with at.autocast("cuda", torch.float16):
        lin = torch.nn.functional.linear(x, w)
        sm = torch.softmax(x.half(), -1)
        ex = torch.exp(x.half())
    assert (lin.dtype, sm.dtype, ex.dtype) == (torch.float16, torch.float32, torch.float32)


@pytest.mark.clause("TRC-AUT-002")
def test_autocast_casts_a_weight_once_per_region() -> None:
    """Inputs: one Linear called twice in an emulated fp16 autocast region. Expected: four
    _to_copy calls (weight and bias cached once, the input once per call). Pass: equal."""
    lin = torch.nn.Linear(8, 8)
    x = torch.randn(2, 8)
    with at.emulate() as em, at.autocast("cuda", torch.float16):
        lin(x)
        lin(x)
    casts = sum(r.calls for r in em.report.rows() if r.op == "_to_copy")
    assert casts == 2 + 2  # weight and bias once (cached), the input once per call


@pytest.mark.clause("TRC-NRM-002")
def test_backward_ops_return_the_engines_gradients() -> None:
    """Inputs: layer_norm with weight and bias backward under emulate, and the engine's on
    the same values and output gradient. Expected: identical input, weight and bias
    gradients. Pass: bitwise equal."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal((4, 6)).astype(np.float32)
    w, b = rng.standard_normal(6).astype(np.float32), rng.standard_normal(6).astype(np.float32)
    g = rng.standard_normal((4, 6)).astype(np.float32)
    tx, tw, tb = (torch.from_numpy(v).requires_grad_() for v in (x, w, b))
    with at.emulate():
        torch.nn.functional.layer_norm(tx, (6,), tw, tb).backward(torch.from_numpy(g))
    ex, ew, eb = (ampref.tensor(v, requires_grad=True) for v in (x, w, b))
    F.layer_norm(ex, (6,), ew, eb).backward(g)
    for t, e in ((tx, ex), (tw, ew), (tb, eb)):
        assert_bitwise_equal(t.grad.numpy(), np.asarray(e.grad))


@pytest.mark.clause("TRC-NRM-002")
def test_a_backward_whose_forward_ran_outside_is_refused() -> None:
    """Inputs: a layer_norm forward outside emulate, its backward inside. Expected:
    UnsupportedOpError saying eps is unknown. Pass: raised."""
    x = torch.randn(3, 6, requires_grad=True)
    y = torch.nn.functional.layer_norm(x, (6,))
    with pytest.raises(at.UnsupportedOpError, match="eps is unknown"):
        with at.emulate():
            y.sum().backward()


@pytest.mark.clause("TRC-PWO-002")
def test_unscaling_flags_an_inf_and_scales_by_the_float32_inverse() -> None:
    """Inputs: gradients [2, 4] and [inf, 1], inverse scale 1/3, through the aten unscale
    op under emulate. Expected: found_inf 1; the first gradient times fl32(1/3) in float32.
    Pass: both."""
    grads = [torch.tensor([2.0, 4.0]), torch.tensor([float("inf"), 1.0])]
    found, inv = torch.zeros(()), torch.tensor(1.0 / 3.0)
    with at.emulate():
        torch._amp_foreach_non_finite_check_and_unscale_(grads, found, inv)
    assert found.item() == 1.0
    want = np.array([2.0, 4.0], np.float32) * np.float32(1.0 / 3.0)
    assert_bitwise_equal(grads[0].numpy(), want)


@pytest.mark.clause("TRC-NRM-001")
def test_batch_norm_running_statistics_follow_torchs_update_rule() -> None:
    """Inputs: a (6, 4, 5, 5) float32 batch through BatchNorm2d(4, momentum=0.3) in
    training mode, twice, under emulate and in plain torch, from running stats (mean 0.5,
    var 2). Expected: running mean m mean + (1 - m) running and running var with the
    unbiased variance, as torch's (float32; torch accumulates in float64, so within 4
    ulps of float32 of torch's values). Pass: both buffers within the bound after each
    batch."""
    rng = np.random.default_rng(11)
    x = torch.from_numpy((rng.standard_normal((6, 4, 5, 5)) * 3 + 1).astype(np.float32))
    ours, theirs = (torch.nn.BatchNorm2d(4, momentum=0.3) for _ in range(2))
    for bn in (ours, theirs):
        bn.running_mean.fill_(0.5)
        bn.running_var.fill_(2.0)
    for _ in range(2):
        with at.emulate(fallback="error"):
            ours(x)
        theirs(x)
        for name in ("running_mean", "running_var"):
            a = getattr(ours, name).numpy().astype(np.float64)
            b = getattr(theirs, name).numpy().astype(np.float64)
            assert np.all(np.abs(a - b) <= 4 * 2.0**-23 * np.abs(b)), (name, a, b)


@pytest.mark.clause("TRC-NN-001", "TRC-NN-003")
def test_reductions_norms_and_losses_take_torchs_defaults() -> None:
    """Inputs: x.sum(1) (keepdim by default False), torch.linalg.vector_norm(x) (ord by
    default 2), F.mse_loss(x, y) (reduction by default 'mean'), under emulate and in plain
    torch on (3, 4) float32 data. Expected: torch's shapes, and values within 2 float32
    ulps (ampref's sums are exactly rounded, torch's CPU ones may differ in the last
    bit). Pass: shapes equal, values within the bound."""
    rng = np.random.default_rng(12)
    x = torch.from_numpy(rng.standard_normal((3, 4)).astype(np.float32))
    y = torch.from_numpy(rng.standard_normal((3, 4)).astype(np.float32))
    calls = {"sum": lambda: x.sum(1), "norm": lambda: torch.linalg.vector_norm(x),
             "mse": lambda: torch.nn.functional.mse_loss(x, y)}
    for name, call in calls.items():
        want = call()
        with at.emulate(fallback="error"):
            got = call()
        assert tuple(got.shape) == tuple(want.shape), name
        a, b = got.numpy().astype(np.float64), want.numpy().astype(np.float64)
        assert np.all(np.abs(a - b) <= 2 * 2.0**-23 * np.abs(b)), (name, a, b)


@pytest.mark.clause("TRC-NN-001")
@pytest.mark.parametrize("accumulation", ["exact", "sequential"])
@pytest.mark.parametrize("stride, padding, bias", [(1, 0, True), (2, 1, True), (1, 2, False)])
def test_conv1d_is_the_engines_conv2d_on_a_height_one_image(
        stride: int, padding: int, bias: bool, accumulation: str) -> None:
    """Inputs: x (2, 3, 9), weight (4, 3, 3), bias (4) or none, stride and padding as
    given, ``accumulation``; forward and the gradients of sum(y * u) (u random) under
    emulate(fallback='error'). Expected: the engine's conv2d of x as (2, 3, 1, 9) with
    weight (4, 3, 1, 3), stride (1, s), padding (0, p), and its gradients, reshaped back.
    Pass: equal words."""
    rng = np.random.default_rng(stride * 10 + padding)
    x = rng.standard_normal((2, 3, 9)).astype(np.float32)
    w = rng.standard_normal((4, 3, 3)).astype(np.float32)
    b = rng.standard_normal(4).astype(np.float32)
    tx, tw = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
    tb = torch.tensor(b, requires_grad=True) if bias else None
    with at.emulate(fallback="error", accumulation=accumulation):
        y = torch.nn.functional.conv1d(tx, tw, tb, stride=stride, padding=padding)
        u = torch.tensor(rng.standard_normal(tuple(y.shape)).astype(np.float32))
        (y * u).sum().backward()
    ex = ampref.tensor(x.reshape(2, 3, 1, 9), requires_grad=True)
    ew = ampref.tensor(w.reshape(4, 3, 1, 3), requires_grad=True)
    eb = ampref.tensor(b, requires_grad=True) if bias else None
    ey = F.conv2d(ex, ew, eb, (1, stride), (0, padding), accumulation=accumulation)
    F.sum(F.mul(ey, ampref.tensor(u.numpy().reshape(ey.shape)))).backward()
    assert_bitwise_equal(y.detach().numpy(), ey.numpy().reshape(y.shape), msg="forward: ")
    for got, want in ((tx.grad, ex.grad), (tw.grad, ew.grad)) + (
            ((tb.grad, eb.grad),) if tb is not None and eb is not None else ()):
        assert got is not None and want is not None
        assert_bitwise_equal(got.numpy(), np.asarray(want).reshape(got.shape), msg="grad: ")


@pytest.mark.clause("TRC-NN-001")
@pytest.mark.parametrize("groups, cin, cout", [(2, 4, 6), (4, 4, 4), (4, 4, 8)],
                         ids=["2 groups", "depthwise", "depthwise x2"])
def test_a_grouped_convolution_is_one_engine_conv2d_per_group(groups: int, cin: int,
                                                              cout: int) -> None:
    """Inputs: x (2, cin, 6, 6), weight (cout, cin / groups, 3, 3), bias, padding 1,
    ``groups``; forward and the gradients of sum(y * u) under emulate(fallback='error').
    Expected: the engine's conv2d of each group's input channels with its output
    channels' weights and bias, concatenated over channels, and its gradients. Pass:
    equal words."""
    rng = np.random.default_rng(groups + cout)
    x = rng.standard_normal((2, cin, 6, 6)).astype(np.float32)
    w = rng.standard_normal((cout, cin // groups, 3, 3)).astype(np.float32)
    b = rng.standard_normal(cout).astype(np.float32)
    tx, tw, tb = (torch.tensor(a, requires_grad=True) for a in (x, w, b))
    with at.emulate(fallback="error"):
        y = torch.nn.functional.conv2d(tx, tw, tb, padding=1, groups=groups)
        u = torch.tensor(rng.standard_normal(tuple(y.shape)).astype(np.float32))
        (y * u).sum().backward()
    ci, co = cin // groups, cout // groups
    parts = []
    for g in range(groups):
        ex = ampref.tensor(x[:, g * ci:(g + 1) * ci], requires_grad=True)
        ew = ampref.tensor(w[g * co:(g + 1) * co], requires_grad=True)
        eb = ampref.tensor(b[g * co:(g + 1) * co], requires_grad=True)
        ey = F.conv2d(ex, ew, eb, 1, 1)
        F.sum(F.mul(ey, ampref.tensor(u.numpy()[:, g * co:(g + 1) * co]))).backward()
        parts.append((ey.numpy(), ex.grad, ew.grad, eb.grad))
    assert_bitwise_equal(y.detach().numpy(), np.concatenate([p[0] for p in parts], 1))
    assert tx.grad is not None and tw.grad is not None and tb.grad is not None
    assert_bitwise_equal(tx.grad.numpy(), np.concatenate([np.asarray(p[1]) for p in parts], 1))
    assert_bitwise_equal(tw.grad.numpy(), np.concatenate([np.asarray(p[2]) for p in parts], 0))
    assert_bitwise_equal(tb.grad.numpy(), np.concatenate([np.asarray(p[3]) for p in parts], 0))


def _attention_inputs(seed: int) -> tuple[list[np.ndarray], np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    qkv = [rng.standard_normal((2, 2, 5, 4)).astype(np.float32) for _ in range(3)]
    keep = rng.uniform(size=(2, 1, 5, 5)) > 0.3
    keep[..., 0] = True  # no row fully masked
    bias = rng.standard_normal((2, 1, 5, 5)).astype(np.float32)
    return qkv, keep, bias


@pytest.mark.clause("TRC-NN-002")
@pytest.mark.parametrize("mask", ["boolean", "additive"])
def test_masked_attention_is_the_engines_attention_with_torchs_additive_mask(
        mask: str) -> None:
    """Inputs: q, k, v (2, 2, 5, 4) random, a boolean keep-mask (torch turns it into a
    0 / -inf additive mask before its CPU kernel) or a random float bias; forward and
    the gradients of sum(y * u) under emulate(fallback='error'). Expected: the engine's
    scaled_dot_product_attention with the boolean mask (masked_fill) resp. the bias
    (s + bias) and its gradients; within 2^-12 of torch's own. Pass: equal words, and
    the bound."""
    qkv, keep, bias = _attention_inputs(1)
    tmask = torch.tensor(keep) if mask == "boolean" else torch.tensor(bias)
    u = np.random.default_rng(2).standard_normal(qkv[0].shape).astype(np.float32)
    runs = []
    for emulated in (True, False):
        ts = [torch.tensor(a, requires_grad=True) for a in qkv]
        with at.emulate(fallback="error") if emulated else contextlib.nullcontext():
            y = torch.nn.functional.scaled_dot_product_attention(*ts, attn_mask=tmask)
            (y * torch.tensor(u)).sum().backward()
        runs.append([y.detach().numpy()] + [t.grad.numpy() for t in ts if t.grad is not None])
    es = [ampref.tensor(a, requires_grad=True) for a in qkv]
    ey = F.scaled_dot_product_attention(es[0], es[1], es[2],
                                        keep if mask == "boolean" else ampref.tensor(bias))
    F.sum(F.mul(ey, ampref.tensor(u))).backward()
    want = [ey.numpy()] + [np.asarray(e.grad) for e in es]
    assert len(runs[0]) == 4
    for got, w, torchs in zip(runs[0], want, runs[1], strict=True):
        assert_bitwise_equal(got, w)
        assert float(np.abs(got - torchs).max()) <= 2.0**-12


@pytest.mark.clause("TRC-NN-002")
def test_a_zero_or_minus_inf_additive_mask_equals_the_boolean_mask_in_the_engine() -> None:
    """Inputs: the engine's attention with a boolean keep-mask, and with the additive
    mask torch derives from it (0 where kept, -inf elsewhere), same q, k, v. Expected:
    the same output and gradients (adding 0 or -inf is exact). Pass: equal words."""
    qkv, keep, _ = _attention_inputs(3)
    outs = []
    for m in (keep, ampref.tensor(np.where(keep, 0.0, -np.inf).astype(np.float32))):
        es = [ampref.tensor(a, requires_grad=True) for a in qkv]
        y = F.scaled_dot_product_attention(es[0], es[1], es[2], m)
        F.sum(y).backward()
        outs.append([y.numpy()] + [np.asarray(e.grad) for e in es])
    for a, b in zip(outs[0], outs[1], strict=True):
        assert_bitwise_equal(a, b)


@pytest.mark.clause("TRC-NN-002", "TRC-EMU-002")
@pytest.mark.parametrize("which", ["MultiheadAttention", "TransformerEncoderLayer"])
def test_attention_modules_with_a_key_padding_mask_run_emulated(which: str) -> None:
    """Inputs: nn.MultiheadAttention(8, 2) or nn.TransformerEncoderLayer(8, 2, 16,
    dropout 0) (batch first), a batch of 2 sequences of 6 with the last 2 positions of
    the first padded (key_padding_mask), forward and backward under emulate(model,
    fallback='error'). Expected: no UnsupportedOpError, every op emulated, parameter
    gradients within 2^-10 of torch's. Pass: all."""
    torch.manual_seed(3)
    if which == "MultiheadAttention":
        model: Any = torch.nn.MultiheadAttention(8, 2, batch_first=True)
    else:
        model = torch.nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True)
    model.train()
    x = torch.randn(2, 6, 8)
    pad = torch.zeros(2, 6, dtype=torch.bool)
    pad[0, 4:] = True

    def run() -> Any:
        if which == "MultiheadAttention":
            return model(x, x, x, key_padding_mask=pad, need_weights=False)[0]
        return model(x, src_key_padding_mask=pad)
    run().square().sum().backward()
    want = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    with at.emulate(model, fallback="error") as em:
        run().square().sum().backward()
    assert all(r.emulated for r in em.report.rows())
    for p, w in zip(model.parameters(), want, strict=True):
        assert p.grad is not None and float((p.grad - w).abs().max()) <= 2.0**-10


@pytest.mark.clause("TRC-NN-001")
@pytest.mark.parametrize("dim, keepdim", [(None, False), (1, False), (-1, True), ((0, 1), False)])
def test_torch_norm_with_p_2_is_the_emulated_vector_norm(dim: Any, keepdim: bool) -> None:
    """Inputs: x (3, 5) random with an inf-free wide exponent range, aten.norm (the op
    PairwiseDistance and TripletMarginLoss issue; torch.norm itself now calls
    linalg_vector_norm) with p = 2 over ``dim``, and torch.linalg.vector_norm(x, 2, dim,
    keepdim), under emulate(fallback='error'). Expected: the same words (both are
    fl32(sqrt(fl32(exact sum of squares)))), within 2^-20 relative of torch's. Pass:
    both."""
    rng = np.random.default_rng(8)
    x = torch.tensor((rng.standard_normal((3, 5)) * np.exp2(rng.integers(-6, 7, (3, 5))))
                     .astype(np.float32))
    aten = torch.ops.aten

    def norm() -> Any:
        if dim is None:
            return aten.norm.Scalar(x, 2)
        return aten.norm.ScalarOpt_dim(x, 2, [dim] if isinstance(dim, int) else list(dim),
                                       keepdim)
    with at.emulate(fallback="error"):
        got = norm()
        want = torch.linalg.vector_norm(x, 2, dim, keepdim)
    assert got.numpy().view(np.uint32).tolist() == want.numpy().view(np.uint32).tolist(), \
        f"{got.numpy().view(np.uint32)} want {want.numpy().view(np.uint32)} (hex words)"
    ref = norm()
    assert float(((got - ref).abs() / ref.abs()).max()) <= 2.0**-20



@pytest.mark.clause("TRC-EMU-001")
def test_torchs_random_draws_run_in_torch_under_emulate() -> None:
    """Inputs: torch.manual_seed(3), then rand_like, randn_like, randint_like and
    torch.normal on a (4, 5) float32 tensor, inside emulate(fallback='error') and
    outside. Expected: the same draws (they involve no rounding ampref defines; torch's
    generator makes them). Pass: torch.equal for each."""
    base = torch.zeros(4, 5)
    draws = [lambda: torch.rand_like(base), lambda: torch.randn_like(base),
             lambda: torch.randint_like(base, 10), lambda: torch.normal(base, 1.0)]
    for draw in draws:
        torch.manual_seed(3)
        want = draw()
        torch.manual_seed(3)
        with at.emulate(fallback="error"):
            got = draw()
        assert torch.equal(got, want)
