"""``addmm`` and ``baddbmm`` with any bias shape and factors under emulate (TRC-NN-001)
against an exact rational oracle: ``fl_out(fl32(fl32(alpha P) + fl32(beta c)))`` with
``P = fl32(exact m1 @ m2)``; ``beta = 0`` ignores ``c`` (NaN included)."""

from __future__ import annotations

from fractions import Fraction as Q
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from value_oracles import r32  # noqa: E402

import ampref  # noqa: E402
from ampref.testing import assert_bitwise_equal  # noqa: E402
from ampref.torch import emulate  # noqa: E402


def _oracle(c: np.ndarray, a: np.ndarray, b: np.ndarray, beta: float, alpha: float,
            dtype: str) -> np.ndarray:
    """Per batch and element, the exact dot product and the float32 epilogue steps."""
    lead = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    out = np.zeros(lead + (a.shape[-2], b.shape[-1]), np.float64)
    cb = np.broadcast_to(c, out.shape)
    for idx in np.ndindex(out.shape):
        *bt, i, j = idx
        ai, bj = a[tuple(bt)][i], b[tuple(bt)][:, j]
        p = r32(sum((Q(float(x)) * Q(float(y)) for x, y in zip(ai, bj, strict=True)), Q(0)))
        if alpha != 1:
            p = r32(Q(alpha) * p)
        if beta != 0:
            cv = Q(float(cb[idx]))
            p = r32(p + (cv if beta == 1 else r32(Q(beta) * cv)))
        out[idx] = float(p)
    return ampref.quantize(out, dtype).astype(np.float32)


CASES = {"addmm 2-d bias": ((3, 5), (3, 4), (4, 5), 1.0, 1.0),
         "addmm factors": ((5,), (3, 4), (4, 5), 0.5, 2.0),
         "addmm beta 3/7": ((3, 5), (3, 4), (4, 5), 3 / 7, 1.0),
         "baddbmm attention": ((2, 3, 5), (2, 3, 4), (2, 4, 5), 0.0, 0.125),
         "baddbmm broadcast bias": ((1, 3, 5), (2, 3, 4), (2, 4, 5), 1.0, 1.0)}


@pytest.mark.clause("TRC-NN-001")
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_addmm_and_baddbmm_are_the_exact_product_with_a_float32_epilogue(
        name: str, dtype: str) -> None:
    """Inputs: ``name``'s shapes and (beta, alpha), wide-exponent operands in float32 or
    bfloat16. Expected: the oracle's fl_out(fl32(fl32(alpha P) + fl32(beta c))).
    Pass: bitwise."""
    cs, as_, bs, beta, alpha = CASES[name]
    rng = np.random.default_rng(len(name))
    dt = getattr(torch, dtype)

    def draw(shape: tuple[int, ...]) -> Any:
        v = rng.standard_normal(shape) * np.exp2(rng.integers(-6, 7, shape))
        return torch.tensor(v, dtype=torch.float32).to(dt)
    c, a, b = draw(cs), draw(as_), draw(bs)
    op = torch.addmm if len(as_) == 2 else torch.baddbmm
    with emulate(fallback="error"):
        got = op(c, a, b, beta=beta, alpha=alpha)
    want = _oracle(c.float().numpy(), a.float().numpy(), b.float().numpy(), beta, alpha,
                   dtype)
    assert_bitwise_equal(got.float().numpy(), want, msg=f"{name} {dtype}")


@pytest.mark.clause("TRC-NN-001")
def test_beta_zero_ignores_the_bias_even_when_it_is_nan() -> None:
    """Inputs: baddbmm with a NaN / inf bias, beta = 0. Expected: alpha times the
    product, no NaN (torch documents that such an input is ignored). Pass: finite and
    equal to fl32(alpha fl32(exact product))."""
    a, b = torch.randn(2, 3, 4), torch.randn(2, 4, 5)
    c = torch.full((2, 3, 5), float("nan"))
    c[0, 0, 0] = float("inf")
    with emulate(fallback="error"):
        got = torch.baddbmm(c, a, b, beta=0.0, alpha=0.5)
    want = _oracle(np.zeros((2, 3, 5), np.float32), a.numpy(), b.numpy(), 0.0, 0.5,
                   "float32")
    assert_bitwise_equal(got.numpy(), want)


