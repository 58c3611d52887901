"""TF32 and SIMT SGEMM library models against both H100 runs (ACC-LIB-004, ACC-LIB-006):
every recorded ``torch.mm`` of float32 with TF32 allowed and not, bit for bit, as a
split-K kernel over the instruction's TF32 chain or over float32 FMAs.

Data: ``tests/data/h100_gemms.npz`` (run 1: ``gemm_battery(fmt, seed=1)``, K = 16..1024)
and ``tests/data/h100_gemms_run2.npz`` (run 2: fresh operands, K = 32..8192, M and N up
to 96); provenance in ``tests/data/h100_gemms.md`` and ``h100_gemms_run2.md``."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import pytest

from ampref.accumulation import models, registry
from ampref.accumulation.library import split_bounds
from ampref.testing import assert_bitwise_equal
from paths import DATA

RUN1 = np.load(DATA / "h100_gemms.npz")
RUN2 = np.load(DATA / "h100_gemms_run2.npz")
GEMM = {"tf32": "torch.mm tf32->fp32", "float32": "torch.mm fp32 (no tf32)"}

#: (input format, case) -> the smallest slice count S that reproduces every element,
#: found by scanning S = 1..128 over each recorded GEMM (2026-11-26); the SGEMMs of
#: operand pair #5 (integers whose every partial sum is exact) fit every S and are left
#: out. The test checks S fits and S - 1 does not.
SMALLEST_S = {
    **{("tf32", f"r1 K={k} #{p}"): s for k, s in ((16, 4), (64, 2), (256, 8), (1024, 16))
       for p in range(6)},
    **{("tf32", f"battery k={k} #{p}"): s for k, s in ((32, 1), (128, 4), (2048, 22))
       for p in range(6)},
    ("tf32", "random 64x200x96"): 17, ("tf32", "random 64x1000x96"): 16,
    ("tf32", "random 8x8192x8"): 32,
    **{("float32", f"r1 K={k} #{p}"): s for k, s in ((16, 2), (64, 2), (256, 8), (1024, 32))
       for p in range(5)},
    **{("float32", f"battery k={k} #{p}"): s for k, s in ((32, 2), (128, 4), (2048, 32))
       for p in range(5)},
    ("float32", "random 64x200x96"): 13, ("float32", "random 64x1000x96"): 16,
    ("float32", "random 8x8192x8"): 128,
}


def _operands(fin: str, case: str) -> tuple[Any, Any, Any]:
    """A, B (float64 values of ``fin``) and the recorded float32 output of one case."""
    if case.startswith("r1 "):
        k, p = case[5:].split(" #")
        a, b = (RUN1[f"shared|{fin}|{k}|{p}|{s}"].astype(np.float64) for s in "ab")
        return a, b, RUN1[f"shared|{GEMM[fin]}|float32|{k}|{p}|out"]
    a, b = (RUN2[f"in|{fin}|{case}|{s}"].view(np.float32).astype(np.float64) for s in "ab")
    return a, b, RUN2[f"out|{GEMM[fin]}|{case}"]


def _fits(a: Any, b: Any, want: Any, fin: str, split: int) -> bool:
    got = np.asarray(models.matmul(a, b, input_format=fin,
                                   accumulation=f"cublas:h100:split-k={split}"), np.float32)
    return bool(np.array_equal(got.view(np.uint32), want.view(np.uint32)))


@pytest.mark.clause("ACC-LIB-004", "ACC-LIB-006")
@pytest.mark.parametrize("fin,case", sorted(SMALLEST_S), ids=lambda v: str(v))
def test_every_recorded_tf32_and_sgemm_gemm_is_a_split_k_chain(fin: str, case: str) -> None:
    """Input: one recorded H100 GEMM of float32 operands (TF32 allowed, or SGEMM) and its
    pinned slice count S. Expected: ``cublas:h100:split-k=S`` reproduces every element
    bit for bit, and S - 1 slices do not (the data pin S). Pass: both."""
    a, b, want = _operands(fin, case)
    split = SMALLEST_S[(fin, case)]
    got = np.asarray(models.matmul(a, b, input_format=fin,
                                   accumulation=f"cublas:h100:split-k={split}"), np.float32)
    assert_bitwise_equal(got, want, msg=f"{fin} {case} split-k={split}")
    if split > 1:
        assert not _fits(a, b, want, fin, split - 1), (fin, case, split - 1)


def test_the_pinned_cases_are_every_recorded_tf32_and_sgemm_gemm() -> None:
    """Input: the recorded files. Expected: 24 run-1 and 21 run-2 GEMMs per flavour, each
    pinned but the SGEMM pairs #5 of both runs (integers whose partial sums are all
    exact: every S fits). Pass: the pinned keys are exactly those."""
    for fin, gemm in GEMM.items():
        run1 = {f"r1 K={k.split('|')[3]} #{k.split('|')[4]}" for k in RUN1.files
                if k.startswith(f"shared|{gemm}|")}
        run2 = {k.split("|")[2] for k in RUN2.files if k.startswith(f"out|{gemm}|")}
        assert len(run1) == 24 and len(run2) == 21
        pinned = {c for f, c in SMALLEST_S if f == fin}
        left = (run1 | run2) - pinned
        assert all(c.endswith("#5") for c in left) and len(left) == (0 if fin == "tf32" else 7)


@pytest.mark.clause("ACC-LIB-006")
@pytest.mark.parametrize("fin,case,granule", [("tf32", "random 64x200x96", 8),
                                              ("float32", "random 64x1000x96", 1)])
def test_the_split_granules_are_what_the_records_need(fin: str, case: str, granule: int,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Input: the recorded GEMM that pins each flavour's granule, with the granule
    changed (TF32 4 -> 8: slices of 12 products impossible; SGEMM 8 -> 1: slices of 64
    of 1000 impossible). Expected: no slice count 1..32 reproduces it, while the row's
    granule does (the parametrised test above). Pass: none fits."""
    row = registry.LIBRARY_GPUS["h100"]
    changed = (replace(row, tf32_granule=granule) if fin == "tf32"
               else replace(row, sgemm_granule=granule))
    monkeypatch.setitem(registry.LIBRARY_GPUS, "h100", changed)
    a, b, want = _operands(fin, case)
    assert not any(_fits(a, b, want, fin, s) for s in range(1, 33))


