"""Between torch tensors and ampref: dtypes as formats, values as exact NumPy arrays.

Every torch floating dtype ampref has a format for maps to it by name; values cross as
float32 (float64 for float64) NumPy arrays, which hold every value of those formats
exactly, so no conversion rounds. Integer and bool tensors cross as their own dtype.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt
import torch

from ampref.engine.tensor import Tensor as EngineTensor
from ampref.formats.cast import encode, quantize
from ampref.formats.table import Format, get_format

__all__ = ["ELEMENTWISE_BACKWARDS", "FLOAT_DTYPES", "KERNEL_META", "dtype_steps", "engine",
           "format_of", "from_numpy", "is_float", "kernel_meta", "meta", "on_zeros",
           "to_numpy", "to_torch"]

#: torch's floating dtypes by the ampref format of the same values
FLOAT_DTYPES: dict[torch.dtype, str] = {
    torch.float32: "float32", torch.float64: "float64", torch.float16: "float16",
    torch.bfloat16: "bfloat16",
}
for _name in ("float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz",
              "float8_e8m0fnu"):
    if hasattr(torch, _name):
        FLOAT_DTYPES[getattr(torch, _name)] = _name


def is_float(t: Any) -> bool:
    """True for a torch tensor of a floating dtype."""
    return isinstance(t, torch.Tensor) and t.dtype.is_floating_point


def format_of(dtype: torch.dtype) -> Format:
    """The ampref format of a torch floating dtype.

    Raises:
        TypeError: a dtype ampref has no format for (complex, or a new float type).
    """
    try:
        return get_format(FLOAT_DTYPES[dtype])
    except KeyError:
        raise TypeError(f"no ampref format for torch dtype {dtype}; known: "
                        f"{', '.join(str(d) for d in FLOAT_DTYPES)}") from None


def dtype_steps(dtype: torch.dtype) -> Callable[[Any], Any]:
    """One operation of torch's 16-bit (c10 Half/BFloat16) arithmetic: the float32 value
    rounded to ``dtype`` (nearest-even, overflow to inf, NaN kept), returned as float32;
    the identity for every other dtype. The 16-bit CPU kernels that round each step
    (pointwise, losses, linspace) are written with it."""
    if dtype not in (torch.float16, torch.bfloat16):
        return lambda v: v
    fmt = FLOAT_DTYPES[dtype]
    return lambda v: quantize(np.asarray(v, np.float32), fmt)


def to_numpy(t: torch.Tensor) -> npt.NDArray[Any]:
    """The values of ``t``: float32 (float64 for float64) for floating tensors, exactly;
    the tensor's own dtype otherwise."""
    t = t.detach()
    if t.dtype.is_floating_point:
        wide = t.dtype == torch.float64
        return t.to(torch.float64 if wide else torch.float32).cpu().numpy()
    return t.cpu().numpy()


def _writable(arr: Any) -> Any:
    # (ascontiguousarray would make a 0-d array 1-d; torch wants writable memory)
    return arr if arr.flags.c_contiguous and arr.flags.writeable else arr.copy()


def from_numpy(values: Any, dtype: torch.dtype) -> torch.Tensor:
    """Round ``values`` (float32/float64, exact or wide results) once into ``dtype``
    (nearest-even) and return the torch tensor. Formats narrower than float32 cross as
    ampref's codes, so a NaN keeps ampref's NaN code (torch's own conversion would pick
    its NaN)."""
    arr = np.asarray(values)
    if not dtype.is_floating_point:
        return torch.from_numpy(_writable(arr)).to(dtype)
    wide = arr.dtype == np.float64
    src = arr.astype(np.float64 if wide else np.float32, copy=False)
    if dtype in (torch.float32, torch.float64):
        return torch.from_numpy(_writable(np.asarray(src, dtype=(
            np.float64 if dtype == torch.float64 else np.float32))))
    fmt = format_of(dtype)
    with np.errstate(all="ignore"):
        codes = encode(src, fmt)
    ints = {8: torch.uint8, 16: torch.int16}[codes.dtype.itemsize * 8]
    raw = codes.view(np.int16) if ints == torch.int16 else codes
    return torch.from_numpy(_writable(raw)).view(dtype)


def to_torch(values: Any, dtype: torch.dtype) -> torch.Tensor:
    """A torch tensor of ``dtype`` from values already representable in it (the caller
    rounded them): the conversion is exact."""
    return from_numpy(values, dtype)


def engine(t: Any, requires_grad: bool = False) -> Any:
    """An engine tensor with the values and format of ``t`` (None and non-tensors pass)."""
    if not isinstance(t, torch.Tensor):
        return t
    if not t.dtype.is_floating_point:
        return to_numpy(t)
    return EngineTensor(to_numpy(t), format_of(t.dtype), requires_grad=requires_grad)


