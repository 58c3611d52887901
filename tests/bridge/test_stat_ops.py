"""Statistics reductions under emulate (``ampref.torch.statops``, TRC-RED-001) against
exact oracles: logsumexp at 60 digits (mpmath), the variance as an exact rational (its
square root at 60 digits), prefix sums as exact rationals; each rounded to float32.
Where the clause allows float64 error, values within that distance of a float32
rounding boundary are exempt (counted)."""

from __future__ import annotations

from fractions import Fraction as Q
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")
mp = pytest.importorskip("mpmath")

from value_oracles import r32, r32_near  # noqa: E402

from ampref.testing import assert_bitwise_equal  # noqa: E402
from ampref.torch import emulate  # noqa: E402

mp.mp.dps = 60


def _q(v: Any) -> Q:
    sign, man, exp, _ = v._mpf_
    return (-1 if sign else 1) * Q(int(man)) * Q(2) ** int(exp)


def _emulated(fn: Any, *xs: Any) -> Any:
    with emulate(fallback="error"):
        return fn(*xs)


def _check(got: np.ndarray, exact: list[Q], rel: Q, what: str) -> None:
    want, near = zip(*(r32_near(q, rel) for q in exact), strict=True)
    near_a = np.array(near)
    assert near_a.mean() < 0.05, f"{what}: too many exempt values"
    w = np.array([float(v) for v in want], np.float32)
    assert_bitwise_equal(got.reshape(-1)[~near_a], w[~near_a], msg=what)


@pytest.mark.clause("TRC-RED-001")
@pytest.mark.parametrize("dim", [-1, 0])
def test_logsumexp_is_its_value_rounded_to_float32(dim: int) -> None:
    """Inputs: x (6, 9) float32, normal with scale 3 (every term counts) plus 20 in one
    row and -90 in another. Expected: fl32 of the 60-digit log(sum exp x) over ``dim``,
    values within 2^-45 of a boundary exempt. Pass: bitwise."""
    rng = np.random.default_rng(41 + dim)
    x = (rng.standard_normal((6, 9)) * 3).astype(np.float32)
    x[1, 2], x[4, 4] = 20.0, -90.0
    got = _emulated(lambda t: torch.logsumexp(t, dim), torch.tensor(x)).numpy()
    rows = np.moveaxis(x, dim, -1)
    exact = [_q(mp.log(mp.fsum(mp.exp(mp.mpf(float(v))) for v in row))) for row in rows]
    _check(got, exact, Q(1, 2**45), "logsumexp")


@pytest.mark.clause("TRC-RED-001")
def test_logsumexp_keeps_infinities_and_nan() -> None:
    """Inputs: rows all -inf; with one +inf; with a NaN; a row of -inf and 0.
    Expected: -inf, +inf, NaN, 0 (torch's values). Pass: bitwise (any NaN)."""
    inf, nan = float("inf"), float("nan")
    x = torch.tensor([[-inf, -inf], [inf, 1.0], [nan, 1.0], [-inf, 0.0]])
    got = _emulated(lambda t: torch.logsumexp(t, -1), x)
    assert_bitwise_equal(got.numpy(), torch.logsumexp(x, -1).numpy(), nan="any")


