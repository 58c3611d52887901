"""``where``, ``tril`` and ``triu`` against torch's: picked values bit for bit in every
format (specials included), torch's promotion and weak scalars, integer tensors, and the
same refusals (specs/engine.md ENG-SEL-001)."""

from __future__ import annotations

import numpy as np
import pytest

import ampref
from torch_compare import assert_same_result

torch = pytest.importorskip("torch")

SPECIAL = np.array([[np.nan, -0.0, np.inf, 1.5], [-np.inf, 2.0**-24, -3.0, 0.0],
                    [65504.0, -2.0**-14, 7.0, np.nan]])
TORCH_DT = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


def _pair(fmt: str) -> tuple[object, object]:
    """The special values in ``fmt`` for both libraries (torch casts from float32)."""
    x32 = ampref.quantize(SPECIAL, fmt).astype(np.float32)
    return ampref.tensor(x32, fmt), torch.tensor(x32).to(TORCH_DT[fmt])


@pytest.mark.clause("ENG-SEL-001")
@pytest.mark.parametrize("fmt", sorted(TORCH_DT))
@pytest.mark.parametrize("k", [-1, 0, 2])
def test_tril_and_triu_keep_torchs_bits_and_zero_the_rest(fmt: str, k: int) -> None:
    """Inputs: a 3 x 4 tensor of NaN, ±0, ±inf, subnormal, fp16 max and plain values in
    ``fmt``, tril and triu with diagonal ``k``. Expected: torch's values: picked elements
    unchanged (NaN and -0 included), +0 elsewhere (over NaN and inf too). Pass: equal
    float32 bit patterns of the values."""
    ours, theirs = _pair(fmt)
    for op in ("tril", "triu"):
        assert_same_result(getattr(ampref, op)(ours, k), getattr(torch, op)(theirs, k),
                           f"{op} {fmt} diagonal {k}")


@pytest.mark.clause("ENG-SEL-001", "ENG-PRM-001")
@pytest.mark.parametrize("fmt", sorted(TORCH_DT))
def test_where_picks_torchs_bits_with_torchs_promotion_and_weak_scalars(fmt: str) -> None:
    """Inputs: the special 3 x 4 tensor in ``fmt``, a condition of its row/column
    pattern, against (a) a float32 tensor, (b) the scalar 1 + 2^-11 + 2^-40 (a value
    torch rounds through float32, landing on a fp16 tie), (c) the same tensor flipped,
    with the scalar on either side. Expected: torch.where's values and dtype (float32 for
    a float32 partner; ``fmt`` with a scalar). Pass: equal dtype names and bits."""
    ours, theirs = _pair(fmt)
    cond = np.arange(12).reshape(3, 4) % 3 != 1
    c_o, c_t = ampref.tensor(cond), torch.tensor(cond)
    other = np.linspace(-2, 2, 12, dtype=np.float32).reshape(3, 4)
    v = 1 + 2.0**-11 + 2.0**-40
    cases = [(lambda c, x, o: (c, x, o)), (lambda c, x, o: (c, x, v)),
             (lambda c, x, o: (c, v, x)), (lambda c, x, o: (c, x, x[[2, 1, 0]]))]
    for make in cases:
        assert_same_result(ampref.where(*make(c_o, ours, ampref.tensor(other))),
                           torch.where(*make(c_t, theirs, torch.tensor(other))), f"where {fmt}")


@pytest.mark.clause("ENG-SEL-001")
def test_tril_of_an_integer_tensor_stays_integer_as_torchs() -> None:
    """Inputs: the int64 3 x 4 tensor 0..11 and its bool mask (> 4), tril(1) and
    triu(-1); the causal mask tril(ones(4, 4)). Expected: torch's values and dtypes.
    Pass: equal lists and dtype names."""
    data = np.arange(12).reshape(3, 4)
    for d in (data, data > 4):
        for op, k in (("tril", 1), ("triu", -1)):
            got = getattr(ampref, op)(ampref.tensor(d), k)
            want = getattr(torch, op)(torch.tensor(d), k)
            assert got.tolist() == want.tolist() and got.dtype == str(want.dtype)[6:]
    assert ampref.tril(ampref.ones(4, 4)).tolist() == torch.tril(torch.ones(4, 4)).tolist()


@pytest.mark.clause("ENG-SEL-001", "API-ERR-001")
def test_where_tril_and_triu_refuse_what_torch_refuses_by_name() -> None:
    """Inputs: a float condition, an int64 tensor as a value, two scalars, a float
    diagonal, a 1-D tensor for tril. Expected: torch raises for each; ampref raises a
    TypeError/ValueError naming the problem. Pass: both raise, ampref's words match."""
    x, tx = ampref.tensor(np.ones((2, 2))), torch.ones(2, 2)
    cases = [(lambda: ampref.where(x, x, x), lambda: torch.where(tx, tx, tx),
              TypeError, "condition must be a bool"),
             (lambda: ampref.tril(x, 1.0), lambda: torch.tril(tx, 1.0),  # type: ignore[arg-type]
              TypeError, "diagonal must be an int"),
             (lambda: ampref.tril(ampref.tensor(np.ones(3))), lambda: torch.tril(torch.ones(3)),
              ValueError, "at least 2 dims"),
             (lambda: ampref.triu(ampref.tensor([1, 2])), lambda: torch.triu(torch.tensor([1, 2])),
              ValueError, "at least 2 dims")]
    for ours, theirs, error, words in cases:
        with pytest.raises((RuntimeError, TypeError, ValueError)):
            theirs()
        with pytest.raises(error, match=words):
            ours()
    with pytest.raises(TypeError, match="integer tensor"):
        ampref.where(x > 0, ampref.tensor([[1, 2], [3, 4]]), x)
    with pytest.raises(TypeError, match="at least one of input and other"):
        ampref.where(x > 0, 1.0, 2.0)
