"""The bridge's average pooling and nearest upsampling (``ampref.torch.poolops``,
TRC-NN-007) against exact rational oracles (window sums exact, rounded to float32, then
the float32 division; backward contributions summed exactly, rounded once), against
torch where one rounding is all there is, and torch's modules end to end under emulate
without fallback."""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction as Q
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from value_oracles import r32  # noqa: E402

from ampref.testing import assert_bitwise_equal  # noqa: E402
from ampref.torch import emulate  # noqa: E402

TF = torch.nn.functional

#: (kernel, stride, padding, ceil_mode, count_include_pad, divisor_override) on 7 x 7
POOLS = {"2x2 stride 2": (2, 2, 0, False, True, None),
         "3x3 stride 2 pad 1": (3, 2, 1, False, True, None),
         "3x3 stride 2 pad 1 without pad": (3, 2, 1, False, False, None),
         "3x3 stride 2 ceil": (3, 2, 1, True, False, None),
         "3x3 stride 1 divisor 5": (3, 1, 0, False, True, 5)}


def _divisors(n: int, n_out: int, k: int, s: int, p: int,
              include: bool) -> list[tuple[int, int, int]]:
    """(start, end, divisor factor) per output along one axis, as torch computes them."""
    out = []
    for o in range(n_out):
        a = o * s - p
        e = min(a + k, n + p)
        size = e - a
        a2, e2 = max(a, 0), min(e, n)
        out.append((a2, e2, size if include else e2 - a2))
    return out


def _oracle_pool(x: np.ndarray, cfg: tuple[Any, ...], n_out: int) -> np.ndarray:
    k, s, p, _, include, override = cfg
    axis = _divisors(x.shape[-1], n_out, k, s, p, include)
    out = np.zeros(x.shape[:-2] + (n_out, n_out), np.float64)
    for idx in np.ndindex(x.shape[:-2]):
        for i, (a, e, dh) in enumerate(axis):
            for j, (b, f, dw) in enumerate(axis):
                total = sum((Q(float(v)) for v in x[idx][a:e, b:f].ravel()), Q(0))
                div = Q(override) if override else Q(dh * dw)
                out[idx + (i, j)] = float(r32(r32(total) / div))
    return out


@pytest.mark.clause("TRC-NN-007")
@pytest.mark.parametrize("name", sorted(POOLS))
def test_avg_pool2d_is_the_exact_window_sum_rounded_then_divided(name: str) -> None:
    """Inputs: x (2, 3, 7, 7) random float32 with wide exponents, the pooling of ``name``,
    under emulate(fallback='error'). Expected: per output fl32(fl32(exact window sum) /
    divisor), torch's divisor (override, window size with or without the padding, clipped
    windows in ceil_mode). Pass: every element equal."""
    rng = np.random.default_rng(len(name))
    x = (rng.standard_normal((2, 3, 7, 7)) * np.exp2(rng.integers(-8, 9, (2, 3, 7, 7)))
         ).astype(np.float32)
    k, s, p, ceil, include, override = POOLS[name]
    with emulate(fallback="error"):
        got = TF.avg_pool2d(torch.tensor(x), k, s, p, ceil, include, override).numpy()
    want = _oracle_pool(x, POOLS[name], got.shape[-1])
    assert_bitwise_equal(got, want.astype(np.float32), msg=f"{name}: ")


