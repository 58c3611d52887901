"""The engine's scaled_dot_product_attention with grouped-query heads (ENG-ATT-001):
against the same attention on explicitly repeated key/value heads (forward), an exact
rational sum of the copies' gradients (backward), and the torch bridge's emulation of
torch's own ``enable_gqa`` (which repeats with torch and runs the engine's attention)."""

from __future__ import annotations

from fractions import Fraction as Q

import numpy as np
import pytest

import ampref
from ampref.engine import functional as F
from ampref.testing import assert_bitwise_equal
from value_oracles import r32


def _operands(hq: int, hk: int, fmt: str) -> list[np.ndarray]:
    rng = np.random.default_rng(hq * 10 + hk)
    shapes = [(2, hq, 5, 8), (2, hk, 6, 8), (2, hk, 6, 8)]
    return [ampref.quantize(rng.standard_normal(s), fmt).astype(np.float32) for s in shapes]


@pytest.mark.clause("ENG-ATT-001")
@pytest.mark.parametrize("fmt", ["float32", "bfloat16"])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("hq,hk", [(6, 2), (4, 1)])
def test_grouped_query_attention_is_attention_on_repeated_heads_with_summed_gradients(
        fmt: str, causal: bool, hq: int, hk: int) -> None:
    """Inputs: q (2, hq, 5, 8), k and v (2, hk, 6, 8) in ``fmt`` (6 query heads on 2
    key/value heads; 4 on 1, multi-query attention), causal or not, and the upstream sum.
    Expected: output equal to the attention on k, v with each head repeated hq/hk times
    in a row (torch's repeat_interleave); k's and v's gradients the exact sum of the
    copies' gradients from that run, rounded once to float32 then to ``fmt``; q's
    gradient equal. Pass: bitwise."""
    g = hq // hk
    q, k, v = _operands(hq, hk, fmt)
    eq, ek, ev = (ampref.tensor(a, fmt, requires_grad=True) for a in (q, k, v))
    y = F.scaled_dot_product_attention(eq, ek, ev, is_causal=causal, enable_gqa=True)
    F.sum(y).backward()
    rq, rk, rv = (ampref.tensor(a, fmt, requires_grad=True)
                  for a in (q, np.repeat(k, g, axis=1), np.repeat(v, g, axis=1)))
    r = F.scaled_dot_product_attention(rq, rk, rv, is_causal=causal)
    F.sum(r).backward()
    assert_bitwise_equal(y.numpy(), r.numpy(), msg="forward")
    assert_bitwise_equal(np.asarray(eq.grad), np.asarray(rq.grad), msg="query gradient")
    for name, got, copies in (("key", ek.grad, rk.grad), ("value", ev.grad, rv.grad)):
        c = np.asarray(copies, np.float64).reshape(2, hk, g, 6, 8)
        want = ampref.quantize(_r32(c), fmt).astype(np.float32)
        assert_bitwise_equal(np.asarray(got, np.float32), want, msg=name)


def _r32(c: np.ndarray) -> np.ndarray:
    """fl32 of the exact sum over the copies axis (2), by exact rationals."""
    out = np.empty(c.shape[:2] + c.shape[3:], np.float64)
    for idx in np.ndindex(out.shape):
        b, h, i, j = idx
        out[idx] = float(r32(sum((Q(float(c[b, h, g, i, j])) for g in range(c.shape[2])),
                                 Q(0))))
    return out