@pytest.mark.clause("TRC-RED-001")
@pytest.mark.parametrize("correction", [1, 0, 2.5])
@pytest.mark.parametrize("root", [False, True], ids=["var", "std"])
def test_var_and_std_are_the_exact_moments_rounded(correction: float, root: bool) -> None:
    """Inputs: x (5, 12) float32 with a mean far from zero (offset 300) and spread
    deviations, ``correction`` 1 / 0 / 2.5, over the last axis. Expected: fl32 of the
    exact rational sum (x - mean)^2 / (n - correction) (std: its 60-digit square root);
    the clause's float64 bound exempts values within 2^-40 of a boundary. Pass:
    bitwise on the rest."""
    rng = np.random.default_rng(int(correction * 10) + root)
    x = (300 + rng.standard_normal((5, 12)) * 2.0 ** rng.integers(-6, 3, (5, 12))
         ).astype(np.float32)
    op = torch.std if root else torch.var
    got = _emulated(lambda t: op(t, -1, correction=correction), torch.tensor(x)).numpy()
    exact = []
    for row in x:
        vals = [Q(float(v)) for v in row]
        mu = sum(vals, Q(0)) / len(vals)
        var = sum(((v - mu) ** 2 for v in vals), Q(0)) / (len(vals) - Q(correction))
        exact.append(_q(mp.sqrt(mp.mpf(var.numerator) / var.denominator)) if root else var)
    _check(got, exact, Q(1, 2**40), f"{'std' if root else 'var'} c={correction}")


@pytest.mark.clause("TRC-RED-001")
def test_var_mean_returns_the_engines_mean() -> None:
    """Inputs: x (4, 10) spread float32. Expected: var_mean's and std_mean's mean equal
    fl32(fl32(exact sum) / n). Pass: bitwise."""
    rng = np.random.default_rng(43)
    x = (rng.standard_normal((4, 10)) * 2.0 ** rng.integers(-20, 21, (4, 10))).astype(np.float32)
    want = np.array([float(r32(r32(sum((Q(float(v)) for v in row), Q(0))) / 10)) for row in x],
                    np.float32)
    for op in (torch.var_mean, torch.std_mean):
        got = _emulated(lambda t: op(t, -1)[1], torch.tensor(x))  # noqa: B023
        assert_bitwise_equal(got.numpy(), want, msg=op.__name__)


@pytest.mark.clause("TRC-RED-001")
@pytest.mark.parametrize("dim", [1, 0])
def test_cumsum_is_each_prefixs_exact_sum_rounded_once(dim: int) -> None:
    """Inputs: x (7, 33) float32, a third near ±1 and the rest below its half ulp (a
    running float32 sum drops them, the exact sum does not), cumsum over ``dim``; the
    same with dtype=float64. Expected: fl32(exact prefix sum) (float64: the float64
    running sum's values are not claimed; only the dtype). Pass: bitwise."""
    rng = np.random.default_rng(47 + dim)
    small = rng.random((7, 33)) < 2 / 3
    x = np.where(small, (0.5 + 0.49 * rng.random((7, 33))) * 2.0**-24,
                 rng.choice([-1.0, 1.0], (7, 33)) * (1 + rng.random((7, 33)))).astype(np.float32)
    got = _emulated(lambda t: torch.cumsum(t, dim), torch.tensor(x)).numpy()
    rows = np.moveaxis(x, dim, -1)
    want = np.empty(rows.shape, np.float32)
    for i, row in enumerate(rows):
        acc = Q(0)
        for j, v in enumerate(row):
            acc += Q(float(v))
            want[i, j] = float(r32(acc))
    assert_bitwise_equal(got, np.moveaxis(want, -1, dim), msg=f"cumsum dim {dim}")
    wide = _emulated(lambda t: torch.cumsum(t, dim, dtype=torch.float64), torch.tensor(x))
    assert wide.dtype == torch.float64


def _exact_products(rows: np.ndarray) -> list[list[Q]]:
    out = []
    for row in rows:
        acc, prefix = Q(1), []
        for v in row:
            acc *= Q(float(v))
            prefix.append(acc)
        out.append(prefix)
    return out


