"""Smaller aten ops under emulate: vector products (``dot``, ``mv``: the engine's
matmul, TRC-NN-001), ``trace`` (exact sum), ``round`` with decimals and ``dist``
(torch's float32 steps), accumulating ``put`` and ``scatter_reduce`` (TRC-IDX-001),
and the exact ops handed to torch (integer parts, fmod, sign transfers, selections,
diagonals: TRC-EMU-001). Oracles: exact rationals, or torch itself where the op is a
selection or torch's own float32 steps."""

from __future__ import annotations

import math
from fractions import Fraction as Q
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from value_oracles import r32  # noqa: E402

from ampref.testing import assert_bitwise_equal  # noqa: E402
from ampref.torch import emulate, shadow  # noqa: E402


def _spread(seed: int, *shape: int) -> Any:
    rng = np.random.default_rng(seed)
    return torch.tensor((rng.standard_normal(shape) * 2.0 ** rng.integers(-20, 21, shape)
                         ).astype(np.float32))


def _emulated(fn: Any) -> Any:
    with emulate(fallback="error") as em:
        out = fn()
    assert em.report.not_emulated() == []
    return out


@pytest.mark.clause("TRC-NN-001")
def test_dot_mv_and_trace_are_exactly_rounded_sums_of_products() -> None:
    """Inputs: vectors of 33 spread float32 values, a 4 x 33 matrix, a 6 x 6 matrix.
    Expected: dot = fl32(exact sum a_i b_i), mv row by row likewise, trace =
    fl32(exact sum of the diagonal). Pass: bitwise."""
    a, b, m, sq = _spread(1, 33), _spread(2, 33), _spread(3, 4, 33), _spread(4, 6, 6)

    def dotq(u: Any, v: Any) -> float:
        return float(r32(sum((Q(float(x)) * Q(float(y)) for x, y in zip(u, v, strict=True)),
                             Q(0))))
    assert_bitwise_equal(_emulated(lambda: torch.dot(a, b)).numpy(),
                         np.float32(dotq(a, b)), msg="dot")
    assert_bitwise_equal(_emulated(lambda: torch.mv(m, b)).numpy(),
                         np.array([dotq(r, b) for r in m], np.float32), msg="mv")
    want = np.float32(float(r32(sum((Q(float(sq[i, i])) for i in range(6)), Q(0)))))
    assert_bitwise_equal(_emulated(lambda: torch.trace(sq)).numpy(), want, msg="trace")


@pytest.mark.clause("TRC-NN-001")
@pytest.mark.parametrize("decimals", [2, -1, 3])
def test_round_with_decimals_is_torchs_float32_steps(decimals: int) -> None:
    """Inputs: 200 float32 values over 2^-8 .. 2^12 of both signs, halves included.
    Expected: torch's own CPU result (nearbyint(x 10^d) / 10^d in float32). Pass:
    bitwise."""
    rng = np.random.default_rng(decimals + 10)
    x = torch.tensor((rng.standard_normal(200) * 2.0 ** rng.integers(-8, 13, 200)
                      ).astype(np.float32))
    x[:4] = torch.tensor([0.125, -2.5, 0.005, 1234.5])
    got = _emulated(lambda: torch.round(x, decimals=decimals))
    assert_bitwise_equal(got.numpy(), torch.round(x, decimals=decimals).numpy())


@pytest.mark.clause("TRC-NN-001")
@pytest.mark.parametrize("p", [2.0, 1.0, math.inf])
def test_dist_is_the_norm_of_the_rounded_difference(p: float) -> None:
    """Inputs: two spread vectors of 20, p = 2 / 1 / inf. Expected: the p-norm (TRC-NN-
    001's rules) of fl32(x - y). Pass: bitwise."""
    x, y = _spread(5, 20), _spread(6, 20)
    d = [Q(float(v)) for v in (x - y)]
    want = {2.0: lambda: np.float32(math.sqrt(float(r32(sum((v * v for v in d), Q(0)))))),
            1.0: lambda: np.float32(float(r32(sum((abs(v) for v in d), Q(0))))),
            math.inf: lambda: np.float32(float(max(abs(v) for v in d)))}[p]()
    assert_bitwise_equal(_emulated(lambda: torch.dist(x, y, p)).numpy(), want)


@pytest.mark.clause("TRC-IDX-001")
@pytest.mark.parametrize("reduce,include", [("sum", True), ("sum", False), ("mean", True),
                                            ("mean", False), ("amax", True)])
