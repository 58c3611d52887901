"""Vector norms of every order under emulate (``ampref.torch.vecnorms``, TRC-NN-001):
exact rational oracles for orders 1, inf, -inf and 0, 60-digit values (mpmath) for the
others, NaN propagation, and gradient clipping by the max norm end to end."""

from __future__ import annotations

import math
from fractions import Fraction as Q

import numpy as np
import pytest

torch = pytest.importorskip("torch")
mp = pytest.importorskip("mpmath")

from value_oracles import r32, r32_near  # noqa: E402

from ampref.testing import assert_bitwise_equal  # noqa: E402
from ampref.torch import emulate  # noqa: E402

mp.mp.dps = 60


def _x(seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((5, 17)) * 2.0 ** rng.integers(-20, 21, (5, 17))
            ).astype(np.float32)


@pytest.mark.clause("TRC-NN-001")
@pytest.mark.parametrize("order", [1, math.inf, -math.inf, 0])
@pytest.mark.parametrize("op", ["linalg_vector_norm", "norm"])
def test_norms_of_order_one_inf_and_zero_are_exact(order: float, op: str) -> None:
    """Inputs: x (5, 17) float32 over 2^-20 .. 2^20 with two zeros, the norm over the
    last axis through torch.linalg.vector_norm or torch.norm. Expected: fl32(exact sum
    |x|) (order 1), max |x|, min |x|, the count of nonzeros. Pass: bitwise."""
    x = _x(53)
    x[1, 3] = x[2, 0] = 0.0
    fn = {"linalg_vector_norm": lambda t: torch.linalg.vector_norm(t, order, dim=-1),
          "norm": lambda t: torch.norm(t, p=order, dim=-1)}[op]
    with emulate(fallback="error"):
        got = fn(torch.tensor(x)).numpy()
    rows = [[Q(float(abs(v))) for v in row] for row in x]
    want = {1: lambda r: float(r32(sum(r, Q(0)))), math.inf: lambda r: float(max(r)),
            -math.inf: lambda r: float(min(r)),
            0: lambda r: float(sum(1 for v in r if v != 0))}[order]
    assert_bitwise_equal(got, np.array([want(r) for r in rows], np.float32), msg=f"{order}")


@pytest.mark.clause("TRC-NN-001")
@pytest.mark.parametrize("order", [3, 0.5, 1.5])
def test_other_orders_are_their_value_rounded_to_float32(order: float) -> None:
    """Inputs: x (5, 17) float32 over 2^-4 .. 2^4, order 3 / 0.5 / 1.5 over the last axis.
    Expected: fl32 of the 60-digit (sum |x|^p)^(1/p), values within 2^-40 of a float32
    boundary exempt (float64 evaluation). Pass: bitwise on the rest."""
    rng = np.random.default_rng(int(order * 10))
    x = (rng.standard_normal((5, 17)) * 2.0 ** rng.integers(-4, 5, (5, 17))).astype(np.float32)
    with emulate(fallback="error"):
        got = torch.linalg.vector_norm(torch.tensor(x), order, dim=-1).numpy()
    want, near = [], []
    for row in x:
        total = mp.fsum(mp.power(abs(mp.mpf(float(e))), order) for e in row)
        _, man, exp, _ = mp.power(total, 1 / mp.mpf(order))._mpf_
        r, n = r32_near(Q(int(man)) * Q(2) ** int(exp), Q(1, 2**40))
        want.append(float(r))
        near.append(n)
    keep = ~np.array(near)
    assert keep.sum() >= 4
    assert_bitwise_equal(got[keep], np.array(want, np.float32)[keep], msg=f"{order}")


@pytest.mark.clause("TRC-NN-001")
@pytest.mark.parametrize("order", [1, 2, math.inf, -math.inf, 3])
def test_a_nan_makes_every_norm_nan(order: float) -> None:
    """Inputs: a row with one NaN among finite values. Expected: NaN for every order
    (torch's value; NumPy's fmax would have skipped it). Pass: NaN."""
    x = torch.tensor([[1.0, float("nan"), -2.0]])
    with emulate(fallback="error"):
        got = torch.linalg.vector_norm(x, order, dim=-1)
    assert torch.isnan(got).all()


