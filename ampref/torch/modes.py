"""``emulate`` and ``shadow``: dispatch modes that put ampref's reference under an
unmodified torch model (``specs/torch.md`` TRC-EMU-*, TRC-SHD-*).

Both sit below autograd (``TorchDispatchMode``), so they see every aten op of the
forward pass and every backward op autograd issues. ``emulate`` answers each floating
op with ampref's result; ``shadow`` lets torch compute (the implementation under test)
and recomputes each op with ampref on copies of the same inputs, recording where the
two differ.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from ampref.accumulation.models import parse_model
from ampref.policy.autocast import suspended

from .convert import FLOAT_DTYPES, is_float, meta, to_numpy
from .cudacalls import intercepted
from .layout import match_layout
from .nnops import NN
from .normops import NORMS
from .pointwise import POINTWISE
from .recipes import RecipeLinears
from .rnnops import RNN
from .report import OpRecord, Report

__all__ = ["EXACT", "HANDLERS", "UnsupportedOpError", "emulate", "shadow", "supported_ops"]

#: aten ops ampref computes (overload packet name -> handler)
HANDLERS: dict[str, Callable[..., Any]] = {**POINTWISE, **NN, **NORMS, **RNN}

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
    "arange", "tril", "triu", "max", "amax", "min", "amin", "argmax", "argmin",
    "max_pool2d_with_indices", "slice_backward", "select_backward", "eq", "ne", "lt", "gt",
    "le", "ge", "logical_not", "logical_and", "logical_or", "isnan", "isinf", "isfinite",
    "any", "all", "sort", "topk", "repeat", "flip", "roll", "scatter", "_to_copy_int",
    "detach_", "set_", "resize_", "sign", "_record_function_enter_new",
    "_record_function_exit", "view_as", "expand_as", "masked_select", "nonzero",
    "transpose_", "t_", "squeeze_", "unsqueeze_", "unsafe_split", "unsafe_split_with_sizes",
    "unsafe_chunk", "chunk", "narrow", "movedim", "swapaxes", "diagonal", "new_empty_strided",
    "equal", "is_same_size", "is_nonzero",
})


def supported_ops() -> list[str]:
    """The floating aten ops ampref computes (overload packet names), sorted."""
    return sorted(HANDLERS)


class UnsupportedOpError(NotImplementedError):
    """A floating aten op that ampref has no reference for (or not for these arguments)."""


def _passes_through(func: Any, name: str, handler: Any, args: tuple[Any, ...],
                    kwargs: dict[str, Any]) -> bool:
    """An op both modes hand to torch unchanged: no ampref handler and exact (views,
    copies) or without a floating-point output (integer, bool and index ops)."""
    return handler is None and (name in EXACT or not _floating_output(func, args, kwargs))


def _floating_output(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    try:
        out = meta(func, args, kwargs)
    except Exception:  # noqa: BLE001 - ops without a meta kernel: judge by the inputs
        return any(is_float(a) for a in args)
    outs = out if isinstance(out, (list, tuple)) else [out]
    return any(isinstance(o, torch.Tensor) and o.dtype.is_floating_point for o in outs)


def _elements(out: Any) -> int:
    outs = out if isinstance(out, (list, tuple)) else [out]
    return sum(o.numel() for o in outs if isinstance(o, torch.Tensor))


def _all_finite(args: Any) -> bool:
    for a in (args if isinstance(args, (list, tuple)) else [args]):
        if isinstance(a, (list, tuple)):
            if not _all_finite(a):
                return False
        elif is_float(a) and a.dtype in FLOAT_DTYPES and not bool(torch.isfinite(a).all()):
            return False
    return True


def _count_nonfinite(rec: OpRecord, args: tuple[Any, ...], out: Any) -> None:
    outs = [o for o in (out if isinstance(out, (list, tuple)) else [out]) if is_float(o)]
    if all(bool(o.isfinite().all()) for o in outs):
        return  # the usual case: one pass per output
    bad = sum(int((~torch.isfinite(o)).sum()) for o in outs)
    if _all_finite(args):
        rec.nonfinite_from_finite += bad


class _Base(TorchDispatchMode):
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
        self.accumulation = accumulation
        root = type(model).__name__ if model is not None else ""
        self.names = {id(m): f"{root}.{n}" if n else root
                      for n, m in (model.named_modules() if model is not None else [])}
        self.report = Report(self.kind)
        self.saved_eps: dict[int, float] = {}
        self._stack: list[str] = []
        self._hooks: list[Any] = []

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
        return super().__enter__()

    def __exit__(self, *exc: Any) -> None:
        for h in self._hooks:
            h.remove()
        self._hooks = []
        self._stack = []
        super().__exit__(*exc)


class emulate(_Base):  # noqa: N801 - used as a context manager, like torch.autocast
    """Run torch models on ampref's reference: ``with ampref.torch.emulate(): ...``.

    Every floating aten op inside (forward and backward) is computed by ampref
    (:func:`supported_ops`); ops without rounding run in torch. ``accumulation`` names
    the matmul/convolution model (``exact``, ``tensorcore:h100``, ...). ``recipe`` (one
    of ``ampref.recipes.roles.GEMM_RECIPES``: fp8-delayed, fp8-current, fp8-block, mxfp8,
    nvfp4) runs every ``F.linear`` as the engine's recipe linear with ``recipe_profile``
    (``te`` or ``torchao``) and stochastic-rounding seeds from ``seed``. An op without a
    reference raises :class:`UnsupportedOpError` naming it and the module, unless
    ``fallback="torch"``: then torch computes it and ``report`` lists it as not emulated.

    Raises:
        ValueError: unknown accumulation model, fallback, recipe or recipe profile
            (choices named).
        TypeError: a model that is not an ``nn.Module``.
    """

    kind = "emulate"

    def __init__(self, model: torch.nn.Module | None = None, *, accumulation: str = "exact",
                 fallback: str = "error", recipe: str | None = None,
                 recipe_profile: str = "te", seed: int = 0) -> None:
        super().__init__(model, accumulation=accumulation)
        if fallback not in ("error", "torch"):
            raise ValueError(f"fallback must be 'error' or 'torch', got {fallback!r}")
        self.fallback = fallback
        self.linears = None if recipe is None else RecipeLinears(recipe, recipe_profile,
                                                                 accumulation, seed)

    def __enter__(self) -> Any:
        if self.linears is not None:
            self.linears.__enter__()
        self._cuda = intercepted()
        self._cuda.__enter__()
        return super().__enter__()

    def __exit__(self, *exc: Any) -> None:
        super().__exit__(*exc)
        self._cuda.__exit__(*exc)
        if self.linears is not None:
            self.linears.__exit__(*exc)

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple[Any, ...] = (),
                           kwargs: dict[str, Any] | None = None) -> Any:
        kwargs = kwargs or {}
        name = func.overloadpacket.__name__
        handler = HANDLERS.get(name)
        if _passes_through(func, name, handler, args, kwargs):
            return func(*args, **kwargs)
        rec = self.report.record(self.path(), name)
        try:
            if handler is None:
                raise UnsupportedOpError("no reference implementation")
            with suspended():  # torch's casts are already in the graph: no engine autocast
                out = match_layout(func, args, kwargs, handler(self, func, args, kwargs))
        except NotImplementedError as e:
            if self.fallback != "torch":
                raise UnsupportedOpError(
                    f"ampref.torch.emulate: {e} (aten op {func}, module {rec.module}); pass "
                    "fallback='torch' to let torch compute it (the report then lists it as "
                    "not emulated); covered ops: ampref.torch.supported_ops()") from None
            out = func(*args, **kwargs)
            rec.emulated, rec.note = False, str(e)
        rec.calls += 1
        rec.elements += _elements(out)
        _count_nonfinite(rec, args, out)
        return out


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


def _clone(a: Any) -> Any:
    if isinstance(a, torch.Tensor):
        return a.detach().clone()
    if isinstance(a, (list, tuple)):
        return type(a)(_clone(x) for x in a)
    return a


class shadow(_Base):  # noqa: N801 - a context manager
    """Let torch compute and check every op against ampref: ``with
    ampref.torch.shadow(model) as s: ...; print(s.report.table())``.

    torch's results are what the model uses; ampref recomputes each op it has a
    reference for on copies of the same inputs. The report gives per module and op the
    calls, elements, differing elements, the largest distance in ulps of the output
    format, inf/NaN made from finite inputs, and the first divergence (index, values
    and the elementwise inputs in hex).
    """

    kind = "shadow"

    def __enter__(self) -> shadow:
        super().__enter__()
        return self

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple[Any, ...] = (),
                           kwargs: dict[str, Any] | None = None) -> Any:
        kwargs = kwargs or {}
        name = func.overloadpacket.__name__
        handler = HANDLERS.get(name)
        if _passes_through(func, name, handler, args, kwargs):
            return func(*args, **kwargs)
        copies, kw_copies = _clone(args), _clone(kwargs)
        theirs = func(*args, **kwargs)
        rec = self.report.record(self.path(), name)
        rec.calls += 1
        rec.elements += _elements(theirs)
        _count_nonfinite(rec, copies, theirs)
        if handler is None:
            rec.emulated, rec.note = False, "no ampref reference"
            return theirs
        try:
            with suspended():
                ours = handler(self, func, copies, kw_copies)
        except NotImplementedError as e:
            rec.emulated, rec.note = False, str(e)
            return theirs
        n = _COMPARED.get(name)
        _compare(rec, copies, theirs[:n] if n else theirs, ours[:n] if n else ours)
        return theirs


#: ops whose trailing outputs are workspace for torch's own backward (compared: the first)
_COMPARED = {"_scaled_dot_product_flash_attention_for_cpu": 1}


def _pairs(theirs: Any, ours: Any) -> list[tuple[torch.Tensor, torch.Tensor]]:
    t = theirs if isinstance(theirs, (list, tuple)) else [theirs]
    o = ours if isinstance(ours, (list, tuple)) else [ours]
    return [(a, b) for a, b in zip(t, o, strict=False)
            if is_float(a) and is_float(b) and a.shape == b.shape and a.dtype in FLOAT_DTYPES]


def _compare(rec: OpRecord, inputs: tuple[Any, ...], theirs: Any, ours: Any) -> None:
    """Count differing elements and the largest ulp distance; keep the first divergence."""
    from ampref.testing import ordinal  # the ordered number line of each format

    from .convert import format_of

    for a, b in _pairs(theirs, ours):
        x, y = to_numpy(a).reshape(-1), to_numpy(b).reshape(-1)
        diff = (x.view(np.uint32 if x.dtype == np.float32 else np.uint64)
                != y.view(np.uint32 if y.dtype == np.float32 else np.uint64))
        diff &= ~(np.isnan(x) & np.isnan(y))
        n = int(diff.sum())
        if not n:
            continue
        rec.mismatches += n
        fmt = format_of(a.dtype)
        fin = np.isfinite(x) & np.isfinite(y)
        ulps = np.abs(ordinal(x[fin & diff], fmt) - ordinal(y[fin & diff], fmt))
        rec.max_ulps = max(rec.max_ulps, int(ulps.max()) if ulps.size else 0,
                           2**31 if (diff & ~fin).any() else 0)
        if not rec.first:
            i = int(np.flatnonzero(diff)[0])
            rec.first = {"index": i, "dtype": str(a.dtype), "torch": _show(x[i]),
                         "ampref": _show(y[i]),
                         "inputs": [_show(to_numpy(t).reshape(-1)[i]) for t in inputs
                                    if is_float(t) and t.shape == a.shape]}


def _show(v: Any) -> str:
    arr = np.asarray(v)
    bits = arr.view(np.uint32 if arr.dtype == np.float32 else np.uint64)
    return f"{int(bits):#x} ({float(arr)!r})"