@pytest.mark.clause("TRC-NN-007")
@pytest.mark.parametrize("name", sorted(POOLS))
def test_avg_pool2d_backward_sums_each_inputs_contributions_once_rounded(name: str) -> None:
    """Inputs: as above, backward with a random upstream gradient. Expected: per input
    element fl32(exact sum over the windows that read it of fl32(g / divisor)). Pass:
    every element equal; where windows do not overlap (2x2 stride 2) also torch's own
    gradient word for word."""
    rng = np.random.default_rng(len(name) + 1)
    x = rng.standard_normal((1, 2, 7, 7)).astype(np.float32)
    k, s, p, ceil, include, override = POOLS[name]
    tx = torch.tensor(x, requires_grad=True)
    with emulate(fallback="error"):
        y = TF.avg_pool2d(tx, k, s, p, ceil, include, override)
        g = torch.tensor(rng.standard_normal(tuple(y.shape)).astype(np.float32))
        y.backward(g)
    assert tx.grad is not None
    n_out = y.shape[-1]
    axis = _divisors(7, n_out, k, s, p, include)
    acc = [[[Q(0)] * 7 for _ in range(7)] for _ in range(2)]
    for c in range(2):
        for i, (a, e, dh) in enumerate(axis):
            for j, (b, f, dw) in enumerate(axis):
                div = np.float32(override if override else dh * dw)
                d = Q(float(np.float32(g[0, c, i, j].item()) / div))
                for r in range(a, e):
                    for q in range(b, f):
                        acc[c][r][q] += d
    want = np.array([[[float(r32(v)) for v in row] for row in ch] for ch in acc])
    assert_bitwise_equal(tx.grad.numpy()[0], want.astype(np.float32), msg=f"{name}: ")
    if name == "2x2 stride 2":
        tx2 = torch.tensor(x, requires_grad=True)
        TF.avg_pool2d(tx2, k, s).backward(g)
        assert tx2.grad is not None
        assert_bitwise_equal(tx.grad.numpy(), tx2.grad.numpy(), msg="torch: ")


@pytest.mark.clause("TRC-NN-007")
@pytest.mark.parametrize("scale", [2.0, 1.5, 3.0])
def test_nearest_upsampling_backward_adds_each_sources_gradients_once_rounded(
        scale: float) -> None:
    """Inputs: x (1, 2, 4, 5), nearest upsampling by ``scale``, a random upstream
    gradient, under emulate(fallback='error'). Expected: forward torch's (values moved
    unchanged); backward per input element fl32(exact sum of the gradients of the outputs
    whose source (floor(o / scale), torch's float32 index) it is). Pass: equal."""
    rng = np.random.default_rng(int(scale * 10))
    x = rng.standard_normal((1, 2, 4, 5)).astype(np.float32)
    tx = torch.tensor(x, requires_grad=True)
    with emulate(fallback="error"):
        y = TF.interpolate(tx, scale_factor=scale, mode="nearest")
        g = torch.tensor((rng.standard_normal(tuple(y.shape)) * np.exp2(
            rng.integers(-20, 21, tuple(y.shape)))).astype(np.float32))
        y.backward(g)
    assert torch.equal(y, TF.interpolate(torch.tensor(x), scale_factor=scale, mode="nearest"))
    Ho, Wo = y.shape[-2:]
    s = np.float32(1.0 / scale)
    rows = [min(int(np.floor(np.float32(o) * s)), 3) for o in range(Ho)]
    cols = [min(int(np.floor(np.float32(o) * s)), 4) for o in range(Wo)]
    acc = np.empty((2, 4, 5), object)
    for idx in np.ndindex(acc.shape):
        acc[idx] = Q(0)
    for c in range(2):
        for i in range(Ho):
            for j in range(Wo):
                acc[c, rows[i], cols[j]] += Q(float(g[0, c, i, j].item()))
    want = np.vectorize(lambda v: float(r32(v)))(acc).astype(np.float64)
    assert tx.grad is not None
    assert_bitwise_equal(tx.grad.numpy()[0], want.astype(np.float32), msg=f"scale {scale}: ")


def _adaptive(n: int, m: int) -> list[range]:
    """torch's adaptive windows along one axis: floor(o n / m) .. ceil((o + 1) n / m)."""
    return [range(int(np.floor(o * n / m)), int(np.ceil((o + 1) * n / m))) for o in range(m)]


ADAPTIVE = [((7, 7), (3, 3)), ((7, 5), (3, 2)), ((14, 14), (7, 7)), ((5, 9), (2, 4))]