@pytest.mark.clause("TRC-NN-001", "TRC-EMU-001")
@pytest.mark.parametrize("norm_type", [math.inf, 1.0, 2.0])
def test_gradient_clipping_by_any_norm_runs_emulated(norm_type: float) -> None:
    """Inputs: a linear layer's gradients from one step, clip_grad_norm_ to 0.01 with
    norm_type inf / 1 / 2 under emulate(fallback='error'). Expected: the returned total
    norm equals the norm of the gradients' norms computed by the oracle (max, exact sum,
    root of the exact sum of squares, each rounded as the clause says); no fallback.
    Pass: bitwise and no op left to torch."""
    torch.manual_seed(1)
    lin = torch.nn.Linear(6, 4)
    lin(torch.randn(3, 6)).square().sum().backward()
    grads = [p.grad.detach().numpy().copy() for p in lin.parameters() if p.grad is not None]
    with emulate(lin, fallback="error") as em:
        total = torch.nn.utils.clip_grad_norm_(lin.parameters(), 0.01, norm_type=norm_type)
    assert em.report.not_emulated() == []
    flat = [np.abs(g.reshape(-1)) for g in grads]
    if norm_type == math.inf:
        want = np.float32(max(float(f.max()) for f in flat))
    elif norm_type == 1.0:
        per = [r32(sum((Q(float(v)) for v in f), Q(0))) for f in flat]
        want = np.float32(float(r32(sum(per, Q(0)))))
    else:
        per = [np.float32(math.sqrt(float(r32(sum((Q(float(v)) ** 2 for v in f), Q(0))))))
               for f in flat]
        want = np.float32(math.sqrt(float(r32(sum((Q(float(v)) ** 2 for v in per), Q(0))))))
    assert_bitwise_equal(np.float32(total), want, msg=f"norm_type {norm_type}")


@pytest.mark.clause("TRC-NN-001")
@pytest.mark.parametrize("p", [2.0, 1.0, math.inf])
def test_cdist_is_each_pairs_exact_distance_and_its_gradient_exact_sums(p: float) -> None:
    """Inputs: x1 (2, 4, 5) and x2 (2, 3, 5) of wide exponents (2^-12 .. 2^12), p = 2 /
    1 / inf, compute_mode donot_use_mm (torch's direct kernel); an upstream gradient.
    Expected: per pair fl32(sqrt(fl32(exact sum (a - b)^2))), fl32(exact sum |a - b|),
    max |a - b| rounded; for p 2 and 1 x1's gradient fl32(exact sum over x2's rows of
    fl(fl(g fl32(a - b)) / dist)) resp. fl(g sign(a - b)). Pass: bitwise."""
    rng = np.random.default_rng(int(p) if p != math.inf else 9)
    x1 = (rng.standard_normal((2, 4, 5)) * 2.0 ** rng.integers(-12, 13, (2, 4, 5))
          ).astype(np.float32)
    x2 = (rng.standard_normal((2, 3, 5)) * 2.0 ** rng.integers(-12, 13, (2, 3, 5))
          ).astype(np.float32)
    g = rng.standard_normal((2, 4, 3)).astype(np.float32)
    t1 = torch.tensor(x1, requires_grad=True)
    with emulate(fallback="error"):
        y = torch.cdist(t1, torch.tensor(x2), p=p, compute_mode="donot_use_mm_for_euclid_dist")
        if p != math.inf:
            y.backward(torch.tensor(g))
    want = np.zeros((2, 4, 3), np.float32)
    grad = np.zeros((2, 4, 5), np.float32)
    for b, i, j in np.ndindex(2, 4, 3):
        diffs = [Q(float(u)) - Q(float(v)) for u, v in zip(x1[b, i], x2[b, j], strict=True)]
        if p == 2.0:
            want[b, i, j] = np.float32(math.sqrt(float(r32(sum((d * d for d in diffs), Q(0))))))
        elif p == 1.0:
            want[b, i, j] = float(r32(sum((abs(d) for d in diffs), Q(0))))
        else:
            want[b, i, j] = float(r32(max(abs(d) for d in diffs)))
    assert_bitwise_equal(y.detach().numpy(), want, msg=f"p={p}")
    if p == math.inf:
        return
    for b, i, k in np.ndindex(2, 4, 5):
        terms = []
        for j in range(3):
            d = np.float32(x1[b, i, k]) - np.float32(x2[b, j, k])
            dist = want[b, i, j]
            gj = np.float32(g[b, i, j])
            t = np.float32(gj * d) / dist if p == 2.0 else gj * np.sign(d)
            terms.append(Q(0) if dist == 0 else Q(float(np.float32(t))))
        grad[b, i, k] = float(r32(sum(terms, Q(0))))
    assert t1.grad is not None
    assert_bitwise_equal(t1.grad.numpy(), grad, msg=f"gradient p={p}")


