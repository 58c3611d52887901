"""The tensor-core model's switchable rules (specs/accumulation.md ACC-TC-008): with
MMA-Sim's rules ampref reproduces every recorded MMA-Sim block bit for bit (an
adversarial campaign over V100 .. B200, fp32 and fp16 output, FP8 with fp16 output,
recorded by scripts/record_mmasim_vectors.py), and every rule is needed for that."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from ampref.accumulation import tensorcore as tc
from ampref.accumulation.gpus import AMPREF_RULES, MMASIM_RULES, Rules, get_rules
from paths import DATA as RECORDED

DATA = np.load(RECORDED / "mmasim_matrixcores.npz")
#: config -> (gpu, input format, output format), as the recording script names them
CONFIGS = {
    "v100-fp16": ("v100", "float16", "float32"), "v100-fp16-f16": ("v100", "float16", "float16"),
    "a100-fp16": ("a100", "float16", "float32"), "a100-bf16": ("a100", "bfloat16", "float32"),
    "a100-tf32": ("a100", "tf32", "float32"), "h100-fp16": ("h100", "float16", "float32"),
    "h100-fp16-f16": ("h100", "float16", "float16"), "h100-bf16": ("h100", "bfloat16", "float32"),
    "h100-tf32": ("h100", "tf32", "float32"), "h100-e4m3": ("h100", "e4m3", "float32"),
    "h100-e4m3-f16": ("h100", "e4m3", "float16"), "h100-e5m2-f16": ("h100", "e5m2", "float16"),
    "b200-e4m3": ("b200", "e4m3", "float32"), "b200-e5m2-f16": ("b200", "e5m2", "float16"),
}


def _hex(x: np.ndarray) -> list[str]:
    return [f"{v:08x}" for v in np.asarray(x, np.float32).view(np.uint32)]


def _mismatches(name: str, rules: Rules) -> np.ndarray:
    gpu, fin, fout = CONFIGS[name]
    a, b, c, d = (DATA[f"nv/{name}/{k}"] for k in "abcd")
    got = tc.dot(a, b, c, gpu=gpu, input_format=fin, output_format=fout, rules=rules,
                 quantize_inputs=fin == "tf32")  # raw fp32 words: truncated (ACC-TC-003)
    return np.flatnonzero(np.asarray(got, np.float32).view(np.uint32)
                          != d.astype(np.float32).view(np.uint32))


def test_the_recorded_campaign_covers_every_configuration() -> None:
    assert {k.split("/")[1] for k in DATA.files if k.startswith("nv/")} == set(CONFIGS)


@pytest.mark.clause("ACC-TC-008", "ACC-TC-007")
@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_mmasim_rules_reproduce_every_recorded_mmasim_block_bit_for_bit(name: str) -> None:
    """Inputs: every recorded MMA-Sim NVIDIA block case under rules='mmasim'. Expected:
    MMA-Sim's outputs. Pass: no row differs."""
    bad = _mismatches(name, MMASIM_RULES)
    d = DATA[f"nv/{name}/d"]
    assert bad.size == 0, f"{name}: {bad.size} rows differ, first {bad[:3]}: want " \
        f"{_hex(d[bad[:3]])}"


@pytest.mark.clause("ACC-TC-008")
@pytest.mark.parametrize("rule", [f.name for f in dataclasses.fields(Rules)])
def test_every_mmasim_rule_is_needed_to_reproduce_mmasim(rule: str) -> None:
    """Reverting any one rule to ampref's breaks at least one recorded row: each
    documented class is real and exercised by the vectors."""
    rules = dataclasses.replace(MMASIM_RULES, **{rule: getattr(AMPREF_RULES, rule)})
    assert sum(_mismatches(n, rules).size for n in CONFIGS) > 0


@pytest.mark.clause("ACC-TC-008")
def test_ampref_rules_differ_from_mmasim_on_some_rows_only() -> None:
    """The default rules are ampref's: they differ from MMA-Sim on a minority of rows
    (those of the documented classes); all others agree bit for bit."""
    total = sum(DATA[f"nv/{n}/d"].size for n in CONFIGS)
    differ = sum(_mismatches(n, AMPREF_RULES).size for n in CONFIGS)
    assert 0 < differ < total // 20


