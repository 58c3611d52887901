"""Which aten ops ``emulate`` and ``shadow`` hand to torch unchanged (``specs/torch.md``
TRC-EMU-*): ops without rounding (:data:`EXACT`), ops without a floating output, and ops
on operands without values (meta and zero tensors, empty batches).
"""

from __future__ import annotations

from typing import Any

import torch

from .convert import is_float, meta

__all__ = ["EXACT", "has_complex", "passes_through"]

#: ops without rounding: data movement, views, gathers, comparisons, maxima, random
#: draws (torch's generator), allocation; torch computes them in either mode
EXACT = frozenset({
    "view", "_unsafe_view", "reshape", "_reshape_alias", "t", "transpose", "permute",
    "expand", "slice", "select", "split", "split_with_sizes", "unbind", "cat", "stack", "clone",
    "detach", "alias", "contiguous", "empty_like", "zeros_like", "ones_like", "full", "full_like",
    "fill_", "zero_", "lift_fresh", "embedding", "index_select", "gather", "index", "squeeze",
    "unsqueeze", "flatten", "unflatten", "as_strided", "new_zeros", "new_empty", "new_ones",
    "new_full", "empty", "empty_strided", "zeros", "ones", "scalar_tensor", "_local_scalar_dense",
    "bernoulli_", "bernoulli", "randn", "rand", "randint", "randperm", "normal_", "uniform_",
    "rand_like", "randn_like", "randint_like", "normal", "random_", "exponential_",
    "multinomial", "_sample_dirichlet", "_standard_gamma", "poisson", "binomial",
    "geometric_", "log_normal_", "cauchy_",
    "arange", "tril", "triu", "max", "amax", "min", "amin", "argmax", "argmin",
    "max_pool2d_with_indices", "slice_backward", "select_backward", "eq", "ne", "lt", "gt",
    "le", "ge", "logical_not", "logical_and", "logical_or", "isnan", "isinf", "isfinite",
    "any", "all", "sort", "topk", "repeat", "flip", "roll", "scatter", "_to_copy_int",
    "detach_", "set_", "resize_", "sign", "sgn", "_record_function_enter_new",
    "_record_function_exit", "view_as", "expand_as", "masked_select", "nonzero",
    "transpose_", "t_", "squeeze_", "unsqueeze_", "unsafe_split", "unsafe_split_with_sizes",
    "unsafe_chunk", "chunk", "narrow", "movedim", "swapaxes", "diagonal", "new_empty_strided",
    "equal", "is_same_size", "is_nonzero", "constant_pad_nd", "upsample_nearest1d",
    "upsample_nearest2d", "pixel_shuffle", "pixel_unshuffle", "im2col", "reflection_pad1d",
    "reflection_pad2d", "reflection_pad3d", "replication_pad1d", "replication_pad2d",
    "replication_pad3d", "max_pool3d_with_indices", "adaptive_max_pool2d",
    "adaptive_max_pool3d", "channel_shuffle", "native_channel_shuffle",
    # integer parts, remainders of division, sign transfers and replacements are exact
    # in IEEE arithmetic (fmod and frac included); selections and diagonal moves
    "floor", "floor_", "ceil", "ceil_", "trunc", "trunc_", "fix", "frac", "frac_", "fmod",
    "fmod_", "copysign", "copysign_", "nan_to_num", "nan_to_num_", "fmax", "fmin",
    "median", "nanmedian", "kthvalue", "mode", "take", "index_fill", "index_fill_",
    "masked_scatter", "masked_scatter_", "masked_scatter_backward", "diagonal_copy",
    "diagonal_backward", "diag_embed", "diagonal_scatter", "select_scatter",
    "slice_scatter", "unfold", "unfold_backward", "upsample_nearest3d",
    "_upsample_nearest_exact1d", "_upsample_nearest_exact2d", "_upsample_nearest_exact3d",
    # identity matrices, running maxima / minima, unpooling (values placed at indices),
    # fractional max pooling (torch's random windows, then maxima), sequence packing
    "eye", "cummax", "cummin", "max_unpool2d", "max_unpool3d", "fractional_max_pool2d",
    "fractional_max_pool3d", "_pack_padded_sequence", "_pad_packed_sequence",
    "max_pool_double_backward",
    # a step function's values are 0, 1 or the given value; copies of rows by index
    "heaviside", "heaviside_", "index_copy", "index_copy_",
    # both extremes at once, the elementwise smaller; a float's significand in [0.5, 1)
    # and its exponent
    "aminmax", "minimum", "frexp", "_efficientzerotensor",
    # counts of the values in each bin (torch's binning), exact integers; views of a
    # complex tensor as pairs of reals and back (complex arithmetic itself is refused)
    "histc", "view_as_real", "view_as_complex",
    # quarter turns, block-diagonal assembly, distinct values (sorted, with inverse
    # indices and counts), the materialising copies of views, strided writes into a copy
    "rot90", "block_diag", "_unique", "_unique2", "unique_dim", "unique_consecutive",
    "unique_dim_consecutive", "alias_copy", "as_strided_copy", "detach_copy",
    "expand_copy", "narrow_copy", "permute_copy", "select_copy", "slice_copy",
    "split_copy", "split_with_sizes_copy", "squeeze_copy", "t_copy", "transpose_copy",
    "unbind_copy", "unfold_copy", "unsqueeze_copy", "view_copy", "_reshape_copy",
    "lift_fresh_copy", "as_strided_scatter",
})