#: ops whose meta kernel gives other output metadata than torch's CPU kernel (torch
#: 2.13, surveyed on channels-last and 16-bit inputs; ``tests/bridge/test_layouts.py``):
#: convolution gives a channels-last output for a channels-last input or weight (meta:
#: contiguous); the 3-d convolution's backward contiguous gradients (meta:
#: channels-last); the padding backwards keep the input's channels-last layout (meta:
#: contiguous); group norm of a 16-bit input with float32 affine parameters saves its
#: mean and rstd in float32 (meta: the input's dtype), and its backward keeps a
#: channels-last input's layout (meta: contiguous); batch norm in eval mode returns
#: empty saved statistics (meta: one per channel), and its backward gives a contiguous
#: gradient for a channels-last input in 16-bit (meta: channels-last); the grouped GEMM
#: accepts float32 operands (meta: CUDA's bfloat16-only rule refuses them); layer norm of
#: a 16-bit input with 16-bit or no affine parameters saves its mean and rstd in the
#: input's dtype (meta: float32), and its backward gives the input gradient the input's
#: layout (meta: the incoming gradient's, which differs where the output was used
#: transposed, as EfficientViM does). For these the metadata come from torch's kernel run
#: on zeros (:func:`on_zeros`).
KERNEL_META = frozenset({
    "convolution", "convolution_backward", "native_group_norm",
    "native_layer_norm", "native_layer_norm_backward",
    "native_group_norm_backward", "native_batch_norm", "native_batch_norm_backward",
    "_grouped_mm",
    "reflection_pad1d_backward", "reflection_pad2d_backward", "reflection_pad3d_backward",
    "replication_pad1d_backward", "replication_pad2d_backward", "replication_pad3d_backward",
})


