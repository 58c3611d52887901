"""Tensor-core input families beyond fp16/bf16/tf32 (specs/accumulation.md ACC-TC-009,
ACC-TC-010): FP4/FP6 elements of Blackwell's kind::f8f6f4, FP8 with fp16 output, and
FP64 DMMA, each against an exact rational oracle written from the spec."""

from __future__ import annotations

from fractions import Fraction as F

import numpy as np
import pytest
from oracle import block_fma_value, round_value, same_bits

from ampref.accumulation import tensorcore as tc
from ampref.formats.cast import quantize
from ampref.formats.exactsum import fma64
from ampref.formats.table import get_format
from ampref.accumulation.gpus import ACC_E8M13

F32, F16 = get_format("float32"), get_format("float16")
F6F4 = ("float4_e2m1fn", "float6_e2m3fn", "float6_e3m2fn", "float8_e4m3fn", "float8_e5m2")


def _draw(rng: np.random.Generator, shape: tuple[int, ...], fmt: str) -> np.ndarray:
    x = rng.standard_normal(shape) * np.exp2(rng.integers(-4, 3, shape))
    x[rng.random(shape) < 0.1] = 0.0
    return quantize(x, fmt, "nearest_even", saturate=True)


@pytest.mark.clause("ACC-TC-009")
@pytest.mark.parametrize("fa", F6F4[:3])
@pytest.mark.parametrize("fb", F6F4)
def test_b200_fp4_fp6_element_mma_equals_the_rational_oracle(fa: str, fb: str) -> None:
    """kind::f8f6f4 on B200: the FP8 path (block 32, f = 25) with the late addend."""
    rng = np.random.default_rng(abs(hash((fa, fb))) % 2**32)
    a, b = _draw(rng, (40, 64), fa), _draw(rng, (40, 64), fb)
    c = quantize(rng.standard_normal(40) * 4, "float32")
    got = tc.dot(a, b, c, gpu="b200", input_format=fa, b_format=fb)
    ea, eb = get_format(fa).minexp, get_format(fb).minexp
    for i in range(40):
        d = F(float(c[i]))
        for k0 in (0, 32):
            blk = block_fma_value([F(x) for x in a[i, k0:k0 + 32]],
                                  [F(x) for x in b[i, k0:k0 + 32]], F(0), ea_min=ea,
                                  eb_min=eb, frac_bits=25, floor=-133, out=F32,
                                  out_rnd="toward_zero")
            d = F(round_value(F(blk) + d, F32))  # c added late, nearest-even (ACC-TC-006)
        ok, msg = same_bits(got[i], d)
        assert ok, f"{fa} x {fb} row {i}: {msg}"


@pytest.mark.clause("ACC-TC-009")
@pytest.mark.parametrize("gpu,fmt,frac,floor", [("h100", "float8_e4m3fn", 13, -21),
                                                ("h100", "float8_e5m2", 13, -21),
                                                ("ada", "float8_e4m3fn", 13, -20),
                                                ("b200", "float8_e5m2", 25, -21)])
def test_fp8_with_fp16_output_equals_the_rational_oracle(gpu: str, fmt: str, frac: int,
                                                         floor: int) -> None:
    """c rounded to fp16 and kept in the block (also on B200: the late addend is an fp32
    output finding), the fp16 floor L, the sum rounded to nearest-even fp16."""
    rng = np.random.default_rng(11)
    blk = tc.get_gpu(gpu).paths["fp8"].block
    a, b = _draw(rng, (60, 2 * blk), fmt), _draw(rng, (60, 2 * blk), fmt)
    c = quantize(rng.standard_normal(60) * 8, "float16")
    got = tc.dot(a, b, c, gpu=gpu, input_format=fmt, output_format="float16")
    e = get_format(fmt).minexp
    for i in range(60):
        d = F(float(c[i]))
        for k0 in (0, blk):
            d = F(block_fma_value([F(x) for x in a[i, k0:k0 + blk]],
                                  [F(x) for x in b[i, k0:k0 + blk]], d, ea_min=e, eb_min=e,
                                  frac_bits=frac, floor=floor, out=F16, out_rnd="nearest_even"))
        ok, msg = same_bits(got[i], d)
        assert ok, f"{gpu} {fmt} row {i}: {msg}"


@pytest.mark.clause("ACC-TC-009")
def test_the_e8m13_accumulator_still_rounds_hopper_fp8_with_fp32_output() -> None:
    """Inputs: [1, 2^-8] . [1, 1] on H100 e4m3. Expected: 257/256 from the block-FMA oracle
    with 13 fraction bits and the E8M13 output. Pass: same bits."""
    a = np.array([[1.0, 2.0**-8]]), np.array([[1.0, 1.0]])
    got = tc.dot(*a, gpu="h100", input_format="e4m3")
    want = block_fma_value([F(1), F(1, 256)], [F(1), F(1)], F(0), ea_min=-6, eb_min=-6,
                           frac_bits=13, floor=-133, out=ACC_E8M13, out_rnd="toward_zero")
    assert want == F(257, 256) and same_bits(got[0], want)[0], same_bits(got[0], want)[1]