@pytest.mark.clause("TRC-NN-007")
@pytest.mark.parametrize("hw,out", ADAPTIVE, ids=[f"{a}->{b}" for a, b in ADAPTIVE])
def test_adaptive_avg_pool2d_is_the_exact_window_sum_divided_by_height_then_width(
        hw: tuple[int, int], out: tuple[int, int]) -> None:
    """Inputs: x (2, 3, H, W) of wide-exponent float32 pooled adaptively to ``out``;
    then x of multiples of 1/8 (window sums exact in float32). Expected: per output
    fl32(fl32(fl32(exact window sum) / kh) / kw) with torch's windows (floor / ceil
    bounds); on the dyadic x also torch's own values. Pass: bitwise, both."""
    rng = np.random.default_rng(hw[0] * 10 + out[0])
    x = (rng.standard_normal((2, 3) + hw) * np.exp2(rng.integers(-8, 9, (2, 3) + hw))
         ).astype(np.float32)
    with emulate(fallback="error"):
        got = TF.adaptive_avg_pool2d(torch.tensor(x), out).numpy()
    want = np.zeros((2, 3) + out, np.float32)
    for idx in np.ndindex(2, 3):
        for i, rs in enumerate(_adaptive(hw[0], out[0])):
            for j, cs in enumerate(_adaptive(hw[1], out[1])):
                total = sum((Q(float(x[idx][r, c])) for r in rs for c in cs), Q(0))
                want[idx + (i, j)] = float(r32(r32(r32(total) / len(rs)) / len(cs)))
    assert_bitwise_equal(got, want, msg=f"{hw}->{out}")
    dy = torch.tensor(rng.integers(-64, 64, (2, 3) + hw).astype(np.float32) / 8)
    with emulate(fallback="error"):
        got_dy = TF.adaptive_avg_pool2d(dy, out)
    assert_bitwise_equal(got_dy.numpy(), TF.adaptive_avg_pool2d(dy, out).numpy(), msg="torch")


@pytest.mark.clause("TRC-NN-007")
@pytest.mark.parametrize("hw,out", ADAPTIVE, ids=[f"{a}->{b}" for a, b in ADAPTIVE])
def test_adaptive_avg_pool2d_backward_sums_the_divided_gradients_exactly(
        hw: tuple[int, int], out: tuple[int, int]) -> None:
    """Inputs: x (1, 2, H, W), adaptive average pooling to ``out``, upstream values of
    wide exponents. Expected: per input fl32(exact sum over the windows holding it of
    fl32(fl32(g / kh) / kw)). Pass: bitwise."""
    rng = np.random.default_rng(hw[1] * 10 + out[1])
    tx = torch.zeros((1, 2) + hw, requires_grad=True)
    g = torch.tensor((rng.standard_normal((1, 2) + out) * np.exp2(
        rng.integers(-20, 21, (1, 2) + out))).astype(np.float32))
    with emulate(fallback="error"):
        TF.adaptive_avg_pool2d(tx, out).backward(g)
    acc: dict[tuple[int, ...], Q] = {}
    for c in range(2):
        for i, rs in enumerate(_adaptive(hw[0], out[0])):
            for j, cs in enumerate(_adaptive(hw[1], out[1])):
                d = Q(float(np.float32(np.float32(g[0, c, i, j].item()) / np.float32(len(rs)))
                            / np.float32(len(cs))))
                for r in rs:
                    for q in cs:
                        acc[(c, r, q)] = acc.get((c, r, q), Q(0)) + d
    want = np.zeros((2,) + hw, np.float32)
    for k, v in acc.items():
        want[k] = float(r32(v))
    assert tx.grad is not None
    assert_bitwise_equal(tx.grad.numpy()[0], want, msg=f"{hw}->{out}")


MODULES: dict[str, tuple[Callable[[], Any], tuple[int, ...]]] = {
    "AdaptiveAvgPool2d((3, 2))": (lambda: torch.nn.AdaptiveAvgPool2d((3, 2)), (2, 4, 7, 5)),
    "AdaptiveAvgPool1d(4)": (lambda: torch.nn.AdaptiveAvgPool1d(4), (2, 4, 10)),
    "LocalResponseNorm(2)": (lambda: torch.nn.LocalResponseNorm(2), (2, 4, 5, 5)),
    "AvgPool2d": (lambda: torch.nn.AvgPool2d(2), (2, 4, 6, 6)),
    "AvgPool2d(3, 2, 1)": (lambda: torch.nn.AvgPool2d(3, 2, 1), (2, 4, 7, 7)),
    "AvgPool1d": (lambda: torch.nn.AvgPool1d(3, 2), (2, 4, 9)),
    "Upsample": (lambda: torch.nn.Upsample(scale_factor=2), (2, 4, 3, 3)),
    "PixelShuffle": (lambda: torch.nn.PixelShuffle(2), (2, 4, 3, 3)),
    "ZeroPad2d": (lambda: torch.nn.ZeroPad2d((1, 2, 0, 1)), (2, 4, 3, 3)),
    "Conv1d": (lambda: torch.nn.Conv1d(4, 4, 3, padding=1), (2, 4, 9)),
}


