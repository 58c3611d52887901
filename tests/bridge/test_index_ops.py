"""The bridge's accumulating scatters (``ampref.torch.indexops``, TRC-IDX-001) against
exact rational oracles: every destination is the exact sum of its old value and the
values scattered to it, rounded once to float32. The oracles find destinations by
explicit loops over each op's documented indexing (not by torch, which the code under
test asks); values spread over many binades, so a float32 running sum (torch's CPU
loop) differs from the exact one. Where one value meets a fresh zero, torch itself is
the oracle. Modules end to end under emulate without fallback."""

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


def _spread(rng: np.random.Generator, *shape: int) -> Any:
    """float32 values: a third near ±1 (1 .. 2), the rest positive and below the half
    ulp of those (0.5 .. 0.99 x 2^-24): added one by one after a large value each small
    one vanishes, while the exact sum of two or more of them moves the rounded result."""
    small = rng.random(shape) < 2 / 3
    v = np.where(small, (0.5 + 0.49 * rng.random(shape)) * 2.0**-24,
                 rng.choice([-1.0, 1.0], shape) * (1 + rng.random(shape)))
    return torch.tensor(v.astype(np.float32))


def _sum_into(base: Any, contributions: dict[tuple[int, ...], list[float]]) -> Any:
    """base with each listed position replaced by fl32(exact base + its values)."""
    out = base.detach().numpy().astype(np.float64).copy()
    for pos, vals in contributions.items():
        out[pos] = float(r32(Q(float(base[pos])) + sum((Q(v) for v in vals), Q(0))))
    return out.astype(np.float32)


def _emulated(fn: Callable[..., Any], *args: Any) -> Any:
    with emulate(fallback="error"):
        return fn(*args)


@pytest.mark.clause("TRC-IDX-001")
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_scatter_add_is_each_destinations_exact_sum_rounded_once(dim: int) -> None:
    """Inputs: a 4 x 6 self of spread values, an index of 9 x 6 (dim 0) or 4 x 11 (dim 1)
    with many repeats, src of spread values. Expected: self[index[i][j]][j] (dim 0; the
    column for dim 1) = fl32(exact self + all its src values). Pass: bitwise."""
    rng = np.random.default_rng(1 + dim)
    x = _spread(rng, 4, 6)
    ishape = (9, 6) if dim == 0 else (4, 11)
    index = torch.tensor(rng.integers(0, x.shape[dim], ishape))
    src = _spread(rng, *ishape)
    got = _emulated(lambda: x.scatter_add(dim, index, src))
    acc: dict[tuple[int, ...], list[float]] = {}
    for i, j in np.ndindex(*ishape):
        dst = (int(index[i, j]), j) if dim == 0 else (i, int(index[i, j]))
        acc.setdefault(dst, []).append(float(src[i, j]))
    assert_bitwise_equal(got.numpy(), _sum_into(x, acc), msg=f"scatter_add dim {dim}")


@pytest.mark.clause("TRC-IDX-001")
@pytest.mark.parametrize("alpha", [1, 0.75])
def test_index_add_sums_repeated_rows_exactly(alpha: float) -> None:
    """Inputs: a 3 x 5 self, index [0, 2, 0, 0, -1 -> 2] style repeats along dim 0,
    source 5 x 5, alpha 1 or 0.75. Expected: row r = fl32(exact self[r] + sum of
    fl32(alpha source[k]) over k with index[k] = r). Pass: bitwise."""
    rng = np.random.default_rng(5)
    x, source = _spread(rng, 3, 5), _spread(rng, 5, 5)
    index = torch.tensor([0, 2, 0, 0, 2])
    got = _emulated(lambda: x.index_add(0, index, source, alpha=alpha))
    acc: dict[tuple[int, ...], list[float]] = {}
    for k, r in enumerate(index.tolist()):
        for j in range(5):
            v = float(np.float32(alpha) * source[k, j].numpy())
            acc.setdefault((r, j), []).append(v)
    assert_bitwise_equal(got.numpy(), _sum_into(x, acc), msg=f"index_add alpha {alpha}")


