"""Transposed convolutions under emulate (``ampref.torch.convops``, TRC-NN-008) against an
exact rational oracle of the stated rule (per output position and kernel offset the
exact dot product over input channels rounded to float32, the offsets' values summed and
rounded once, then the bias), their gradients against the engine's conv2d, and torch's
ConvTranspose modules end to end without fallback."""

from __future__ import annotations

from contextlib import nullcontext
from fractions import Fraction as Q
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from value_oracles import r32  # noqa: E402

import ampref  # noqa: E402
from ampref import functional as F  # noqa: E402
from ampref.testing import assert_bitwise_equal  # noqa: E402
from ampref.torch import emulate  # noqa: E402

#: (kernel, stride, padding, output_padding, bias) on a 4 x 4 input
CASES = {"k3": (3, 1, 0, 0, True), "k4 s2 p1": (4, 2, 1, 0, True),
         "k3 s2 p1 op1 no bias": (3, 2, 1, 1, False)}


def _oracle(x: np.ndarray, w: np.ndarray, b: np.ndarray | None, s: int, p: int,
            out_hw: tuple[int, int], d: int = 1) -> np.ndarray:
    N, Ci, H, W = x.shape
    Co, k = w.shape[1], w.shape[2]
    Ho, Wo = out_hw
    y = np.zeros((N, Co, Ho, Wo))
    for n in range(N):
        for co in range(Co):
            for oh in range(Ho):
                for ow in range(Wo):
                    total = Q(0)
                    for i in range(k):  # kernel offset: the input row h with h s - p + i = oh
                        for j in range(k):
                            h, rh = divmod(oh + p - i * d, s)
                            q, rw = divmod(ow + p - j * d, s)
                            if rh or rw or not (0 <= h < H and 0 <= q < W):
                                continue
                            total += r32(sum((Q(float(x[n, ci, h, q]))
                                              * Q(float(w[ci, co, i, j]))
                                              for ci in range(Ci)), Q(0)))
                    v = r32(total)
                    y[n, co, oh, ow] = float(r32(v + Q(float(b[co]))) if b is not None else v)
    return y


@pytest.mark.clause("TRC-NN-008")
@pytest.mark.parametrize("name", sorted(CASES))
def test_conv_transpose2d_is_the_engines_input_gradient_rule(name: str) -> None:
    """Inputs: x (2, 3, 4, 4), weight (3, 2, k, k), bias (2) or none, the case's stride,
    padding and output padding, under emulate(fallback='error'). Expected: per output
    element fl32(fl32(sum over kernel offsets of fl32(exact dot over input channels)) +
    b). Pass: every element equal."""
    k, s, p, op, bias = CASES[name]
    rng = np.random.default_rng(k * 10 + s)
    x = rng.standard_normal((2, 3, 4, 4)).astype(np.float32)
    w = rng.standard_normal((3, 2, k, k)).astype(np.float32)
    b = rng.standard_normal(2).astype(np.float32) if bias else None
    with emulate(fallback="error"):
        y = torch.nn.functional.conv_transpose2d(
            torch.tensor(x), torch.tensor(w), None if b is None else torch.tensor(b),
            stride=s, padding=p, output_padding=op).numpy()
    want = _oracle(x, w, b, s, p, y.shape[-2:])
    assert_bitwise_equal(y, want.astype(np.float32), msg=f"{name}: ")


