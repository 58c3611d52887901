"""What ``emulate`` and ``shadow`` share (``specs/torch.md`` TRC-EMU-*, TRC-SHD-*): the
table of aten ops ampref computes, the ops without rounding that both hand to torch,
argument checks, module paths (forward hooks, and autograd nodes tagged with the module
whose forward made them, for backward ops) and the report.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from ampref.accumulation.models import parse_model
from ampref.accumulation.registry import resolve

from .convert import is_float, meta
from .nnops import NN
from .activations import ACTIVATIONS
from .bagops import BAGS
from .convops import CONVS
from .countops import COUNTS
from .ctcops import CTC
from .fusedoptim import FUSED_OPTIMIZERS
from .embedgrad import EMBEDDING_GRADS
from .gridops import GRIDS
from .groupedmm import GROUPED
from .indexops import INDEXING
from .interpops import INTERPOLATION
from .ldexpop import LDEXP
from .lossops import LOSSES
from .marginops import MARGINS
from .nllops import NLL
from .normops import NORMS
from .pool3d import POOLS3D
from .rangeops import RANGES
from .poolops import POOLS
from .pointwise import POINTWISE
from .report import Report
from .rnnops import RNN
from .rreluops import RRELU
from .specialfns import SPECIAL
from .statops import STATS
from .trilinear import TRILINEAR
from .vecnorms import VECTOR_NORMS
from .weightnorm import WEIGHT_NORM

__all__ = ["EXACT", "HANDLERS", "ModeBase", "UnsupportedOpError", "elements", "has_complex",
           "passes_through", "supported_ops", "unsupported_reason"]

#: aten ops ampref computes (overload packet name -> handler)
HANDLERS: dict[str, Callable[..., Any]] = {**POINTWISE, **ACTIVATIONS, **LOSSES, **NN,
                                            **CONVS, **NORMS, **POOLS, **RNN,
                                            **INDEXING, **NLL, **STATS,
                                            **INTERPOLATION, **VECTOR_NORMS, **BAGS,
                                            **MARGINS, **POOLS3D, **RRELU,
                                            **RANGES, **TRILINEAR, **SPECIAL, **CTC,
                                            **GRIDS, **WEIGHT_NORM, **LDEXP,
                                            **COUNTS, **FUSED_OPTIMIZERS, **GROUPED,
                                            **EMBEDDING_GRADS}

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


def unsupported_reason(name: str, args: tuple[Any, ...] = (),
                       kwargs: dict[str, Any] | None = None) -> str:
    """Why the op ``name`` (with these operands) has no reference, for
    :class:`UnsupportedOpError`."""
    if has_complex(args, kwargs or {}):
        return "complex arithmetic has no reference (complex views run in torch)"
    return "no reference implementation"


def supported_ops() -> list[str]:
    """The floating aten ops ampref computes (overload packet names), sorted."""
    return sorted(HANDLERS)


class UnsupportedOpError(NotImplementedError):
    """A floating aten op that ampref has no reference for (or not for these arguments)."""


def passes_through(func: Any, name: str, handler: Any, args: tuple[Any, ...],
                    kwargs: dict[str, Any]) -> bool:
    """An op both modes hand to torch unchanged: one without ampref handler that is exact
    (views, copies), and any op without a floating-point output (integer, bool and index
    ops: ``sum`` of a bool mask, as cross entropy with label smoothing counts its
    targets), whose results involve no rounding; and any op on a tensor without values:
    a meta tensor, or autograd's zero tensor (``_efficientzerotensor``, the gradient of
    a constant branch), whose ops torch defines as the zeros they stand for; and any op
    with a floating operand of two or more dims and no elements (an empty batch, a
    linear layer of 0 input features): no sum of its values is formed, so the result is
    empty or built from the other operands without a sum (linear's bias, a reduction's
    0 or NaN, addmm's ``beta * input``, one rounding of one product as in ampref)."""
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
    has no elements. An empty 1-d operand is a placeholder some ops take (eval batch
    norm's backward receives empty saved statistics), not an empty batch."""
    for a in (*args, *kwargs.values()):
        items = a if isinstance(a, (list, tuple)) else (a,)
        if any(is_float(t) and t.ndim >= 2 and t.numel() == 0 for t in items):
            return True
    return False


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


def elements(out: Any) -> int:
    outs = out if isinstance(out, (list, tuple)) else [out]
    return sum(o.numel() for o in outs if isinstance(o, torch.Tensor))


class ModeBase(TorchDispatchMode):
    """Shared: argument checks, module paths (forward hooks), the report."""

    kind = ""

    def __init__(self, model: torch.nn.Module | None = None, *,
                 accumulation: str = "exact") -> None:
        super().__init__()
        if model is not None and not isinstance(model, torch.nn.Module):
            raise TypeError(f"model must be a torch.nn.Module or None, got "
                            f"{type(model).__name__}")
        if not isinstance(accumulation, str):
            raise TypeError(f"accumulation must be a str (a model name such as 'exact' or "
                            f"'tensorcore:h100'), got {type(accumulation).__name__}")
        parse_model(accumulation)  # ValueError naming the models
        self.model_name = accumulation
        root = type(model).__name__ if model is not None else ""
        self.names = {id(m): f"{root}.{n}" if n else root
                      for n, m in (model.named_modules() if model is not None else [])}
        self.report = Report(self.kind)
        self.saved_eps: dict[int, float] = {}
        self._stack: list[str] = []
        self._hooks: list[Any] = []

    def adopt_saved(self, source: Any, target: Any) -> None:
        """Let the tensors ``target`` carry what a forward handler saved for the tensors
        ``source`` at the same positions (a normalisation's eps, keyed by its rstd).
        ``shadow`` needs it twice: the model goes on with torch's outputs, not the
        handler's, and a handler computes on copies of the arguments."""
        mine = source if isinstance(source, (list, tuple)) else [source]
        seen = target if isinstance(target, (list, tuple)) else [target]
        for a, b in zip(mine, seen, strict=False):
            if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and \
                    a.data_ptr() in self.saved_eps:
                self.saved_eps[b.data_ptr()] = self.saved_eps[a.data_ptr()]

    @property
    def accumulation(self) -> str:
        """The model every GEMM runs under: the name given, with ``:tf32`` added to a
        library model (``cublas:<gpu>``) while torch allows TF32 for CUDA matmuls
        (``torch.backends.cuda.matmul.allow_tf32``, ``set_float32_matmul_precision``),
        read at each op as cuBLAS calls are (TRC-NN-004)."""
        name = self.model_name
        r = resolve(name)
        if r.kernel == "library" and not r.tf32 and torch.backends.cuda.matmul.allow_tf32:
            return f"{name}:tf32"
        return name

    def path(self) -> str:
        """The module whose forward is running, or, during backward, the module whose
        forward made the autograd node now running (tagged by the forward hook)."""
        node = torch._C._current_autograd_node()
        if node is not None:
            return f"{_metadata(node).get(_TAG, '(top level)')} (backward)"
        return self._stack[-1] if self._stack else "(top level)"

    def __enter__(self) -> Any:
        def pre(module: torch.nn.Module, args: Any) -> None:
            self._stack.append(self.names.get(id(module), type(module).__name__))

        def post(module: torch.nn.Module, args: Any, out: Any) -> None:
            if self._stack:
                _tag(out, self._stack.pop())
        mod = torch.nn.modules.module
        self._hooks = [mod.register_module_forward_pre_hook(pre),
                       mod.register_module_forward_hook(post)]
        # torch's fused inference path for attention (eval mode without autograd:
        # _native_multi_head_attention, _transformer_encoder_layer_fwd) is one kernel
        # ampref has no reference for; off, the modules run the ops of their standard
        # path, the same math (TRC-EMU-007)
        self._fastpath = torch.backends.mha.get_fastpath_enabled()
        torch.backends.mha.set_fastpath_enabled(False)
        return super().__enter__()

    def __exit__(self, *exc: Any) -> None:
        for h in self._hooks:
            h.remove()
        self._hooks = []
        self._stack = []
        torch.backends.mha.set_fastpath_enabled(self._fastpath)
        super().__exit__(*exc)


_TAG = "ampref_module"


def _tag(out: Any, name: str) -> None:
    """Mark the autograd nodes a module's forward created (those not yet marked by an
    inner module) with its name, so backward ops can be attributed to it."""
    outs = out if isinstance(out, (list, tuple)) else [out]
    todo: list[Any] = [o.grad_fn for o in outs
                       if isinstance(o, torch.Tensor) and o.grad_fn is not None]
    while todo:
        node = todo.pop()
        if node is None or _TAG in _metadata(node):
            continue
        _metadata(node)[_TAG] = name
        todo.extend(n for n, _ in node.next_functions)


def _metadata(node: Any) -> dict[str, Any]:
    """An autograd node's metadata dict (kept for the node's lifetime)."""
    meta: dict[str, Any] = node.metadata
    return meta


