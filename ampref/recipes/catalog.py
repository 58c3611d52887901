"""Block-scaled recipes and implementation profiles as data (specs/recipes.md, REC-CAT-*).

A :class:`Recipe` says *what* is quantized: element format, scale format, tile shapes,
whether a per-tensor FP32 scale sits above the block scales, which options exist. A
:class:`Profile` says *whose arithmetic* computes it: each field names the variant of one
rule that an implementation uses, and the rules themselves are written out in
``specs/recipes.md`` (clause named in each field's comment). Adding a stack means adding
a row, not a code path.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["Recipe", "Profile", "RECIPES", "PROFILES", "get_recipe", "get_profile"]

Tile = tuple[int, int]


@dataclass(frozen=True, kw_only=True)
class Recipe:
    """One block-scaled (or per-tensor) quantization recipe (REC-CAT-001)."""

    name: str
    family: Literal["per_tensor", "delayed", "fp8_block", "mx", "nvfp4"]
    element: str                 #: element format name (ampref.formats)
    scale_format: str            #: "float8_e8m0fnu", "float8_e4m3fn" or "float32"
    tiles: tuple[Tile, ...]      #: allowed tiles (rows, cols); the first is the default
    options: tuple[str, ...]     #: option names this recipe accepts
    global_scale: bool = False   #: an FP32 per-tensor scale above the block scales
    summary: str = ""

    @property
    def default_tile(self) -> Tile:
        return self.tiles[0]


@dataclass(frozen=True, kw_only=True)
class Profile:
    """One implementation's exact arithmetic for every recipe it ships (REC-PRF-001)."""

    name: str
    source: str
    #: block/tensor amax: "fmaxf" ignores NaN (CUDA kernels), "torch" propagates it (REC-AMX-001)
    amax: Literal["fmaxf", "torch"]
    #: per-tensor and FP8-block scale formula (REC-SCL-001..003)
    scale: Literal["te", "te-reference", "torchao"]
    #: default amax floor (epsilon) of per-tensor and FP8-block scales
    epsilon: float
    #: MX scale and multiplier rules (REC-MX-001..004)
    mx: Literal["te", "torchao", "ocp"]
    #: MX scale rules this profile implements; the first is its default
    mx_rules: tuple[str, ...]
    #: NVFP4 global and block scale rules (REC-NV4-001..004)
    nvfp4: Literal["te", "te-reference", "torchao"]
    #: how an FP4/FP6 element encodes NaN and -0 (REC-ELM-001)
    fp4_nan: Literal["max", "zero"]
    fp4_negative_zero: Literal["keep", "positive"]
    #: recipes this implementation ships (others are refused, and skipped by compare)
    recipes: tuple[str, ...]
    #: power-of-two FP8-block scales unless the caller says otherwise (TE's default)
    block_pow2: bool = True


_PER_TENSOR_OPTS = ("fp8_format", "epsilon", "pow2")
RECIPES: dict[str, Recipe] = {r.name: r for r in (
    Recipe(name="nvfp4", family="nvfp4", element="float4_e2m1fn", scale_format="float8_e4m3fn",
           tiles=((1, 16), (16, 16)), global_scale=True,
           options=("hadamard", "hadamard_accumulation", "row_scaled", "four_over_six",
                    "four_over_six_error", "four_over_six_e4m3_max", "per_tensor_scale"),
           summary="FP4 E2M1 elements, E4M3 scale per 16, FP32 per-tensor scale"),
    *(Recipe(name=n, family="mx", element=e, scale_format="float8_e8m0fnu",
             tiles=((1, 32), (32, 32)), options=("scale_rule",),
             summary=f"OCP MX: {e} elements, E8M0 scale per 32")
      for n, e in (("mxfp8_e4m3", "float8_e4m3fn"), ("mxfp8_e5m2", "float8_e5m2"),
                   ("mxfp6_e2m3", "float6_e2m3fn"), ("mxfp6_e3m2", "float6_e3m2fn"),
                   ("mxfp4", "float4_e2m1fn"))),
    Recipe(name="fp8_block", family="fp8_block", element="float8_e4m3fn", scale_format="float32",
           tiles=((1, 128), (128, 128)), options=_PER_TENSOR_OPTS,
           summary="DeepSeek-V3 FP8 blocks: 1x128 activations, 128x128 weights, FP32 scales"),
    Recipe(name="fp8_current", family="per_tensor", element="float8_e4m3fn",
           scale_format="float32", tiles=((0, 0),), options=_PER_TENSOR_OPTS,
           summary="per-tensor FP8, scale from this tensor's amax"),
    Recipe(name="fp8_delayed", family="delayed", element="float8_e4m3fn", scale_format="float32",
           tiles=((0, 0),), options=("fp8_format", "state", "margin", "amax_history_len",
                                     "amax_compute_algo"),
           summary="per-tensor FP8, scale from the amax history of earlier steps"),
)}

PROFILES: dict[str, Profile] = {p.name: p for p in (
    Profile(name="te", source="TransformerEngine CUDA kernels (common/recipe, common/cast)",
            amax="fmaxf", scale="te", epsilon=0.0, mx="te", mx_rules=("rceil",),
            nvfp4="te", fp4_nan="max", fp4_negative_zero="keep", recipes=tuple(RECIPES)),
    Profile(name="te-reference",
            source="TransformerEngine Python references (custom_recipes/reference_nvfp4.py, "
                   "tests/pytorch/references/quantize_scale_calc.py)",
            amax="torch", scale="te-reference", epsilon=0.0, mx="te", mx_rules=("rceil",),
            nvfp4="te-reference", fp4_nan="zero", fp4_negative_zero="positive",
            recipes=("nvfp4", "fp8_block", "fp8_current")),
    Profile(name="torchao", source="torchao 0.18 (float8/, prototype/mx_formats/, "
                                   "prototype/blockwise_fp8_training/)",
            amax="torch", scale="torchao", epsilon=1e-12, mx="torchao",
            mx_rules=("floor", "rceil", "ceil", "even"), nvfp4="torchao", fp4_nan="max",
            fp4_negative_zero="keep", block_pow2=False,
            recipes=tuple(r for r in RECIPES if r != "fp8_delayed")),
    Profile(name="ocp", source="OCP Microscaling Formats (MX) v1.0, section 6.3",
            amax="torch", scale="te", epsilon=0.0, mx="ocp",
            mx_rules=("floor", "ceil", "even", "rceil"), nvfp4="te", fp4_nan="max",
            fp4_negative_zero="keep", recipes=tuple(r for r in RECIPES if r.startswith("mx"))),
)}


def _choice(kind: str, name: Any, table: dict[str, Any]) -> Any:
    if not isinstance(name, str):
        raise TypeError(f"{kind} must be a name (str), got {type(name).__name__}: {name!r}; "
                        f"choose one of {', '.join(table)}")
    if name not in table:
        raise ValueError(f"unknown {kind} {name!r}; choose one of {', '.join(table)}")
    return table[name]


def get_recipe(name: str | Recipe) -> Recipe:
    """The :class:`Recipe` named ``name`` (a Recipe passes through).

    Raises:
        TypeError/ValueError: not a name, or not one of :data:`RECIPES`.
    """
    return name if isinstance(name, Recipe) else _choice("recipe", name, RECIPES)


def get_profile(name: str | Profile) -> Profile:
    """The :class:`Profile` named ``name`` (a Profile passes through).

    Raises:
        TypeError/ValueError: not a name, or not one of :data:`PROFILES`.
    """
    return name if isinstance(name, Profile) else _choice("profile", name, PROFILES)