@pytest.mark.clause("TRC-RED-001", "ACC-EXA-002")
@pytest.mark.parametrize("dim", [1, 0])
def test_prod_and_cumprod_are_the_exact_products_rounded_once(dim: int) -> None:
    """Inputs: x (5, 24) float32 near ±1 (a sequential float32 product rounds 23 times
    and differs from the exact one on some row), ``prod`` and ``cumprod`` over ``dim``,
    ``prod`` of everything, ``prod(dim, dtype=float64)`` of its float16 cast and
    ``prod(dim, dtype=float16)`` of x. Expected: fl32 of the exact rational products
    (float64: fl64 of the float16 values' exact product; float16: the input cast to
    float16 first, as torch does, then fl16(fl32(exact product))). Pass: bitwise, dtypes
    torch's."""
    rng = np.random.default_rng(71 + dim)
    x = (rng.choice([-1.0, 1.0], (5, 24)) * (1 + 0.2 * rng.random((5, 24)))).astype(np.float32)
    t = torch.tensor(x)
    rows = np.moveaxis(x, dim, -1)
    exact = _exact_products(rows)
    prefix = np.array([[float(r32(q)) for q in row] for row in exact], np.float32)
    got_c = _emulated(lambda a: torch.cumprod(a, dim), t).numpy()
    assert_bitwise_equal(got_c, np.moveaxis(prefix, -1, dim), msg=f"cumprod dim {dim}")
    got_p = _emulated(lambda a: torch.prod(a, dim), t).numpy()
    assert_bitwise_equal(got_p, prefix[:, -1], msg=f"prod dim {dim}")
    seq = np.multiply.reduce(rows, axis=-1, dtype=np.float32)
    assert np.any(seq.view(np.uint32) != prefix[:, -1].view(np.uint32))
    whole = _exact_products(x.reshape(1, -1))[0][-1]
    assert_bitwise_equal(_emulated(torch.prod, t).numpy(), np.float32(float(r32(whole))))
    half = x.astype(np.float16)
    wide = _emulated(lambda a: torch.prod(a, dim, dtype=torch.float64), torch.tensor(half))
    want64 = [float(q[-1]) for q in _exact_products(np.moveaxis(half, dim, -1))]
    assert wide.dtype == torch.float64
    assert_bitwise_equal(wide.numpy(), np.array(want64), msg="prod float16 -> float64")
    # narrowing: torch casts the float32 input to float16 first, then multiplies
    narrow = _emulated(lambda a: torch.prod(a, dim, dtype=torch.float16), t)
    want16 = [np.float16(np.float32(float(r32(q[-1]))))
              for q in _exact_products(np.moveaxis(half, dim, -1))]
    assert narrow.dtype == torch.float16
    assert_bitwise_equal(narrow.numpy(), np.array(want16), msg="prod float32 -> float16")


@pytest.mark.clause("TRC-RED-001")
def test_prod_gradients_follow_torchs_formula_with_and_without_zeros() -> None:
    """Inputs: x (3, 5) float32 with one zero in row 0 and two in row 1, ``prod(1)`` and
    ``cumprod(1)`` summed, backward under emulate. Expected: torch's own gradient for
    ``prod`` (its zero-safe formula is products of the other factors: a row with one
    zero has a single nonzero gradient, a row with two none) and for ``cumprod``, within
    4 float32 ulps (both are short products and sums; the values' exact agreement is
    the forward tests'). Pass: zero patterns equal, values within the bound."""
    x = torch.tensor([[1.5, -2.0, 0.0, 0.75, 3.0], [0.0, 1.25, 0.0, 2.0, -1.0],
                      [0.5, 1.5, -2.5, 1.125, 0.875]], requires_grad=True)
    with emulate(fallback="error"):
        (x.prod(1).sum() + x.cumprod(1).sum()).backward()
    got = x.grad.clone()
    x.grad = None
    (x.prod(1).sum() + x.cumprod(1).sum()).backward()
    assert torch.equal(got == 0, x.grad == 0)
    ulp = torch.finfo(torch.float32).eps * x.grad.abs().clamp_min(1)
    assert torch.all((got - x.grad).abs() <= 4 * ulp), (got, x.grad)