@pytest.mark.clause("TRC-NN-007", "TRC-EMU-002")
@pytest.mark.parametrize("name", sorted(MODULES))
def test_pooling_upsampling_and_padding_modules_run_emulated_without_fallback(
        name: str) -> None:
    """Inputs: a 1x1 Conv2d (Conv1d's own weights for Conv1d, a Linear over the last axis
    otherwise for 1-d inputs) followed by the module, a random batch, forward and
    backward under emulate(model, fallback='error'). Expected: no UnsupportedOpError,
    every op emulated, the first layer's weight gradient within 2^-10 of torch's. Pass:
    all."""
    make, shape = MODULES[name]
    torch.manual_seed(2)
    first = torch.nn.Conv2d(4, 4, 1) if len(shape) == 4 else torch.nn.Linear(shape[-1],
                                                                             shape[-1])
    model = torch.nn.Sequential(first, make())
    x = torch.randn(*shape)
    model(x).square().sum().backward()
    want = first.weight.grad.clone()
    model.zero_grad()
    with emulate(model, fallback="error") as em:
        model(x).square().sum().backward()
    assert all(r.emulated for r in em.report.rows())
    assert first.weight.grad is not None
    assert float((first.weight.grad - want).abs().max()) <= 2.0**-10, name


POOLS3: dict[str, dict[str, Any]] = {
    "2": dict(kernel_size=2), "3/2/1": dict(kernel_size=3, stride=2, padding=1),
          "3/2/1 without pad": dict(kernel_size=3, stride=2, padding=1,
                                    count_include_pad=False),
          "3/2/1 ceil": dict(kernel_size=3, stride=2, padding=1, ceil_mode=True,
                             count_include_pad=False),
          "(2,3,1) divisor 5": dict(kernel_size=(2, 3, 1), stride=(1, 2, 1),
                                    divisor_override=5)}


def _axis3(n: int, n_out: int, kw: dict[str, Any], a: int) -> list[tuple[range, int]]:
    """Per output along axis a: its input range and divisor factor, from torch's rule."""
    def at(v: Any, d: int) -> int:
        return int(v[a]) if isinstance(v, tuple) else int(v if v is not None else d)
    k = at(kw["kernel_size"], 0)
    s, p = at(kw.get("stride", kw["kernel_size"]), k), at(kw.get("padding", 0), 0)
    include = kw.get("count_include_pad", True)
    out = []
    for o in range(n_out):
        start = o * s - p
        end = min(start + k, n + p)
        r = range(max(start, 0), min(end, n))
        out.append((r, end - start if include else len(r)))
    return out


@pytest.mark.clause("TRC-NN-007")
@pytest.mark.parametrize("name", sorted(POOLS3))
def test_avg_pool3d_is_the_exact_window_sum_divided_once_and_its_gradient_exact_sums(
        name: str) -> None:
    """Inputs: x (1, 2, 5, 6, 7) of wide exponents pooled by ``name``; then x of
    multiples of 1/8 (window sums exact); an upstream gradient of wide exponents.
    Expected: per output fl32(fl32(exact window sum) / divisor) (torch's divisor rules);
    on the dyadic x torch's own output; per input fl32(exact sum over the windows
    holding it of fl32(g / divisor)). Pass: bitwise, all three."""
    kw = POOLS3[name]
    rng = np.random.default_rng(len(name) + 30)
    x = (rng.standard_normal((1, 2, 5, 6, 7)) * np.exp2(rng.integers(-8, 9, (1, 2, 5, 6, 7)))
         ).astype(np.float32)
    tx = torch.tensor(x, requires_grad=True)
    with emulate(fallback="error"):
        y = TF.avg_pool3d(tx, **kw)
        g = (rng.standard_normal(tuple(y.shape)) * np.exp2(
            rng.integers(-8, 9, tuple(y.shape)))).astype(np.float32)
        y.backward(torch.tensor(g))
    axes = [_axis3(x.shape[2 + a], y.shape[2 + a], kw, a) for a in range(3)]
    want = np.zeros(tuple(y.shape), np.float32)
    acc: dict[tuple[int, ...], Q] = {}
    for c, i, j, m in np.ndindex(*y.shape[1:]):
        (ri, fi), (rj, fj), (rm, fm) = axes[0][i], axes[1][j], axes[2][m]
        div = Q(kw["divisor_override"]) if kw.get("divisor_override") else Q(fi * fj * fm)
        total = sum((Q(float(x[0, c, a, b, e])) for a in ri for b in rj for e in rm), Q(0))
        want[0, c, i, j, m] = float(r32(r32(total) / div))
        d = Q(float(np.float32(g[0, c, i, j, m]) / np.float32(div)))
        for a in ri:
            for b in rj:
                for e in rm:
                    acc[(c, a, b, e)] = acc.get((c, a, b, e), Q(0)) + d
    assert_bitwise_equal(y.detach().numpy(), want, msg=f"{name} forward")
    back = np.zeros(x.shape[1:], np.float32)
    for key, v in acc.items():
        back[key] = float(r32(v))
    assert tx.grad is not None
    assert_bitwise_equal(tx.grad.numpy()[0], back, msg=f"{name} backward")
    dy = torch.tensor(rng.integers(-64, 64, (1, 2, 5, 6, 7)).astype(np.float32) / 8)
    with emulate(fallback="error"):
        got = TF.avg_pool3d(dy, **kw)
    assert_bitwise_equal(got.numpy(), TF.avg_pool3d(dy, **kw).numpy(), msg=f"{name} torch")


