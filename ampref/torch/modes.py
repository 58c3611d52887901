"""``emulate``: the dispatch mode that puts ampref's reference under an unmodified torch
model (``specs/torch.md`` TRC-EMU-*).

It sits below autograd (``TorchDispatchMode``), so it sees every aten op of the forward
pass and every backward op autograd issues, and answers each floating op with ampref's
result, in torch's output dtype and memory layout.
"""

from __future__ import annotations

from typing import Any

import torch

from ampref.policy.autocast import suspended

from .base import ModeBase, UnsupportedOpError, elements, unsupported_reason
from .composites import routed
from .cudacalls import intercepted
from .layout import match_layout
from .measures import count_nonfinite
from .outargs import functional_form, store
from .recipes import RecipeLinears, check_recipe_options

__all__ = ["emulate"]

#: GEMM-shaped ops a recipe leaves in the autocast dtype, named in the report
_UNQUANTIZED = {
    op: "not quantized: the recipe applies to linear layers (TRC-REC-001)"
    for op in ("convolution", "convolution_backward", "bmm", "mm",
               "_scaled_dot_product_flash_attention_for_cpu")}


class emulate(ModeBase):  # noqa: N801 - used as a context manager, like torch.autocast
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
        check_recipe_options(recipe_profile, seed)
        self.linears = None if recipe is None else RecipeLinears(recipe, recipe_profile,
                                                                 accumulation, seed)
        if self.linears is not None:
            self.linears.report_to(self.report, self.path)

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
        handler, inplace, answer = routed(self, func, args, kwargs)
        if answer is not NotImplemented:
            return answer
        rec = self.report.record(self.path(), name)
        targets = None
        try:
            if handler is None:
                raise UnsupportedOpError(unsupported_reason(name, args, kwargs))
            call, kw, targets = functional_form(func, args, kwargs, inplace)
            with suspended():  # torch's casts are already in the graph: no engine autocast
                out = match_layout(call, args, kw, handler(self, call, args, kw))
            if targets is not None:
                out = store(func, targets, out)
        except NotImplementedError as e:
            if self.fallback != "torch":
                raise UnsupportedOpError(
                    f"ampref.torch.emulate: {e} (aten op {func}, module {rec.module}); pass "
                    "fallback='torch' to let torch compute it (the report then lists it as "
                    "not emulated); covered ops: ampref.torch.supported_ops()") from None
            out = func(*args, **kwargs)
            rec.emulated, rec.note = False, str(e)
        if self.linears is not None and name in _UNQUANTIZED:
            rec.note = _UNQUANTIZED[name]
        rec.calls += 1
        rec.elements += elements(out if out is not None else targets)
        count_nonfinite(rec, name, args, out)
        return out