def meta(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """What ``func`` returns (dtypes, shapes, strides), without values: from the meta
    device, or for the ops of :data:`KERNEL_META` from :func:`on_zeros`. Cached per call
    signature (op, shapes, strides, dtypes, the other arguments): torch's meta
    decompositions cost about a millisecond a call and a training loop repeats its
    signatures. The results are shared meta tensors: read them only."""
    # an overload's packet; handlers also pass packets (``torch.ops.aten.where``)
    packet = getattr(func, "overloadpacket", func)
    if getattr(packet, "__name__", None) in KERNEL_META:
        return on_zeros(func, args, kwargs)
    return _cached("meta", func, args, kwargs, _meta)


def kernel_meta(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """What torch's CPU kernel returns for ``func`` (dtypes, shapes, strides). For the
    elementwise ops (torch's ``pointwise`` tag and :data:`ELEMENTWISE_BACKWARDS`) that
    neither write into their arguments, nor draw random numbers, nor have an output
    shape that depends on values (torch's schema and tags say which): the kernel run on
    zeros (:func:`on_zeros`), where it accepts them and its shapes agree with
    :func:`meta`'s; for every other op :func:`meta`. The meta device's strides differ
    from the CPU kernel's for these ops once operands have mixed layouts (``pow`` of a
    scalar by a transposed tensor, a floor division by a 0-d tensor, activation and
    loss backwards with the gradient and the input in different layouts). Only
    elementwise kernels run on made-up operands: a kernel that reads state a forward
    left (oneDNN's RNN backward and its workspace) crashes the process on zeros."""
    out = meta(func, args, kwargs)
    name = getattr(getattr(func, "overloadpacket", None), "__name__", None)
    if name in KERNEL_META or not _pure(func) or not (
            name in ELEMENTWISE_BACKWARDS or any(t.name == "pointwise" for t in func.tags)):
        return out
    ran = _cached("kernel", func, args, kwargs, _kernel_or_none)
    return out if ran is None or _shapes(ran) != _shapes(out) else ran


#: elementwise ops without torch's ``pointwise`` tag whose layout :func:`kernel_meta`
#: reads from the kernel: the activation, loss and softmax backwards and the other
#: TensorIterator kernels among the ops ampref emulates (a survey of torch 2.13's OpInfo
#: samples and of mixed-layout calls found meta's strides differing for
#: floor_divide, log_sigmoid_forward, _log_softmax_backward_data, huber_loss_backward,
#: mse_loss_backward, glu_backward and the hardswish, hardsigmoid, hardtanh, elu and
#: softplus backwards; the rest of each family is listed with them; the ones torch tags
#: ``pointwise``, such as gelu_backward and threshold_backward, need no entry)
ELEMENTWISE_BACKWARDS = frozenset({
    "floor_divide", "log_sigmoid_forward", "log_sigmoid_backward",
    "_softmax_backward_data", "_log_softmax_backward_data",
    "huber_loss_backward", "mse_loss_backward", "smooth_l1_loss_backward",
    "binary_cross_entropy_backward", "soft_margin_loss_backward", "glu_backward",
    "hardswish_backward", "hardsigmoid_backward", "hardtanh_backward", "elu_backward",
    "softplus_backward", "softshrink_backward", "hardshrink_backward",
    "leaky_relu_backward", "mish_backward", "rrelu_with_noise_backward",
})

#: tags of ops whose kernel run on zeros would draw random numbers (moving torch's
#: generator) or give shapes that hold only for zeros
_IMPURE_TAGS = frozenset({"nondeterministic_seeded", "dynamic_output_shape",
                          "data_dependent_output", "inplace_view"})


def _pure(func: Any) -> bool:
    schema = getattr(func, "_schema", None)
    return schema is not None and hasattr(func, "overloadpacket") and \
        not schema.is_mutable and not any(t.name in _IMPURE_TAGS for t in func.tags)


def _kernel_or_none(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    try:
        return _zeros(func, args, kwargs)
    except Exception:  # noqa: BLE001 - a kernel that refuses zeros (a factorisation)
        return None


def _shapes(out: Any) -> Any:
    outs = out if isinstance(out, (list, tuple)) else [out]
    return [tuple(o.shape) if isinstance(o, torch.Tensor) else None for o in outs]


def on_zeros(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """The metadata of what torch's own kernel returns for ``func`` on zero-valued
    floating tensors (integer and boolean ones as given) of the arguments' shapes,
    strides, dtypes and devices, as meta tensors: the layout and dtypes the kernel picks
    where its meta kernel picks others. Cached as :func:`meta` is; only for ops without
    side effects or random draws."""
    return _cached("zeros", func, args, kwargs, _zeros)


def _cached(kind: str, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any],
            compute: Callable[[Any, tuple[Any, ...], dict[str, Any]], Any]) -> Any:
    try:
        key = (kind, func, _sig(args), _sig(kwargs))
    except TypeError:  # an unhashable argument: not cached
        return compute(func, args, kwargs)
    hit = _META.get(key)
    if hit is None:
        hit = compute(func, args, kwargs)
        if len(_META) < _META_LIMIT:
            _META[key] = hit
    return hit


def _zeros(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    def zeros(a: Any) -> Any:
        # floating operands become zeros; integer and boolean ones (indices, offsets,
        # lengths, masks) keep their values: a kernel may index memory with them
        # unchecked, and zero offsets or lengths are not always valid
        if isinstance(a, torch.Tensor) and (a.dtype.is_floating_point or a.dtype.is_complex):
            return torch.empty_strided(a.shape, a.stride(), dtype=a.dtype,
                                       device=a.device).zero_()
        if isinstance(a, torch.Tensor):  # read, not written: the op writes no argument
            return a
        if isinstance(a, (list, tuple)):
            return type(a)(zeros(x) for x in a)
        return a

    def described(o: Any) -> Any:  # the cache keeps metadata, not the kernel's buffers
        if isinstance(o, torch.Tensor):
            return torch.empty_strided(o.shape, o.stride(), dtype=o.dtype, device="meta")
        if isinstance(o, (list, tuple)):
            return type(o)(described(x) for x in o)
        return o
    return described(func(*zeros(args), **{k: zeros(v) for k, v in kwargs.items()}))


_META: dict[Any, Any] = {}
_META_LIMIT = 100_000


def _sig(x: Any) -> Any:
    if isinstance(x, torch.Tensor):
        return ("T", tuple(x.shape), x.stride(), x.dtype, x.device.type)
    if isinstance(x, (list, tuple)):
        return (type(x).__name__, *(_sig(v) for v in x))
    if isinstance(x, dict):
        return tuple(sorted((k, _sig(v)) for k, v in x.items()))
    hash(x)  # TypeError for the unhashable
    return (type(x).__name__, x)


def _meta(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    def to_meta(a: Any) -> Any:
        if isinstance(a, torch.Tensor):
            return torch.empty_strided(a.shape, a.stride(), dtype=a.dtype, device="meta")
        if isinstance(a, (list, tuple)):
            return type(a)(to_meta(x) for x in a)
        return a
    kw = {k: to_meta(v) for k, v in kwargs.items()}
    if "device" in kw:  # a copy to a real device would need the values
        kw["device"] = torch.device("meta")
    if kw.get("pin_memory"):
        kw["pin_memory"] = False
    return func(*to_meta(args), **kw)
