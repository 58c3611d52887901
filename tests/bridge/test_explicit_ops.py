"""Ops whose torch kernel is a few other aten ops, written as those ops
(``ampref.torch.explicit``, TRC-EMU-007): ``renorm`` and ``allclose``; and
``index_reduce`` (TRC-IDX-001). Oracles: exact rationals (60-digit square roots for
2-norms), and torch itself where the norm is exact (order inf) or the op selects."""

from __future__ import annotations

import math
from fractions import Fraction as Q
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")
mp = pytest.importorskip("mpmath")

from oracle import round_value  # noqa: E402
from value_oracles import r32  # noqa: E402

import ampref  # noqa: E402
from ampref.testing import assert_bitwise_equal  # noqa: E402
from ampref.torch import UnsupportedOpError, emulate, shadow  # noqa: E402

mp.mp.dps = 60
#: index_reduce warns on every call that it is beta; the tests do not judge that
pytestmark = pytest.mark.filterwarnings("ignore:index_reduce:UserWarning")
EPS32 = Q(float(np.float32(1e-7)))


def _emulated(fn: Any) -> Any:
    with emulate(fallback="error") as em:
        out = fn()
    assert em.report.not_emulated() == []
    return out


def _rows(seed: int, dtype: Any) -> Any:
    """6 rows of 5 values with 8-bit significands (exact in every dtype), row scales
    2^-3 .. 2^3 so some rows' norms exceed the limit and some do not."""
    rng = np.random.default_rng(seed)
    v = rng.integers(-255, 256, (6, 5)) * 2.0 ** (rng.integers(-3, 4, (6, 1)) - 8)
    return torch.tensor(v, dtype=dtype)


def _norm32(row: list[Q], p: float) -> Q:
    """The row's p-norm rounded once to float32 (ampref's vector norm, TRC-NN-001)."""
    if p == math.inf:
        return max(abs(v) for v in row)
    if p == 1:
        return r32(sum((abs(v) for v in row), Q(0)))
    exact = sum((v * v for v in row), Q(0))
    root = mp.sqrt(mp.mpf(exact.numerator) / exact.denominator)
    return r32(Q(str(root)))


@pytest.mark.clause("TRC-EMU-007", "TRC-NN-001")
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("p", [1.0, 2.0, math.inf])
def test_renorm_scales_each_slice_above_the_limit_by_torchs_factor(p: float,
                                                                   dtype: str) -> None:
    """Inputs: 6 x 5 values with 8-bit significands, rows scaled 2^-3 .. 2^3, renorm
    over dim 0 to maxnorm 1.3, orders 1 / 2 / inf. Expected (torch's kernel): n =
    fl32(the row's exact p-norm) (float32 also for 16-bit rows), factor = fl32(fl32(1.3)
    / fl32(n + fl32(1e-7))) where n > fl32(1.3) else 1, rounded to the dtype; each
    element fl_dtype(x * factor). Pass: bitwise, and at least one row scaled and one
    not (the case exercises both branches)."""
    dt = getattr(torch, dtype)
    fmt = ampref.get_format(dtype)
    x = _rows(11, dt)
    got = _emulated(lambda: x.renorm(p, 0, 1.3))
    limit = Q(float(np.float32(1.3)))
    want, scaled = [], 0
    for row in x.double().tolist():
        vals = [Q(v) for v in row]
        n = _norm32(vals, p)
        factor = Q(1)
        if n > limit:
            scaled += 1
            factor = Q(round_value(r32(limit / r32(n + EPS32)), fmt))
        want.append([float(round_value(v * factor, fmt)) for v in vals])
    assert 0 < scaled < 6
    assert_bitwise_equal(got.numpy() if dt == torch.float32 else got.float().numpy(),
                         np.array(want, np.float32), msg=f"p={p} {dtype}")


@pytest.mark.clause("TRC-EMU-007")
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
def test_renorm_of_order_inf_equals_torch_word_for_word_with_inf_and_nan(dtype: str) -> None:
    """Inputs: 8 x 7 seeded normal values (scaled 0.1 .. 3 per row), one row holding
    inf, one NaN, one exactly at the limit 1.5 (2-dim renorm over dim 0, and over dim
    1 of the transpose), order inf (whose norm is a selection, exact in torch too),
    maxnorm 1.5, in place (renorm_) and not. Expected: torch's renorm word for word
    (the inf row's factor 0 makes inf x 0 NaN; a NaN norm is not above the limit; the
    row at the limit is unchanged). Pass: bitwise (NaN any)."""
    dt = getattr(torch, dtype)
    g = torch.Generator().manual_seed(5)
    x = torch.randn(8, 7, generator=g) * torch.linspace(0.1, 3.0, 8)[:, None]
    x[2, 3], x[4, 1] = float("inf"), float("nan")
    x[6] = torch.tensor([1.5, -1.0, 0.5, 0.0, -1.5, 1.25, 0.25])
    x = x.to(dt)
    for fn in (lambda t: t.renorm(math.inf, 0, 1.5), lambda t: t.t().renorm(math.inf, 1, 1.5),
               lambda t: t.clone().renorm_(math.inf, 0, 1.5)):
        got, want = _emulated(lambda fn=fn: fn(x)), fn(x)
        assert_bitwise_equal(got.double().numpy(), want.double().numpy(), nan="any",
                             msg=dtype)
    assert torch.equal(x.renorm(math.inf, 0, 1.5)[6], x[6])


