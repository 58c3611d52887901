"""Spatial-transformer ops under emulate (``ampref.torch.gridops``, TRC-NN-012):
``grid_sample``'s bilinear weights word for word against torch on one-hot images (where
torch's arithmetic is exact), its values and input gradient as exact sums of those
weights, its grid gradient against exact rationals on a lattice where every position
step is exact, nearest sampling against torch, and ``affine_grid`` as exact dots."""

from __future__ import annotations

import itertools
from fractions import Fraction as Q
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from value_oracles import r32  # noqa: E402

from ampref.testing import assert_bitwise_equal  # noqa: E402
from ampref.torch import emulate  # noqa: E402

TF = torch.nn.functional
MODES = list(itertools.product(("zeros", "border", "reflection"), (False, True)))


def _grid(seed: int, n: int = 1) -> Any:
    g = torch.rand(1, 6, 7, 2, generator=torch.Generator().manual_seed(seed)) * 3.0 - 1.5
    return g.expand(n, 6, 7, 2).contiguous()


def _torch_weights(pad: str, align: bool, grid: Any, h: int = 4, w: int = 5) -> np.ndarray:
    """(P, H W) weights read off torch on one-hot images."""
    eye = torch.eye(h * w).reshape(h * w, 1, h, w)
    out = TF.grid_sample(eye, grid.expand(h * w, *grid.shape[1:]), mode="bilinear",
                         padding_mode=pad, align_corners=align)
    return out.reshape(h * w, -1).numpy().T


@pytest.mark.clause("TRC-NN-012")
@pytest.mark.parametrize("pad,align", MODES)
def test_grid_sample_weights_are_torchs_word_for_word(pad: str, align: bool) -> None:
    """Inputs: the 20 one-hot 4 x 5 images sampled bilinearly at 42 points in
    [-1.5, 1.5]^2 (outside the image too). Expected: emulated outputs equal torch's
    (each one a weight, or 0). Pass: bitwise."""
    eye = torch.eye(20).reshape(20, 1, 4, 5)
    grid = _grid(3, 20)
    with emulate(fallback="error"):
        got = TF.grid_sample(eye, grid, mode="bilinear", padding_mode=pad, align_corners=align)
    assert_bitwise_equal(got.numpy(), TF.grid_sample(eye, grid, mode="bilinear", padding_mode=pad,
                                                     align_corners=align).numpy())


@pytest.mark.clause("TRC-NN-012")
@pytest.mark.parametrize("pad,align", MODES)
def test_grid_sample_values_and_input_gradient_are_exact_sums_of_those_weights(
        pad: str, align: bool) -> None:
    """Inputs: x (1, 2, 4, 5) of wide exponents, the grid above, an upstream gradient.
    Expected: out[c, p] = fl32(exact sum_i W[p, i] x[c, i]) with W torch's one-hot
    weights; the input gradient fl32(exact sum_p fl32(W[p, i] g[c, p])). Pass: bitwise."""
    rng = np.random.default_rng(len(pad) + align)
    x = (rng.standard_normal((1, 2, 4, 5)) * np.exp2(rng.integers(-6, 7, (1, 2, 4, 5)))
         ).astype(np.float32)
    g = rng.standard_normal((1, 2, 6, 7)).astype(np.float32)
    grid = _grid(3)
    wts = _torch_weights(pad, align, grid)
    tx = torch.tensor(x, requires_grad=True)
    with emulate(fallback="error"):
        y = TF.grid_sample(tx, grid, mode="bilinear", padding_mode=pad, align_corners=align)
        y.backward(torch.tensor(g))
    xs, gs = x.reshape(2, 20), g.reshape(2, 42)
    want = np.array([[float(r32(sum((Q(float(wts[p, i])) * Q(float(xs[c, i]))
                                     for i in range(20)), Q(0)))) for p in range(42)]
                     for c in range(2)], np.float32)
    back = np.array([[float(r32(sum((Q(float(np.float32(wts[p, i] * gs[c, p])))
                                     for p in range(42)), Q(0)))) for i in range(20)]
                     for c in range(2)], np.float32)
    assert_bitwise_equal(y.detach().numpy().reshape(2, 42), want, msg="forward")
    assert tx.grad is not None
    assert_bitwise_equal(tx.grad.numpy().reshape(2, 20), back, msg="input gradient")


