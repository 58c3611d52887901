"""AMD CDNA matrix cores (ampref.mfma, specs/accumulation.md ACC-MFMA-*): bitwise against
MMA-Sim rows recorded by scripts/record_mmasim_vectors.py and against an exact rational
oracle written here from the spec text; selection through ampref.matmul."""

from __future__ import annotations

from fractions import Fraction as F

import numpy as np
import pytest
from oracle import floor_log2, round_value, same_bits, trunc_to

import ampref
from ampref import accumulation
from ampref.formats.cast import quantize
from ampref.formats.table import get_format
from ampref.accumulation.mfma import AMD_GPUS, mfma_dot
from paths import DATA as RECORDED

DATA = np.load(RECORDED / "mmasim_matrixcores.npz")
AMD_KEYS = sorted(k[:-2] for k in DATA.files if k.startswith("amd/") and k.endswith("/a"))
F32 = get_format("float32")


def _bits(x: np.ndarray, wide: bool) -> np.ndarray:
    return np.asarray(x, np.float64 if wide else np.float32).view(np.uint64 if wide else np.uint32)


@pytest.mark.clause("ACC-MFMA-001", "ACC-MFMA-002", "ACC-MFMA-003")
@pytest.mark.parametrize("key", AMD_KEYS)
def test_mfma_equals_every_recorded_mmasim_row_bit_for_bit(key: str) -> None:
    """Inputs: every recorded MMA-Sim AMD case (GPU, formats, a, b, c). Expected: MMA-Sim's
    outputs (NaN meets NaN, payloads not modelled). Pass: bitwise equal otherwise."""
    gpu, fa, fb = (str(x) for x in DATA[f"{key}/formats"])
    a, b, c, d = (DATA[f"{key}/{k}"] for k in "abcd")
    if fa == "tf32":  # MMA-Sim truncates fp32 words; ampref validates tf32 values
        a, b = quantize(a, "tf32", "toward_zero"), quantize(b, "tf32", "toward_zero")
    wide = fa == "float64"
    got = mfma_dot(a, b, c, gpu=gpu, a_format=fa, b_format=fb,
                   output_format="float64" if wide else "float32")
    # NaN payloads are not modelled (MMA-Sim inherits its host's): NaN must meet NaN
    bad = np.flatnonzero((_bits(got, wide) != _bits(d, wide)) & ~(np.isnan(got) & np.isnan(d)))
    assert bad.size == 0, f"{key}: rows {bad[:5]} differ: got " \
        f"{[hex(int(x)) for x in _bits(got[bad[:3]], wide)]}, want " \
        f"{[hex(int(x)) for x in _bits(d[bad[:3]], wide)]}"


def _e(x: F, emin: int) -> int:
    return -126 if x == 0 else max(floor_log2(abs(x)), emin)


def _down(x: F, q: F) -> F:
    return (x / q).__floor__() * q


def _fused_oracle(a: list[F], b: list[F], d: F, ea: int, eb: int, fp8: bool) -> F | float:
    """One CDNA3 fused step as ACC-MFMA-003 states it, on rationals."""
    def trunc_sum(idx: range) -> tuple[F, int]:
        m = max(_e(a[i], ea) + _e(b[i], eb) for i in idx)
        return sum((trunc_to(a[i] * b[i], F(2) ** (m - 24)) for i in idx), F(0)), m

    if fp8:
        (s0, m0), (s1, m1) = trunc_sum(range(0, len(a), 2)), trunc_sum(range(1, len(a), 2))
        m = max(m0, m1)
        s = _down(s0, F(2) ** (m - 24)) + _down(s1, F(2) ** (m - 24))
    else:
        s, m = trunc_sum(range(len(a)))
    ec = _e(d, -126)
    m2 = max(m, ec)
    c = _down(d, F(2) ** (m2 - 24)) if not (fp8 and ec < m2 - 25) else F(0)
    return round_value(_down(s, F(2) ** (m2 - 31)) + c, F32)


def _pairwise_oracle(p: list[F]) -> F | float:
    if len(p) == 1:
        return p[0]
    h = len(p) // 2
    return round_value(F(_pairwise_oracle(p[:h])) + F(_pairwise_oracle(p[h:])), F32)