@pytest.mark.clause("TRC-EMU-007")
def test_renorm_gradient_and_shadow_run_through_ampref() -> None:
    """Inputs: a seeded 4 x 3 leaf, renorm(2, 0, 0.5) then squares summed, backward;
    the same forward under shadow. Expected: under emulate(fallback='error') nothing
    is left to torch (the backward's parts are ampref's ops) and the gradient is
    within 4 float32 ulps of torch's (ampref's norms are exactly rounded, torch's
    sum in another order); shadow measures renorm's parts, reporting no op it could
    not compare. Pass: as stated."""
    g = torch.Generator().manual_seed(2)
    x0 = torch.randn(4, 3, generator=g)
    x = x0.clone().requires_grad_()
    _emulated(lambda: x.renorm(2, 0, 0.5).pow(2).sum().backward())
    y = x0.clone().requires_grad_()
    y.renorm(2, 0, 0.5).pow(2).sum().backward()
    assert x.grad is not None and y.grad is not None
    ulp = torch.finfo(torch.float32).eps * y.grad.abs().clamp(min=2.0 ** -126)
    assert bool(((x.grad - y.grad).abs() <= 4 * ulp).all()), (x.grad - y.grad).abs().max()
    with shadow(fallback="error") as sh:
        x0.renorm(2, 0, 0.5)
    ops = {row.op for row in sh.report.rows()}
    assert sh.report.not_emulated() == [] and "linalg_vector_norm" in ops, ops


@pytest.mark.clause("TRC-EMU-007")
def test_allclose_is_isclose_on_amprefs_arithmetic() -> None:
    """Inputs: a = [1, 2, inf, NaN], b = a + [1e-9, 2^-20, 0, 0]; allclose with the
    default tolerances, with atol 0 and rtol 0, and with equal_nan. Expected: torch's
    answers (False with a NaN unless equal_nan; True within the default tolerance;
    False at zero tolerance), computed by emulated ops (nothing left to torch).
    Pass: equal booleans."""
    a = torch.tensor([1.0, 2.0, float("inf"), float("nan")])
    b = a + torch.tensor([1e-9, 2.0 ** -20, 0.0, 0.0])
    calls = [lambda: torch.allclose(a, b), lambda: torch.allclose(a, b, equal_nan=True),
             lambda: torch.allclose(a[:3], b[:3], rtol=0.0, atol=0.0),
             lambda: torch.allclose(a[:3], b[:3])]
    assert [_emulated(c) for c in calls] == [c() for c in calls] == [False, True, False, True]


@pytest.mark.clause("TRC-IDX-001")
@pytest.mark.parametrize("reduce,include", [("mean", True), ("mean", False),
                                            ("amax", True), ("amin", False)])
def test_index_reduce_means_are_exact_sums_divided_once(reduce: str, include: bool) -> None:
    """Inputs: self (5, 3) of spread float32 values, source (6, 3) spread values sent
    to rows [0, 2, 2, 4, 0, 0] (rows 1 and 3 receive none), include_self or not.
    Expected: mean = fl32(fl32(exact sum of the terms) / count), count including self
    when included; untouched rows keep self; amax / amin torch's selection.
    Pass: bitwise."""
    rng = np.random.default_rng(4)
    x = torch.tensor((rng.standard_normal((5, 3)) * 2.0 ** rng.integers(-20, 21, (5, 3))
                      ).astype(np.float32))
    src = torch.tensor((rng.standard_normal((6, 3)) * 2.0 ** rng.integers(-20, 21, (6, 3))
                        ).astype(np.float32))
    idx = torch.tensor([0, 2, 2, 4, 0, 0])
    got = _emulated(lambda: x.index_reduce(0, idx, src, reduce, include_self=include))
    torchs = x.index_reduce(0, idx, src, reduce, include_self=include)
    if reduce != "mean":
        assert_bitwise_equal(got.numpy(), torchs.numpy(), msg=reduce)
        return
    want = x.numpy().copy()
    for row in set(idx.tolist()):
        for c in range(3):
            terms = [Q(float(src[i, c])) for i in range(6) if idx[i] == row]
            terms += [Q(float(x[row, c]))] if include else []
            want[row, c] = float(r32(r32(sum(terms, Q(0))) / len(terms)))
    assert_bitwise_equal(got.numpy(), want, msg=f"include_self={include}")


@pytest.mark.clause("TRC-IDX-001", "TRC-EMU-002")
def test_index_reduce_prod_is_refused_and_unknown_names_get_torchs_error() -> None:
    """Inputs: index_reduce with reduce 'prod' and 'sum' under emulate(fallback='error').
    Expected: 'prod' raises UnsupportedOpError naming the emulated reductions (torch's
    loop-order product is not modelled); 'sum', which torch's index_reduce does not
    accept, raises torch's own RuntimeError. Pass: as stated."""
    x, src, idx = torch.zeros(3, 2), torch.ones(2, 2), torch.tensor([0, 2])
    with pytest.raises(UnsupportedOpError, match="mean, amax, amin"):
        _emulated(lambda: x.index_reduce(0, idx, src, "prod"))
    with pytest.raises(RuntimeError, match="prod, mean, amax or amin"):
        _emulated(lambda: x.index_reduce(0, idx, src, "sum"))