def test_scatter_reduce_sums_exactly_and_means_divide_once(reduce: str,
                                                           include: bool) -> None:
    """Inputs: self of 6 spread values, 12 spread values scattered to positions
    [0, 0, 0, 2, 2, 5, 0, 2, 0, 0, 2, 0] (1, 3 and 4 receive none), include_self or not.
    Expected: sum = fl32(exact (self if included) + values); mean = that / count in
    float32; untouched positions keep self; amax torch's selection. Pass: bitwise."""
    x, src = _spread(7, 6), _spread(8, 12)
    idx = torch.tensor([0, 0, 0, 2, 2, 5, 0, 2, 0, 0, 2, 0])
    got = _emulated(lambda: x.scatter_reduce(0, idx, src, reduce, include_self=include))
    if reduce == "amax":
        want = x.scatter_reduce(0, idx, src, reduce, include_self=include).numpy()
    else:
        want = x.numpy().copy()
        for pos in set(idx.tolist()):
            terms = [Q(float(src[i])) for i in range(12) if idx[i] == pos]
            terms += [Q(float(x[pos]))] if include else []
            s = r32(sum(terms, Q(0)))
            want[pos] = float(r32(s / len(terms))) if reduce == "mean" else float(s)
    assert_bitwise_equal(got.numpy(), want, msg=f"{reduce} include_self={include}")


@pytest.mark.clause("TRC-IDX-001")
def test_take_gradient_puts_repeated_positions_as_exact_sums() -> None:
    """Inputs: x (3, 4), take at flat positions [5, 0, 5, 5, 11, 0], spread upstream
    values. Expected: x.grad at each flat position fl32(exact sum of the values taken
    from it), +0 elsewhere. Pass: bitwise."""
    x = torch.zeros(3, 4, requires_grad=True)
    g = _spread(9, 6)
    pos = [5, 0, 5, 5, 11, 0]
    with emulate(fallback="error"):
        torch.take(x, torch.tensor(pos)).backward(g)
    want = np.zeros(12, np.float32)
    for p in set(pos):
        want[p] = float(r32(sum((Q(float(g[i])) for i in range(6) if pos[i] == p), Q(0))))
    assert x.grad is not None
    assert_bitwise_equal(x.grad.numpy().reshape(-1), want)


SPECIALS = torch.tensor([0.0, -0.0, 2.5, -2.5, 3.5, -0.5, 1e30, -1e-45, float("inf"),
                         float("-inf"), float("nan"), 7.75])

EXACT_CALLS = {
    "floor": torch.floor, "ceil": torch.ceil, "trunc": torch.trunc, "round": torch.round,
    "frac": torch.frac, "fmod 1.5": lambda t: torch.fmod(t, 1.5),
    "copysign": lambda t: torch.copysign(t, -torch.ones_like(t)),
    "nan_to_num": torch.nan_to_num, "fmax": lambda t: torch.fmax(t, t.flip(0)),
    "median": lambda t: t.reshape(3, 4).median(-1).values,
    "diag_embed": torch.diag_embed, "index_fill": lambda t: t.index_fill(0, torch.tensor([1]), 5.0),
    "masked_scatter": lambda t: torch.zeros(12).masked_scatter(t > 0, t),
    "unfold": lambda t: t.unfold(0, 4, 3), "floor_ in place": lambda t: t.clone().floor_(),
    "eye": lambda t: torch.eye(4, 3) * t[:3], "cummax": lambda t: t.cummax(0).values,
    "cummin": lambda t: t.cummin(0).values,
    "max_unpool2d": lambda t: torch.nn.functional.max_unpool2d(
        *torch.nn.functional.max_pool2d(t[[2, 3, 4, 5, 6, 11, 7, 9]].reshape(1, 1, 2, 4), 2,
                                        return_indices=True), 2),
    "fractional_max_pool2d": lambda t: torch.nn.functional.fractional_max_pool2d(
        t.reshape(1, 1, 3, 4), 2, output_size=(2, 2), _random_samples=torch.full((1, 1, 2), 0.4)),
    "pack_padded_sequence": lambda t: torch.nn.utils.rnn.pack_padded_sequence(
        t.reshape(4, 3), [4, 2, 1]).data,
    "rot90": lambda t: t.reshape(3, 4).rot90(1, (0, 1)),
    "rot90 backward": lambda t: _rot90_grad(t),
    "block_diag": lambda t: torch.block_diag(t[:4].reshape(2, 2), t[4:]),
    "unique": lambda t: torch.unique(t.reshape(2, 6).repeat(1, 2), return_counts=True)[0],
    "unique rows": lambda t: torch.unique(t.reshape(3, 4)[[0, 2, 0]], dim=0),
    "unique_consecutive": lambda t: torch.unique_consecutive(t.repeat_interleave(2)),
    "narrow_copy": lambda t: t.narrow_copy(0, 2, 5),
    "permute_copy": lambda t: torch.permute_copy(t.reshape(3, 4), (1, 0)),
    "expand_copy": lambda t: torch.expand_copy(t, (2, 12)),
    "as_strided_scatter": lambda t: torch.as_strided_scatter(
        torch.zeros(12), t[:4].reshape(2, 2), (2, 2), (3, 1)),
}


