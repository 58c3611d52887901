"""Linear and bilinear interpolation under emulate (``ampref.torch.interpops``,
TRC-NN-009). Weights: torch's own, read off torch's CPU kernel on one-hot inputs (where
its arithmetic is exact). Values: an exact rational oracle of the separable passes
(width first, each dot product exact and rounded once) with those weights; against
torch's CPU results, whose float32 steps come in another order, a bound of a few ulps."""

from __future__ import annotations

from fractions import Fraction as Q
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from value_oracles import r32  # noqa: E402

from ampref.testing import assert_bitwise_equal  # noqa: E402
from ampref.torch import emulate  # noqa: E402

TF = torch.nn.functional

#: (input size, output size or None, scale_factor or None)
AXES = [(5, None, 2.0), (4, 7, None), (6, None, 1.5), (8, 3, None), (7, 5, None),
        (3, 10, None)]


def _torch_weights(n: int, size: Any, scale: Any, align: bool) -> np.ndarray:
    """torch's (n_out, n_in) weights: linear interpolation of the identity's rows."""
    eye = torch.eye(n)[None]
    kw = {"size": size} if size else {"scale_factor": scale}
    return TF.interpolate(eye, mode="linear", align_corners=align, **kw)[0].numpy().T


def _sep_pass(v: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Along the last axis: out[..., o] = fl32(exact sum_i w[o, i] v[..., i])."""
    out = np.zeros(v.shape[:-1] + (w.shape[0],), np.float32)
    for idx in np.ndindex(v.shape[:-1]):
        for o in range(w.shape[0]):
            out[idx + (o,)] = float(r32(sum((Q(float(w[o, i])) * Q(float(v[idx + (i,)]))
                                             for i in range(w.shape[1])), Q(0))))
    return out


@pytest.mark.clause("TRC-NN-009")
@pytest.mark.parametrize("align", [False, True], ids=["half-pixel", "align_corners"])
@pytest.mark.parametrize("axis", AXES, ids=[f"{a}" for a in AXES])
def test_interpolation_weights_are_torchs_word_for_word(axis: Any, align: bool) -> None:
    """Inputs: one-hot rows (the identity, n x n) interpolated linearly to ``axis``'s
    size or scale, and one-hot images bilinearly in both axes. Expected: the emulated
    outputs equal torch's (one-hot: every product and sum exact, so torch's output is
    its weights, resp. products of two weights). Pass: bitwise."""
    n, size, scale = axis
    kw = {"size": size} if size else {"scale_factor": scale}
    eye = torch.eye(n)[None]
    with emulate(fallback="error"):
        got = TF.interpolate(eye, mode="linear", align_corners=align, **kw)
    assert_bitwise_equal(got.numpy(), TF.interpolate(eye, mode="linear", align_corners=align,
                                                     **kw).numpy(), msg="1-d")
    img = torch.zeros(n * n, 1, n, n)
    img.view(n * n, n * n)[torch.arange(n * n), torch.arange(n * n)] = 1.0
    kw2 = {"size": (size, size)} if size else {"scale_factor": scale}
    with emulate(fallback="error"):
        got2 = TF.interpolate(img, mode="bilinear", align_corners=align, **kw2)
    assert_bitwise_equal(got2.numpy(), TF.interpolate(img, mode="bilinear",
                                                      align_corners=align, **kw2).numpy(),
                         msg="2-d")


@pytest.mark.clause("TRC-NN-009")
@pytest.mark.parametrize("align", [False, True], ids=["half-pixel", "align_corners"])
@pytest.mark.parametrize("hw", [(AXES[0], AXES[1]), (AXES[2], AXES[3]), (AXES[4], AXES[5])],
                         ids=["5x4", "6x8", "7x3"])
def test_bilinear_forward_and_backward_are_exact_separable_passes(hw: Any,
                                                                  align: bool) -> None:
    """Inputs: x (1, 2, H, W) of wide-exponent float32 interpolated bilinearly with the
    two axes' sizes or scales; a wide-exponent upstream gradient. Expected: forward
    fl32 passes of torch's weights, width then height; backward the transposed passes,
    height then width, each dot exact and rounded once. Pass: bitwise, both."""
    (h, hs, hsc), (w, ws, wsc) = hw
    wh, ww = _torch_weights(h, hs, hsc, align), _torch_weights(w, ws, wsc, align)
    rng = np.random.default_rng(h * 10 + w)
    x = (rng.standard_normal((1, 2, h, w)) * np.exp2(rng.integers(-6, 7, (1, 2, h, w)))
         ).astype(np.float32)
    tx = torch.tensor(x, requires_grad=True)
    with emulate(fallback="error"):
        y = TF.interpolate(tx, size=(wh.shape[0], ww.shape[0]), mode="bilinear",
                           align_corners=align)
        g = (rng.standard_normal(tuple(y.shape)) * np.exp2(
            rng.integers(-6, 7, tuple(y.shape)))).astype(np.float32)
        y.backward(torch.tensor(g))
    want = np.swapaxes(_sep_pass(np.swapaxes(_sep_pass(x, ww), -1, -2), wh), -1, -2)
    assert_bitwise_equal(y.detach().numpy(), want, msg="forward")
    back = np.swapaxes(_sep_pass(np.swapaxes(g, -1, -2), wh.T), -1, -2)
    back = _sep_pass(back, ww.T)
    assert tx.grad is not None
    assert_bitwise_equal(tx.grad.numpy(), back, msg="backward")


@pytest.mark.clause("TRC-NN-009")
@pytest.mark.parametrize("align", [False, True], ids=["half-pixel", "align_corners"])
def test_interpolation_is_within_a_few_ulps_of_torchs_cpu_kernel(align: bool) -> None:
    """Inputs: random (2, 3, 6, 7) images upsampled to (13, 10) and (2, 3, 9) rows to 20,
    random upstream gradients. Expected: forward within 3 ulp(max |x|) of torch's CPU
    result (its float32 steps in another order: at most 3 roundings of values below
    max |x|, ours 2); backward within K ulp(K max |g|), K = the most outputs reading one
    input. Pass: both bounds."""
    torch.manual_seed(5)
    for shape, size, mode in (((2, 3, 6, 7), (13, 10), "bilinear"), ((2, 3, 9), 20, "linear")):
        x = torch.randn(shape, requires_grad=True)
        x2 = x.detach().clone().requires_grad_(True)
        with emulate(fallback="error"):
            y = TF.interpolate(x, size=size, mode=mode, align_corners=align)
        g = torch.randn(y.shape)
        with emulate(fallback="error"):
            y.backward(g)
        y2 = TF.interpolate(x2, size=size, mode=mode, align_corners=align)
        y2.backward(g)
        ulp = float(np.spacing(np.float32(x.detach().abs().max())))
        assert float((y - y2).detach().abs().max()) <= 3 * ulp, mode
        k = 4 if mode == "linear" else 9
        gulp = float(np.spacing(np.float32(k * g.abs().max())))
        assert x.grad is not None and x2.grad is not None
        assert float((x.grad - x2.grad).abs().max()) <= k * gulp, mode


@pytest.mark.clause("TRC-NN-009", "TRC-EMU-001")
def test_a_bilinear_decoder_trains_under_cuda_autocast_without_fallback() -> None:
    """Inputs: conv -> bilinear 2x upsampling (nn.Upsample) -> conv, fp16 CUDA autocast
    emulated, MSE loss, one backward. Expected: no op left to torch, a finite loss within
    5 % of torch's float32 loss, gradients for all parameters. Pass: all."""
    torch.manual_seed(0)
    nn = torch.nn
    model = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1),
                          nn.Upsample(scale_factor=2, mode="bilinear"),
                          nn.Conv2d(4, 2, 3, padding=1))
    x, t = torch.randn(2, 3, 5, 5), torch.randn(2, 2, 10, 10)
    want = float(TF.mse_loss(model(x), t).detach())
    from ampref.torch import autocast

    with emulate(model, fallback="error") as em:
        with autocast("cuda", dtype=torch.float16):
            loss = TF.mse_loss(model(x).float(), t)
        loss.backward()
    assert em.report.not_emulated() == []
    got = float(loss.detach())
    assert np.isfinite(got) and abs(got - want) <= 0.05 * abs(want), (got, want)
    assert all(p.grad is not None for p in model.parameters())