@pytest.mark.clause("TRC-NN-008")
@pytest.mark.parametrize("stride,dilation,output_padding", [(2, 3, 2), (1, 3, 2), (2, 4, 3)])
def test_an_output_padding_past_the_stride_is_the_rule_on_the_cropped_convolution(
        stride: int, dilation: int, output_padding: int) -> None:
    """Inputs: x (2, 3, 4, 4), weight (3, 2, 3, 3), bias (2), padding 1, dilation above
    the stride and an output padding of at least the stride (torch allows it below the
    dilation; OpInfo's sample with stride 2, dilation 4, output padding 3 raised a
    reshape error here). Expected: torch's output shape, and every element the rule of
    the rational oracle with dilation: the extra rows and columns hold only the kernel
    offsets that reach them, then the bias. Pass: shape equal to torch's; bitwise."""
    rng = np.random.default_rng(stride * 100 + dilation * 10 + output_padding)
    x = rng.standard_normal((2, 3, 4, 4)).astype(np.float32)
    w = rng.standard_normal((3, 2, 3, 3)).astype(np.float32)
    b = rng.standard_normal(2).astype(np.float32)
    args = dict(stride=stride, padding=1, output_padding=output_padding, dilation=dilation)
    want_shape = torch.nn.functional.conv_transpose2d(
        torch.tensor(x), torch.tensor(w), torch.tensor(b), **args).shape
    with emulate(fallback="error"):
        y = torch.nn.functional.conv_transpose2d(torch.tensor(x), torch.tensor(w),
                                                 torch.tensor(b), **args).numpy()
    assert y.shape == tuple(want_shape)
    want = _oracle(x, w, b, stride, 1, y.shape[-2:], dilation)
    assert_bitwise_equal(y, want.astype(np.float32), msg=f"{args}: ")


def _taps(u: np.ndarray, n: int, h: int, q: int, i: int, j: int, s: int, p: int,
          d: int) -> np.ndarray | None:
    """u's channels at the output position that kernel offset (i, j) of input position
    (h, q) reaches, or None outside u."""
    oh, ow = h * s - p + i * d, q * s - p + j * d
    return u[n, :, oh, ow] if 0 <= oh < u.shape[2] and 0 <= ow < u.shape[3] else None


@pytest.mark.clause("TRC-NN-008")
@pytest.mark.parametrize("stride,dilation,output_padding", [(2, 3, 2), (2, 4, 3)])
def test_the_gradients_past_the_stride_are_the_cropped_convolutions(
        stride: int, dilation: int, output_padding: int) -> None:
    """Inputs: as the test above, backward of sum(y * u) for a seeded u of y's shape.
    Expected: dx[n, ci, h, q] = fl32(exact sum over output channels and kernel offsets
    of u at the reached position times w) (the dilated convolution of u, cropped to x),
    dw[ci, co, i, j] = fl32(exact sum over n, h, q of x times u at the reached position),
    db = fl32(exact sum of u per channel). Pass: bitwise."""
    rng = np.random.default_rng(stride * 7 + dilation)
    x = rng.standard_normal((2, 3, 4, 4)).astype(np.float32)
    w = rng.standard_normal((3, 2, 3, 3)).astype(np.float32)
    tx, tw = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
    tb = torch.zeros(2, requires_grad=True)
    with emulate(fallback="error"):
        y = torch.nn.functional.conv_transpose2d(tx, tw, tb, stride=stride, padding=1,
                                                 output_padding=output_padding,
                                                 dilation=dilation)
        u = rng.standard_normal(tuple(y.shape)).astype(np.float32)
        (y * torch.tensor(u)).sum().backward()
    dx, dw = np.zeros((2, 3, 4, 4), object), np.zeros((3, 2, 3, 3), object)
    dx[...], dw[...] = Q(0), Q(0)
    for n, h, q, i, j in np.ndindex(2, 4, 4, 3, 3):
        t = _taps(u, n, h, q, i, j, stride, 1, dilation)
        if t is None:
            continue
        for ci, co in np.ndindex(3, 2):
            prod = Q(float(t[co])) * Q(float(w[ci, co, i, j]))
            dx[n, ci, h, q] += prod
            dw[ci, co, i, j] += Q(float(x[n, ci, h, q])) * Q(float(t[co]))
    want_dx = np.array([float(r32(v)) for v in dx.ravel()], np.float32).reshape(dx.shape)
    want_dw = np.array([float(r32(v)) for v in dw.ravel()], np.float32).reshape(dw.shape)
    want_db = np.array([float(r32(sum((Q(float(v)) for v in u[:, c].ravel()), Q(0))))
                        for c in range(2)], np.float32)
    assert tx.grad is not None and tw.grad is not None and tb.grad is not None
    assert_bitwise_equal(tx.grad.numpy(), want_dx, msg="dx: ")
    assert_bitwise_equal(tw.grad.numpy(), want_dw, msg="dw: ")
    assert_bitwise_equal(tb.grad.numpy(), want_db, msg="db: ")