@pytest.mark.clause("TRC-NN-012", "ACC-EXA-003")
def test_grid_gradient_is_the_exact_channel_sum_times_the_scale() -> None:
    """Inputs: x (1, 3, 5, 5) of wide exponents, align_corners, zeros padding, grid
    points on multiples of 1/64 in (-1.2, 1.2) (so x = 2 (g + 1) and every distance is
    exact), an upstream gradient. Expected: d/dgx = fl32(fl32(exact sum_c g_c ((ne - nw)
    s + (se - sw) n)) 2), d/dgy = fl32(fl32(exact sum_c g_c ((sw - nw) e + (se - ne) w))
    2), corners outside reading 0, from exact rationals. Pass: bitwise."""
    rng = np.random.default_rng(12)
    x = (rng.standard_normal((1, 3, 5, 5)) * np.exp2(rng.integers(-6, 7, (1, 3, 5, 5)))
         ).astype(np.float32)
    gpts = (rng.integers(-77, 78, (1, 4, 6, 2)) / 64).astype(np.float32)
    up = rng.standard_normal((1, 3, 4, 6)).astype(np.float32)
    tg = torch.tensor(gpts, requires_grad=True)
    with emulate(fallback="error"):
        y = TF.grid_sample(torch.tensor(x), tg, mode="bilinear", padding_mode="zeros",
                           align_corners=True)
        y.backward(torch.tensor(up))

    def at(c: int, iy: int, ix: int) -> Q:
        return Q(float(x[0, c, iy, ix])) if 0 <= iy < 5 and 0 <= ix < 5 else Q(0)
    want = np.zeros((1, 4, 6, 2), np.float32)
    for i, j in np.ndindex(4, 6):
        px, py = ((Q(float(gpts[0, i, j, k])) + 1) * 2 for k in (0, 1))
        fx, fy = int(np.floor(float(px))), int(np.floor(float(py)))
        w, n = px - fx, py - fy
        e, s = 1 - w, 1 - n
        sx = sy = Q(0)
        for c in range(3):
            g = Q(float(up[0, c, i, j]))
            nw, ne = at(c, fy, fx), at(c, fy, fx + 1)
            sw, se = at(c, fy + 1, fx), at(c, fy + 1, fx + 1)
            sx += g * ((ne - nw) * s + (se - sw) * n)
            sy += g * ((sw - nw) * e + (se - ne) * w)
        want[0, i, j] = [float(np.float32(float(r32(sx))) * np.float32(2)),
                         float(np.float32(float(r32(sy))) * np.float32(2))]
    assert tg.grad is not None
    assert_bitwise_equal(tg.grad.numpy(), want)


@pytest.mark.clause("TRC-NN-012")
@pytest.mark.parametrize("pad,align", MODES)
def test_nearest_grid_sample_and_its_gradient_equal_torchs(pad: str, align: bool) -> None:
    """Inputs: x (2, 3, 4, 5), the grid above, upstream gradient of small integers.
    Expected: torch's values (selections) and gradients (sums of integers, exact in any
    order; the grid's gradient 0). Pass: bitwise."""
    x0 = torch.randn(2, 3, 4, 5, generator=torch.Generator().manual_seed(8))
    grid = _grid(5, 2)
    runs = []
    for emulated in (True, False):
        x, gr = x0.clone().requires_grad_(), grid.clone().requires_grad_()
        up = (torch.arange(2 * 3 * 42).reshape(2, 3, 6, 7) % 7).float()
        if emulated:
            with emulate(fallback="error"):
                TF.grid_sample(x, gr, mode="nearest", padding_mode=pad,
                               align_corners=align).backward(up)
        else:
            TF.grid_sample(x, gr, mode="nearest", padding_mode=pad,
                           align_corners=align).backward(up)
        assert x.grad is not None and gr.grad is not None
        runs.append((x.grad.numpy(), gr.grad.numpy()))
    assert_bitwise_equal(runs[0][0], runs[1][0], msg="input gradient")
    assert_bitwise_equal(runs[0][1], runs[1][1], msg="grid gradient")


