"""FP8/MXFP8/NVFP4 training recipes for torch's linear layers under ``emulate``
(``specs/torch.md`` TRC-REC-001).

A ``TorchFunctionMode`` sees each ``F.linear`` call (``nn.Linear`` makes them) and runs
it as the engine's :func:`~ampref.engine.functional.quantized.quantized_linear`: the
three GEMMs (forward, input gradient, weight gradient) under the recipe's operand roles
(Transformer Engine's: E4M3 forward and E5M2 gradients for per-tensor FP8, 1x128/128x128
blocks, MX blocks of 32, NVFP4 with 16x16 weight tiles, stochastic rounding of gradients
and the Hadamard transform on the weight-gradient operands) and profile's arithmetic,
bias added in float32, output rounded to the input's dtype. A custom autograd function
carries the engine's gradients back into torch's graph.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from ampref.engine.functional.quantized import QuantState, quantized_linear
from ampref.engine.tensor import Tensor as EngineTensor
from ampref.kernels.srhash import check_seed
from ampref.recipes.roles import RECIPE_PROFILES, get_gemm_recipe

from .convert import engine, from_numpy, to_numpy
from .report import Report

__all__ = ["RecipeLinears", "check_recipe_options"]


def check_recipe_options(profile: object, seed: object) -> None:
    """Refuse a ``recipe_profile`` outside :data:`RECIPE_PROFILES` and a seed that is not an
    int in [0, 2^64) (each call's stochastic-rounding seeds derive from it), whether or not
    a recipe is chosen: a wrong value is named even where it would go unused.

    Raises:
        TypeError: the seed is not an int (bool included).
        ValueError: an unknown profile, a seed out of range.
    """
    if not isinstance(profile, str) or profile not in RECIPE_PROFILES:
        raise ValueError(f"emulate: recipe_profile must be one of {', '.join(RECIPE_PROFILES)}, "
                         f"got {profile!r}")
    try:
        check_seed(seed)
    except (TypeError, ValueError) as e:
        raise type(e)(f"emulate: {e}") from None


class _QuantLinear(torch.autograd.Function):
    """y = x W^T + b by the engine's recipe linear; backward from the engine's graph."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None,
                layer: dict[str, Any]) -> torch.Tensor:
        ex, ew = engine(x, requires_grad=True), engine(w, requires_grad=True)
        eb = engine(b, requires_grad=True) if b is not None else None
        y = quantized_linear(ex, ew, eb, recipe=layer["recipe"], profile=layer["profile"],
                             accumulation=layer["accumulation"], seed=layer["seed"],
                             state=layer["state"])
        ctx.engine = (ex, ew, eb, y)
        ctx.dtypes = (x.dtype, w.dtype, None if b is None else b.dtype)
        return from_numpy(y.data, x.dtype)

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> Any:
        ex, ew, eb, y = ctx.engine
        y.backward(EngineTensor(to_numpy(g), y.format))
        grads = [None if t is None or t.grad is None else from_numpy(t.grad, dt)
                 for t, dt in zip((ex, ew, eb), ctx.dtypes, strict=True)]
        return grads[0], grads[1], grads[2], None


class RecipeLinears(TorchFunctionMode):
    """Routes ``F.linear`` through :class:`_QuantLinear` under one recipe and profile;
    each weight keeps its own delayed-scaling state, each call its own seed."""

    def __init__(self, recipe: str, profile: str, accumulation: str, seed: int) -> None:
        super().__init__()
        get_gemm_recipe(recipe)  # ValueError naming the recipes
        check_recipe_options(profile, seed)
        self.recipe, self.profile, self.accumulation = recipe, profile, accumulation
        self.seed, self.calls = seed, 0
        self.states: dict[int, QuantState] = {}
        self.report: Report | None = None
        self.path: Callable[[], str] = lambda: "(top level)"

    def report_to(self, report: Report, path: Callable[[], str]) -> None:
        """Record each quantized call in ``report`` under ``path()`` (the module running):
        a ``linear (recipe)`` row with the recipe, profile and the last call's operand
        statistics (amax, underflow %, saturation %, relative MSE, block-scale range per
        role x, w, g; TRN-QNT-004)."""
        self.report, self.path = report, path

    def __torch_function__(self, func: Any, types: Any, args: tuple[Any, ...] = (),
                           kwargs: dict[str, Any] | None = None) -> Any:
        kwargs = kwargs or {}
        if func is not torch.nn.functional.linear:
            return func(*args, **kwargs)
        x, w = args[0], args[1]
        b = args[2] if len(args) > 2 else kwargs.get("bias")
        self.calls += 1
        state = self.states.setdefault(id(w), QuantState(collect=self.report is not None))
        layer = {"recipe": self.recipe, "profile": self.profile,
                 "accumulation": self.accumulation, "seed": self.seed + self.calls,
                 "state": state}
        out = _QuantLinear.apply(x, w, b, layer)
        if self.report is not None:
            rec = self.report.record(self.path(), "linear (recipe)")
            rec.calls += 1
            rec.elements += out.numel()
            # the backward adds role g to this same dict when it runs
            rec.quant = {"recipe": self.recipe, "profile": self.profile, "stats": state.stats}
        return out