@pytest.mark.clause("ENG-ATT-001")
def test_grouped_query_attention_equals_the_torch_bridges_emulation() -> None:
    """Inputs: q (2, 4, 5, 8), k and v (2, 2, 6, 8) float32, causal; torch's
    scaled_dot_product_attention(enable_gqa=True) under ampref.torch.emulate on the same
    values. Expected: outputs and all three gradients equal. Pass: bitwise."""
    torch = pytest.importorskip("torch")
    from ampref.torch import emulate
    q, k, v = _operands(4, 2, "float32")
    eq, ek, ev = (ampref.tensor(a, requires_grad=True) for a in (q, k, v))
    F.sum(F.scaled_dot_product_attention(eq, ek, ev, is_causal=True, enable_gqa=True)
          ).backward()
    tq, tk, tv = (torch.tensor(a, requires_grad=True) for a in (q, k, v))
    with emulate(fallback="error"):
        torch.nn.functional.scaled_dot_product_attention(
            tq, tk, tv, is_causal=True, enable_gqa=True).sum().backward()
    for e, t in ((eq, tq), (ek, tk), (ev, tv)):
        assert_bitwise_equal(np.asarray(e.grad), t.grad.numpy())


@pytest.mark.clause("ENG-ATT-001")
def test_grouped_query_attention_refuses_head_counts_that_do_not_divide() -> None:
    """Inputs: 6 query heads with 4 key/value heads; key 2 and value 3 heads; 3-d
    operands. Expected: ValueError naming the counts (or the shapes). Pass: messages."""
    q, k, v = (ampref.tensor(a) for a in _operands(6, 4, "float32"))
    with pytest.raises(ValueError, match=r"dividing the query's 6, got key 4 and value 4"):
        F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
    q2, k2, _ = (ampref.tensor(a) for a in _operands(6, 2, "float32"))
    v3 = ampref.tensor(np.ones((2, 3, 6, 8), np.float32))
    with pytest.raises(ValueError, match=r"got key 2 and value 3"):
        F.scaled_dot_product_attention(q2, k2, v3, enable_gqa=True)
    flat = ampref.tensor(np.ones((5, 8), np.float32))
    with pytest.raises(ValueError, match=r"enable_gqa needs heads on axis -3"):
        F.scaled_dot_product_attention(flat, flat, flat, enable_gqa=True)


@pytest.mark.clause("ENG-ATT-002")
@pytest.mark.parametrize("dim,heads,causal", [(16, 4, True), (16, 2, False), (12, 3, True),
                                              (8, 8, False)])
def test_the_attention_module_is_torchs_self_attention_with_the_same_weights(
        dim: int, heads: int, causal: bool) -> None:
    """ENG-ATT-002. Inputs: ampref nn.MultiheadAttention(dim, heads, causal, seed=3) on a
    seeded float32 (2, 5, dim) batch; torch's nn.MultiheadAttention(dim, heads,
    batch_first=True) in float64 given the same weights (in_proj = qkv, out_proj =
    proj) and a boolean mask above the diagonal when causal. Expected: torch's output
    up to float32 rounding (shapes with heads == dim/heads included, where a transposed
    head layout still has the right shape). Pass: max |ours - torch| <= 2^-18 max
    |torch|."""
    torch = pytest.importorskip("torch")
    m = ampref.nn.MultiheadAttention(dim, heads, causal=causal, seed=3)
    x = np.random.default_rng(dim + heads).standard_normal((2, 5, dim)).astype(np.float32)
    ours = m(ampref.tensor(x)).numpy().astype(np.float64)
    ref = torch.nn.MultiheadAttention(dim, heads, batch_first=True, dtype=torch.float64)
    with torch.no_grad():
        for theirs, mine in ((ref.in_proj_weight, m.qkv.weight), (ref.in_proj_bias, m.qkv.bias),
                             (ref.out_proj.weight, m.proj.weight),
                             (ref.out_proj.bias, m.proj.bias)):
            assert mine is not None  # the module's projections have biases
            theirs.copy_(torch.from_numpy(mine.numpy().astype(np.float64)))
        xt = torch.from_numpy(x.astype(np.float64))
        mask = torch.triu(torch.ones(5, 5, dtype=torch.bool), 1) if causal else None
        want = ref(xt, xt, xt, attn_mask=mask, need_weights=False)[0].numpy()
    err, size = float(np.abs(ours - want).max()), float(np.abs(want).max())
    assert err <= 2.0**-18 * size, f"max error {err:.3g} against max |torch| {size:.3g}"