@pytest.mark.clause("TRC-IDX-001")
@pytest.mark.parametrize("inplace", [False, True])
def test_put_accumulate_sums_repeated_flat_positions_exactly_and_only_put_writes_self(
        inplace: bool) -> None:
    """Inputs: a 3 x 4 self of spread values, flat index [5, 0, 5, 11, -1 -> 11, 5]
    (repeats), source of 6 spread values; put(accumulate=True) and put_. Expected: flat
    position p = fl32(exact self[p] + the source values put there); put leaves self as
    it was, put_ writes the result into self and returns it. Pass: bitwise."""
    rng = np.random.default_rng(6)
    x, source = _spread(rng, 3, 4), _spread(rng, 6)
    before = x.clone()
    index = torch.tensor([5, 0, 5, 11, -1, 5])
    acc: dict[tuple[int, ...], list[float]] = {}
    for k, p in enumerate(index.tolist()):
        acc.setdefault(divmod(p % 12, 4), []).append(float(source[k]))
    want = _sum_into(before, acc)
    if inplace:
        got = _emulated(lambda: x.put_(index, source, accumulate=True))
        assert got is x
    else:
        got = _emulated(lambda: x.put(index, source, accumulate=True))
        assert_bitwise_equal(x.numpy(), before.numpy(), msg="put changed self")
    assert_bitwise_equal(got.numpy(), want, msg=f"put inplace={inplace}")


@pytest.mark.clause("TRC-IDX-001")
@pytest.mark.parametrize("case", ["rows", "negative rows", "row and column", "mask"])
def test_the_gradient_of_advanced_indexing_sums_repeats_exactly(case: str) -> None:
    """Inputs: x (5 x 4) indexed by repeated rows, negative rows, (row, column) pairs or
    a boolean mask; the upstream gradient of spread values. Expected: x.grad at each
    element = fl32(exact sum of the upstream values of the outputs that read it), +0
    where none does. Pass: bitwise."""
    rng = np.random.default_rng(7)
    negative = [-1, 4, -1, 0, -1, 4, -1, -1]
    rows, cols = [0, 3, 0, 0, 4, 3, 0, 0, 3, 0, 0, 0, 0], [1, 1, 1, 2, 0, 1, 1, 1, 1, 1, 1, 1, 1]
    mask = torch.tensor(rng.random((5, 4)) > 0.5)  # each element once: a copy
    pick: dict[str, Callable[[Any], Any]] = {
        "rows": lambda t: t[torch.tensor(rows)],
        "negative rows": lambda t: t[torch.tensor(negative)],
        "row and column": lambda t: t[torch.tensor(rows), torch.tensor(cols)],
        "mask": lambda t: t[mask]}
    x = torch.zeros(5, 4, requires_grad=True)
    with emulate(fallback="error"):
        y = pick[case](x)
        g = _spread(rng, *y.shape)
        y.backward(g)
    # where each output element reads from, by explicit enumeration
    positions = {"rows": [(r, j) for r in rows for j in range(4)],
                 "negative rows": [(r % 5, j) for r in negative for j in range(4)],
                 "row and column": list(zip(rows, cols, strict=True)),
                 "mask": [tuple(p) for p in np.argwhere(mask.numpy())]}[case]
    acc: dict[tuple[int, ...], list[float]] = {}
    for p, v in zip(positions, g.reshape(-1).tolist(), strict=True):
        acc.setdefault(tuple(int(c) for c in p), []).append(v)
    assert x.grad is not None
    assert_bitwise_equal(x.grad.numpy(), _sum_into(torch.zeros(5, 4), acc), msg=case)