@pytest.mark.clause("TRC-NN-001")
@pytest.mark.parametrize("p", [2.0, 1.0, math.inf])
def test_pdist_is_each_row_pairs_exact_distance_and_its_gradient_exact_sums(p: float) -> None:
    """Inputs: x (6, 5) of wide exponents (2^-12 .. 2^12) with row 4 equal to row 1 (a
    zero distance), p = 2 / 1 / inf; an upstream gradient over the 15 pairs i < j.
    Expected: per pair (torch's order, i major) fl32(sqrt(fl32(exact sum (a - b)^2))),
    fl32(exact sum |a - b|), max |a - b|; for p 2 and 1 row k's gradient
    fl32(exact sum of +term over its pairs (k, j) and -term over (i, k)), term
    fl(fl(g fl32(a - b)) / dist) resp. fl(g sign(a - b)), 0 at a zero distance.
    Pass: bitwise."""
    rng = np.random.default_rng(int(p) + 20 if p != math.inf else 29)
    x = (rng.standard_normal((6, 5)) * 2.0 ** rng.integers(-12, 13, (6, 5))).astype(np.float32)
    x[4] = x[1]
    g = rng.standard_normal(15).astype(np.float32)
    t = torch.tensor(x, requires_grad=True)
    with emulate(fallback="error"):
        y = torch.nn.functional.pdist(t, p)
        if p != math.inf:
            y.backward(torch.tensor(g))
    pairs = [(i, j) for i in range(6) for j in range(i + 1, 6)]
    want = np.zeros(15, np.float32)
    for n, (i, j) in enumerate(pairs):
        diffs = [Q(float(u)) - Q(float(v)) for u, v in zip(x[i], x[j], strict=True)]
        if p == 2.0:
            want[n] = np.float32(math.sqrt(float(r32(sum((d * d for d in diffs), Q(0))))))
        elif p == 1.0:
            want[n] = float(r32(sum((abs(d) for d in diffs), Q(0))))
        else:
            want[n] = float(r32(max(abs(d) for d in diffs)))
    assert_bitwise_equal(y.detach().numpy(), want, msg=f"p={p}")
    if p == math.inf:
        return
    terms: dict[tuple[int, int], list[Q]] = {(k, c): [] for k in range(6) for c in range(5)}
    for n, (i, j) in enumerate(pairs):
        for c in range(5):
            d = np.float32(x[i, c]) - np.float32(x[j, c])
            with np.errstate(divide="ignore", invalid="ignore"):
                tv = np.float32(g[n] * d) / want[n] if p == 2.0 else g[n] * np.sign(d)
            term = Q(0) if want[n] == 0 else Q(float(np.float32(tv)))
            terms[i, c].append(term)
            terms[j, c].append(-term)
    grad = np.array([[float(r32(sum(terms[k, c], Q(0)))) for c in range(5)]
                     for k in range(6)], np.float32)
    assert t.grad is not None
    assert_bitwise_equal(t.grad.numpy(), grad, msg=f"gradient p={p}")