VECTOR_CASES = {"addmv": ((3,), (3, 4), (4,), 1.0, 1.0),
                "addmv factors": ((1,), (3, 4), (4,), 0.5, 2.0),
                "addr": ((3, 5), (3,), (5,), 1.0, 1.0),
                "addr beta 0": ((3, 5), (3,), (5,), 0.0, 3.0)}


@pytest.mark.clause("TRC-NN-001")
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("name", sorted(VECTOR_CASES))
def test_addmv_and_addr_are_addmms_epilogue_on_a_column_and_an_outer_product(
        name: str, dtype: str) -> None:
    """Inputs: ``name``'s shapes and (beta, alpha), wide-exponent operands in float32 or
    bfloat16 (a broadcast (1,) bias for addmv). Expected: the addmm oracle with the
    vector as a column (addmv) or the two vectors as a column and a row (addr: each
    product rounded once), reshaped to torch's output. Pass: bitwise."""
    cs, as_, bs, beta, alpha = VECTOR_CASES[name]
    rng = np.random.default_rng(len(name) + 40)
    dt = getattr(torch, dtype)

    def draw(shape: tuple[int, ...]) -> Any:
        v = rng.standard_normal(shape) * np.exp2(rng.integers(-6, 7, shape))
        return torch.tensor(v, dtype=torch.float32).to(dt)
    c, a, b = draw(cs), draw(as_), draw(bs)
    outer = name.startswith("addr")
    with emulate(fallback="error"):
        got = (torch.addr if outer else torch.addmv)(c, a, b, beta=beta, alpha=alpha)
    av, bv, cv = a.float().numpy(), b.float().numpy(), c.float().numpy()
    m1, m2 = (av[:, None], bv[None, :]) if outer else (av, bv[:, None])
    bias = cv if outer else np.broadcast_to(cv, (av.shape[0],))[:, None]
    want = _oracle(bias, m1, m2, beta, alpha, dtype).reshape(tuple(got.shape))
    assert_bitwise_equal(got.float().numpy(), want, msg=f"{name} {dtype}")


@pytest.mark.clause("TRC-NN-001")
@pytest.mark.parametrize("beta,alpha", [(1.0, 1.0), (0.5, 3.0)])
def test_addbmm_is_the_exact_batch_summed_product_with_addmms_epilogue(
        beta: float, alpha: float) -> None:
    """Inputs: c (3, 5), b1 (4, 3, 2), b2 (4, 2, 5) of wide exponents, (beta, alpha).
    Expected: the addmm oracle on b1 as (3, 8) (batches side by side) and b2 as (8, 5):
    fl32(fl32(alpha fl32(exact sum over batches and k)) + fl32(beta c)). Pass:
    bitwise."""
    rng = np.random.default_rng(int(alpha * 10))

    def draw(shape: tuple[int, ...]) -> np.ndarray:
        return (rng.standard_normal(shape) * np.exp2(rng.integers(-6, 7, shape))
                ).astype(np.float32)
    c, b1, b2 = draw((3, 5)), draw((4, 3, 2)), draw((4, 2, 5))
    with emulate(fallback="error"):
        got = torch.addbmm(torch.tensor(c), torch.tensor(b1), torch.tensor(b2), beta=beta,
                           alpha=alpha)
    want = _oracle(c, b1.transpose(1, 0, 2).reshape(3, 8), b2.reshape(8, 5), beta, alpha,
                   "float32")
    assert_bitwise_equal(got.numpy(), want)