def _rot90_grad(t: Any) -> Any:
    leaf = t.reshape(3, 4).clone().requires_grad_()
    leaf.rot90().backward(torch.arange(12.0).reshape(4, 3))
    return leaf.grad


@pytest.mark.clause("TRC-EMU-001")
@pytest.mark.parametrize("name", sorted(EXACT_CALLS))
def test_exact_ops_run_in_torch_unchanged(name: str) -> None:
    """Inputs: ±0, ±2.5, 3.5, -0.5, 1e30, -2^-149, ±inf, NaN, 7.75 through the op under
    emulate(fallback='error'). Expected: torch's own result word for word (these ops
    round nothing: integer parts, fmod, sign transfers, replacements, selections, data
    movement), no UnsupportedOpError. Pass: bitwise (NaN any)."""
    fn = EXACT_CALLS[name]
    got = _emulated(lambda: fn(SPECIALS))
    assert_bitwise_equal(got.numpy(), fn(SPECIALS).numpy(), nan="any", msg=name)


@pytest.mark.clause("TRC-IDX-001", "TRC-EMU-001")
def test_running_maxima_unpooling_and_fractional_pooling_route_gradients_to_their_sources(
        ) -> None:
    """Inputs: x (2, 1, 4, 6) float32 (distinct values), upstream gradients of small
    integers; cummax over the last axis, max_unpool2d of a 2x2 max pool, and
    fractional_max_pool2d (kernel 2, output 3x4, fixed samples), forward and backward
    under emulate(fallback='error'). Expected: torch's own results (selections; each
    gradient a sum of integers, exact in torch's order and in ampref's exact scatter).
    Pass: bitwise, values and gradients."""
    fn = torch.nn.functional
    x0 = torch.randperm(48, generator=torch.Generator().manual_seed(3)).float().reshape(2, 1, 4, 6)
    calls = {
        "cummax": lambda t: t.cummax(-1).values,
        "max_unpool2d": lambda t: fn.max_unpool2d(*fn.max_pool2d(t, 2, return_indices=True), 2),
        "fractional": lambda t: fn.fractional_max_pool2d(
            t, 2, output_size=(3, 4), _random_samples=torch.full((2, 1, 2), 0.3)),
    }
    for name, call in calls.items():
        runs = []
        for emulated in (True, False):
            x = x0.clone().requires_grad_()
            if emulated:
                with emulate(fallback="error"):
                    y = call(x)
                    y.backward(torch.arange(y.numel(), dtype=torch.float32).reshape(y.shape) % 5)
            else:
                y = call(x)
                y.backward(torch.arange(y.numel(), dtype=torch.float32).reshape(y.shape) % 5)
            assert x.grad is not None
            runs.append((y.detach().numpy(), x.grad.numpy()))
        assert_bitwise_equal(runs[0][0], runs[1][0], msg=f"{name} forward")
        assert_bitwise_equal(runs[0][1], runs[1][1], msg=f"{name} gradient")