@pytest.mark.clause("ACC-LIB-006")
def test_tf32_and_sgemm_slices_are_made_of_their_granules() -> None:
    """Input: K = 200 in 17 TF32 slices (granule 4), K = 1000 in 16 SGEMM slices (granule
    8), K = 16 in 4 TF32 slices. Expected: 12-product slices (the last 8), 64-product
    slices (the last 40), 4-product slices. Pass: the bounds listed."""
    row = registry.LIBRARY_GPUS["h100"]
    assert row.granule("tf32") == 4 and row.granule("float32") == 8
    assert row.granule("float16") == row.granule("float8_e4m3fn") == 128
    tf = split_bounds(200, 17, row.granule("tf32"))
    assert tf[0] == (0, 12) and tf[-1] == (192, 200) and len(tf) == 17
    sg = split_bounds(1000, 16, row.granule("float32"))
    assert sg[0] == (0, 64) and sg[-1] == (960, 1000) and len(sg) == 16
    assert split_bounds(16, 4, 4) == [(0, 4), (4, 8), (8, 12), (12, 16)]


def _operand_mix(rng: np.random.Generator, shape: tuple[int, int], fin: str) -> Any:
    """Values of ``fin`` with a spread of exponents, zeros and tiny subnormal products."""
    x = rng.standard_normal(shape) * np.exp2(rng.integers(-30, 30, shape))
    x[rng.random(shape) < 0.1] = 0.0
    x[rng.random(shape) < 0.05] = 2.0**-140
    words = x.astype(np.float32).view(np.uint32)
    if fin == "tf32":
        words = words & np.uint32(0xFFFFE000)
    return words.view(np.float32).astype(np.float64)


@pytest.mark.clause("ACC-LIB-004", "ACC-LIB-005")
@pytest.mark.parametrize("seed", [3, 4])
def test_unsplit_tf32_and_sgemm_reduce_to_the_instruction_and_fma_models(seed: int) -> None:
    """Input: fresh operands (not recorded) of 5x48 @ 48x6 with exponents over 2^+-30,
    zeros and subnormal products, and C = 0. Expected: ``cublas:h100`` on tf32 equals
    ``tensorcore:h100`` (one TF32 chain), on float32 equals ``fma-chain``; with split-k=3
    each equals the sum of its three 16-product slices in float32. Pass: bitwise."""
    rng = np.random.default_rng(seed)
    for fin, inner in (("tf32", "tensorcore:h100"), ("float32", "fma-chain")):
        a, b = _operand_mix(rng, (5, 48), fin), _operand_mix(rng, (48, 6), fin)
        lib = models.matmul(a, b, input_format=fin, accumulation="cublas:h100")
        assert_bitwise_equal(lib, models.matmul(a, b, input_format=fin, accumulation=inner),
                             msg=fin)
        acc = np.zeros((5, 6), np.float32)
        for k0 in (0, 16, 32):
            part = models.matmul(a[:, k0:k0 + 16], b[k0:k0 + 16], input_format=fin,
                                 accumulation=inner)
            acc = (acc.astype(np.float64) + part.astype(np.float64)).astype(np.float32)
        split = models.matmul(a, b, input_format=fin, accumulation="cublas:h100:split-k=3")
        assert_bitwise_equal(split, acc, msg=f"{fin} split-k=3")