@pytest.mark.clause("ACC-TC-008")
def test_gemm_under_mmasim_rules_equals_the_dot_model_bit_for_bit() -> None:
    """Inputs: 24 H100 bf16 MMA-Sim rows as a GEMM under rules='mmasim'. Expected: the per-
    element dot under the same rules. Pass: equal bits."""
    a, b, c = (DATA[f"nv/h100-bf16/{k}"][:24] for k in "abc")
    got = tc.gemm(a, b, np.tile(c[:, None], (1, 24)), gpu="h100", input_format="bf16",
                  rules="mmasim")
    want = tc.dot(a[:, None, :], b[None, :, :], c[:, None], gpu="h100", input_format="bf16",
                  rules="mmasim")
    assert _hex(got.ravel()) == _hex(want.ravel())


@pytest.mark.clause("ACC-TC-008")
def test_rules_are_named_or_built_and_bad_values_are_refused() -> None:
    """Inputs: get_rules(None), ('MMASim'), ('hw'); Rules(overflow='wrap'),
    Rules(zero_exponent='x'). Expected: the two rule sets; ValueError/TypeError naming each
    bad value and the choices. Pass: each."""
    assert get_rules(None) is AMPREF_RULES and get_rules("MMASim") is MMASIM_RULES
    with pytest.raises(ValueError, match="unknown tensor-core rules 'hw'; choose one of "
                       "ampref, mmasim"):
        get_rules("hw")
    with pytest.raises(ValueError, match=r"Rules.overflow = 'wrap'; choose one of "
                       r"\('saturate', 'inf'\)"):
        Rules(overflow="wrap")
    with pytest.raises(TypeError, match="Rules.zero_exponent must be an int or None, got 'x'"):
        Rules(zero_exponent="x")  # type: ignore[arg-type]


@pytest.mark.clause("ACC-TC-008")
def test_tf32_words_turn_a_low_payload_nan_into_infinity() -> None:
    """Inputs: a low-payload NaN word times 1 on H100 tf32. Expected: inf under
    rules='mmasim' (the word truncates to inf), NaN under ampref's rules. Pass: both."""
    nan_low = np.array([0x7F800001, 0x3F800000], np.uint32).view(np.float32)
    one = np.ones(2, np.float32)
    assert np.isinf(tc.dot(nan_low, one, gpu="h100", input_format="tf32", rules="mmasim"))
    assert np.isnan(tc.dot(nan_low, one, gpu="h100", input_format="tf32"))


@pytest.mark.clause("ACC-TC-008")
@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_a_sum_of_exactly_2_to_128_is_inf_under_mmasim_rules_and_flt_max_under_amprefs(
        sign: float) -> None:
    """Inputs: one H100 bf16 -> fp32 block (K = 16): c = +-FLT_MAX (2^128 - 2^104) and one
    product 2^52 x +-2^52 = +-2^104, so the exact sum is +-2^128; and c = +-FLT_MAX with
    the product +-2^103 (exact sum between FLT_MAX and 2^128). Expected: +-inf for the
    first under rules='mmasim' (MMA-Sim truncates the significand, then converts 2^128 to
    float32, which overflows: mmasim/simulator/arithmetic.py, nv_fused_dot_add), +-FLT_MAX
    under ampref's IEEE toward-zero rule; +-FLT_MAX for the second under both. Pass: bit
    patterns."""
    flt_max = float(np.finfo(np.float32).max)
    a, b = np.zeros((1, 16)), np.zeros((1, 16))
    c = np.array([sign * flt_max])
    a[0, 0] = 2.0**52
    for bexp, mmasim in ((52, np.inf), (51, flt_max)):
        b[0, 0] = sign * 2.0**bexp
        got = {name: np.float32(tc.dot(a, b, c, gpu="h100", input_format="bfloat16",
                                       output_format="float32", rules=rules)[0])
               for name, rules in (("mmasim", MMASIM_RULES), ("ampref", AMPREF_RULES))}
        want = {"mmasim": np.float32(sign * mmasim), "ampref": np.float32(sign * flt_max)}
        assert {k: _hex(np.array([v])) for k, v in got.items()} == \
            {k: _hex(np.array([v])) for k, v in want.items()}, bexp
