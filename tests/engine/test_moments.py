"""var and std (ENG-VAR-001) step by step against exact rational oracles, against torch
within a stated bound, and in torch's two spellings (unbiased=, correction=)."""

from __future__ import annotations

from decimal import Decimal
from fractions import Fraction as Q
from typing import Any

import numpy as np
import pytest
from oracle import round_value
from value_oracles import DTYPES, dec, from_dec, r32

import ampref
from ampref.engine import functional as F
from ampref.testing import assert_bitwise_equal


def _exact_var(row: list[Q], c: float) -> tuple[Q, list[Q]]:
    """The two-pass formula with a float32 rounding after every step (module docstring of
    ampref.engine.functional.moments), in exact rationals: (var32, deviations)."""
    n = len(row)
    m = r32(r32(sum(row, Q(0))) / n)
    d = [r32(v - m) for v in row]
    s = r32(sum((r32(e * e) for e in d), Q(0)))
    return r32(s / Q(n - Q(c))), d


def _sqrt32(v: Q) -> Q:
    return r32(from_dec(dec(v).sqrt()))


@pytest.mark.clause("ENG-VAR-001", "ENG-BWD-001")
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("correction", [0, 1, 0.5])
def test_var_std_and_their_gradients_round_at_the_stated_steps(dtype: str,
                                                              correction: float) -> None:
    """Inputs: a 5x7 tensor of ``dtype`` (normal values scaled by 2^-3..2^3 and offset by
    100 in one row, where a one-pass formula would cancel), reduced over dim 1 with
    ``correction``; output gradients from a fixed seed. Expected: each row's var and std,
    and the input gradients of both, equal to the exact-rational evaluation of the stated
    float32 steps rounded to ``dtype``. Pass: every element equal."""
    rng = np.random.default_rng(11)
    raw = rng.standard_normal((5, 7)) * np.exp2(rng.integers(-3, 4, (5, 1)))
    raw[2] += 100.0
    x = ampref.quantize(raw, dtype).astype(np.float64)
    g = ampref.quantize(rng.standard_normal(5), dtype).astype(np.float64)
    fmt = ampref.get_format(dtype)
    for name in ("var", "std"):
        t = ampref.tensor(x, dtype, requires_grad=True)
        out = getattr(F, name)(t, 1, correction=correction)
        out.backward(ampref.tensor(g, dtype))
        want, want_g = [], []
        for row, gi in zip(x, g, strict=True):
            v, d = _exact_var([Q(float(e)) for e in row], correction)
            r = _sqrt32(v) if name == "std" else v
            want.append(float(round_value(r, fmt)))
            gq = Q(float(gi))
            if name == "std":
                gq = r32(gq / r32(2 * r))
            scale = r32(r32(2 * gq) / Q(7 - Q(correction)))
            want_g.append([float(round_value(r32(scale * e), fmt)) for e in d])
        assert_bitwise_equal(out.numpy(), np.array(want, np.float32), msg=f"{name} {dtype}")
        assert_bitwise_equal(np.asarray(t.grad), np.array(want_g, np.float32),
                             msg=f"{name} {dtype} gradient")


@pytest.mark.clause("ENG-VAR-001")
@pytest.mark.parametrize("kw", [{}, {"dim": 1}, {"dim": 0, "keepdim": True},
                                {"dim": (0, 1), "correction": 0}, {"dim": -1, "unbiased": False},
                                {"dim": 1, "correction": 2}])
def test_var_and_std_are_within_two_ulps_of_torchs(kw: dict[str, Any]) -> None:
    """Inputs: a 16x33 float32 tensor (values ~N(3, 1)); torch's spellings of the
    reduction. Expected: torch's shape, and values within 2 ulps (torch accumulates
    differently; measured at most 1 ulp). Pass: shapes equal, ulp distance <= 2."""
    torch = pytest.importorskip("torch")
    x = (np.random.default_rng(2).standard_normal((16, 33)) + 3).astype(np.float32)
    for name in ("var", "std"):
        ours = getattr(ampref.tensor(x), name)(**kw).numpy()
        theirs = getattr(torch.tensor(x), name)(**kw).numpy()
        assert ours.shape == theirs.shape
        gap = np.abs(ours.view(np.int32).astype(np.int64) - theirs.view(np.int32))
        assert gap.max() <= 2, f"{name} {kw}: {gap.max()} ulps"


