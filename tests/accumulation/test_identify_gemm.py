"""identify_gemm names the accumulation model of a black-box GEMM (ACC-IDN-001). Oracles: a
float32 loop written in tests/planted.py (one rounding per product and per addition, or
one per fused step), NumPy's float64 product (exact for these sums, one rounding at the
end), and every shipped model planted as a black box, which must be named together with
exactly the models that give the same bits on the battery."""

from __future__ import annotations

import numpy as np
import pytest

from ampref.accumulation.identify import gemm_battery, gemm_candidates, identify_gemm
from ampref.accumulation.models import matmul
from planted import gemm_f32_loop


def _battery_bits(fmt: str, kw: dict) -> bytes:
    """One model's float32 bit patterns over the whole battery, as one key."""
    return b"".join(np.asarray(matmul(a, b, **kw), np.float32).view(np.uint32).tobytes()
                    for a, b in gemm_battery(fmt))


@pytest.mark.clause("ACC-IDN-001")
@pytest.mark.parametrize("fmt", ["bfloat16", "tf32"])
def test_every_model_is_named_with_exactly_the_models_equal_to_it(fmt: str) -> None:
    """Inputs: each candidate GEMM model for bf16 and tf32 planted as the function under
    test. Expected: identify_gemm names it together with exactly the candidates that agree
    with it on the whole battery (each candidate's bits computed once here, so the check
    costs one identification per candidate). Pass: equal sets."""
    cands = gemm_candidates(fmt)
    bits = {label: _battery_bits(fmt, kw) for label, kw in cands}
    for label, kw in cands:
        def planted(a: np.ndarray, b: np.ndarray, kw: dict = kw) -> np.ndarray:
            return np.asarray(matmul(a, b, **kw))

        got = identify_gemm(planted, fmt)
        twins = {lab for lab, _ in cands if bits[lab] == bits[label]}
        assert set(got.matches) == twins and label in got.matches, (label, str(got))


@pytest.mark.clause("ACC-IDN-001")
def test_bfloat16_tells_ampref_rules_from_mmasim_rules() -> None:
    """Inputs: tensorcore:h100 with rules='mmasim' on bf16. Expected: the mmasim variant
    named, no ampref-rules variant. Pass: both."""
    got = identify_gemm(lambda a, b: matmul(a, b, input_format="bfloat16",
                                            accumulation="tensorcore:h100", rules="mmasim"),
                        "bfloat16")
    assert "tensorcore:h100, rules=mmasim" in got.matches
    assert not any("rules=ampref" in m for m in got.matches)


@pytest.mark.clause("ACC-IDN-001")
def test_a_hand_written_float32_loop_is_sequential_and_its_fused_twin_fma_chain() -> None:
    """Inputs: a float32 loop GEMM and its fused twin on float32 and float16 inputs.
    Expected: 'sequential'; 'fma-chain' and the unsplit H100/H200 SGEMM models (a float32
    FMA chain, ACC-LIB-004) and nothing else; both first on float16 (exact products).
    Pass: each."""
    seq = identify_gemm(gemm_f32_loop, "float32")
    assert seq.matches == ("sequential",)
    fused = identify_gemm(lambda a, b: gemm_f32_loop(a, b, fused=True), "float32")
    assert fused.matches == ("fma-chain", "cublas:h100", "cublas:h200")
    # float16 products are exact in float32, so there the two rules are one
    assert identify_gemm(gemm_f32_loop, "float16").matches[:2] == ("sequential", "fma-chain")


@pytest.mark.clause("ACC-IDN-001")
def test_a_gemm_no_model_explains_gets_the_closest_and_its_first_element() -> None:
    """Inputs: a float32 loop with element (2, 5) one ulp off. Expected: no match, closest
    'sequential', 6 mismatches (one per battery pair), the first at (0, 2, 5) in hex. Pass:
    all."""
    def off(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        c = gemm_f32_loop(a, b)
        c[2, 5] = np.nextafter(c[2, 5], np.float32(np.inf))
        return c

    got = identify_gemm(off, "float16")
    # one element off in each of the battery's six pairs
    assert got.matches == () and got.closest == "sequential" and got.mismatches == 6
    assert got.first is not None and got.first[:3] == (0, 2, 5)
    assert "element (2, 5)" in str(got) and "0x" in str(got)


@pytest.mark.clause("ACC-IDN-001", "API-ERR-001")
def test_identify_gemm_refuses_non_callables_and_other_shapes() -> None:
    """Inputs: a string instead of a function; a function returning shape (8,). Expected:
    TypeError and ValueError naming them. Pass: both."""
    with pytest.raises(TypeError, match="needs a callable"):
        identify_gemm("sequential", "float16")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"returned shape \(8,\)"):
        identify_gemm(lambda a, b: np.zeros(8, np.float32), "float16")