@pytest.mark.clause("ACC-TC-010")
@pytest.mark.parametrize("gpu", ["a100", "h100", "h200", "b200"])
def test_dmma_is_a_chain_of_correctly_rounded_fp64_fmas(gpu: str) -> None:
    """Inputs: 30 rows of 9 float64 products over 2^-60..2^60 on A100, H100, H200, B200; a
    4x5 GEMM. Expected: one exact-then-nearest-even float64 rounding per FMA; the GEMM
    equals the dot. Pass: same bits."""
    rng = np.random.default_rng(12)
    a = rng.standard_normal((30, 9)) * np.exp2(rng.integers(-60, 60, (30, 9)))
    b = rng.standard_normal((30, 9)) * np.exp2(rng.integers(-60, 60, (30, 9)))
    c = rng.standard_normal(30)
    got = tc.dot(a, b, c, gpu=gpu, input_format="float64", output_format="float64")
    assert got.dtype == np.float64
    for i in range(30):
        d = c[i]
        for k in range(9):
            d = float(F(a[i, k]) * F(b[i, k]) + F(d))  # exact, then nearest-even float64
        ok, msg = same_bits(got[i], d, wide=True)
        assert ok, f"{gpu} row {i}: {msg}"
    gm = tc.gemm(a[:4], b[:5], np.zeros((4, 5)), gpu=gpu, input_format="float64",
                 output_format="float64")
    want = tc.dot(a[:4, None, :], b[None, :5, :], np.zeros((4, 5)), gpu=gpu,
                  input_format="float64", output_format="float64")
    assert gm.view(np.uint64).tolist() == want.view(np.uint64).tolist()


@pytest.mark.clause("ACC-TC-010", "ACC-API-001")
def test_families_are_refused_where_the_gpu_lacks_them() -> None:
    """Inputs: float64 on Ada, float32 output for float64 inputs, fp16 x e4m3. Expected:
    ValueError naming each. Pass: each."""
    with pytest.raises(ValueError, match="ada has no float64 tensor-core path"):
        tc.dot(np.ones(4), np.ones(4), gpu="ada", input_format="float64",
               output_format="float64")
    with pytest.raises(ValueError, match="output_format float32 is not modelled for float64 "
                       "inputs; choose one of float64"):
        tc.dot(np.ones(4), np.ones(4), gpu="h100", input_format="float64")
    with pytest.raises(ValueError, match="mixed operands float16 x float8_e4m3fn"):
        tc.dot(np.ones(4), np.ones(4), gpu="h100", input_format="float16", b_format="e4m3")


@pytest.mark.clause("ACC-EXA-001", "ACC-TC-010")
def test_fma64_is_correctly_rounded_everywhere_in_the_exponent_range() -> None:
    """Inputs: 20,000 triples over the whole float64 exponent range, half with near-
    cancelling addends; signed-zero cases; 0-d operands on the exact-rational fallback and
    the fast path, and broadcast (2, 1) x (1, 3) operands. Expected: the exact a*b + c
    rounded once (inf on overflow); zero signs -, -, +; 0-d results of shape () (a
    ValueError from np.nonzero on 0-d arrays before), the broadcast shape. Pass: same
    bits."""
    rng = np.random.default_rng(13)
    n = 20000
    a = rng.standard_normal(n) * np.exp2(rng.integers(-560, 500, n))
    b = rng.standard_normal(n) * np.exp2(rng.integers(-560, 500, n))
    c = np.where(rng.random(n) < 0.5, -a * b * (1 + rng.standard_normal(n) * 2.0**-40),
                 rng.standard_normal(n) * np.exp2(rng.integers(-1074, 1000, n)))
    got = fma64(a, b, c)
    for i in range(n):
        exact = F(a[i]) * F(b[i]) + F(c[i])
        try:
            want = float(exact)
        except OverflowError:
            want = float("inf") if exact > 0 else float("-inf")
        ok, msg = same_bits(got[i], want, wide=True)
        assert ok, f"fma({a[i].hex()}, {b[i].hex()}, {c[i].hex()}): {msg}"
    zeros = fma64(np.array([-0.0, 0.0, 1.0]), np.array([1.0, -1.0, 0.0]),
                  np.array([-0.0, -0.0, -0.0]))
    assert np.signbit(zeros).tolist() == [True, True, False]
    # 0-d and broadcast operands, each through the exact-rational fallback (a product
    # below 2^-900) and the fast path: the shape broadcast, the values exact
    tiny = 2.0**-540
    for args, want in (((np.float64(tiny), np.float64(tiny * 3), np.float64(2.0**-1074)),
                        float(F(tiny) * F(tiny * 3) + F(2.0**-1074))),
                       ((np.float64(1.5), np.float64(2.0), np.float64(0.25)), 3.25)):
        got0 = fma64(*args)
        assert got0.shape == () and same_bits(got0, want, wide=True)[0], args
    grid = fma64(np.full((2, 1), tiny), np.full((1, 3), tiny), 0.0)
    assert grid.shape == (2, 3) and (grid == 0.0).all()  # 2^-1080 rounds to +0