@pytest.mark.clause("ENG-VAR-001", "ENG-SPC-001")
@pytest.mark.parametrize("values, correction", [([1.5], 1), ([1.5], 0), ([2.0, 2.0], 1),
                                                ([1.0, np.nan], 0), ([1.0, np.inf], 1),
                                                ([1.0, 3.0], 2), ([1.0, 3.0], 3)])
def test_degenerate_slices_give_torchs_nan_inf_and_zero(values: list[float],
                                                        correction: float) -> None:
    """Inputs: one element with correction 1 (0/0), constant values, NaN, inf, and
    corrections reaching or passing n. Expected: torch's float32 results (NaN, 0, inf)
    bit for bit, NaN equal to any NaN. Pass: equal bits."""
    torch = pytest.importorskip("torch")
    import warnings
    x = np.array(values, np.float32)
    for name in ("var", "std"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # torch warns for degrees of freedom <= 0
            want = getattr(torch.tensor(x), name)(correction=correction).numpy()
        got = getattr(ampref.tensor(x), name)(correction=correction).numpy()
        assert_bitwise_equal(got, want, nan="any", msg=f"{name}{values} c={correction}")


@pytest.mark.clause("ENG-VAR-001", "API-ERR-001")
@pytest.mark.parametrize("call, error, match", [
    (lambda x: x.var(0, unbiased=True, correction=1), TypeError, "not both"),
    (lambda x: x.std(unbiased="yes"), TypeError, "unbiased"),
    (lambda x: x.var(correction="1"), TypeError, "correction must be a real number"),
    (lambda x: x.var(correction=float("nan")), ValueError, "correction must be finite"),
    (lambda x: x.var(2), ValueError, "dim"),
    (lambda x: F.var(ampref.tensor([1, 2])), TypeError, "var"),
])
def test_bad_var_and_std_arguments_are_refused(call: Any, error: Any, match: str) -> None:
    """Inputs: both spellings at once, non-bool unbiased, non-real or NaN correction, a
    dim out of range, an integer tensor. Expected: the error naming it. Pass: raises."""
    with pytest.raises(error, match=match):
        call(ampref.ones(2, 3))


@pytest.mark.clause("ENG-VAR-001")
def test_a_hand_written_layer_norm_equals_torchs_within_the_bound() -> None:
    """Inputs: (x - mean) / sqrt(var(unbiased=False) + eps) on a 4x64 float32 tensor in
    both libraries, the same script text. Expected: within 2^-20 of torch's, absolutely
    (outputs are about N(0, 1); torch's mean or var may differ in the last bit, which
    shifts x - mean by up to ulp(mean) and scales the row by about 2^-23: a relative
    bound would fail only where x - mean cancels). Pass: max |difference| <= 2^-20."""
    torch = pytest.importorskip("torch")
    x = np.random.default_rng(5).standard_normal((4, 64)).astype(np.float32)
    outs = []
    for lib in (ampref, torch):
        t = lib.tensor(x)
        mean, v = t.mean(-1, keepdim=True), t.var(-1, keepdim=True, unbiased=False)
        outs.append(((t - mean) / (v + 1e-5).sqrt()).numpy())
    assert np.abs(outs[0] - outs[1]).max() <= 2.0**-20


def test_the_oracle_helpers_round_as_float32(  # the oracle's own check, no clause
) -> None:
    """Inputs: sqrt(2) and 1/3 through the helpers. Expected: float32's values. Pass:
    equal."""
    assert float(_sqrt32(Q(2))) == float(np.float32(np.sqrt(np.float64(2))))
    assert float(r32(Q(1, 3))) == float(np.float32(1 / 3))
    assert isinstance(dec(Q(1, 4)), Decimal)