@pytest.mark.clause("TRC-NN-012")
@pytest.mark.parametrize("align", [False, True])
@pytest.mark.parametrize("spatial", [(4, 5), (3, 4, 5), (1, 2, 3)])
@pytest.mark.filterwarnings("ignore:Since version 1.3.0, affine_grid:UserWarning")
def test_affine_grid_is_the_exact_dot_of_torchs_base_grid_with_theta(
        align: bool, spatial: tuple[int, ...]) -> None:
    """Inputs: theta (2, d, d + 1) of wide exponents for a d-dimensional size (2-d
    (H, W) = (4, 5); 3-d (D, H, W) = (3, 4, 5), and (1, 2, 3) with its one-point axis),
    an upstream gradient. Expected: base x = torch.linspace(-1, 1, W) (times (W - 1)/W
    in two float32 steps without align_corners; 0 for a single point), y over H, z over
    D likewise, and 1, x varying fastest; each grid point fl32(exact dot with theta's
    row); theta's gradient fl32(exact sum over points of g * base). Pass: bitwise."""
    d = len(spatial)
    rng = np.random.default_rng(40 + align + 2 * sum(spatial))
    th = (rng.standard_normal((2, d, d + 1)) * np.exp2(rng.integers(-4, 5, (2, d, d + 1)))
          ).astype(np.float32)
    points = int(np.prod(spatial))
    up = rng.standard_normal((2, *spatial, d)).astype(np.float32)
    tt = torch.tensor(th, requires_grad=True)
    with emulate(fallback="error"):
        grid = TF.affine_grid(tt, [2, 1, *spatial], align_corners=align)
        grid.backward(torch.tensor(up))

    def axis(n: int) -> list[Q]:
        if n == 1:
            return [Q(0)]
        r = torch.linspace(-1, 1, n).numpy()
        r = r if align else (r * np.float32(n - 1)) / np.float32(n)
        return [Q(float(v)) for v in r]
    per_axis = [axis(n) for n in spatial]  # outermost (z or y) first
    base = [tuple(per_axis[a][idx[a]] for a in reversed(range(d))) + (Q(1),)
            for idx in itertools.product(*[range(n) for n in spatial])]
    want = np.array([[[float(r32(sum((b * Q(float(th[n, k, m])) for m, b in enumerate(pt)),
                                     Q(0))))
                       for k in range(d)] for pt in base] for n in range(2)], np.float32)
    assert_bitwise_equal(grid.detach().numpy().reshape(2, points, d), want, msg="grid")
    ups = up.reshape(2, points, d)
    gth = np.array([[[float(r32(sum((Q(float(ups[n, p, k])) * base[p][m]
                                     for p in range(points)), Q(0))))
                      for m in range(d + 1)] for k in range(d)] for n in range(2)], np.float32)
    assert tt.grad is not None
    assert_bitwise_equal(tt.grad.numpy(), gth, msg="theta gradient")


@pytest.mark.clause("TRC-NN-012")
@pytest.mark.parametrize("pad,align", MODES)
def test_grid_gradient_is_within_float32_rounding_of_torchs_in_every_padding(
        pad: str, align: bool) -> None:
    """Inputs: x (2, 3, 4, 5), a grid reaching outside the image (reflection and border
    clip and flip it), an upstream gradient. Expected: the grid's gradient within
    2^-16 of the largest |gradient| of torch's (torch sums the same terms in float32 in
    its order; a wrong multiplier or reflection sign is off by the gradient itself).
    Pass: the bound everywhere and the zero pattern of clipped points equal."""
    x = torch.randn(2, 3, 4, 5, generator=torch.Generator().manual_seed(21))
    grid = torch.rand(2, 6, 7, 2, generator=torch.Generator().manual_seed(22)) * 4.0 - 2.0
    up = torch.randn(2, 3, 6, 7, generator=torch.Generator().manual_seed(23))
    runs = []
    for emulated in (True, False):
        gr = grid.clone().requires_grad_()
        if emulated:
            with emulate(fallback="error"):
                TF.grid_sample(x, gr, padding_mode=pad, align_corners=align).backward(up)
        else:
            TF.grid_sample(x, gr, padding_mode=pad, align_corners=align).backward(up)
        assert gr.grad is not None
        runs.append(gr.grad.numpy())
    ours, theirs = runs
    scale = float(np.abs(theirs).max())
    assert float(np.abs(ours - theirs).max()) <= scale * 2.0**-16
    assert np.array_equal(ours == 0, theirs == 0)
