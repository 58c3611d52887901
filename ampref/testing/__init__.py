"""Helpers for property tests of numeric code: hypothesis strategies, bitwise asserts, and
one call that checks an implementation against the reference and names the rule it follows.

Strategies (need the ``test`` extra, i.e. hypothesis):

* :func:`representable` / :func:`arrays`: values exactly representable in a format,
  drawn as codes so subnormals, ±0, ±max and (optionally) inf/NaN are all reachable;
* :func:`hard_cases`: the inputs that break casts: rounding midpoints and their
  float32/float64 neighbours, the subnormal boundary, max and the overflow threshold,
  signed zeros, NaN payloads;
* :func:`block_cases`: matrices whose blocks break block-scaled quantizers (maxima at
  binade edges, one outlier, all-zero blocks, NaN/inf in one element, amax at the scale
  format's limits), built from a few integers so failures shrink in seconds;
* :func:`operands`: GEMM operands of a format, drawn as codes.

Assertions (no hypothesis needed): :func:`assert_bitwise_equal`,
:func:`assert_within_ulps`; failures print the differing elements in hex with their
position and input.

One call per kind of implementation (hypothesis draws the hard cases, the comparison is
bitwise, a failure is a minimal hex counterexample and the rule that explains it):
:func:`assert_matches` (elementwise casts), :func:`assert_block_matches` (block-scaled
quantizers), :func:`assert_gemm_matches` (GEMMs under an accumulation model),
:func:`assert_scaler_matches` (loss-scale updates).

Identification (no hypothesis needed): :func:`identify` names the rounding rule of a
cast (mode, saturation, subnormals, double rounding via float32); :func:`identify_block`
the profile and scale rule of a block quantizer; :func:`identify_gemm` the accumulation
model and tensor-core conventions of a GEMM; :func:`identify_scaler` the framework whose
scale-update rules a scaler follows.

Imports: ``ampref.common``, ``ampref.formats``, ``ampref.accumulation``, ``ampref.recipes``
and ``ampref.scaling``.
"""

from ampref.accumulation.identify import GemmIdentification, identify_gemm
from ampref.formats.identify import Identification, identify
from ampref.recipes.identify import BlockIdentification, identify_block
from ampref.scaling.identify import ScalerIdentification, identify_scaler

from .assertions import assert_bitwise_equal, assert_within_ulps, ordinal
from .blocks import assert_block_matches, block_cases
from .matches import assert_matches
from .strategies import arrays, hard_cases, representable
from .updates import assert_gemm_matches, assert_scaler_matches, operands

__all__ = ["representable", "arrays", "hard_cases", "block_cases", "operands",
           "assert_bitwise_equal", "assert_within_ulps", "assert_matches",
           "assert_block_matches", "assert_gemm_matches", "assert_scaler_matches", "ordinal",
           "identify", "Identification", "identify_block", "BlockIdentification",
           "identify_gemm", "GemmIdentification", "identify_scaler", "ScalerIdentification"]