@pytest.mark.clause("TRC-NN-008")
@pytest.mark.parametrize("name", sorted(CASES))
def test_conv_transpose2d_gradients_are_the_engines_conv2d_and_its_weight_gradient(
        name: str) -> None:
    """Inputs: as above, backward of sum(y * u). Expected: dx = the engine's conv2d(u, w)
    (stride, padding), dw = the engine's conv2d weight gradient with input u and upstream
    x, db = the engine's exact sum of u over batch and positions. Pass: equal words."""
    k, s, p, op, bias = CASES[name]
    rng = np.random.default_rng(k * 10 + s + 1)
    x = rng.standard_normal((2, 3, 4, 4)).astype(np.float32)
    w = rng.standard_normal((3, 2, k, k)).astype(np.float32)
    tx, tw = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
    tb = torch.tensor(rng.standard_normal(2).astype(np.float32), requires_grad=True) \
        if bias else None
    with emulate(fallback="error"):
        y = torch.nn.functional.conv_transpose2d(tx, tw, tb, stride=s, padding=p,
                                                 output_padding=op)
        u = rng.standard_normal(tuple(y.shape)).astype(np.float32)
        (y * torch.tensor(u)).sum().backward()
    assert tx.grad is not None and tw.grad is not None
    assert_bitwise_equal(tx.grad.numpy(), F.conv2d(ampref.tensor(u), ampref.tensor(w), None,
                                                   s, p).numpy(), msg="dx: ")
    ew = ampref.tensor(w, requires_grad=True)
    F.sum(F.mul(F.conv2d(ampref.tensor(u), ew, None, s, p), ampref.tensor(x))).backward()
    assert_bitwise_equal(tw.grad.numpy(), np.asarray(ew.grad), msg="dw: ")
    if tb is not None:
        assert tb.grad is not None
        assert_bitwise_equal(tb.grad.numpy(), F.sum(ampref.tensor(u), (0, 2, 3)).numpy())


@pytest.mark.clause("TRC-NN-008", "TRC-EMU-002")
@pytest.mark.parametrize("which", ["ConvTranspose2d", "ConvTranspose1d"])
def test_conv_transpose_modules_run_emulated_without_fallback(which: str) -> None:
    """Inputs: ConvTranspose2d(3, 4, 4, stride 2, padding 1) on (2, 3, 5, 5), or
    ConvTranspose1d(3, 2, 4, stride 2) on (2, 3, 7), forward and backward under
    emulate(model, fallback='error'). Expected: no UnsupportedOpError, every op
    emulated, gradients within 2^-10 of torch's. Pass: all."""
    torch.manual_seed(5)
    model: Any = torch.nn.ConvTranspose2d(3, 4, 4, stride=2, padding=1) \
        if which == "ConvTranspose2d" else torch.nn.ConvTranspose1d(3, 2, 4, stride=2)
    x = torch.randn(2, 3, 5, 5) if which == "ConvTranspose2d" else torch.randn(2, 3, 7)
    model(x).square().sum().backward()
    want = [q.grad.clone() for q in model.parameters()]
    model.zero_grad()
    with emulate(model, fallback="error") as em:
        model(x).square().sum().backward()
    assert all(r.emulated for r in em.report.rows())
    for q, g in zip(model.parameters(), want, strict=True):
        assert q.grad is not None and float((q.grad - g).abs().max()) <= 2.0**-10


def _zero_inserted(w: np.ndarray, d: tuple[int, int]) -> np.ndarray:
    """The kernel with d - 1 zeros between taps: a dense kernel with the dilated taps."""
    co, ci, kh, kw = w.shape
    out = np.zeros((co, ci, (kh - 1) * d[0] + 1, (kw - 1) * d[1] + 1), np.float32)
    out[:, :, ::d[0], ::d[1]] = w
    return out


