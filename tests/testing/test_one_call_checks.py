"""One call per kind of implementation (REC-IDN-002, ACC-IDN-002, SCL-IDN-002, REC-CMP-002):
correct implementations written independently in tests/planted.py pass; the same
implementations with one planted bug fail with a minimal hex counterexample, its position,
and the rule that explains it."""

from __future__ import annotations

import time

import numpy as np
import pytest

from ampref import recipes
from ampref.accumulation.models import matmul
from ampref.testing import (assert_block_matches, assert_gemm_matches, assert_scaler_matches,
                            block_cases, hard_cases)
from planted import gemm_f32_loop, ocp_floor_mxfp8, textbook_scaler


def finite_ocp(x: np.ndarray, *, half_away: bool = False) -> np.ndarray:
    """The hand-written OCP quantizer; blocks holding NaN/inf (left open by the OCP text)
    take ampref's OCP rows, so that only the finite arithmetic is under test."""
    out = ocp_floor_mxfp8(np.where(np.isfinite(x), x, 0), half_away=half_away)
    ref = recipes.quantize(x, "mxfp8_e4m3", profile="ocp", scale_rule="floor").values
    bad = ~np.isfinite(x).reshape(x.shape[0], -1, 32).all(axis=-1)
    return np.where(np.repeat(bad, 32, axis=-1), ref, out)


@pytest.mark.clause("REC-IDN-002")
def test_a_correct_hand_written_mx_quantizer_passes() -> None:
    """Inputs: a hand-written OCP floor MXFP8 quantizer through assert_block_matches (150
    examples). Expected: no difference from quantize(profile='ocp', scale_rule='floor').
    Pass: no AssertionError."""
    assert_block_matches(finite_ocp, "mxfp8_e4m3", profile="ocp", scale_rule="floor",
                         max_examples=150)


@pytest.mark.clause("REC-IDN-002")
def test_a_half_away_element_rounding_bug_shrinks_to_one_block_with_position_and_rule() -> None:
    """Inputs: the same quantizer rounding elements half away from zero (300 examples).
    Expected: an AssertionError naming the reference call, shrunk to block 0 with the
    element, input, actual and desired in hex, and identify_block's verdict. Pass: all
    phrases present."""
    t0 = time.perf_counter()
    with pytest.raises(AssertionError) as e:
        assert_block_matches(lambda x: finite_ocp(x, half_away=True), "mxfp8_e4m3",
                             profile="ocp", scale_rule="floor", max_examples=300)
    seconds = time.perf_counter() - t0
    text = str(e.value)
    assert "mxfp8_e4m3 vs quantize(profile='ocp', scale_rule='floor')" in text
    assert "at (0, " in text and "[block 0, element" in text  # shrunk to one block
    assert "input 0x" in text and "actual 0x" in text and "desired 0x" in text
    assert "identify_block(mxfp8_e4m3" in text and "closest: profile=ocp" in text
    assert "no profile explains every element" in text
    print(f"half-away MXFP8 bug found and shrunk in {seconds:.1f} s")  # docs/testing.md


@pytest.mark.clause("REC-IDN-002")
def test_block_cases_cover_every_family_and_print_as_their_name() -> None:
    """Inputs: 300 derandomized draws of block_cases('mxfp8_e4m3') for one 1x32 block.
    Expected: specials, all-zero blocks and scale-limit blocks appear; the strategies print
    as their calls. Pass: all."""
    from hypothesis import given, settings

    seen: set[str] = set()

    @settings(max_examples=300, deadline=None, database=None, derandomize=True)
    @given(block_cases("mxfp8_e4m3", rows=(1, 1), blocks=(1, 1)))
    def draw(x: np.ndarray) -> None:
        assert x.dtype == np.float32 and x.shape == (1, 32)
        if not np.isfinite(x).all():
            seen.add("special")
        elif not x.any():
            seen.add("zero")
        elif np.abs(x).max() >= 2.0**100 or np.abs(x).max() < 2.0**-100:
            seen.add("scale_limit")

    draw()
    assert seen == {"special", "zero", "scale_limit"}
    assert repr(block_cases("mxfp8_e4m3")) == "block_cases('mxfp8_e4m3')"
    assert repr(hard_cases("e4m3fn")) == "hard_cases(fmt='float8_e4m3fn', dtype='float32')"


@pytest.mark.clause("REC-IDN-002")
def test_a_scale_limit_block_lies_within_four_binades_of_each_end_of_the_scales() -> None:
    """Inputs: make_block('scale_limit') for an MXFP8 1x32 block, k = 0..7, j = -1 and 1.
    Expected: values uniform in (-1, 1) times 2^top with top = -130 + k mod 4 at the
    bottom (amaxes at E8M0's smallest scale, 2^-127, and up to three binades below) and
    126 - k mod 4 at the top (float32's last binades): amax in [2^(top-1), 2^top). Pass:
    each block's amax in its binade."""
    from ampref.testing.blocks import make_block

    for k in range(8):
        for j, top in ((-1, -130 + k % 4), (1, 126 - k % 4)):
            amax = float(np.abs(make_block("scale_limit", 32, "float8_e4m3fn", 5, k, j, 0)).max())
            assert 2.0 ** (top - 1) <= amax < 2.0**top, (k, j, amax)


