"""torch's CPU LSTM on ampref's engine (``specs/torch.md`` TRC-RNN-*).

``nn.LSTM`` on the CPU runs one fused oneDNN op per layer and direction,
``mkldnn_rnn_layer`` (and ``mkldnn_rnn_layer_backward``); ``nn.GRU`` and ``nn.RNN``
decompose into aten ops ampref already covers. The reference definition of one LSTM
layer is the textbook cell written with the engine's ops in the input's format, each op
rounding once (as torch's unfused ``lstm_cell`` does op by op):

    gates = linear(x_t, W_ih, b_ih) + linear(h, W_hh, b_hh)      (gate order i, f, g, o)
    c = sigmoid(f) * c + sigmoid(i) * tanh(g);   h = sigmoid(o) * tanh(c)

stepping t = 0..T-1 (T-1..0 for the reverse direction) over a time-major input. The
backward op replays that graph in the engine and returns its gradients in float32 for
bfloat16/float16 layers (the dtype torch's backward kernel returns) and in the input's
dtype otherwise. oneDNN's own kernel keeps the gates in float32; the difference is a
stated definition difference, not a defect (TRC-RNN-001).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from ampref.engine import functional as F
from ampref.engine.tensor import Tensor as EngineTensor

from .convert import engine, on_zeros, to_torch
from .replay import as_torch, forward

__all__ = ["RNN"]

Handler = Callable[[Any, Any, tuple[Any, ...], dict[str, Any]], Any]

_LSTM = 2  # mkldnn_rnn_layer's mode for LSTM (0, 1: RNN relu/tanh, 3: GRU)


def _layer(x: Any, w_ih: Any, w_hh: Any, b_ih: Any, b_hh: Any, h: Any, c: Any, reverse: bool,
           accumulation: str) -> tuple[Any, Any, Any]:
    """One LSTM layer over time-major ``x`` (T, B, F): (outputs (T, B, H), h_T, c_T)."""
    steps, hidden = x.shape[0], h.shape[-1]
    outs: list[Any] = [None] * steps
    for t in (range(steps - 1, -1, -1) if reverse else range(steps)):
        gates = F.add(F.linear(F.index(x, t), w_ih, b_ih, accumulation=accumulation),
                      F.linear(h, w_hh, b_hh, accumulation=accumulation))
        i, f, g, o = (F.index(gates, (slice(None), slice(k * hidden, (k + 1) * hidden)))
                      for k in range(4))
        c = F.add(F.mul(F.sigmoid(f), c), F.mul(F.sigmoid(i), F.tanh(g)))
        h = F.mul(F.sigmoid(o), F.tanh(c))
        outs[t] = F.reshape(h, (1, *h.shape))
    return F.concat(outs, 0), h, c


def _check(mode: int, batch_sizes: Any, bidirectional: bool) -> None:
    if mode != _LSTM or list(batch_sizes or []):
        raise NotImplementedError(f"ampref.torch: mkldnn_rnn_layer is emulated for LSTM "
                                  f"(mode 2) without packed sequences, got mode {mode}")


def _lstm(ctx: Any, func: Any, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
    x, w_ih, w_hh, b_ih, b_hh, hx, cx, reverse, batch_sizes, mode, _, _, has_biases, bidi = \
        args[:14]
    _check(mode, batch_sizes, bidi)
    biases = (b_ih, b_hh) if has_biases else (None, None)
    # the states are (B, H) under autograd and (1, B, H) where torch.lstm's composite runs
    # whole (inference mode); the outputs take the given shape
    shape = tuple(hx.shape)
    out, h, c = forward(lambda x_, wi, wh, bi, bh, h0, c0: _layer(
        x_, wi, wh, bi, bh, h0, c0, bool(reverse), ctx.accumulation),
        x, w_ih, w_hh, *biases, hx.reshape(shape[-2:]), cx.reshape(shape[-2:]))
    # torch's backward state, unused by ampref's backward: as oneDNN's forward makes it
    # (the meta kernel says 0 bytes; bfloat16 training needs some; none without
    # training), from the forward run once per signature on zeros
    ws = on_zeros(func, args, kw)[3]
    workspace = None if ws is None else torch.empty(tuple(ws.shape), dtype=torch.uint8)
    return (as_torch(out, x.dtype), as_torch(h, x.dtype).reshape(shape),
            as_torch(c, x.dtype).reshape(shape), workspace)


def _lstm_bwd(ctx: Any, func: Any, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
    x, w_ih, w_hh, b_ih, b_hh, hx, cx = args[:7]
    g_out, g_hy, g_cy, reverse, mode = args[10:15]
    has_biases, bidi, batch_sizes = args[17], args[19], args[20]
    _check(mode, batch_sizes, bidi)
    inputs = [x, w_ih, w_hh, b_ih, b_hh, hx, cx]
    eng = [engine(t, requires_grad=True) for t in inputs]
    b_i, b_h = (eng[3], eng[4]) if has_biases else (None, None)
    out, h, c = _layer(eng[0], eng[1], eng[2], b_i, b_h, eng[5], eng[6], bool(reverse),
                       ctx.accumulation)
    # one scalar whose gradient with respect to (out, h, c) is exactly (g_out, g_hy, g_cy)
    terms = [F.sum(F.mul(y, engine(g))) for y, g in ((out, g_out), (h, g_hy), (c, g_cy))
             if g is not None]
    total = terms[0]
    for t in terms[1:]:
        total = F.add(total, t)
    total.backward(EngineTensor(np.ones((), np.float32), total.format))
    dtype = torch.float32 if x.dtype in (torch.bfloat16, torch.float16) else x.dtype
    return tuple(to_torch(np.asarray(e.grad), dtype) if e.grad is not None
                 else torch.zeros(t.shape, dtype=dtype) for t, e in zip(inputs, eng, strict=True))


#: aten op name (overload packet) -> handler
RNN: dict[str, Handler] = {"mkldnn_rnn_layer": _lstm, "mkldnn_rnn_layer_backward": _lstm_bwd}