@pytest.mark.clause("TRC-NN-007")
@pytest.mark.parametrize("size", [(2, 3, 4), (3, 2, 5), (1, 1, 1)])
def test_adaptive_avg_pool3d_divides_the_exact_window_sum_by_each_axis_in_turn(
        size: tuple[int, int, int]) -> None:
    """Inputs: x (1, 2, 5, 7, 6) of wide-exponent float32, adaptive_avg_pool3d to
    ``size``; an upstream gradient. Expected: per output fl32(exact window sum), then
    / kd, / kh, / kw in float32 (torch's order); each input's gradient the exact sum of
    fl32(fl32(fl32(g / kd) / kh) / kw) over the windows holding it, rounded once. A
    (1, 1, 1) output is torch's ``mean`` over the volume instead (torch's composite
    takes that path): fl32(exact sum) / 210 once, and g / 210 for every input. Pass:
    bitwise, both."""
    rng = np.random.default_rng(sum(size))
    x = (rng.standard_normal((1, 2, 5, 7, 6)) * np.exp2(rng.integers(-8, 9, (1, 2, 5, 7, 6)))
         ).astype(np.float32)
    g = rng.standard_normal((1, 2) + size).astype(np.float32)
    tx = torch.tensor(x, requires_grad=True)
    with emulate(fallback="error"):
        y = TF.adaptive_avg_pool3d(tx, size)
        y.backward(torch.tensor(g))
    wins = [_adaptive(n, m) for n, m in zip((5, 7, 6), size, strict=True)]
    want = np.zeros((1, 2) + size, np.float32)
    back: dict[tuple[int, ...], list[Q]] = {}
    for c, od, oh, ow in np.ndindex(2, *size):
        cells = [(d, h, w) for d in wins[0][od] for h in wins[1][oh] for w in wins[2][ow]]
        total = np.float32(float(r32(sum((Q(float(x[0, c, d, h, w])) for d, h, w in cells),
                                         Q(0)))))
        k = [np.float32(len(wins[0][od])), np.float32(len(wins[1][oh])),
             np.float32(len(wins[2][ow]))]
        if size == (1, 1, 1):
            want[0, c, od, oh, ow] = total / np.float32(210)
            share = np.float32(g[0, c, od, oh, ow]) / np.float32(210)
        else:
            want[0, c, od, oh, ow] = total / k[0] / k[1] / k[2]
            share = np.float32(g[0, c, od, oh, ow]) / k[0] / k[1] / k[2]
        for cell in cells:
            back.setdefault((c,) + cell, []).append(Q(float(share)))
    grad = np.zeros_like(x)
    for (c, d, h, w), parts in back.items():
        grad[0, c, d, h, w] = float(r32(sum(parts, Q(0))))
    assert_bitwise_equal(y.detach().numpy(), want, msg="forward")
    assert tx.grad is not None
    assert_bitwise_equal(tx.grad.numpy(), grad, msg="backward")