@pytest.mark.clause("TRC-IDX-001")
def test_gather_and_index_select_gradients_are_exact_sums() -> None:
    """Inputs: x (4 x 6); gather along dim 1 with repeated columns, index_select of rows
    [1, 1, 3, 1]; upstream gradients of spread values. Expected: each x.grad element the
    exactly rounded sum of the upstream values read from it. Pass: bitwise, both ops."""
    rng = np.random.default_rng(11)
    idx = torch.tensor(rng.integers(0, 6, (4, 7)))
    rows = torch.tensor([1, 1, 3, 1])
    for name, op, reads in (
            ("gather", lambda t: torch.gather(t, 1, idx),
             lambda i, j: (i, int(idx[i, j]))),
            ("index_select", lambda t: torch.index_select(t, 0, rows),
             lambda i, j: (int(rows[i]), j))):
        x = torch.zeros(4, 6, requires_grad=True)
        with emulate(fallback="error"):
            y = op(x)
            g = _spread(rng, *y.shape)
            y.backward(g)
        acc: dict[tuple[int, ...], list[float]] = {}
        for i, j in np.ndindex(*y.shape):
            acc.setdefault(reads(i, j), []).append(float(g[i, j]))
        assert x.grad is not None
        assert_bitwise_equal(x.grad.numpy(), _sum_into(torch.zeros(4, 6), acc), msg=name)


def _mirror(i: int, n: int, mode: str) -> int:
    """The source of padded position i (already shifted by the left pad) along an axis
    of n elements: reflection without repeating the edge, replication clamps."""
    if mode == "replicate":
        return min(max(i, 0), n - 1)
    i = abs(i)
    return 2 * (n - 1) - i if i >= n else i


@pytest.mark.clause("TRC-IDX-001")
@pytest.mark.parametrize("mode", ["reflect", "replicate"])
@pytest.mark.parametrize("nd", [1, 2, 3])
def test_padding_gradients_sum_every_copy_of_an_element_exactly(mode: str, nd: int) -> None:
    """Inputs: x (2 planes, each side 4) padded by 3 before and 2 after on every spatial
    axis (reflect / replicate); upstream gradient of spread values. Expected: each x.grad
    element the exactly rounded sum of the upstream values of its copies (sources by
    the mirror / clamp formula). Pass: bitwise."""
    rng = np.random.default_rng(13 + nd)
    shape = (1, 2) + (4,) * nd
    x = torch.zeros(shape, requires_grad=True)
    with emulate(fallback="error"):
        y = TF.pad(x, (3, 2) * nd, mode=mode)
        g = _spread(rng, *y.shape)
        y.backward(g)
    acc: dict[tuple[int, ...], list[float]] = {}
    for pos in np.ndindex(*y.shape):
        src = pos[:2] + tuple(_mirror(p - 3, 4, mode) for p in pos[2:])
        acc.setdefault(src, []).append(float(g[pos]))
    assert x.grad is not None
    assert_bitwise_equal(x.grad.numpy(), _sum_into(torch.zeros(shape), acc),
                         msg=f"{mode} {nd}-d")


@pytest.mark.clause("TRC-IDX-001")
@pytest.mark.parametrize("dilation,padding,stride", [(1, 0, 1), (1, 1, 1), (2, 1, 2)])
def test_fold_sums_overlapping_patches_exactly(dilation: int, padding: int,
                                               stride: int) -> None:
    """Inputs: columns (2, 3*2*2, L) of spread values folded into 3 x 5 x 6 images with
    a 2 x 2 kernel, the given dilation, padding and stride. Expected: each image element
    the exactly rounded sum of the column entries whose patch position lands on it
    (explicit loops over patch, kernel offset; entries in the padding dropped).
    Pass: bitwise."""
    H, W, k = 5, 6, 2
    ho = (H + 2 * padding - dilation * (k - 1) - 1) // stride + 1
    wo = (W + 2 * padding - dilation * (k - 1) - 1) // stride + 1
    rng = np.random.default_rng(17)
    cols = _spread(rng, 2, 3 * k * k, ho * wo)
    got = _emulated(lambda: TF.fold(cols, (H, W), k, dilation=dilation, padding=padding,
                                    stride=stride))
    acc: dict[tuple[int, ...], list[float]] = {}
    for n, c, i, j, a, b in np.ndindex(2, 3, k, k, ho, wo):
        r, q = a * stride - padding + i * dilation, b * stride - padding + j * dilation
        if 0 <= r < H and 0 <= q < W:
            acc.setdefault((n, c, r, q), []).append(float(cols[n, (c * k + i) * k + j,
                                                             a * wo + b]))
    assert_bitwise_equal(got.numpy(), _sum_into(torch.zeros(2, 3, H, W), acc))


