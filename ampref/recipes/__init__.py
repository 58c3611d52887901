"""Block-scaled and per-tensor low-precision recipes of today's training stacks, bit-exact,
with each implementation's arithmetic as a profile (specs/recipes.md).

``quantize(x, recipe, profile=...)`` runs one recipe (``RECIPES``: nvfp4, mxfp8_e4m3,
mxfp8_e5m2, mxfp6_e2m3, mxfp6_e3m2, mxfp4, fp8_block, fp8_current, fp8_delayed) with one
implementation's arithmetic (``PROFILES``: te, te-reference, torchao, ocp);
``compare`` shows where profiles disagree and which rule is responsible; ``matmul`` is
the block-scaled GEMM reference.

Imports: ``ampref.common``, ``ampref.formats`` and ``ampref.accumulation``.
"""

import numpy as np
import numpy.typing as npt

from ampref.common.checks import check_instance

from .catalog import PROFILES, RECIPES, Profile, Recipe, get_profile, get_recipe
from .compare import Comparison, compare
from .gemm import matmul
from .hadamard import hadamard_matrix, rht
from .mx import MX_ELEMENTS, MX_RULES, mx_quantize, mx_scale_exponents
from .pertensor import (FLT_MAX, DelayedScaling, DelayedState, amax, current_scale,
                        quantize_per_tensor)
from .quantize import quantize
from .tiles import Quantized
from .tiles import dequantize as _dequantize_codes

__all__ = ["quantize", "dequantize", "compare", "matmul", "Quantized", "Comparison", "Recipe",
           "Profile", "RECIPES", "PROFILES", "get_recipe", "get_profile", "hadamard_matrix",
           "rht", "amax", "DelayedScaling", "DelayedState", "current_scale",
           "quantize_per_tensor", "mx_quantize", "mx_scale_exponents", "MX_RULES",
           "MX_ELEMENTS", "FLT_MAX"]


def dequantize(q: Quantized) -> npt.NDArray[np.float32]:
    """float32 values of a :class:`Quantized` from its codes and scales (REC-DEQ-001);
    equal to ``q.values``.

    Raises:
        TypeError: ``q`` is not a :class:`Quantized`.
    """
    check_instance("q", q, Quantized, "dequantize")
    return _dequantize_codes(q.codes, q.element, q.scales, q.tile, q.codes.shape,
                             q.global_scale)