def has_complex(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    """Whether a complex tensor is among the operands (lists of tensors included):
    ampref has no reference for complex arithmetic, so no handler takes one."""
    for a in (*args, *kwargs.values()):
        items = a if isinstance(a, (list, tuple)) else (a,)
        if any(isinstance(t, torch.Tensor) and t.dtype.is_complex for t in items):
            return True
    return False


def passes_through(func: Any, name: str, handler: Any, args: tuple[Any, ...],
                    kwargs: dict[str, Any]) -> bool:
    """An op both modes hand to torch unchanged: one without ampref handler that is exact
    (views, copies), and any op without a floating-point output (integer, bool and index
    ops: ``sum`` of a bool mask, as cross entropy with label smoothing counts its
    targets), whose results involve no rounding; and any op on a tensor without values:
    a meta tensor, or autograd's zero tensor (``_efficientzerotensor``, the gradient of
    a constant branch), whose ops torch defines as the zeros they stand for; and any op
    with a floating operand of two or more dims and no elements (an empty batch, a
    linear layer of 0 input features), or with no element in any floating operand: no
    sum of its values is formed, so the result is empty or built from the other operands
    without a sum (linear's bias, a reduction's 0 or NaN, addmm's ``beta * input``, one
    rounding of one product as in ampref)."""
    if _valueless(args, kwargs) or _empty_float(args, kwargs):
        return True
    if handler is None:
        # an in-place form of an op without rounding (``triu_``, ``scatter_``) is one too
        exact = name in EXACT or (name.endswith("_") and name[:-1] in EXACT)
        return exact or not _floating_output(func, args, kwargs)
    # a floating operand makes the output floating for every handled op: skip the meta call
    return not _has_float(args, kwargs) and not _floating_output(func, args, kwargs)


def _empty_float(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    """Whether a floating tensor operand (lists of tensors included) of two or more dims
    has no elements, or every floating tensor operand has none (a sum, norm, softmax or
    loss of an empty vector: 0, NaN or an empty result, no value rounded). An empty 1-d
    operand beside non-empty ones is a placeholder some ops take (eval batch norm's
    backward receives empty saved statistics), not an empty batch."""
    floats = [t for a in (*args, *kwargs.values())
              for t in (a if isinstance(a, (list, tuple)) else (a,)) if is_float(t)]
    return any(t.ndim >= 2 and t.numel() == 0 for t in floats) or (
        bool(floats) and all(t.numel() == 0 for t in floats))


def _valueless(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    """Whether a tensor operand (lists of tensors included) is a meta or zero tensor, or
    the op makes a meta tensor (torch's zero-tensor kernels move operands there)."""
    device = kwargs.get("device")
    if device is not None and torch.device(device).type == "meta":
        return True
    for a in (*args, *kwargs.values()):
        items = a if isinstance(a, (list, tuple)) else (a,)
        if any(isinstance(t, torch.Tensor) and (t.is_meta or t._is_zerotensor())
               for t in items):
            return True
    return False


def _has_float(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    """Whether a floating tensor is among the operands (lists of tensors included)."""
    for a in (*args, *kwargs.values()):
        items = a if isinstance(a, (list, tuple)) else (a,)
        if any(is_float(t) for t in items):
            return True
    return False


def _floating_output(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    if not func._schema.returns:
        # an op returning nothing (``_foreach_tanh_``) outputs what it writes into
        return any(isinstance(t, torch.Tensor) and (t.dtype.is_floating_point
                                                    or t.dtype.is_complex)
                   for t in _written(func, args, kwargs))
    try:
        out = meta(func, args, kwargs)
    except Exception:  # noqa: BLE001 - ops without a meta kernel: judge by the inputs
        return any(is_float(a) or has_complex((a,), {}) for a in args)
    outs = out if isinstance(out, (list, tuple)) else [out]
    # a complex output rounds as much as a real one: not handed to torch as exact
    return any(isinstance(o, torch.Tensor) and (o.dtype.is_floating_point or o.dtype.is_complex)
               for o in outs)


def _written(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[Any]:
    """The tensors ``func``'s schema marks as written (``Tensor(a!)[] self``)."""
    out: list[Any] = []
    for i, a in enumerate(func._schema.arguments):
        if a.alias_info is None or not a.alias_info.is_write:
            continue
        v = args[i] if i < len(args) else kwargs.get(a.name)
        out.extend(v if isinstance(v, (list, tuple)) else [v])
    return out