@pytest.mark.clause("TRC-RED-001")
def test_logcumsumexp_is_each_prefixs_value_rounded_to_float32() -> None:
    """Inputs: x (4, 12) float32, normal with scale 4, a -inf at the start of row 2 and
    40 in row 3; logcumsumexp over the last axis. Expected: fl32 of the 60-digit
    log(sum exp) of each prefix (-inf for the -inf prefix), values within 2^-45 of a
    boundary exempt. Pass: bitwise."""
    rng = np.random.default_rng(83)
    x = (rng.standard_normal((4, 12)) * 4).astype(np.float32)
    x[2, 0], x[3, 5] = -np.inf, 40.0
    got = _emulated(lambda t: torch.logcumsumexp(t, 1), torch.tensor(x)).numpy()
    assert got[2, 0] == -np.inf
    finite = np.ones((4, 12), bool)
    finite[2, 0] = False  # the lone -inf prefix: checked above
    exact = [_q(mp.log(mp.fsum(mp.exp(mp.mpf(float(v))) for v in x[r, :k + 1])))
             for r, k in zip(*np.nonzero(finite), strict=True)]
    _check(got[finite], exact, Q(1, 2**45), "logcumsumexp")


@pytest.mark.clause("TRC-RED-001")
def test_nansum_and_nanmean_skip_nans_with_exact_sums() -> None:
    """Inputs: x (5, 33) float32 with NaNs planted (one row all NaN), magnitudes 2^-30
    .. 2^10 (a float32 running sum drops the small ones); nansum over dim 1 and over
    everything, nanmean over dim 1. Expected: fl32(exact sum of the non-NaN values)
    (+0 for the all-NaN row), nanmean fl32(that / count) (NaN for the all-NaN row:
    0 / 0). Pass: bitwise (NaN any)."""
    rng = np.random.default_rng(88)
    x = (rng.standard_normal((5, 33)) * np.exp2(rng.integers(-30, 11, (5, 33)))).astype(np.float32)
    x[rng.random((5, 33)) < 0.2] = np.nan
    x[3] = np.nan
    t = torch.tensor(x)
    got = _emulated(lambda a: torch.nansum(a, 1), t).numpy()
    got_all = _emulated(torch.nansum, t).numpy()
    got_mean = _emulated(lambda a: torch.nanmean(a, 1), t).numpy()
    sums = [sum((Q(float(v)) for v in row if not np.isnan(v)), Q(0)) for row in x]
    counts = [int((~np.isnan(row)).sum()) for row in x]
    assert_bitwise_equal(got, np.array([float(r32(q)) for q in sums], np.float32))
    assert_bitwise_equal(got_all, np.float32(float(r32(sum(sums, Q(0))))))
    want_mean = [float(r32(r32(q) / c)) if c else np.nan for q, c in zip(sums, counts,
                                                                           strict=True)]
    assert_bitwise_equal(got_mean, np.array(want_mean, np.float32), nan="any")


@pytest.mark.clause("TRC-RED-001", "TRC-EMU-001")
def test_statistics_train_without_fallback_under_cuda_autocast() -> None:
    """Inputs: a linear layer whose output feeds a hand-written layer norm (var_mean),
    a logsumexp loss and a cumsum, fp16 CUDA autocast emulated, one backward.
    Expected: no op left to torch, finite gradients. Pass: all."""
    torch.manual_seed(0)
    lin = torch.nn.Linear(8, 8)
    x = torch.randn(4, 8)
    with emulate(lin, fallback="error") as em:
        from ampref.torch import autocast

        with autocast("cuda", dtype=torch.float16):
            h = lin(x).float()
            var, mean = torch.var_mean(h, -1, keepdim=True, correction=0)
            z = (h - mean) / torch.sqrt(var + 1e-5)
            loss = (torch.logsumexp(z, -1).mean() + torch.cumsum(z, -1).std()
                        + torch.cumprod(z.tanh(), -1).sum() + z.sigmoid().prod(-1).sum())
        loss.backward()
    assert em.report.not_emulated() == []
    assert lin.weight.grad is not None and torch.isfinite(lin.weight.grad).all()