def _cubic_taps_oracle(n_in: int, n_out: int, align: bool,
                       scale: Any) -> list[list[tuple[int, Q]]]:
    """Per output the four (clamped index, weight) taps, from the clause in exact
    rationals: Keys' A = -3/4, torch's float32 steps (fused multiply-adds rounded once)."""
    def fma(a: Q, b: Q, c: Q) -> Q:
        return r32(a * b + c)

    def inner(x: Q) -> Q:
        return r32(r32(r32(fma(Q(5, 4), x, Q(-9, 4)) * x) * x) + 1)

    def outer(x: Q) -> Q:
        return r32(r32(fma(fma(Q(-3, 4), x, Q(15, 4)), x, Q(-6)) * x) + 3)
    if align:
        s = r32(Q(n_in - 1, n_out - 1)) if n_out > 1 else Q(0)
    else:
        s = r32(Q(1.0 / scale)) if scale else r32(Q(n_in, n_out))
    taps = []
    for o in range(n_out):
        pos = r32(s * o) if align else r32((s * (2 * o + 1) - 1) / 2)
        i0 = min(int(np.floor(float(pos))), n_in - 1)
        t = min(max(r32(pos - i0), Q(0)), Q(1))  # a float32 subtraction (pos may be < 0)
        ws = [outer(r32(t + 1)), inner(t), inner(r32(1 - t)), outer(r32(r32(1 - t) + 1))]
        taps.append([(min(max(i0 - 1 + k, 0), n_in - 1), ws[k]) for k in range(4)])
    return taps


