"""Grouped-query attention under emulate (TRC-NN-002): ``enable_gqa`` shares each key /
value head among consecutive query heads, torch's ``repeat_interleave`` definition; the
oracle is the same model written with explicit ``repeat_interleave`` (whose backward
is an aten ``sum``, the engine's exactly rounded sum) and, for the key/value gradients,
an exact rational sum of the repeated heads' gradients."""

from __future__ import annotations

from fractions import Fraction as Q
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from value_oracles import r32  # noqa: E402

from ampref.testing import assert_bitwise_equal  # noqa: E402
from ampref.torch import emulate  # noqa: E402

TF = torch.nn.functional


def _run(q: Any, k: Any, v: Any, g: Any, causal: bool, gqa: bool) -> list[Any]:
    ins = [t.detach().clone().requires_grad_(True) for t in (q, k, v)]
    rep = ins[0].shape[1] // ins[1].shape[1]
    with emulate(fallback="error"):
        if gqa:
            y = TF.scaled_dot_product_attention(*ins, is_causal=causal, enable_gqa=True)
        else:
            y = TF.scaled_dot_product_attention(ins[0], ins[1].repeat_interleave(rep, 1),
                                                ins[2].repeat_interleave(rep, 1),
                                                is_causal=causal)
        y.backward(g)
    return [y.detach()] + [t.grad for t in ins]


@pytest.mark.clause("TRC-NN-002")
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("causal", [False, True])
def test_grouped_query_attention_is_attention_on_repeated_key_value_heads(
        dtype: str, causal: bool) -> None:
    """Inputs: q with 6 heads, k and v with 2 (groups of 3), batch 2, 5 positions,
    head size 8, float32 or bfloat16, causal or not; a random upstream gradient.
    Expected: output and q, k, v gradients equal those of the explicit repeat_interleave
    model bit for bit, and each key/value gradient equals fl(exact sum of the gradients
    of its 3 copies). Pass: bitwise, every tensor."""
    gen = torch.Generator().manual_seed(3)
    dt = getattr(torch, dtype)
    q = torch.randn(2, 6, 5, 8, generator=gen).to(dt)
    k, v = (torch.randn(2, 2, 5, 8, generator=gen).to(dt) for _ in range(2))
    g = torch.randn(2, 6, 5, 8, generator=gen).to(dt)
    got = _run(q, k, v, g, causal, True)
    want = _run(q, k, v, g, causal, False)
    for name, a, b in zip(("out", "dq", "dk", "dv"), got, want, strict=True):
        assert_bitwise_equal(a.float().numpy(), b.float().numpy(), msg=f"{name} {dtype}")
    # the key/value heads' gradients: the exact sum of their copies', rounded once
    copies = _copy_grads(q, k, v, g, causal)
    for name, grad, per_copy in (("dk", got[2], copies[0]), ("dv", got[3], copies[1])):
        pc = per_copy.float().numpy().reshape(2, 2, 3, 5, 8)
        want_np = np.zeros((2, 2, 5, 8))
        for idx in np.ndindex(2, 2, 5, 8):
            total = sum((Q(float(pc[idx[0], idx[1], c, idx[2], idx[3]])) for c in range(3)),
                        Q(0))
            want_np[idx] = float(r32(total))
        want_t = torch.tensor(want_np, dtype=torch.float32).to(dt).float().numpy()
        assert_bitwise_equal(grad.float().numpy(), want_t, msg=f"{name} exact sum")


def _copy_grads(q: Any, k: Any, v: Any, g: Any, causal: bool) -> tuple[Any, Any]:
    """The gradients of the repeated key and value heads themselves (6 heads each)."""
    kr = k.repeat_interleave(3, 1).requires_grad_(True)
    vr = v.repeat_interleave(3, 1).requires_grad_(True)
    qq = q.clone().requires_grad_(True)
    with emulate(fallback="error"):
        TF.scaled_dot_product_attention(qq, kr, vr, is_causal=causal).backward(g)
    assert kr.grad is not None and vr.grad is not None
    return kr.grad, vr.grad


@pytest.mark.clause("TRC-NN-002")
def test_attention_with_heads_that_do_not_divide_is_refused_naming_the_counts() -> None:
    """Inputs: the emulated attention op called directly with 4 query heads and 3 key /
    value heads. Expected: UnsupportedOpError naming both head counts (not a NumPy
    broadcasting error). Pass: the type and both numbers in the message."""
    q, k = torch.randn(1, 4, 5, 8), torch.randn(1, 3, 5, 8)
    with pytest.raises(NotImplementedError, match="4 query heads and 3 key"):
        with emulate(fallback="error"):
            torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(q, k, k)


@pytest.mark.clause("TRC-NN-002")
@pytest.mark.parametrize("causal", [False, True])
def test_the_direct_attention_ops_logsumexp_is_that_of_the_scaled_scores(causal: bool) -> None:
    """Inputs: the CPU flash-attention op called directly under emulate (2 x 3 heads, 6
    positions, head size 8, seeded; scores of size up to about 4), causal or not.
    Expected: its second output, the logsumexp of each query's scaled (and causally
    masked) scores, within 1e-5 of a float64 oracle computed from q and k with NumPy (the
    scores' own float32 roundings differ by about 1e-7 relative), and within 1e-5 of
    torch's own logsumexp. Pass: both bounds, on every element."""
    rng = np.random.default_rng(17)
    q, k, v = (torch.tensor(rng.standard_normal((2, 3, 6, 8)).astype(np.float32))
               for _ in range(3))
    op = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu
    with emulate(fallback="error"):
        lse = op(q, k, v, is_causal=causal)[1]
    s = q.numpy().astype(np.float64) @ np.swapaxes(k.numpy().astype(np.float64), -1, -2)
    s = s / np.sqrt(8.0)
    if causal:
        s = np.where(np.triu(np.ones((6, 6), bool), 1), -np.inf, s)
    m = s.max(-1, keepdims=True)
    want = (m + np.log(np.exp(s - m).sum(-1, keepdims=True)))[..., 0]
    assert lse.shape == want.shape
    assert np.abs(lse.numpy() - want).max() <= 1e-5, np.abs(lse.numpy() - want).max()
    theirs = op(q, k, v, is_causal=causal)[1].numpy()
    assert np.abs(lse.numpy() - theirs).max() <= 1e-5, np.abs(lse.numpy() - theirs).max()
