"""Library GEMM models against the GEMMs an H100 computed (ACC-LIB-*, ACC-BND-003,
ACC-REG-001): each recorded flavour's outputs are reproduced bit for bit by its named
model; TF32 and SGEMM lie within their stated bounds; the library models reduce to the
instruction model where their rules say so; one registry parses every name."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ampref.accumulation import models
from ampref.accumulation.identify import identify_gemm
from ampref.accumulation.registry import MODEL_ROWS, resolve
from ampref.testing import assert_bitwise_equal
from ampref.testing.updates import operands
from paths import DATA

REC = np.load(DATA / "h100_gemms.npz")
KS = (16, 64, 256, 1024)

#: recorded GEMM -> (input format, output format, the model that must reproduce it)
MODELLED = {
    "torch.mm fp16->fp32": ("float16", "float32", "cublas:h100"),
    "torch.mm bf16->fp32": ("bfloat16", "float32", "cublas:h100"),
    "torch.mm fp16->fp16": ("float16", "float16", "cublas:h100"),
    "torch.mm bf16->bf16": ("bfloat16", "bfloat16", "cublas:h100"),
    "_scaled_mm e4m3 fast_accum": ("float8_e4m3fn", "float32", "cublas:h100:fast-accum"),
    "_scaled_mm e4m3 no fast_accum": ("float8_e4m3fn", "float32", "cublas:h100"),
    "ampref cublasGemmEx fp16": ("float16", "float32", "cublas:h100"),
    "ampref cublasGemmEx bf16": ("bfloat16", "float32", "cublas:h100"),
}
FLOAT32_INPUTS = {"torch.mm tf32->fp32": "tf32", "torch.mm fp32 (no tf32)": "float32"}


@st.composite
def gemm_operands(draw: Any, fmt: str, max_k: int) -> tuple[Any, Any]:
    """(3, K) @ (K, 2) operands of ``fmt`` values, K in 1..max_k (the testing kit's
    operand strategy: 13-binade windows, or codes over every binade)."""
    k = draw(st.integers(1, max_k))
    return draw(operands(fmt, (3, k))), draw(operands(fmt, (k, 2)))


def _cases(gemm: str, fin: str, fout: str) -> list[tuple[int, Any, Any, Any]]:
    out = []
    for k in KS:
        i = 0
        while f"shared|{gemm}|{fout}|{k}|{i}|out" in REC.files:
            out.append((k, REC[f"shared|{fin}|{k}|{i}|a"].astype(np.float64),
                        REC[f"shared|{fin}|{k}|{i}|b"].astype(np.float64),
                        REC[f"shared|{gemm}|{fout}|{k}|{i}|out"]))
            i += 1
    return out


def test_the_record_is_the_h100_run_it_says_it_is() -> None:
    """Input: the npz's meta. Expected: H100, torch 2.11, seed 1 inputs, 12 GEMMs x 4 K x
    6 pairs. Pass: all stated."""
    meta = json.loads(str(REC["meta"]))
    assert meta["device"] == "NVIDIA H100 80GB HBM3" and meta["torch"].startswith("2.11")
    assert meta["seeds"]["shared"] == 1
    assert sum(f.endswith("|out") for f in REC.files) == 12 * 4 * 6


@pytest.mark.clause("ACC-LIB-001", "ACC-LIB-002", "ACC-LIB-003")
@pytest.mark.parametrize("gemm", sorted(MODELLED))
def test_each_recorded_h100_gemm_is_reproduced_bit_for_bit_by_its_model(gemm: str) -> None:
    """Input: the recorded operands (K = 16, 64, 256, 1024; six pairs each) of one GEMM
    flavour. Expected: its named library model gives every recorded float32 word.
    Pass: bitwise equality of all 1536 elements (hex on failure)."""
    fin, fout, model = MODELLED[gemm]
    cases = _cases(gemm, fin, fout)
    assert len(cases) == 24
    for k, a, b, want in cases:
        got = models.matmul(a, b, input_format=fin, output_format=fout, accumulation=model)
        assert_bitwise_equal(np.asarray(got, np.float32), want, msg=f"{gemm} K={k}")


@pytest.mark.clause("ACC-LIB-003")
def test_fp8_without_fast_accumulation_differs_from_the_unpromoted_chain_past_128() -> None:
    """Input: the recorded FP8 _scaled_mm without fast accumulation at K = 256 and 1024.
    Expected: the unpromoted chain (fast-accum, the instruction model alone) misses
    elements there, so the promotion interval is what the data decides. Pass: the chain
    misses at least 100 of 384 elements per K."""
    for k in (256, 1024):
        cases = [c for c in _cases("_scaled_mm e4m3 no fast_accum", "float8_e4m3fn", "float32")
                 if c[0] == k]
        miss = sum(int((np.asarray(models.matmul(a, b, input_format="float8_e4m3fn",
                                                 accumulation="cublas:h100:fast-accum"),
                                   np.float32).view(np.uint32) != w.view(np.uint32)).sum())
                   for _, a, b, w in cases)
        assert miss >= 100, (k, miss)


@pytest.mark.clause("ACC-BND-003")
@pytest.mark.parametrize("gemm", sorted(FLOAT32_INPUTS))
def test_tf32_and_sgemm_lie_within_their_stated_bounds(gemm: str) -> None:
    """Input: the recorded TF32 and SIMT SGEMM outputs. Expected: |recorded - exact| <=
    error_bound(accumulation='cublas:h100') for every element, the exact value from
    ampref's exact model in float64 (their bits: tests/accumulation/
    test_h100_tf32_sgemm.py). Pass: every element."""
    fin = FLOAT32_INPUTS[gemm]
    for k, a, b, want in _cases(gemm, fin, "float32"):
        exact = models.dot(a[:, None, :], b.T[None, :, :], accumulation="exact",
                           input_format=fin, output_format="float64")
        bound = models.error_bound(a[:, None, :], b.T[None, :, :], accumulation="cublas:h100",
                                   input_format=fin)
        err = np.abs(want.astype(np.float64) - np.asarray(exact, np.float64))
        assert np.all(err <= bound), (k, float(np.max(err - bound)))


@pytest.mark.clause("ACC-LIB-005")
@settings(max_examples=40, deadline=None)
@given(ops=gemm_operands("float8_e4m3fn", max_k=128), fast=st.booleans())
def test_fp8_library_gemms_within_one_promotion_interval_are_the_instruction_chain(
        ops: tuple[Any, Any], fast: bool) -> None:
    """Input: hypothesis FP8 operands with K <= 128. Expected: with or without fast
    accumulation the library GEMM is the tensorcore:h100 chain (no promotion happens
    within one interval). Pass: bitwise."""
    a, b = ops
    lib = models.matmul(a, b, input_format="float8_e4m3fn",
                        accumulation="cublas:h100:fast-accum" if fast else "cublas:h100")
    inst = models.matmul(a, b, input_format="float8_e4m3fn", accumulation="tensorcore:h100")
    assert_bitwise_equal(np.asarray(lib, np.float32), np.asarray(inst, np.float32))


@pytest.mark.clause("ACC-LIB-005")
@settings(max_examples=40, deadline=None)
@given(ops=gemm_operands("bfloat16", max_k=96), out=st.sampled_from(["float32", "bfloat16"]))
def test_16bit_library_gemms_are_the_chain_rounded_once(ops: tuple[Any, Any], out: str) -> None:
    """Input: hypothesis bf16 operands, float32 or bfloat16 output. Expected: cublas:h100
    equals the tensorcore:h100 chain in float32 rounded once into the output. Pass:
    bitwise."""
    import ampref

    a, b = ops
    lib = models.matmul(a, b, input_format="bfloat16", output_format=out,
                        accumulation="cublas:h100")
    chain = models.matmul(a, b, input_format="bfloat16", accumulation="tensorcore:h100")
    want = chain if out == "float32" else ampref.quantize(np.asarray(chain, np.float32), out)
    assert_bitwise_equal(np.asarray(lib, np.float32), np.asarray(want, np.float32))


@pytest.mark.clause("ACC-IDN-001", "ACC-LIB-002")
def test_identify_gemm_names_torchs_16bit_output_gemm() -> None:
    """Input: the recorded torch.mm bf16 -> bf16 as a black box on identify_gemm's own
    battery (seed 1, K = 64: the recorded operands). Expected: matches cublas:h100 and the
    tensor-core chain rounded once to bfloat16 (and the exact sum rounded once, which a
    bfloat16 output cannot tell apart on this battery), not a bfloat16 accumulator
    (sequential, pairwise). Pass: as stated."""
    cases = {a.tobytes(): w for k, a, b, w in _cases("torch.mm bf16->bf16", "bfloat16",
                                                      "bfloat16") if k == 64}

    def recorded(a: Any, b: Any) -> Any:
        return cases[np.asarray(a, np.float64).tobytes()]

    got = identify_gemm(recorded, "bfloat16", output_format="bfloat16", seed=1)
    assert "cublas:h100" in got.matches
    assert "tensorcore:h100, rules=ampref, float32 rounded once to bfloat16" in got.matches
    assert "sequential" not in got.matches and "pairwise" not in got.matches


@pytest.mark.clause("ACC-REG-001")
def test_one_registry_parses_every_model_name_and_names_the_choices() -> None:
    """Input: valid names of each row and bad ones. Expected: resolve gives the row's
    kind and GPU; unknown names, GPUs and options raise ValueError listing the choices;
    a non-str raises TypeError. Pass: as stated."""
    names = {r.name for r in MODEL_ROWS}
    assert names >= {"exact", "tensorcore:<gpu>", "cublas",
                     "cublas:<gpu>[:fast-accum][:tf32][:split-k=<S>]"}
    assert resolve("cublas:H100:fast-accum").fast_accum and resolve("cublas:h100").gpu == "h100"
    assert resolve("cublas:h100:split-k=3:tf32").tf32 and not resolve("cublas:h100").tf32
    assert resolve("tensorcore:mi300").kernel == "mfma"
    assert resolve("exact").kernel == "exact" and resolve("cublas").kernel == "cublas"
    for bad, words in (("exactly", "choose one of"), ("cublas:a100", "modelled: h100"),
                       ("cublas:h100:slow", "fast-accum"), ("tensorcore:x", "known:"),
                       ("cublas:h100:tf32:tf32", "given twice")):
        with pytest.raises(ValueError, match=words):
            resolve(bad)
    with pytest.raises(TypeError, match="must be a str"):
        resolve(3)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="runs on a GPU backend"):
        models.matmul(np.ones((2, 2)), np.ones((2, 2)), input_format="float16",
                      accumulation="cublas")