@pytest.mark.clause("TRC-NN-001", "TRC-RED-001")
def test_float64_norms_and_statistics_are_computed_in_float64() -> None:
    """Inputs: a seeded float64 8x9 tensor spread over 2^-30..2^30 under emulate: the 2-
    and 1-norms of each row, the max-norm, ``logsumexp``, ``var``/``std`` (correction 1)
    and ``var_mean``'s mean per row. Expected: the 2-norm fl64(sqrt(fl64(exact sum x^2)))
    and the 1-norm fl64(exact sum |x|) bitwise (Fraction oracles), the max-norm the
    largest |x| exactly; logsumexp, var and std within 2^-45 relative of their exact or
    60-digit values (before, each went through float32: errors of 2^-24 or more).
    Pass: bitwise / the bound."""
    rng = np.random.default_rng(17)
    v = rng.standard_normal((8, 9)) * 2.0 ** rng.integers(-30, 30, (8, 9))
    x = torch.from_numpy(v)
    with emulate(fallback="error"):
        two, one = torch.linalg.vector_norm(x, 2, dim=1), torch.linalg.vector_norm(x, 1, dim=1)
        top = torch.linalg.vector_norm(x, math.inf, dim=1)
        lse, var, std = torch.logsumexp(x / 2.0 ** 28, 1), x.var(1), x.std(1)
        _, mean = torch.var_mean(x, 1)
    rows = [[Q(float(e)) for e in row] for row in v]
    want_two = [math.sqrt(float(sum(e * e for e in r))) for r in rows]
    want_one = [float(sum(abs(e) for e in r)) for r in rows]
    assert_bitwise_equal(two.numpy(), np.array(want_two), msg="2-norm")
    assert_bitwise_equal(one.numpy(), np.array(want_one), msg="1-norm")
    assert_bitwise_equal(top.numpy(), np.abs(v).max(1), msg="max-norm")
    mpmath = pytest.importorskip("mpmath")
    mpmath.mp.dps = 60
    for i, r in enumerate(rows):
        mu: Q = sum(r, Q(0)) / 9
        exact_var: Q = sum(((e - mu) ** 2 for e in r), Q(0)) / 8
        lse_i = mpmath.log(sum(mpmath.exp(mpmath.mpf(float(e)) / 2 ** 28) for e in v[i]))
        for got, want in ((var[i].item(), exact_var), (mean[i].item(), mu)):
            assert abs(Q(got) - want) <= abs(want) * Q(1, 2 ** 45), (i, got)
        assert abs(std[i].item() - math.sqrt(float(exact_var))) <= 2.0 ** -45 * std[i].item()
        assert abs(lse[i].item() - float(lse_i)) <= 2.0 ** -45 * abs(float(lse_i)), i


@pytest.mark.clause("TRC-NN-001")
@pytest.mark.parametrize("p", [2.0, 1.0])
def test_cdist_of_broadcast_batches_gives_both_gradients_as_torchs_formula(p: float) -> None:
    """Inputs: x1 (2, 1, 3, 2) and x2 (1, 4, 2) (batch dims broadcast to (2, 1)) of wide
    exponents, p = 2 / 1, an upstream gradient g (2, 1, 3, 4), both operands requiring
    grad. Expected (rational oracle): x1's gradient per element fl32(exact sum over x2's
    rows of the float32 term t(g, fl32(a - b), dist)); x2's the same term with the roles
    swapped, summed exactly per batch and rounded, then the two batches' values summed
    exactly and rounded once (autograd reduces torch's broadcast-batch result with a sum,
    ENG-RED-001). Pass: bitwise, where _cdist_backward raised a NumPy broadcast error."""
    rng = np.random.default_rng(17 + int(p))
    x1 = (rng.standard_normal((2, 1, 3, 2)) * 2.0 ** rng.integers(-8, 9, (2, 1, 3, 2))
          ).astype(np.float32)
    x2 = (rng.standard_normal((1, 4, 2)) * 2.0 ** rng.integers(-8, 9, (1, 4, 2))
          ).astype(np.float32)
    g = rng.standard_normal((2, 1, 3, 4)).astype(np.float32)
    t1, t2 = torch.tensor(x1, requires_grad=True), torch.tensor(x2, requires_grad=True)
    with emulate(fallback="error"):
        y = torch.cdist(t1, t2, p=p, compute_mode="donot_use_mm_for_euclid_dist")
        y.backward(torch.tensor(g))
    dist = y.detach().numpy()

    def term(gv: np.float32, a: np.float32, b: np.float32, d: np.float32) -> Q:
        diff = np.float32(a - b)
        t = np.float32(gv * diff) / d if p == 2.0 else gv * np.sign(diff)
        return Q(0) if d == 0 else Q(float(np.float32(t)))

    want1 = np.zeros(x1.shape, np.float32)
    for b, i, k in np.ndindex(2, 3, 2):
        want1[b, 0, i, k] = float(r32(sum((term(g[b, 0, i, j], x1[b, 0, i, k], x2[0, j, k],
                                                 dist[b, 0, i, j]) for j in range(4)), Q(0))))
    want2 = np.zeros(x2.shape, np.float32)
    for j, k in np.ndindex(4, 2):
        per_batch = [r32(sum((term(g[b, 0, i, j], x2[0, j, k], x1[b, 0, i, k],
                                   dist[b, 0, i, j]) for i in range(3)), Q(0)))
                     for b in range(2)]
        want2[0, j, k] = float(r32(sum(per_batch, Q(0))))
    assert t1.grad is not None and t2.grad is not None
    assert_bitwise_equal(t1.grad.numpy(), want1, msg=f"x1 gradient p={p}")
    assert_bitwise_equal(t2.grad.numpy(), want2, msg=f"x2 gradient p={p}")