@pytest.mark.clause("REC-IDN-002")
def test_an_edge_block_peaks_j_float32_steps_from_the_element_max_on_js_side() -> None:
    """Inputs: make_block('edge') and ('mantissa') for an MXFP8 (e4m3, max 448) 1x32 block,
    k = 0 and 3, j = -2..2, the special element at position 5. Expected: edge: element 5
    is sign(j) times the float32 whose bit pattern is that of 448 * 2^k moved |j| steps
    up (j > 0) or down (j < 0), integer arithmetic on the bits as the oracle; mantissa:
    element 5 is ±448 * (1 + (2|j| + 1)/16) * 2^k; every other element is at most half
    the peak in magnitude. Pass: equal bits, the bound held."""
    from ampref.testing.blocks import make_block

    for k in (0, 3):
        base = int(np.float32(448.0 * 2.0**k).view(np.uint32))
        for j in range(-2, 3):
            sign = -1.0 if j < 0 else 1.0
            # positive floats order as their bit patterns: + j steps up for j > 0 and
            # down toward 0 for j < 0
            want = {"edge": sign * np.uint32(base + j).view(np.float32),
                    "mantissa": np.float32(sign * 448.0 * (1 + (2 * abs(j) + 1) / 16)
                                           * 2.0**k)}
            for kind, peak in want.items():
                b = make_block(kind, 32, "float8_e4m3fn", 9, k, j, 5)
                got = b[5:6].view(np.uint32)[0]
                assert got == np.float32(peak).view(np.uint32), (kind, k, j, hex(got))
                rest = np.abs(np.delete(b, 5))
                assert rest.max() <= abs(peak) / 2, (kind, k, j)


@pytest.mark.clause("ACC-IDN-002")
def test_a_float32_loop_passes_as_sequential_and_fails_as_pairwise_naming_sequential() -> None:
    """Inputs: a float32 loop GEMM checked as sequential (60 examples) and as pairwise
    (200). Expected: passes the first; fails the second with operands in hex and
    identify_gemm naming sequential. Pass: both."""
    assert_gemm_matches(gemm_f32_loop, input_format="bfloat16", accumulation="sequential",
                        max_examples=60)
    with pytest.raises(AssertionError) as e:
        assert_gemm_matches(gemm_f32_loop, input_format="bfloat16", accumulation="pairwise",
                            max_examples=200)
    text = str(e.value)
    assert "GEMM vs matmul(accumulation='pairwise')" in text
    assert "A[" in text and "B[:, " in text and "0x" in text
    assert "identify_gemm(bfloat16): matches sequential" in text


@pytest.mark.clause("ACC-IDN-002")
def test_a_tensor_core_model_passes_against_itself_through_the_helper() -> None:
    """Inputs: ampref's own tensorcore:h100 GEMM checked against that model (30 examples).
    Expected: no difference. Pass: no AssertionError."""
    def h100(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return np.asarray(matmul(a, b, input_format="float16", accumulation="tensorcore:h100"))

    assert_gemm_matches(h100, input_format="float16", accumulation="tensorcore:h100",
                        max_examples=30)


@pytest.mark.clause("SCL-IDN-002")
def test_a_textbook_scaler_passes_as_torch_and_an_off_by_one_fails_minimally() -> None:
    """Inputs: a textbook scaler checked as torch, and a variant that grows one step late.
    Expected: the first passes; the second fails on the minimal sequence of three clean
    steps with both scales and identify_scaler's verdict. Pass: both."""
    assert_scaler_matches(textbook_scaler, "torch", init_scale=2.0**16, growth_interval=3)
    with pytest.raises(AssertionError) as e:
        assert_scaler_matches(lambda f: textbook_scaler(f, late_growth=True), "torch",
                              init_scale=2.0**16, growth_interval=3)
    text = str(e.value)
    # the minimal sequence: three clean steps, where torch grows and the bug does not
    assert "update 3 (found_inf=False)" in text and "flags (1 = overflow): 000" in text
    assert "gave 65536.0, the profile gives 131072.0" in text
    assert "identify_scaler: no profile explains every update" in text


@pytest.mark.clause("SCL-IDN-002", "API-ERR-001")
def test_assert_scaler_matches_names_an_unknown_profile() -> None:
    """Inputs: profile 'horovod'. Expected: ValueError naming it and the choices. Pass:
    raised."""
    with pytest.raises(ValueError, match="unknown loss-scale profile 'horovod'; choose one of"):
        assert_scaler_matches(textbook_scaler, "horovod")


@pytest.mark.clause("REC-CMP-002")
def test_compare_takes_a_users_quantizer_and_names_the_rule_it_followed() -> None:
    """Inputs: the MX block battery compared between te and a user's OCP-floor quantizer; a
    user side of the wrong shape; one side only. Expected: a pair naming the rules the
    user's values follow (torchao floor | ocp floor); ValueErrors for the shape and the
    single side. Pass: all."""
    from ampref.recipes.identify import block_battery

    x = block_battery("mxfp8_e4m3")
    x = np.where(np.isfinite(x), x, 0).astype(np.float32)

    def my_mxfp8(m: np.ndarray) -> np.ndarray:
        return ocp_floor_mxfp8(m)

    c = recipes.compare(x, "mxfp8_e4m3", ("te", my_mxfp8))
    pair = c.pairs[0]
    assert (pair.a, pair.b) == ("my_mxfp8", "te") and pair.values > 0
    # torchao's and OCP's floor rules agree on these elements: both are named
    assert list(pair.causes) == ["my_mxfp8: value of profile=torchao, scale_rule=floor | "
                                 "profile=ocp, scale_rule=floor"]
    assert "my_mxfp8" in str(c) and "te" in c.results
    with pytest.raises(ValueError, match=r"returned shape \(3,\)"):
        recipes.compare(x, "mxfp8_e4m3", ("te", lambda m: np.zeros(3)))
    with pytest.raises(ValueError, match="compare needs two sides"):
        recipes.compare(x, "mxfp8_e4m3", (my_mxfp8,))