@pytest.mark.clause("TRC-NN-001")
@pytest.mark.parametrize("accumulation", ["exact", "sequential"])
@pytest.mark.parametrize("dilation, stride, padding", [((2, 2), 1, 2), ((2, 3), 2, 1),
                                                       ((3, 1), 1, 0)])
def test_a_dilated_convolution_is_the_dot_product_over_its_real_taps(
        dilation: tuple[int, int], stride: int, padding: int, accumulation: str) -> None:
    """Inputs: x (2, 3, 9, 9), weight (4, 3, 3, 3), bias, the dilation, stride and
    padding given, under emulate(fallback='error', accumulation=...); backward of
    sum(y * u). Expected: the engine's conv2d with the zero-inserted (dense) kernel: the
    same dot products, the inserted zero products adding nothing (random data: no
    partial sum is -0), so the same output, input gradient and, at the real taps, weight
    gradient. Pass: equal words."""
    rng = np.random.default_rng(sum(dilation) + stride)
    x = rng.standard_normal((2, 3, 9, 9)).astype(np.float32)
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    b = rng.standard_normal(4).astype(np.float32)
    tx, tw, tb = (torch.tensor(a, requires_grad=True) for a in (x, w, b))
    with emulate(fallback="error", accumulation=accumulation):
        y = torch.nn.functional.conv2d(tx, tw, tb, stride=stride, padding=padding,
                                       dilation=dilation)
        u = rng.standard_normal(tuple(y.shape)).astype(np.float32)
        (y * torch.tensor(u)).sum().backward()
    ex = ampref.tensor(x, requires_grad=True)
    ew = ampref.tensor(_zero_inserted(w, dilation), requires_grad=True)
    ey = F.conv2d(ex, ew, ampref.tensor(b), stride, padding, accumulation=accumulation)
    F.sum(F.mul(ey, ampref.tensor(u))).backward()
    assert tx.grad is not None and tw.grad is not None
    assert_bitwise_equal(y.detach().numpy(), ey.numpy(), msg="forward: ")
    assert_bitwise_equal(tx.grad.numpy(), np.asarray(ex.grad), msg="dx: ")
    assert_bitwise_equal(tw.grad.numpy(),
                         np.asarray(ew.grad)[:, :, ::dilation[0], ::dilation[1]], msg="dw: ")


@pytest.mark.clause("TRC-NN-001", "TRC-EMU-002")
def test_a_dilated_conv1d_stack_runs_emulated_and_padding_reads_zeros() -> None:
    """Inputs: a WaveNet-style stack of Conv1d(4, 4, 2, dilation d, padding d) for d = 1,
    2, 4, 8 with ReLU, on (2, 4, 16) containing an inf at position 0 of one channel,
    under emulate(model, fallback='error'). Expected: no UnsupportedOpError, every op
    emulated; the output's non-finite pattern is torch's (padding reads +0, never a
    NaN made from the inf); finite outputs within 2^-12 of torch's. Pass: all."""
    torch.manual_seed(6)
    layers: list[Any] = []
    for d in (1, 2, 4, 8):
        layers += [torch.nn.Conv1d(4, 4, 2, dilation=d, padding=d), torch.nn.ReLU()]
    model = torch.nn.Sequential(*layers)
    x = torch.randn(2, 4, 16)
    x[1, 2, 0] = float("inf")
    with torch.no_grad():
        want = model(x)
        with emulate(model, fallback="error") as em:
            got = model(x)
    assert all(r.emulated for r in em.report.rows())
    assert torch.equal(torch.isfinite(got), torch.isfinite(want))
    assert torch.equal(torch.isnan(got), torch.isnan(want))
    fin = torch.isfinite(want)
    assert float((got[fin] - want[fin]).abs().max()) <= 2.0**-12