def _draw(rng: np.random.Generator, n: int, fmt: str, spread: int) -> np.ndarray:
    x = rng.standard_normal(n) * np.exp2(rng.integers(-spread, spread + 1, n))
    x[rng.random(n) < 0.15] = 0.0
    return quantize(x, fmt, "toward_zero" if fmt == "tf32" else "nearest_even")


@pytest.mark.clause("ACC-MFMA-003")
@pytest.mark.parametrize("fa,fb,g", [("float16", "float16", 8), ("bfloat16", "bfloat16", 8),
                                     ("tf32", "tf32", 4),
                                     ("float8_e4m3fnuz", "float8_e5m2fnuz", 16)])
def test_cdna3_fused_step_equals_the_rational_oracle(fa: str, fb: str, g: int) -> None:
    """Inputs: 150 random pairs of two chained fused steps per format pair on MI300 (fp16,
    bf16, tf32, FP8 FNUZ), exponent spreads, random addends. Expected: the exact rational
    model of CDNA3's fused step. Pass: same bits."""
    rng = np.random.default_rng(7)
    ea, eb = get_format(fa).minexp, get_format(fb).minexp
    for _ in range(150):
        spread = int(rng.integers(0, 5 if fa.startswith("float8") else 12))  # FNUZ: no inf
        a, b = _draw(rng, 2 * g, fa, spread), _draw(rng, 2 * g, fb, spread)
        c = float(quantize(np.array(rng.standard_normal() * 2.0 ** rng.integers(-30, 10)),
                           "float32"))
        got = mfma_dot(a, b, np.array(c), gpu="mi300", a_format=fa, b_format=fb)
        want = F(c)
        for k0 in (0, g):  # two chained steps
            want = F(_fused_oracle([F(x) for x in a[k0:k0 + g]], [F(x) for x in b[k0:k0 + g]],
                                   want, ea, eb, fa.startswith("float8")))
        ok, msg = same_bits(got, want)
        assert ok, f"{fa}: a={a.tolist()} b={b.tolist()} c={c!r}: {msg}"


@pytest.mark.clause("ACC-MFMA-002")
@pytest.mark.parametrize("gpu,fmt,g", [("mi100", "float16", 4), ("mi100", "bfloat16", 2),
                                       ("mi250", "float16", 4), ("mi250", "bfloat16", 4)])
def test_cdna1_2_pairwise_steps_equal_the_rational_oracle(gpu: str, fmt: str, g: int) -> None:
    """Inputs: 150 random three-step cases on MI100 and MI250 fp16/bf16. Expected: products
    rounded to float32, summed pairwise, added to the accumulator, each rounded (exact
    oracle; MI250 flushes subnormal inputs). Pass: same bits."""
    rng = np.random.default_rng(8)
    flush = gpu == "mi250"
    tiny = 2.0 ** get_format(fmt).minexp
    for _ in range(150):
        a, b = _draw(rng, 3 * g, fmt, 10), _draw(rng, 3 * g, fmt, 10)
        c = float(quantize(np.array(rng.standard_normal()), "float32"))
        got = mfma_dot(a, b, np.array(c), gpu=gpu, a_format=fmt)
        if flush:  # CDNA2: subnormal inputs are zero (none of these sums is subnormal)
            a, b = np.where(np.abs(a) < tiny, 0.0, a), np.where(np.abs(b) < tiny, 0.0, b)
        want = F(c)
        for k0 in range(0, 3 * g, g):
            prods = [F(round_value(F(x) * F(y), F32)) for x, y in zip(a[k0:k0 + g], b[k0:k0 + g],
                                                                     strict=True)]
            want = F(round_value(want + F(_pairwise_oracle(prods)), F32))
        ok, msg = same_bits(got, want)
        assert ok, f"{gpu} {fmt}: {msg}"


@pytest.mark.clause("ACC-MFMA-002")
def test_cdna2_flushes_subnormal_inputs_to_positive_zero_and_results_keep_their_sign() -> None:
    """Inputs: an fp16 subnormal times 1 on MI250 and MI100; a bf16 case whose result is
    -2^-127. Expected: 0 on MI250, the subnormal on MI100, -0 (0x80000000) for the tiny
    result. Pass: each."""
    sub = 2.0**-20  # subnormal in fp16
    assert float(mfma_dot(np.array([sub, 0, 0, 0]), np.array([1.0, 0, 0, 0]), np.array(0.0),
                          gpu="mi250", a_format="float16")) == 0.0
    assert float(mfma_dot(np.array([sub, 0, 0, 0]), np.array([1.0, 0, 0, 0]), np.array(0.0),
                          gpu="mi100", a_format="float16")) == sub
    neg = mfma_dot(np.array([2.0**-63, 0, 0, 0]), np.array([2.0**-63, 0, 0, 0]),
                   np.array(-1.5 * 2.0**-126), gpu="mi250", a_format="bfloat16")
    assert neg.view(np.uint32) == 0x80000000  # -1.5*2^-126 + 2^-126 = -2^-127: to -0


