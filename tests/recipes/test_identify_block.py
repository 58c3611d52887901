"""identify_block names the profile and scale rule a block quantizer follows
(REC-IDN-001): each shipped (profile, rule) planted as a black box is named as exactly
itself; a hand-written OCP MX quantizer (NumPy and ml_dtypes, written here from the OCP
MX v1.0 text) is named as OCP's floor rule; a quantizer no profile explains gets the
closest profile and its first miss by row, block and element, in hex."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from ampref import recipes
from ampref.recipes.catalog import RECIPES
from ampref.recipes.identify import candidates, reference, block_battery
from ampref.testing import identify_block
from planted import ocp_floor_mxfp8

NAMES = [r for r in RECIPES if r != "fp8_delayed"]


@pytest.mark.clause("REC-IDN-001")
@pytest.mark.parametrize("recipe", NAMES)
def test_every_shipped_profile_and_rule_is_named_as_exactly_itself(recipe: str) -> None:
    """Inputs: each shipped (profile, rule) of each recipe planted as the function under
    test. Expected: identify_block names exactly that candidate. Pass: equal."""
    for label, opts in candidates(recipe):
        got = identify_block(reference(recipe, opts), recipe)
        assert got.matches == (label,), (label, str(got))


@pytest.mark.clause("REC-IDN-001")
def test_a_hand_written_ocp_quantizer_is_named_as_the_ocp_floor_rule() -> None:
    """Inputs: a hand-written OCP floor MXFP8 quantizer (ampref's OCP rows for NaN/inf
    blocks). Expected: the ocp floor rule among the matches. Pass: named."""
    x = block_battery("mxfp8_e4m3")
    finite: np.ndarray = np.asarray(np.isfinite(x).all(axis=1))

    def ours(m: np.ndarray) -> np.ndarray:
        out = ocp_floor_mxfp8(np.where(np.isfinite(m), m, 0))
        # the OCP text leaves NaN/inf blocks to the implementation: take ampref's OCP rows
        ref = recipes.quantize(m, "mxfp8_e4m3", profile="ocp", scale_rule="floor").values
        return np.where(finite[:, None], out, ref)

    got = identify_block(ours, "mxfp8_e4m3")
    assert "profile=ocp, scale_rule=floor" in got.matches, str(got)


@pytest.mark.clause("REC-IDN-001")
def test_a_quantizer_no_profile_explains_gets_the_closest_and_its_first_miss() -> None:
    """Inputs: ocp/even MXFP8 values with one element one bit off. Expected: no match,
    closest ocp/even, one mismatch at row 2, block 1, element 5 in hex. Pass: all."""
    def rounds_elements_half_away(m: np.ndarray) -> Any:
        q = recipes.quantize(m, "mxfp8_e4m3", profile="ocp", scale_rule="even")
        v = q.values.copy()
        v[2, 37] = np.nextafter(v[2, 37], np.float32(np.inf))  # one element off by a bit
        return v

    got = identify_block(rounds_elements_half_away, "mxfp8_e4m3")
    assert got.matches == () and got.closest == "profile=ocp, scale_rule=even"
    assert got.mismatches == 1 and got.first is not None
    row, block, element, hexed, _, _ = got.first
    assert (row, block, element) == (2, 1, 5) and hexed.startswith("0x") and len(hexed) == 10
    assert "row 2, block 1, element 5" in str(got)


@pytest.mark.clause("REC-IDN-001", "API-ERR-001")
def test_identify_block_refuses_delayed_scaling_non_callables_and_other_shapes() -> None:
    """Inputs: fp8_delayed; None as the function; a function returning fewer columns for
    a block recipe (called once) and a per-tensor one (called row by row); recipe 'mxfp9'.
    Expected: ValueError/TypeError naming each, the shape messages naming the returned
    and the input shape. Pass: each."""
    with pytest.raises(ValueError, match="fp8_delayed depends on the amax history"):
        identify_block(lambda m: m, "fp8_delayed")
    with pytest.raises(TypeError, match="needs a callable"):
        identify_block(None, "mxfp4")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"returned shape \((\d+), 64\) for input shape "
                                         r"\(\1, 128\)"):
        identify_block(lambda m: m[:, :64], "mxfp4")
    # a per-tensor recipe runs the function row by row: the message names the row's shape
    with pytest.raises(ValueError, match=r"returned shape \(1, 64\) for input shape "
                                         r"\(1, 128\)"):
        identify_block(lambda m: m[:, :64], "fp8_current")
    calls = iter(range(10**6))  # right for the first row, wrong from the second on

    def late(m: np.ndarray) -> np.ndarray:
        return m if next(calls) == 0 else m[:, :100]

    with pytest.raises(ValueError, match=r"returned shape \(1, 100\) for input shape "
                                         r"\(1, 128\)"):
        identify_block(late, "fp8_current")
    with pytest.raises(ValueError, match="unknown recipe"):
        identify_block(lambda m: m, "mxfp9")