def _tap_pass(v: np.ndarray, taps: list[list[tuple[int, Q]]]) -> np.ndarray:
    """Along the last axis: out[..., o] = fl32(exact sum over o's taps of w v[..., i])."""
    out = np.zeros(v.shape[:-1] + (len(taps),), np.float32)
    for idx in np.ndindex(v.shape[:-1]):
        for o, row in enumerate(taps):
            out[idx + (o,)] = float(r32(sum((w * Q(float(v[idx + (i,)])) for i, w in row),
                                            Q(0))))
    return out


def _tap_pass_t(g: np.ndarray, taps: list[list[tuple[int, Q]]], n_in: int) -> np.ndarray:
    """The transposed pass: input i gets fl32(exact sum of g[o] w over taps naming i)."""
    out = np.zeros(g.shape[:-1] + (n_in,), np.float32)
    for idx in np.ndindex(g.shape[:-1]):
        acc = [Q(0)] * n_in
        for o, row in enumerate(taps):
            for i, w in row:
                acc[i] += w * Q(float(g[idx + (o,)]))
        out[idx] = [float(r32(a)) for a in acc]
    return out


#: AXES and sizes whose weights tell fused from unfused multiply-adds apart
CUBIC_AXES = AXES + [(5, 9, None), (4, 13, None), (6, 11, None), (9, 4, None), (7, 3, None)]


@pytest.mark.clause("TRC-NN-009")
@pytest.mark.parametrize("align", [False, True], ids=["half-pixel", "align_corners"])
@pytest.mark.parametrize("axis", CUBIC_AXES, ids=[f"{a}" for a in CUBIC_AXES])
def test_bicubic_weights_are_the_clauses_taps_and_torchs_word_for_word(axis: Any,
                                                                      align: bool) -> None:
    """Inputs: one-hot images (height 1, the identity's rows along the width)
    interpolated bicubically to ``axis``'s width or scale. Expected: torch's outputs
    equal the oracle's taps (a clamped border's two weights added in float32, as torch
    adds x w2 + x w3 for x = 1), and the emulated outputs equal torch's. Pass: bitwise."""
    n, size, scale = axis
    kw = {"size": (1, size)} if size else {"scale_factor": (1.0, scale)}
    eye = torch.eye(n)[:, None, None, :]
    theirs = TF.interpolate(eye, mode="bicubic", align_corners=align, **kw)
    with emulate(fallback="error"):
        ours = TF.interpolate(eye, mode="bicubic", align_corners=align, **kw)
    assert_bitwise_equal(ours.numpy(), theirs.numpy(), msg="emulated vs torch")
    taps = _cubic_taps_oracle(n, theirs.shape[-1], align, scale)
    want = np.zeros((n, theirs.shape[-1]), np.float32)
    for o, row in enumerate(taps):
        for i, w in row:
            want[i, o] = np.float32(want[i, o] + np.float32(float(w)))
    assert_bitwise_equal(theirs[:, 0, 0].numpy(), want, msg="clause vs torch")


