"""Ops that masked transformers and RNNs issue on the CPU, emulated (TRC-NRM-004,
TRC-RNN-001), and jmp-style policies on torch calls (TRC-AUT-003)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")
at = pytest.importorskip("ampref.torch")

import ampref  # noqa: E402
from ampref import functional as F  # noqa: E402
from ampref.testing import assert_bitwise_equal  # noqa: E402


@pytest.mark.clause("TRC-NRM-004")
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_safe_softmax_is_the_engines_softmax_and_zero_on_fully_masked_rows(dtype: str) -> None:
    """Input: a (3, 5) score matrix with one row all -inf, one row half -inf, one finite,
    through aten._safe_softmax under emulate. Expected: the fully masked row is 0 (as
    torch's own _safe_softmax gives, where softmax gives NaN); the others equal the
    engine's softmax bitwise. Pass: both, and torch's row agrees on the zeros."""
    dt = getattr(torch, dtype)
    x = torch.randn(3, 5).to(dt)
    x[0] = float("-inf")
    x[1, 2:] = float("-inf")
    theirs = torch.ops.aten._safe_softmax(x, -1)
    with at.emulate():
        ours = torch.ops.aten._safe_softmax(x, -1)
    assert torch.equal(theirs[0], torch.zeros(5, dtype=dt)) and \
        torch.equal(ours[0], torch.zeros(5, dtype=dt))
    engine = F.softmax(ampref.tensor(x[1:].float().numpy(), dtype=dtype), -1)
    assert_bitwise_equal(ours[1:].float().numpy(), np.asarray(engine.data, np.float32))


def _cell_twin(lstm: Any, suffix: str) -> Any:
    cell = torch.nn.LSTMCell(lstm.input_size, lstm.hidden_size).to(lstm.weight_ih_l0.dtype)
    with torch.no_grad():
        for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"):
            getattr(cell, name).copy_(getattr(lstm, f"{name}_l0{suffix}"))
    return cell


@pytest.mark.clause("TRC-RNN-001")
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_lstm_layers_equal_the_lstmcell_decomposition_bit_for_bit(dtype: str) -> None:
    """Input: a bidirectional nn.LSTM (torch's CPU path: one mkldnn_rnn_layer per
    direction, emulated as one op) and nn.LSTMCell twins with its weights stepped by hand
    (torch's unfused cell: linear, add, chunk, sigmoid, tanh, mul, each aten op emulated
    separately), both under emulate. Expected: the same definition by two routes: equal
    outputs for both directions and equal final states. Pass: bitwise equality."""
    dt = getattr(torch, dtype)
    torch.manual_seed(0)
    lstm = torch.nn.LSTM(5, 6, 1, bidirectional=True).to(dt)
    x = torch.randn(7, 3, 5).to(dt)
    with at.emulate():
        y, (h, c) = lstm(x)
        for d, (suffix, steps) in enumerate((("", range(7)), ("_reverse", range(6, -1, -1)))):
            cell = _cell_twin(lstm, suffix)
            hh, cc = torch.zeros(3, 6, dtype=dt), torch.zeros(3, 6, dtype=dt)
            outs = {}
            for t in steps:
                hh, cc = cell(x[t], (hh, cc))
                outs[t] = hh
            twin = torch.stack([outs[t] for t in range(7)])
            assert torch.equal(y[..., d * 6:(d + 1) * 6], twin), f"direction {d}"
            assert torch.equal(h[d], hh) and torch.equal(c[d], cc), f"direction {d}"


@pytest.mark.clause("TRC-RNN-001")
def test_lstm_gradients_lie_within_float32_rounding_of_torchs_onednn_lstm() -> None:
    """Input: a 2-layer bidirectional float32 nn.LSTM, loss sum(y) + sum(h_n), backward
    in torch (oneDNN) and under emulate. Expected: the emulated output and every
    gradient (input, 16 weight and bias tensors) within 1e-5 of torch's, relative to each
    tensor's largest magnitude (both are float32 computations of one function; neither is
    exactly rounded end to end). Pass: all within."""
    torch.manual_seed(1)
    lstm = torch.nn.LSTM(4, 5, 2, bidirectional=True)
    x = torch.randn(6, 2, 4, requires_grad=True)

    def run() -> list[Any]:
        lstm.zero_grad()
        x.grad = None
        y, (h, _) = lstm(x)
        (y.sum() + h.sum()).backward()
        return [y.detach(), x.grad.clone(), *(p.grad.clone() for p in lstm.parameters())]

    theirs = run()
    with at.emulate():
        ours = run()
    assert len(ours) == 18
    for a, b in zip(theirs, ours, strict=True):
        scale = max(a.abs().max().item(), 1e-30)
        assert (a - b).abs().max().item() <= 1e-5 * scale


@pytest.mark.clause("TRC-AUT-003")
def test_a_jmp_policy_casts_every_torch_call_into_the_compute_format() -> None:
    """Input: linear, softmax and exp of float32 tensors and a float64 tensor under
    policy 'params=float32,compute=bfloat16,output=float32'. Expected: every result in
    bfloat16 (softmax and exp too, which torch's lists keep in float32), float64 left
    as it is. Pass: the four dtypes."""
    x, w = torch.randn(4, 8), torch.randn(3, 8)
    with at.autocast(policy="params=float32,compute=bfloat16,output=float32"):
        dts = (torch.nn.functional.linear(x, w).dtype, torch.softmax(x, -1).dtype,
               torch.exp(x).dtype, torch.exp(x.double()).dtype)
    assert dts == (torch.bfloat16, torch.bfloat16, torch.bfloat16, torch.float64)


@pytest.mark.clause("TRC-NRM-001")
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_overlapping_max_pool_gradients_are_exact_sums_rounded_once(dtype: str) -> None:
    """Input: ResNet's max pool (3x3, stride 2, padding 1: windows overlap) backward on a
    (2, 3, 9, 9) input, seeded gradients. Expected: each input's gradient is the exact
    sum (Fractions) of the output gradients whose argmax it is, rounded to float32 and
    then to the dtype. Pass: bitwise equal to that oracle."""
    from fractions import Fraction

    dt = getattr(torch, dtype)
    torch.manual_seed(0)
    x = torch.randn(2, 3, 9, 9).to(dt)
    y, idx = torch.nn.functional.max_pool2d(x, 3, 2, 1, return_indices=True)
    g = torch.randn_like(y)
    with at.emulate():
        ours = torch.ops.aten.max_pool2d_with_indices_backward(
            g, x, [3, 3], [2, 2], [1, 1], [1, 1], False, idx)
    grads, where = g.float().numpy().reshape(6, -1), idx.numpy().reshape(6, -1)
    exact = np.zeros((6, 81))
    for p in range(6):
        acc: dict[int, Fraction] = {}
        for v, k in zip(grads[p], where[p], strict=True):
            acc[int(k)] = acc.get(int(k), Fraction(0)) + Fraction(float(v))
        for k, v in acc.items():
            exact[p, k] = float(v)
    want = torch.from_numpy(exact.astype(np.float32)).to(dt).reshape(x.shape)
    assert_bitwise_equal(ours.float().numpy(), want.float().numpy())
