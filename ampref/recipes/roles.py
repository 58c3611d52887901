"""How a training recipe quantizes the three GEMMs of a linear layer, as data
(specs/train.md TRN-QNT-*).

A linear layer y = x W^T runs three GEMMs, each A @ B^T with both operands quantized
along the contracted axis K:

* fprop: y = x @ W^T           A = x (tokens, in),  B = W (out, in)
* dgrad: dx = g @ W            A = g (tokens, out), B = W^T (in, out)
* wgrad: dW = g^T @ x          A = g^T (out, tokens), B = x^T (in, tokens)

Each operand is an :class:`Operand` row: which ``ampref.recipes`` recipe, tile, FP8
format, and whether stochastic rounding or the Hadamard transform applies. The roles
follow Transformer Engine's recipes (E4M3 forward and E5M2 gradients in HYBRID; 1x128
activations/gradients and 128x128 weights for FP8 block; 1x16 activations/gradients,
16x16 weights, stochastic rounding of gradients and the Hadamard transform on the wgrad
operands for NVFP4).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .catalog import get_recipe

__all__ = ["Operand", "GemmRecipe", "GEMM_RECIPES", "get_gemm_recipe", "RECIPE_PROFILES",
           "ROLES"]

#: the tensor each operand of each GEMM is made from
ROLES = {"fprop": ("x", "w"), "dgrad": ("g", "w"), "wgrad": ("g", "x")}
#: implementations whose arithmetic a GEMM recipe can follow (the ``profile`` of
#: :func:`ampref.engine.functional.quantized.quantized_linear`)
RECIPE_PROFILES = ("te", "torchao")


@dataclass(frozen=True, kw_only=True)
class Operand:
    """How one GEMM operand is quantized (TRN-QNT-001)."""

    recipe: str
    tile: tuple[int, int] | None = None
    fp8_format: str | None = None
    stochastic: bool = False
    hadamard: bool = False

    def __post_init__(self) -> None:
        get_recipe(self.recipe)

    def options(self) -> dict[str, Any]:
        opts: dict[str, Any] = {}
        if self.fp8_format is not None:
            opts["fp8_format"] = self.fp8_format
        if self.hadamard:
            opts["hadamard"] = True
        return opts


@dataclass(frozen=True, kw_only=True)
class GemmRecipe:
    """The operands of fprop, dgrad and wgrad (TRN-QNT-001)."""

    name: str
    fprop: tuple[Operand, Operand]
    dgrad: tuple[Operand, Operand]
    wgrad: tuple[Operand, Operand]
    about: str = ""

    @property
    def per_tensor(self) -> bool:
        """One scale per tensor: each tensor is quantized once and its transpose reuses
        the codes (exact), as TE's per-tensor FP8 does."""
        return get_recipe(self.fprop[0].recipe).family in ("per_tensor", "delayed")

    def operand(self, gemm: str, side: int) -> Operand:
        return dict(fprop=self.fprop, dgrad=self.dgrad, wgrad=self.wgrad)[gemm][side]


def _hybrid(recipe: str) -> GemmRecipe:
    e4, e5 = Operand(recipe=recipe, fp8_format="e4m3"), Operand(recipe=recipe, fp8_format="e5m2")
    return GemmRecipe(name=recipe.replace("_", "-"), fprop=(e4, e4), dgrad=(e5, e4),
                      wgrad=(e5, e4), about=f"TE {recipe} HYBRID: E4M3 forward, E5M2 gradients")


_ACT_B = Operand(recipe="fp8_block", tile=(1, 128))
_W_B = Operand(recipe="fp8_block", tile=(128, 128))
_MX = Operand(recipe="mxfp8_e4m3", tile=(1, 32))
_X4 = Operand(recipe="nvfp4", tile=(1, 16))
_W4 = Operand(recipe="nvfp4", tile=(16, 16))
_G4 = Operand(recipe="nvfp4", tile=(1, 16), stochastic=True)
GEMM_RECIPES: dict[str, GemmRecipe] = {r.name: r for r in (
    _hybrid("fp8_delayed"),
    _hybrid("fp8_current"),
    GemmRecipe(name="fp8-block", fprop=(_ACT_B, _W_B), dgrad=(_ACT_B, _W_B),
               wgrad=(_ACT_B, _ACT_B),
               about="DeepSeek-V3 blocks: 1x128 activations/gradients, 128x128 weights"),
    GemmRecipe(name="mxfp8", fprop=(_MX, _MX), dgrad=(_MX, _MX), wgrad=(_MX, _MX),
               about="MXFP8 E4M3, blocks of 32 along K, each GEMM quantized from bf16"),
    GemmRecipe(name="nvfp4", fprop=(_X4, _W4), dgrad=(_G4, _W4),
               wgrad=(Operand(recipe="nvfp4", tile=(1, 16), stochastic=True, hadamard=True),
                      Operand(recipe="nvfp4", tile=(1, 16), hadamard=True)),
               about="NVFP4: 1x16 activations/gradients, 16x16 weights, stochastic "
                     "gradients, Hadamard on wgrad"),
)}


def get_gemm_recipe(name: str | GemmRecipe) -> GemmRecipe:
    """The :class:`GemmRecipe` named ``name`` (one of :data:`GEMM_RECIPES`).

    Raises:
        ValueError: unknown name (the choices named).
    """
    if isinstance(name, GemmRecipe):
        return name
    if name not in GEMM_RECIPES:
        raise ValueError(f"unknown GEMM recipe {name!r}; choose one of "
                         f"{', '.join(GEMM_RECIPES)}")
    return GEMM_RECIPES[name]