@pytest.mark.clause("ACC-LIB-004")
@pytest.mark.parametrize("fin", ["tf32", "float32"])
def test_tf32_and_sgemm_write_float32_only(fin: str) -> None:
    """Input: a TF32 or SGEMM library GEMM asked for a bfloat16 output. Expected: a
    ValueError naming the input format and the one output (float32). Pass: raised."""
    with pytest.raises(ValueError, match=f"float32 for {fin} inputs, got bfloat16"):
        models.matmul(np.ones((2, 8)), np.ones((8, 2)), input_format=fin,
                      output_format="bfloat16", accumulation="cublas:h100")


@pytest.mark.clause("ACC-LIB-004", "ACC-BND-003")
@pytest.mark.parametrize("seed", [5, 6])
def test_the_tf32_option_runs_float32_operands_on_the_tf32_kernels(seed: int) -> None:
    """Input: fresh float32 operands (low fraction bits set) of 6x40 @ 40x5, under
    ``cublas:h100:tf32`` and ``cublas:h100:tf32:split-k=3``, and fp16 operands under
    ``cublas:h100:tf32``. Expected: equal to the TF32 model on the operands with their
    low 13 bits cleared (what the kernels read), different from the SGEMM; fp16 GEMMs
    unchanged by the option; every element within error_bound(..., 'cublas:h100:tf32'),
    which must exceed the SGEMM bound (the operands' truncation). Pass: bitwise and
    elementwise."""
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((6, 40)).astype(np.float32).astype(np.float64)
    b = rng.standard_normal((40, 5)).astype(np.float32).astype(np.float64)
    cut = [(x.astype(np.float32).view(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32)
           .astype(np.float64) for x in (a, b)]
    for split in ("", ":split-k=3"):
        got = models.matmul(a, b, input_format="float32", accumulation=f"cublas:h100:tf32{split}")
        want = models.matmul(*cut, input_format="tf32", accumulation=f"cublas:h100{split}")
        assert_bitwise_equal(got, want, msg=split)
        sgemm = models.matmul(a, b, input_format="float32", accumulation=f"cublas:h100{split}")
        assert not np.array_equal(got, sgemm)
    h = rng.standard_normal((6, 40)).astype(np.float16).astype(np.float64)
    assert_bitwise_equal(models.matmul(h, h.T, input_format="float16",
                                       accumulation="cublas:h100:tf32"),
                         models.matmul(h, h.T, input_format="float16",
                                       accumulation="cublas:h100"), msg="fp16")
    exact = models.dot(a[:, None, :], b.T[None, :, :], accumulation="exact",
                       output_format="float64")
    got = models.matmul(a, b, input_format="float32", accumulation="cublas:h100:tf32")
    bound = models.error_bound(a[:, None, :], b.T[None, :, :], accumulation="cublas:h100:tf32")
    err = np.abs(got.astype(np.float64) - np.asarray(exact, np.float64))
    assert np.all(err <= bound)
    sgemm_bound = models.error_bound(a[:, None, :], b.T[None, :, :], accumulation="cublas:h100")
    assert np.any(err > sgemm_bound)


@pytest.mark.clause("ACC-IDN-001", "ACC-LIB-004")
def test_identify_gemm_names_a_tf32_gemm_on_float32_operands() -> None:
    """Input: a black-box GEMM that truncates float32 operands to TF32 (clearing their low
    13 bits with NumPy) and then runs the TF32 library model split in 2 slices, given to
    identify_gemm as float32 at K = 64. Expected: among the matches
    'cublas:h100:tf32:split-k=2', and no SGEMM candidate (plain 'cublas:h100...').
    Pass: both."""
    from ampref.testing import identify_gemm

    def box(a: Any, b: Any) -> Any:
        cut = [(np.asarray(x, np.float32).view(np.uint32) & np.uint32(0xFFFFE000))
               .view(np.float32).astype(np.float64) for x in (a, b)]
        return models.matmul(*cut, input_format="tf32", accumulation="cublas:h100:split-k=2")

    got = identify_gemm(box, "float32", k=64)
    assert "cublas:h100:tf32:split-k=2" in got.matches, got.matches
    assert not any(m.startswith("cublas:h100") and ":tf32" not in m for m in got.matches)
