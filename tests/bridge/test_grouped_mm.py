"""Grouped GEMM (``_grouped_mm``, mixture-of-experts layers) under emulate (TRC-NN-014):
each group an exactly rounded matmul (exact rational oracle), torch's layouts of
groups, its gradient, and torch's own errors for arguments torch refuses."""

from __future__ import annotations

import re
from fractions import Fraction as Q
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from value_oracles import r32  # noqa: E402

from ampref.testing import assert_bitwise_equal  # noqa: E402
from ampref.torch import emulate  # noqa: E402


def _spread(seed: int, *shape: int) -> Any:
    rng = np.random.default_rng(seed)
    return torch.tensor((rng.standard_normal(shape) * 2.0 ** rng.integers(-12, 13, shape)
                         ).astype(np.float32))


def _dyadic(seed: int, *shape: int, dtype: Any = torch.float32) -> Any:
    """Multiples of 1/8 in [-2, 2]: every product and sum of 8-term dot products is
    exact in float32 and representable in every 16-bit dtype after rounding once."""
    g = torch.Generator().manual_seed(seed)
    return (torch.randint(-16, 17, shape, generator=g).float() / 8).to(dtype)


def _mm32(a: Any, b: Any) -> np.ndarray:
    """fl32 of each exact dot product of float32 matrices a (m, k) and b (k, n)."""
    A = [[Q(float(v)) for v in row] for row in a.tolist()]
    B = [[Q(float(v)) for v in row] for row in b.tolist()]
    m, k, n = len(A), len(B), len(B[0]) if B else 0
    return np.array([[float(r32(sum((A[i][t] * B[t][j] for t in range(k)), Q(0))))
                      for j in range(n)] for i in range(m)], np.float32).reshape(m, n)


def _emulated(fn: Any) -> Any:
    with emulate(fallback="error") as em:
        out = fn()
    assert em.report.not_emulated() == []
    return out


OFFS = torch.tensor([3, 3, 8], dtype=torch.int32)  # group 1 is empty; rows 8, 9 follow


@pytest.mark.clause("TRC-NN-014", "TRC-NN-001")
@pytest.mark.parametrize("case", ["2d x 3d", "3d x 3d", "2d x 2d", "3d x 2d"])
def test_each_group_is_an_exactly_rounded_matmul(case: str) -> None:
    """Inputs: float32 values spread over 2^-12 .. 2^12; 2d x 3d: a (10, 8) rows split at
    offs [3, 3, 8] (an empty group, rows 8 and 9 past the last offset), b (3, 8, 8);
    3d x 3d: (3, 4, 8) x (3, 8, 8); 2d x 2d: (4, 8) x (8, 8), the inner dimension split
    at [3, 3, 8]; 3d x 2d: (3, 4, 8) x (8, 8), the columns split at [3, 3, 8].
    Expected: each group's elements fl32(exact dot product), rows past the last offset
    and empty groups +0. Pass: bitwise."""
    if case == "2d x 3d":
        a, b = _spread(1, 10, 8), _spread(2, 3, 8, 8)
        want = np.zeros((10, 8), np.float32)
        want[0:3], want[3:8] = _mm32(a[0:3], b[0]), _mm32(a[3:8], b[2])
        got = _emulated(lambda: torch._grouped_mm(a, b, OFFS))
    elif case == "3d x 3d":
        a, b = _spread(3, 3, 4, 8), _spread(4, 3, 8, 8)
        want = np.stack([_mm32(a[g], b[g]) for g in range(3)])
        got = _emulated(lambda: torch._grouped_mm(a, b))
    elif case == "2d x 2d":
        a, b = _spread(5, 4, 8), _spread(6, 8, 8)
        want = np.stack([_mm32(a[:, 0:3], b[0:3]), np.zeros((4, 8), np.float32),
                         _mm32(a[:, 3:8], b[3:8])])
        got = _emulated(lambda: torch._grouped_mm(a, b, OFFS))
    else:
        a, b = _spread(7, 3, 4, 8), _spread(8, 8, 8)
        want = np.zeros((4, 8), np.float32)
        want[:, 0:3], want[:, 3:8] = _mm32(a[0], b[:, 0:3]), _mm32(a[2], b[:, 3:8])
        got = _emulated(lambda: torch._grouped_mm(a, b, OFFS))
    assert_bitwise_equal(got.numpy(), want, msg=case)


@pytest.mark.clause("TRC-NN-014")
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
def test_grouped_products_and_gradients_equal_torch_where_both_are_exact(dtype: str) -> None:
    """Inputs: multiples of 1/8 in [-2, 2] (every dot product exact), a (8, 8) split at
    offs [3, 3, 8], b (3, 8, 8), upstream gradient of the same kind, in float32 /
    bfloat16 / float16; forward and backward (whose gradients are _grouped_mm again:
    2-d x 3-d for a, 2-d x 2-d for b). Expected: torch's values, dtypes and gradients
    word for word (b's empty group's gradient +0), nothing left to torch.
    Pass: bitwise."""
    dt = getattr(torch, dtype)
    a0, b0, g = _dyadic(1, 8, 8, dtype=dt), _dyadic(2, 3, 8, 8, dtype=dt), _dyadic(3, 8, 8,
                                                                                   dtype=dt)
    runs = []
    for ours in (True, False):
        a, b = a0.clone().requires_grad_(), b0.clone().requires_grad_()
        if ours:
            y = _emulated(lambda a=a, b=b: _forward_backward(a, b, g))
        else:
            y = _forward_backward(a, b, g)
        runs.append((y, a.grad, b.grad))
    for got, want in zip(runs[0], runs[1], strict=True):
        assert got.dtype == want.dtype == dt
        assert_bitwise_equal(got.view(torch.int16 if dt != torch.float32 else torch.int32
                                      ).numpy(),
                             want.view(torch.int16 if dt != torch.float32 else torch.int32
                                       ).numpy(), msg=dtype)


def _forward_backward(a: Any, b: Any, g: Any) -> Any:
    y = torch._grouped_mm(a, b, OFFS)
    y.backward(g)
    return y


@pytest.mark.clause("TRC-NN-014", "TRC-EMU-002")
def test_arguments_torch_refuses_raise_torchs_error() -> None:
    """Inputs: float64 operands; int64 offsets; float32 rows whose stride is not a
    multiple of 16 bytes (k = 5). Expected: torch's RuntimeError for each, under
    emulate as without it. Pass: the messages match torch's."""
    calls = [lambda: torch._grouped_mm(torch.zeros(8, 8, dtype=torch.float64),
                                       torch.zeros(3, 8, 8, dtype=torch.float64), OFFS),
             lambda: torch._grouped_mm(torch.zeros(8, 8), torch.zeros(3, 8, 8), OFFS.long()),
             lambda: torch._grouped_mm(torch.zeros(8, 5), torch.zeros(3, 5, 8), OFFS)]
    for call in calls:
        with pytest.raises(RuntimeError) as theirs:
            call()
        with pytest.raises(RuntimeError, match=re.escape(str(theirs.value))):
            _emulated(call)