@pytest.mark.clause("TRC-NN-009")
@pytest.mark.parametrize("align", [False, True], ids=["half-pixel", "align_corners"])
def test_bicubic_forward_and_backward_are_exact_four_tap_passes(align: bool) -> None:
    """Inputs: x (1, 2, 5, 4) of wide-exponent float32 resized bicubically to (8, 7), a
    wide-exponent upstream gradient. Expected: forward the oracle's tap passes, width
    then height, each four-term dot exact and rounded once; backward the transposed
    passes, height then width. Pass: bitwise, both."""
    rng = np.random.default_rng(31 + align)
    x = (rng.standard_normal((1, 2, 5, 4)) * np.exp2(rng.integers(-6, 7, (1, 2, 5, 4)))
         ).astype(np.float32)
    g = (rng.standard_normal((1, 2, 8, 7)) * np.exp2(rng.integers(-6, 7, (1, 2, 8, 7)))
         ).astype(np.float32)
    tx = torch.tensor(x, requires_grad=True)
    with emulate(fallback="error"):
        y = TF.interpolate(tx, size=(8, 7), mode="bicubic", align_corners=align)
        y.backward(torch.tensor(g))
    th, tw = _cubic_taps_oracle(5, 8, align, None), _cubic_taps_oracle(4, 7, align, None)
    want = np.swapaxes(_tap_pass(np.swapaxes(_tap_pass(x, tw), -1, -2), th), -1, -2)
    assert_bitwise_equal(y.detach().numpy(), want, msg="forward")
    back = np.swapaxes(_tap_pass_t(np.swapaxes(g, -1, -2), th, 5), -1, -2)
    assert tx.grad is not None
    assert_bitwise_equal(tx.grad.numpy(), _tap_pass_t(back, tw, 4), msg="backward")


@pytest.mark.clause("TRC-NN-009")
def test_trilinear_forward_and_backward_are_three_exact_separable_passes() -> None:
    """Inputs: x (1, 2, 3, 4, 5) of wide-exponent float32 resized trilinearly to
    (5, 7, 3) (half-pixel), an upstream gradient. Expected: forward fl32 passes of
    torch's 1-d linear weights, width, height, then depth; backward the transposed passes
    in reverse order. Pass: bitwise, both."""
    rng = np.random.default_rng(77)
    x = (rng.standard_normal((1, 2, 3, 4, 5)) * np.exp2(rng.integers(-6, 7, (1, 2, 3, 4, 5)))
         ).astype(np.float32)
    g = rng.standard_normal((1, 2, 5, 7, 3)).astype(np.float32)
    tx = torch.tensor(x, requires_grad=True)
    with emulate(fallback="error"):
        y = TF.interpolate(tx, size=(5, 7, 3), mode="trilinear")
        y.backward(torch.tensor(g))
    wd, wh, ww = (_torch_weights(3, 5, None, False), _torch_weights(4, 7, None, False),
                  _torch_weights(5, 3, None, False))
    v = _sep_pass(x, ww)
    v = np.swapaxes(_sep_pass(np.swapaxes(v, -1, -2), wh), -1, -2)
    v = np.swapaxes(_sep_pass(np.swapaxes(v, -1, -3), wd), -1, -3)
    assert_bitwise_equal(y.detach().numpy(), v, msg="forward")
    b = np.swapaxes(_sep_pass(np.swapaxes(g, -1, -3), wd.T), -1, -3)
    b = np.swapaxes(_sep_pass(np.swapaxes(b, -1, -2), wh.T), -1, -2)
    b = _sep_pass(b, ww.T)
    assert tx.grad is not None
    assert_bitwise_equal(tx.grad.numpy(), b, msg="backward")