def _oracle_grouped(x: np.ndarray, w: np.ndarray, s: int, p: int, d: int, groups: int,
                    out_hw: tuple[int, int]) -> np.ndarray:
    """The transposed rule with groups and dilation: per output position and kernel
    offset (the input position h with h s - p + i d = oh) the exact dot over the input
    channels of the output channel's group rounded to float32; the offsets' values
    summed exactly and rounded once (no bias)."""
    N, Ci, H, W = x.shape
    co_g, k = w.shape[1], w.shape[2]
    ci_g = Ci // groups
    y = np.zeros((N, co_g * groups) + out_hw)
    for n, co, oh, ow in np.ndindex(*y.shape):
        g, col = divmod(co, co_g)
        total = Q(0)
        for i in range(k):
            for j in range(k):
                h, rh = divmod(oh + p - i * d, s)
                q, rw = divmod(ow + p - j * d, s)
                if rh or rw or not (0 <= h < H and 0 <= q < W):
                    continue
                total += r32(sum((Q(float(x[n, ci, h, q])) * Q(float(w[ci, col, i, j]))
                                  for ci in range(g * ci_g, (g + 1) * ci_g)), Q(0)))
        y[n, co, oh, ow] = float(r32(total))
    return y


@pytest.mark.clause("TRC-NN-008")
@pytest.mark.parametrize("groups,dilation,stride", [(2, 1, 2), (1, 2, 1), (2, 2, 2)])
def test_grouped_and_dilated_transposed_convolutions_follow_the_same_rule(
        groups: int, dilation: int, stride: int) -> None:
    """Inputs: x (1, 4, 4, 4) of wide exponents, weight (4, 3, 3, 3) (3 outputs per group),
    groups / dilation / stride as given, padding 1, no bias. Expected: the grouped,
    dilated transposed rule above. Pass: bitwise."""
    rng = np.random.default_rng(groups * 10 + dilation)
    x = (rng.standard_normal((1, 4, 4, 4)) * np.exp2(rng.integers(-8, 9, (1, 4, 4, 4)))
         ).astype(np.float32)
    w = (rng.standard_normal((4, 3, 3, 3)) * np.exp2(rng.integers(-8, 9, (4, 3, 3, 3)))
         ).astype(np.float32)
    with emulate(fallback="error"):
        got = torch.nn.functional.conv_transpose2d(torch.tensor(x), torch.tensor(w),
                                                   stride=stride, padding=1, groups=groups,
                                                   dilation=dilation).numpy()
    want = _oracle_grouped(x, w, stride, 1, dilation, groups, got.shape[-2:])
    assert_bitwise_equal(got, want.astype(np.float32), msg=f"g{groups} d{dilation} s{stride}")


@pytest.mark.clause("TRC-NN-001")
@pytest.mark.parametrize("dilation,groups", [(1, 1), (2, 2)])
def test_a_3d_convolution_is_one_exact_dot_product_per_output(dilation: int,
                                                              groups: int) -> None:
    """Inputs: x (1, 4, 5, 4, 6) of wide exponents, weight (2, 4/groups, 3, 3, 3), bias,
    stride (1, 2, 1), padding 1, dilation and groups as given. Expected: per output
    fl32(fl32(exact dot over its group's channels and real taps) + b) (padding reads
    zeros). Pass: bitwise."""
    rng = np.random.default_rng(dilation + groups)
    cg = 4 // groups
    x = (rng.standard_normal((1, 4, 5, 4, 6)) * np.exp2(rng.integers(-8, 9, (1, 4, 5, 4, 6)))
         ).astype(np.float32)
    w = (rng.standard_normal((2, cg, 3, 3, 3)) * np.exp2(rng.integers(-8, 9, (2, cg, 3, 3, 3)))
         ).astype(np.float32)
    b = rng.standard_normal(2).astype(np.float32)
    st = (1, 2, 1)
    with emulate(fallback="error"):
        got = torch.nn.functional.conv3d(torch.tensor(x), torch.tensor(w), torch.tensor(b),
                                         stride=st, padding=1, dilation=dilation,
                                         groups=groups).numpy()
    want = np.zeros(got.shape, np.float32)
    for n, co, a, bb, c in np.ndindex(*got.shape):
        g = co // (2 // groups)
        total = Q(0)
        for ci, i, j, m in np.ndindex(cg, 3, 3, 3):
            pos = (a * st[0] - 1 + i * dilation, bb * st[1] - 1 + j * dilation,
                   c * st[2] - 1 + m * dilation)
            if all(0 <= v < n_ for v, n_ in zip(pos, x.shape[2:], strict=True)):
                total += Q(float(x[(n, g * cg + ci) + pos])) * Q(float(w[co, ci, i, j, m]))
        want[n, co, a, bb, c] = float(r32(r32(total) + Q(float(b[co]))))
    assert_bitwise_equal(got, want, msg=f"d{dilation} g{groups}")