@pytest.mark.clause("TRC-IDX-001")
@pytest.mark.parametrize("pool", ["max_pool3d 3/1/1", "max_pool2d 3/1/1", "max_pool2d 3/2/1",
                                  "adaptive_max_pool2d 3x2"])
def test_max_pool_gradients_meet_at_shared_maxima_as_exact_sums(pool: str) -> None:
    """Inputs: zeros with one 1 per plane where windows overlap most (27 windows of a
    3x3x3 stride-1 pool, 9 of the 2-d one, 4 of ResNet's 3x3 stride 2 pad 1, 4 of an
    adaptive pool from 7 x 5 to 3 x 2), 4 x 4 planes; upstream spread values. Expected:
    each input's gradient the exactly rounded sum of the upstream values of the windows
    whose argmax (torch's returned index) it is. Pass: bitwise."""
    rng = np.random.default_rng(19)
    run = {"max_pool3d 3/1/1": ((4, 4, 5, 5, 5), (2, 2, 2),
                                lambda t: TF.max_pool3d(t, 3, 1, 1, return_indices=True)),
           "max_pool2d 3/1/1": ((4, 4, 5, 5), (2, 2),
                                lambda t: TF.max_pool2d(t, 3, 1, 1, return_indices=True)),
           "max_pool2d 3/2/1": ((4, 4, 9, 9), (3, 3),
                                lambda t: TF.max_pool2d(t, 3, 2, 1, return_indices=True)),
           "adaptive_max_pool2d 3x2": ((4, 4, 7, 5), (2, 2),
                                       lambda t: TF.adaptive_max_pool2d(t, (3, 2), True))}
    shape, peak, op = run[pool]
    x = torch.zeros(shape)
    x[(Ellipsis,) + peak] = 1.0
    x.requires_grad_(True)
    with emulate(fallback="error"):
        y, idx = op(x)
        g = _spread(rng, *y.shape)
        y.backward(g)
    nd = len(shape) - 2
    acc: dict[tuple[int, ...], list[float]] = {}
    for pos in np.ndindex(*y.shape):
        flat = int(idx[pos])
        acc.setdefault(pos[:2] + np.unravel_index(flat, shape[-nd:]), []).append(float(g[pos]))
    assert max(len(v) for v in acc.values()) >= 4, "the case lost its shared maxima"
    assert x.grad is not None
    assert_bitwise_equal(x.grad.numpy(), _sum_into(torch.zeros(shape), acc), msg=pool)


@pytest.mark.clause("TRC-IDX-001")
def test_one_value_meeting_a_fresh_gradient_is_torchs_including_signed_zeros() -> None:
    """Inputs: distinct-index scatters of values including -0, +0, inf, NaN and
    subnormals: gather's and reflection padding's (2 on a side of 5: each input read
    at most twice, but the distinct ones once) backward; scatter_add into a -0 self.
    Expected: what torch computes (one addition to the old value: exact), so a -0
    reaching a fresh gradient is +0 and -0 + -0 stays -0. Pass: bitwise (NaN any)."""
    vals = torch.tensor([-0.0, 0.0, float("inf"), float("nan"), 1e-45, -3.5])
    perm = torch.tensor([[3, 0, 5, 1, 4, 2]])

    def gather_grad() -> Any:
        x = torch.zeros(1, 6, requires_grad=True)
        torch.gather(x, 1, perm).backward(vals[None])
        return x.grad

    def scatter_neg_zero() -> Any:
        return torch.full((1, 6), -0.0).scatter_add(1, perm, vals[None])

    for name, fn in (("gather backward", gather_grad), ("scatter_add", scatter_neg_zero)):
        assert_bitwise_equal(_emulated(fn).numpy(), fn().numpy(), nan="any", msg=name)


