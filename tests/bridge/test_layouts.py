"""Emulated outputs carry the metadata torch's CPU kernels give (TRC-EMU-005): strides,
dtypes and shapes of every output, op by op, for the ops whose meta kernel disagrees
with the CPU kernel (``ampref.torch.convert.KERNEL_META``) and for the outputs of
backward ops that return None beside tensors. Oracle: torch itself, the same calls run
without the mode and logged the same way."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import ExitStack
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402

from ampref.torch import emulate  # noqa: E402

fn = torch.nn.functional


class _Meta(TorchDispatchMode):  # type: ignore[misc]
    """Every aten op below autograd with the (shape, strides, dtype) of its outputs."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: list[tuple[str, list[tuple[Any, ...]]]] = []

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        outs = out if isinstance(out, (list, tuple)) else [out]
        self.ops.append((func.overloadpacket.__name__,
                         [(tuple(o.shape), o.stride(), o.dtype) for o in outs
                          if isinstance(o, torch.Tensor)]))
        return out


def _cl(*shape: int, dtype: Any = torch.float32) -> Any:
    """A seeded leaf in channels-last layout (2-d or 3-d)."""
    x = torch.randn(*shape, generator=torch.Generator().manual_seed(len(shape))).to(dtype)
    fmt = torch.channels_last if len(shape) == 4 else torch.channels_last_3d
    return x.to(memory_format=fmt).requires_grad_()


def _w(*shape: int, dtype: Any = torch.float32) -> Any:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(7)).to(
        dtype).requires_grad_()


CALLS: dict[str, Callable[[], Any]] = {
    "conv2d, channels-last input": lambda: fn.conv2d(_cl(2, 8, 6, 6), _w(16, 8, 3, 3),
                                                     _w(16), padding=1),
    "conv2d bfloat16, channels-last input": lambda: fn.conv2d(
        _cl(2, 8, 6, 6, dtype=torch.bfloat16), _w(16, 8, 3, 3, dtype=torch.bfloat16),
        padding=1),
    "depthwise conv2d, channels-last input": lambda: fn.conv2d(
        _cl(2, 8, 6, 6), _w(8, 1, 7, 7), padding=3, groups=8),
    "conv2d, channels-last weight": lambda: fn.conv2d(
        _w(2, 8, 6, 6), _w(16, 8, 3, 3).detach().to(
            memory_format=torch.channels_last).requires_grad_(), padding=1),
    "transposed conv2d, channels-last input": lambda: fn.conv_transpose2d(
        _cl(2, 8, 4, 4), _w(8, 4, 2, 2), stride=2),
    "conv3d, channels-last input": lambda: fn.conv3d(_cl(1, 4, 4, 4, 4), _w(4, 4, 3, 3, 3),
                                                     padding=1),
    "reflection pad 2-d": lambda: fn.pad(_cl(2, 8, 4, 4), (1, 1, 1, 1), "reflect"),
    "replication pad 3-d": lambda: fn.pad(_cl(1, 2, 3, 3, 3), (1, 1, 1, 1, 1, 1), "replicate"),
    "group norm without affine, channels-last": lambda: fn.group_norm(_cl(2, 8, 4, 4), 4),
    "group norm bfloat16 with float32 affine": lambda: fn.group_norm(
        _cl(2, 8, 4, 4, dtype=torch.bfloat16), 4, _w(8), _w(8)),
    "batch norm bfloat16 of a transposed view, float32 affine": lambda: fn.batch_norm(
        _w(2, 16, 8, dtype=torch.bfloat16).transpose(1, 2).view(2, 8, 4, 4),
        torch.zeros(8), torch.ones(8), _w(8), _w(8), training=True).contiguous(),
    "layer norm whose gradient arrives transposed": lambda: fn.layer_norm(
        _w(2, 3, 4, 5), [5], _w(5), _w(5)).transpose(1, 3).contiguous(),
    "layer norm bfloat16 over two dims, gradient permuted": lambda: fn.layer_norm(
        _w(2, 3, 4, 5, dtype=torch.bfloat16), [4, 5], _w(4, 5, dtype=torch.bfloat16),
        None).permute(0, 3, 1, 2),
    "a scalar to the power of a transposed tensor": lambda: torch.pow(2, _w(5, 4).t()),
    "hardswish of channels-last, its gradient contiguous": lambda: fn.hardswish(
        _cl(2, 3, 4, 5)).contiguous(),
    "elu of channels-last, its gradient contiguous": lambda: fn.elu(_cl(2, 3, 4, 5)).contiguous(),
    "softplus bfloat16 of channels-last, gradient contiguous": lambda: fn.softplus(
        _cl(2, 3, 4, 5, dtype=torch.bfloat16)).contiguous(),
    "hardtanh of channels-last, its gradient contiguous": lambda: fn.hardtanh(
        _cl(2, 3, 4, 5)).contiguous(),
    "log_softmax whose gradient arrives transposed": lambda: fn.log_softmax(
        _w(2, 3), 1).t().contiguous(),
    "mse loss of channels-last against contiguous": lambda: fn.mse_loss(
        _cl(2, 3, 4, 5), _w(2, 3, 4, 5).detach(), reduction="none").contiguous(),
    "floor division of a transposed tensor by a 0-d tensor": lambda: torch.div(
        _w(5, 4).t(), torch.tensor(3.0), rounding_mode="floor"),
    "log-sigmoid of a transposed tensor": lambda: fn.logsigmoid(_w(5, 4).t()),
    "glu of channels-last, its gradient contiguous": lambda: fn.glu(
        _cl(2, 4, 4, 5), dim=1).contiguous(),
    "huber loss of channels-last, its gradient contiguous": lambda: fn.huber_loss(
        _cl(2, 3, 4, 5), _w(2, 3, 4, 5).detach(), reduction="none").contiguous(),
    "renorm of a reversed-layout tensor": lambda: torch.renorm(
        _w(5, 4, 3).permute(2, 1, 0), 2, 0, 1.0),
    "frexp of an empty tensor (its backward's exp2 of an empty exponent)": lambda: torch.frexp(
        _w(1, 0, 3))[0],
    "dot product of two empty vectors": lambda: torch.linalg.vecdot(_w(0), _w(0)),
    "bidirectional bfloat16 LSTM (oneDNN's workspace output)": lambda: torch.nn.LSTM(
        4, 6, batch_first=True, bidirectional=True).to(torch.bfloat16)(
        _w(2, 5, 4, dtype=torch.bfloat16))[0],
    "batch norm in eval mode": lambda: fn.batch_norm(
        _w(2, 8, 4, 4), torch.zeros(8), torch.ones(8), _w(8), _w(8), training=False),
}