@pytest.mark.clause("TRC-NN-001", "TRC-NN-008", "TRC-EMU-002")
@pytest.mark.parametrize("which", ["Conv3d", "ConvTranspose3d", "ConvTranspose2d groups",
                                   "ConvTranspose1d dilated"])
def test_3d_and_grouped_transposed_modules_train_emulated(which: str) -> None:
    """Inputs: the module on random input, forward and backward under emulate(module,
    fallback='error'). Expected: no UnsupportedOpError; input and weight gradients
    within 2^-10 of torch's (roundings only). Pass: all."""
    torch.manual_seed(3)
    nn = torch.nn
    module, shape = {
        "Conv3d": (nn.Conv3d(2, 3, 3, padding=1), (2, 2, 4, 5, 4)),
        "ConvTranspose3d": (nn.ConvTranspose3d(2, 3, 2, stride=2), (1, 2, 3, 3, 3)),
        "ConvTranspose2d groups": (nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1,
                                                      output_padding=1, groups=2), (2, 4, 5, 5)),
        "ConvTranspose1d dilated": (nn.ConvTranspose1d(3, 4, 3, dilation=3, stride=2),
                                    (2, 3, 7))}[which]
    x = torch.randn(shape, requires_grad=True)
    module(x).square().sum().backward()
    want_x, want_w = x.grad.clone(), module.weight.grad.clone()
    x.grad, module.weight.grad = None, None
    with emulate(module, fallback="error") as em:
        module(x).square().sum().backward()
    assert em.report.not_emulated() == []
    assert x.grad is not None and module.weight.grad is not None
    assert float((x.grad - want_x).abs().max()) <= 2.0**-10
    assert float((module.weight.grad - want_w).abs().max()) <= 2.0**-10 * max(
        1.0, float(want_w.abs().max()))


@pytest.mark.clause("TRC-NN-001")
@pytest.mark.parametrize("nd", [1, 2, 3])
@pytest.mark.parametrize("transposed", [False, True])
def test_one_entry_geometry_lists_stand_for_every_spatial_dim(nd: int, transposed: bool) -> None:
    """Inputs: aten.convolution (and its backward) on an nd-d input with stride [2],
    padding [1], dilation [1], output padding [1] or [0], each a one-entry list as
    ``conv3d(padding="valid")`` passes them, under emulate(fallback="error"). Expected:
    torch's output shape, and output and both gradients bitwise equal to the same call with
    each list repeated over the nd dims (the rule the other tests check against exact
    oracles). Pass: shapes equal, words equal."""
    rng = np.random.default_rng(nd + 3 * transposed)
    x = rng.standard_normal((1, 2) + (5,) * nd).astype(np.float32)
    w = rng.standard_normal((2, 2) + (3,) * nd).astype(np.float32)
    op = [1] if transposed else [0]

    def run(lists: list[list[int]], emulated: bool) -> tuple[Any, Any, Any]:
        tx, tw = (torch.tensor(a, requires_grad=True) for a in (x, w))
        with emulate(fallback="error") if emulated else nullcontext():
            y = torch.ops.aten.convolution(tx, tw, None, *lists, transposed,
                                           op * len(lists[0]), 1)
            y.backward(torch.ones_like(y))
        return y.detach(), tx.grad, tw.grad

    short = [[2], [1], [1]]
    full = [v * nd for v in short]
    native = run(short, False)[0]
    got, want = run(short, True), run(full, True)
    assert tuple(got[0].shape) == tuple(native.shape)
    for name, a, b in zip(("y", "dx", "dw"), got, want, strict=True):
        assert_bitwise_equal(a.numpy(), b.numpy(), msg=f"{name} {nd}-d: ")