@pytest.mark.clause("ACC-MFMA-001")
def test_f32_and_f64_mfma_are_fma_chains() -> None:
    """Inputs: 20 rows of 6 in float64 and float32 on MI300. Expected: one rounding per
    product-add step (exact oracle) in each precision. Pass: same bits."""
    rng = np.random.default_rng(9)
    a, b = rng.standard_normal((20, 6)), rng.standard_normal((20, 6))
    c = rng.standard_normal(20)
    got = mfma_dot(a, b, c, gpu="mi300", a_format="float64", output_format="float64")
    a32, b32 = quantize(a, "float32"), quantize(b, "float32")
    got32 = mfma_dot(a32, b32, quantize(c, "float32"), gpu="mi300", a_format="float32")
    for i in range(20):
        w, w32 = F(c[i]), F(float(quantize(np.array(c[i]), "float32")))
        for k in range(6):
            w = F(float(F(a[i, k]) * F(b[i, k]) + w))  # float(): nearest-even to float64
            w32 = F(round_value(F(a32[i, k]) * F(b32[i, k]) + w32, F32))
        for res, oracle, wide in ((got[i], w, True), (got32[i], w32, False)):
            ok, msg = same_bits(res, oracle, wide)
            assert ok, f"row {i}: {msg}"


@pytest.mark.clause("ACC-MFMA-004", "ACC-API-001")
def test_amd_gpus_are_selected_through_matmul_and_bad_choices_are_named() -> None:
    """Inputs: a matmul under tensorcore:mi300; mi355; e4m3fnuz on MI100; mixed fp16 x
    bf16; rules with an AMD model; mismatched K; an error bound request. Expected: the per-
    element MFMA result; ValueErrors naming each problem. Pass: all."""
    rng = np.random.default_rng(10)
    A = quantize(rng.standard_normal((5, 40)), "float16")
    B = quantize(rng.standard_normal((40, 3)), "float16")
    got = ampref.matmul(A, B, input_format="float16", accumulation="tensorcore:mi300")
    want = mfma_dot(A[:, None, :], B.T[None, :, :], np.zeros((5, 3)), gpu="mi300",
                    a_format="float16")
    assert got.view(np.uint32).tolist() == want.view(np.uint32).tolist()
    assert set(AMD_GPUS) == {"mi100", "mi250", "mi300", "mi325"}
    with pytest.raises(ValueError, match="mi355: CDNA4 .* no published bit-level MFMA model"):
        accumulation.parse_model("tensorcore:mi355")
    with pytest.raises(ValueError, match="mi100 \\(CDNA1\\) has no float8_e4m3fnuz MFMA"):
        ampref.matmul(np.zeros((1, 16)), np.zeros((16, 1)), input_format="e4m3fnuz",
                      accumulation="tensorcore:mi100")
    with pytest.raises(ValueError, match="mixed MFMA operands float16 x bfloat16"):
        accumulation.dot(np.zeros(8), np.zeros(8), input_format="float16", b_format="bfloat16",
                         accumulation="tensorcore:mi300")
    with pytest.raises(ValueError, match="rules='mmasim' switches NVIDIA tensor-core "
                       "conventions; 'tensorcore:mi300' takes none"):
        ampref.matmul(A, B, input_format="float16", accumulation="tensorcore:mi300",
                      rules="mmasim")
    with pytest.raises(ValueError, match=r"same last axis \(K\), got shapes \(4,\) and \(5,\)"):
        mfma_dot(np.zeros(4), np.zeros(5), np.zeros(()), gpu="mi300", a_format="fp16")
    with pytest.raises(ValueError, match="no rigorous bound is stated for the AMD MFMA"):
        accumulation.error_bound(A[0], B[:, 0], accumulation="tensorcore:mi300",
                                 input_format="fp16")
