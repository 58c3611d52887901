"""What ``emulate`` and ``shadow`` share (``specs/torch.md`` TRC-EMU-*, TRC-SHD-*): the
table of aten ops ampref computes, argument checks, module paths (forward hooks, and
autograd nodes tagged with the module whose forward made them, for backward ops) and the
report. Which ops both hand to torch unchanged is :mod:`ampref.torch.passthrough`'s rule.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from ampref.accumulation.models import parse_model
from ampref.accumulation.registry import resolve

from .nnops import NN
from .passthrough import has_complex
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

__all__ = ["HANDLERS", "ModeBase", "UnsupportedOpError", "elements", "supported_ops",
           "unsupported_reason"]

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