def _logged(call: Callable[[], Any], ours: bool) -> list[tuple[str, list[tuple[Any, ...]]]]:
    with ExitStack() as stack:
        if ours:
            stack.enter_context(emulate(fallback="error"))
        log = stack.enter_context(_Meta())
        y = call()
        y.float().pow(2).sum().backward()
    return log.ops


@pytest.mark.clause("TRC-EMU-005")
@pytest.mark.parametrize("name", sorted(CALLS))
def test_every_output_has_the_cpu_kernels_strides_dtype_and_shape(name: str) -> None:
    """Inputs: the call (channels-last convolutions forward and backward in float32 and
    bfloat16, depthwise and transposed, 3-d; padding backwards; group norm without
    affine parameters and with float32 ones on bfloat16; batch norm of a bfloat16
    transposed view, as LeViT's attention output; eval batch norm; layer norm whose
    output is used transposed, as EfficientViM's, so that its gradient arrives
    permuted; activation and loss backwards whose gradient and input differ in layout,
    log_softmax's gradient arriving transposed, a scalar to a transposed power: ops
    whose meta kernel's strides are not the CPU kernel's), squares
    summed, backward; logged op by op under emulate(fallback='error') and natively.
    Expected: the same ops with outputs of the same shapes, strides and dtypes (for
    example group norm's saved statistics float32, eval batch norm's empty).
    Pass: equal logs."""
    want, got = _logged(CALLS[name], False), _logged(CALLS[name], True)
    assert [op for op, _ in got] == [op for op, _ in want]
    for (op, ours), (_, theirs) in zip(got, want, strict=True):
        assert ours == theirs, f"{op}: ampref {ours}, torch {theirs}"


@pytest.mark.clause("TRC-EMU-005")
def test_a_view_of_a_permuted_channels_last_convolution_works_as_in_torch() -> None:
    """Inputs: a channels-last batch (2, 3, 8, 8) through a 3x3 convolution, the output
    permuted to NHWC and viewed as rows of channels, then a linear layer (as
    channels-last CNN heads and ConvNeXt blocks do). Expected: the view succeeds under
    emulate (a contiguous convolution output would make it raise), the values equal
    the emulated convolution's. Pass: no error; equal words."""
    conv = torch.nn.Conv2d(3, 4, 3, padding=1)
    x = torch.randn(2, 3, 8, 8, generator=torch.Generator().manual_seed(1)).to(
        memory_format=torch.channels_last)
    with emulate(fallback="error"):
        y = conv(x)
        rows = y.permute(0, 2, 3, 1).view(-1, 4)
        torch.nn.functional.linear(rows, torch.ones(2, 4))
    assert torch.equal(rows.view(torch.int32), y.permute(0, 2, 3, 1).reshape(-1, 4).view(
        torch.int32))


@pytest.mark.clause("TRC-EMU-005")
def test_every_listed_elementwise_backward_is_an_emulated_aten_op_torch_does_not_tag() -> None:
    """Input: ``ELEMENTWISE_BACKWARDS``. Expected: each name an aten op that ampref
    emulates (a handler), pure (writes no argument, draws no random number), and not
    tagged ``pointwise`` by torch (those are read from the kernel without an entry).
    Pass: no name fails."""
    from ampref.torch.base import HANDLERS
    from ampref.torch.convert import ELEMENTWISE_BACKWARDS
    bad = []
    for name in sorted(ELEMENTWISE_BACKWARDS):
        op = getattr(torch.ops.aten, name).default
        tags = {t.name for t in op.tags}
        if name not in HANDLERS or op._schema.is_mutable or "pointwise" in tags \
                or "nondeterministic_seeded" in tags:
            bad.append(name)
    assert bad == []