@pytest.mark.clause("TRC-NN-001")
@pytest.mark.parametrize("dim", [-1, 0])
def test_cross_product_components_are_exact_differences_rounded_once(dim: int) -> None:
    """Inputs: a, b (4, 3) (transposed for dim 0) of wide exponents with a row where
    a_j b_k and a_k b_j nearly cancel; an upstream gradient. Expected: each component
    fl32(exact a_j b_k - a_k b_j); the gradients of a and b are the same op on (b, g)
    and (g, a) (torch's formula), so fl32(exact b_j g_k - b_k g_j) for a. Pass:
    bitwise."""
    rng = np.random.default_rng(90 + dim)
    a = (rng.standard_normal((4, 3)) * np.exp2(rng.integers(-8, 9, (4, 3)))).astype(np.float32)
    b = (rng.standard_normal((4, 3)) * np.exp2(rng.integers(-8, 9, (4, 3)))).astype(np.float32)
    a[0] = [1.0, 1 + 2.0**-23, 3.0]
    b[0] = [2.0, 1 - 2.0**-24, 1 + 2.0**-22]  # a1 b2 - a2 b1: 2^-22 cancellations
    g = rng.standard_normal((4, 3)).astype(np.float32)
    t = (lambda v: v) if dim == -1 else (lambda v: np.ascontiguousarray(v.T))
    ta, tb = torch.tensor(t(a), requires_grad=True), torch.tensor(t(b), requires_grad=True)
    with emulate(fallback="error"):
        y = torch.linalg.cross(ta, tb, dim=dim)
        y.backward(torch.tensor(t(g)))

    def cross(u: np.ndarray, v: np.ndarray) -> np.ndarray:
        q = [[Q(float(e)) for e in row] for row in (u, v)]
        return np.array([float(r32(q[0][j] * q[1][k] - q[0][k] * q[1][j]))
                         for j, k in ((1, 2), (2, 0), (0, 1))], np.float32)
    want = np.stack([cross(a[i], b[i]) for i in range(4)])
    want_a = np.stack([cross(b[i], g[i]) for i in range(4)])
    assert_bitwise_equal(y.detach().numpy(), t(want), msg="cross")
    assert ta.grad is not None
    assert_bitwise_equal(ta.grad.numpy(), t(want_a), msg="gradient of a")


@pytest.mark.clause("TRC-EMU-001", "ENG-DTY-001")
def test_mean_with_a_dtype_averages_the_values_cast_to_it() -> None:
    """Inputs: 1,000 float32 values spread over 2^-20..2^20, ``mean(dtype=float64)`` and
    ``mean(dtype=float16)`` under emulate, and shadow's measure of the float64 call.
    Expected: the float64 mean within 2^-45 relative of the exact Fraction mean (before,
    it was the float32 mean widened: off by about 2^-26 here); the float16 mean equal
    to the float16 mean of the values cast to float16, as torch computes it; shadow
    measures a float64 mismatch in float64 ulps (before: ValueError, float64 has no
    codes). Pass: the bound, bitwise, no error."""
    x = _spread(31, 1000)
    exact = sum((Q(float(v)) for v in x.tolist()), Q(0)) / 1000
    with emulate(fallback="error"):
        wide, narrow = x.mean(dtype=torch.float64), x.mean(dim=0, dtype=torch.float16)
        narrow_of_cast = x.half().mean()
    assert wide.dtype == torch.float64 and narrow.dtype == torch.float16
    assert abs(Q(wide.item()) - exact) <= abs(exact) * Q(1, 2 ** 45), (wide.item(), exact)
    assert_bitwise_equal(narrow.view(torch.int16).numpy(),
                         narrow_of_cast.view(torch.int16).numpy())
    x64 = torch.linspace(-5, 5, 1000, dtype=torch.float64)
    with shadow(fallback="error") as mode:
        x64.exp()
    (row,) = mode.report.rows()
    assert row.op == "exp" and row.mismatches > 0 and 1 <= row.max_ulps <= 2, row


@pytest.mark.clause("TRC-EMU-002")
@pytest.mark.parametrize("op", ["layer_norm", "group_norm"])
def test_a_negative_eps_is_refused_as_an_op_without_reference_not_a_value_error(
        op: str) -> None:
    """Inputs: layer and group norm of a (2, 4, 3) tensor with eps = -0.5, which torch
    accepts (OpInfo's layer-norm samples use it; its training batch norm refuses it)
    and ampref's engine does not define. Expected: under emulate(fallback='error')
    UnsupportedOpError naming the eps (a ValueError from the engine before); under
    fallback='torch' torch's own result bit for bit. Pass: both."""
    from ampref.torch.base import UnsupportedOpError
    x = torch.linspace(-2, 3, 24).reshape(2, 4, 3)
    call = {"layer_norm": lambda: torch.nn.functional.layer_norm(x, [3], eps=-0.5),
            "group_norm": lambda: torch.nn.functional.group_norm(x, 2, eps=-0.5)}[op]
    with pytest.raises(UnsupportedOpError, match="eps=-0.5"), emulate(fallback="error"):
        call()
    want = call()
    with emulate(fallback="torch"):
        got = call()
    assert_bitwise_equal(got.numpy(), want.numpy(), nan="bitwise", msg=op)