@pytest.mark.clause("TRC-IDX-001", "TRC-EMU-001")
@pytest.mark.parametrize("name", ["Fold", "Unfold", "ReflectionPad2d", "ReplicationPad1d",
                                  "conv reflect", "MaxPool3d", "AdaptiveMaxPool2d",
                                  "ChannelShuffle", "embedding lookup by index"])
def test_index_modules_run_forward_and_backward_without_fallback(name: str) -> None:
    """Inputs: each module on random input, forward and backward under
    emulate(fallback='error'). Expected: no UnsupportedOpError, a finite gradient of the
    input's shape, every op emulated or exact. Pass: all."""
    torch.manual_seed(0)
    nn = torch.nn
    mods: dict[str, tuple[Any, tuple[int, ...]]] = {
        "Fold": (nn.Fold((4, 5), 2), (2, 8, 12)), "Unfold": (nn.Unfold(2, padding=1), (2, 2, 4, 4)),
        "ReflectionPad2d": (nn.ReflectionPad2d(2), (1, 2, 4, 4)),
        "ReplicationPad1d": (nn.ReplicationPad1d((1, 3)), (2, 3, 4)),
        "conv reflect": (nn.Conv2d(2, 3, 3, padding=1, padding_mode="reflect"), (1, 2, 5, 5)),
        "MaxPool3d": (nn.MaxPool3d(3, 2, 1), (1, 2, 5, 5, 5)),
        "AdaptiveMaxPool2d": (nn.AdaptiveMaxPool2d((3, 2)), (1, 2, 7, 5)),
        "ChannelShuffle": (nn.ChannelShuffle(2), (1, 4, 2, 2)),
        "embedding lookup by index": (lambda t: t[torch.tensor([2, 0, 2])] * 2.0, (3, 4))}
    module, shape = mods[name]
    x = torch.randn(shape, requires_grad=True)
    with emulate(fallback="error") as em:
        module(x).sum().backward()
    assert em.report.not_emulated() == []
    assert x.grad is not None and x.grad.shape == x.shape and torch.isfinite(x.grad).all()


def _nearest_src(n_in: int, n_out: int, scale: Any, exact: bool) -> list[int]:
    """torch's nearest source per output: floor(o s) (``nearest``) or floor((o + 0.5) s)
    (``nearest-exact``) in float32, s = fl32(1 / scale_factor) or fl32(n_in / n_out)."""
    s = np.float32(1.0 / scale) if scale else np.float32(n_in / n_out)
    o = np.arange(n_out, dtype=np.float32)
    pos = (o + np.float32(0.5)) * s if exact else o * s
    return [min(int(np.floor(v)), n_in - 1) for v in pos]


@pytest.mark.clause("TRC-IDX-001")
@pytest.mark.parametrize("mode", ["nearest", "nearest-exact"])
@pytest.mark.parametrize("nd,scale", [(1, 2.0), (2, 1.5), (3, 2.0), (2, None)])
def test_nearest_upsampling_gradients_sum_each_sources_copies_exactly(
        nd: int, scale: Any, mode: str) -> None:
    """Inputs: x (1, 2, 3[, 3[, 3]]) upsampled ``mode`` by ``scale`` (None: to size 5 per
    axis), upstream spread values. Expected: each input's gradient fl32(exact sum of the
    upstream values of the outputs whose source it is, the sources by torch's float32
    formula). Pass: bitwise."""
    shape = (1, 2) + (3,) * nd
    x = torch.zeros(shape, requires_grad=True)
    kw: dict[str, Any] = {"scale_factor": scale} if scale else {"size": (5,) * nd}
    rng = np.random.default_rng(nd * 7 + (scale is None))
    with emulate(fallback="error"):
        y = TF.interpolate(x, mode=mode, **kw)
        g = _spread(rng, *y.shape)
        y.backward(g)
    srcs = [_nearest_src(3, y.shape[2 + a], scale, mode == "nearest-exact") for a in range(nd)]
    acc: dict[tuple[int, ...], list[float]] = {}
    for pos in np.ndindex(*y.shape):
        src = pos[:2] + tuple(srcs[a][pos[2 + a]] for a in range(nd))
        acc.setdefault(src, []).append(float(g[pos]))
    assert x.grad is not None
    assert_bitwise_equal(x.grad.numpy(), _sum_into(torch.zeros(shape), acc),
                         msg=f"{mode} {nd}-d")


@pytest.mark.clause("TRC-IDX-001")
@pytest.mark.parametrize("call", ["take backward", "put accumulate", "index_put accumulate",
                                  "index_add"])
def test_accumulating_into_an_empty_tensor_gives_torchs_empty_result(call: str) -> None:
    """Inputs: an empty float32 tensor (shape (0,)) with empty indices: take's backward
    (put with accumulate into a zero gradient), put(accumulate=True),
    index_put(accumulate=True), index_add; under emulate(fallback="error"). Expected:
    torch's empty result (dtype, shape) and, for take, its empty gradient, where a NumPy
    error on the empty segment list was raised. Pass: equal dtypes and shapes."""
    idx = torch.zeros(0, dtype=torch.int64)

    def run() -> tuple[Any, Any]:
        x = torch.zeros(0, requires_grad=call == "take backward")
        v = torch.zeros(0)
        if call == "take backward":
            y = torch.take(x, idx)
            y.sum().backward()
            return y.detach(), x.grad
        if call == "put accumulate":
            return x.put(idx, v, accumulate=True), None
        if call == "index_put accumulate":
            return x.index_put((idx,), v, accumulate=True), None
        return x.index_add(0, idx, v), None

    want = run()
    with emulate(fallback="error"):
        got = run()
    for a, b in zip(got, want, strict=True):
        assert (a is None) == (b is None)
        if a is not None:
            assert (a.dtype, tuple(a.shape)) == (b.dtype, tuple(b.shape))


#: functional form, in-place form: each adds into a copy of self, or into self itself
INPLACE_PAIRS: dict[str, tuple[Callable[..., Any], Callable[..., Any]]] = {
    "scatter_add": (lambda x, i, s: x.scatter_add(0, i, s),
                    lambda x, i, s: x.scatter_add_(0, i, s)),
    "index_add": (lambda x, i, s: x.index_add(0, i[:, 0], s),
                  lambda x, i, s: x.index_add_(0, i[:, 0], s)),
    "index_put accumulate": (lambda x, i, s: x.index_put((i[:, 0],), s, accumulate=True),
                             lambda x, i, s: x.index_put_((i[:, 0],), s, accumulate=True)),
}


@pytest.mark.clause("TRC-IDX-001")
@pytest.mark.parametrize("name", list(INPLACE_PAIRS))
def test_the_functional_form_leaves_self_and_the_in_place_form_writes_it(name: str) -> None:
    """Inputs: a 4 x 6 self of spread values, a 9-row index with repeats and 9 x 6 source
    rows, through the functional form and the in-place form of ``name`` under emulate.
    Expected: the functional form returns a new tensor and leaves self's bits as they
    were; the in-place form returns self itself, holding the functional form's result.
    Pass: bitwise, and identity as stated."""
    rng = np.random.default_rng(11)
    x = _spread(rng, 4, 6)
    index = torch.tensor(rng.integers(0, 4, (9, 6)))
    src = _spread(rng, 9, 6)
    before = x.clone()
    functional, in_place = INPLACE_PAIRS[name]
    out = _emulated(functional, x, index, src)
    assert out is not x
    assert_bitwise_equal(x.numpy(), before.numpy(), msg=f"{name} changed self")
    target = x.clone()
    got = _emulated(in_place, target, index, src)
    assert got is target
    assert_bitwise_equal(target.numpy(), out.numpy(), msg=f"{name}_ differs")
