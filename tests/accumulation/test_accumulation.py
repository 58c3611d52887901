"""Accumulation models against independent loops and exact rationals; error bounds."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import ampref
from ampref import accumulation as acc
from ampref.testing import arrays, assert_bitwise_equal

import oracle

F32 = ampref.float32


def exact_rounded(a: np.ndarray, b: np.ndarray, c: float) -> np.float32:
    """Oracle: exact sum with Fractions, one nearest-even rounding by the scalar oracle."""
    s = sum((Fraction(float(x)) * Fraction(float(y)) for x, y in zip(a, b, strict=True)),
            Fraction(float(c)))
    code = oracle.round_scalar(s, F32, "nearest_even")
    return np.array([code], np.uint32).view(np.float32)[0]


@pytest.mark.clause("ACC-SEQ-001")
@given(a=arrays("fp16", 12), b=arrays("fp16", 12), c=st.floats(-1e4, 1e4, width=32))
def test_sequential_equals_a_plain_float32_loop(a: np.ndarray, b: np.ndarray, c: float) -> None:
    """Inputs: hypothesis fp16 vectors of 12 and a float32 addend. Expected: d = fl32(d +
    x*y) in k order (fp16 products exact in float32). Pass: bitwise equal."""
    d = np.float32(c)
    for x, y in zip(a, b, strict=True):
        d = np.float32(d + np.float32(x) * np.float32(y))  # fp16 products are exact in fp32
    got = acc.dot(a, b, c, accumulation="sequential", input_format="fp16")
    assert_bitwise_equal(got, np.asarray(d, np.float32))


@pytest.mark.clause("ACC-PAIR-001")
@given(a=arrays("bf16", 11), b=arrays("bf16", 11))
def test_pairwise_equals_a_float32_recursive_halving(a: np.ndarray, b: np.ndarray) -> None:
    """Inputs: hypothesis bf16 vectors of 11, addend 0.5. Expected: float32 products summed
    by recursive halving (first half the larger), then + 0.5, each addition rounded to
    float32. Pass: bitwise equal."""
    def tree(p: list[np.float32]) -> np.float32:
        if len(p) == 1:
            return p[0]
        h = (len(p) + 1) // 2
        return np.float32(tree(p[:h]) + tree(p[h:]))

    # bf16 products may overflow fp32 (both sides give inf), and inf + -inf gives NaN on both
    with np.errstate(over="ignore", invalid="ignore"):
        products = [np.float32(x * y) for x, y in zip(a, b, strict=True)]
        want = np.float32(tree(products) + np.float32(0.5))
    got = acc.dot(a, b, 0.5, accumulation="pairwise", input_format="bf16")
    assert_bitwise_equal(got, np.asarray(want, np.float32))


@pytest.mark.clause("ACC-FMA-001")
@given(a=arrays("float32", 6), b=arrays("float32", 6))
def test_fma_chain_rounds_once_per_step_exactly(a: np.ndarray, b: np.ndarray) -> None:
    """Inputs: hypothesis float32 vectors of 6 (clipped to +-2^60). Expected: each step the
    exact x*y + d rounded once (rational oracle). Pass: equal values."""
    a, b = np.clip(a, -2.0**60, 2.0**60), np.clip(b, -2.0**60, 2.0**60)  # no fp32 overflow
    d = Fraction(0)
    for x, y in zip(a, b, strict=True):
        d = Fraction(float(exact_rounded(np.array([x]), np.array([y]), float(d))))
    got = acc.dot(a.astype(np.float64), b.astype(np.float64), accumulation="fma-chain")
    assert Fraction(float(got)) == d


@pytest.mark.clause("ACC-EXA-001")
@given(a=arrays("e5m2", 20), b=arrays("fp16", 20), c=st.sampled_from([0.0, 1e-30, -3.0, 2.0**100]))
def test_exact_model_is_the_exact_sum_rounded_once(a: np.ndarray, b: np.ndarray, c: float) -> None:
    """Inputs: hypothesis e5m2 and fp16 vectors of 20, addends 0, 1e-30, -3, 2^100.
    Expected: the exact sum of products and addend rounded once to float32. Pass: bitwise
    equal."""
    got = acc.dot(a, b, c, accumulation="exact", input_format="fp16")
    assert_bitwise_equal(got, np.asarray(exact_rounded(a, b, c)))


@pytest.mark.clause("ACC-EXA-001")
def test_correctly_rounded_addition_avoids_double_rounding() -> None:
    """Inputs: (1 + 2^-24) + 2^-80 to float32. Expected: 1 + 2^-23 (the exact sum is above
    the tie), where a float64 sum then cast gives 1. Pass: both values."""
    from ampref.formats.exactsum import add_rounded

    # 1 + 2^-24 + 2^-80: float64 first rounds to the fp32 tie 1 + 2^-24, which then goes
    # to even (1.0); the exact sum is above the tie and must round up
    x, y = np.array([1 + 2.0**-24]), np.array([2.0**-80])
    assert add_rounded(x, y, F32, "nearest_even")[0] == 1 + 2.0**-23
    assert np.float32(x[0] + y[0]) == 1.0


GPUS = ["v100", "a100", "h100", "b200", "ada"]


def adversarial(rng: np.random.Generator, fmt: str, shape: tuple[int, int]) -> np.ndarray:
    """Wide exponent spread, cancellation pairs and subnormals (no fp32 overflow: the
    bounds assume none, ACC-BND-001)."""
    f = ampref.get_format(fmt)
    mag = np.exp2(rng.uniform(np.log2(f.smallest_subnormal), min(np.log2(f.max) - 8, 55), shape))
    x = mag * rng.choice([-1, 1], shape)
    odd = x[:, 1::2].shape
    x[:, 1::2] = -x[:, 0::2][:, : odd[1]] * (1 + rng.integers(0, 3, odd) * f.eps)
    return ampref.quantize(x, fmt, saturate=True)


@pytest.mark.clause("ACC-BND-001", "ACC-BND-002")
@pytest.mark.parametrize("model", ["sequential", "pairwise", "fma-chain", "exact",
                                   *[f"tensorcore:{g}" for g in GPUS]])
@pytest.mark.parametrize("fmt", ["fp16", "bf16", "e4m3"])
def test_error_bound_holds_on_adversarial_inputs_with_chained_blocks(model: str, fmt: str) -> None:
    """Inputs: 300 adversarial dot products (wide exponent spread, cancellation) of K = 7,
    16, 50 per model and format, random addends. Expected: |result - exact| <= the model's
    stated bound (exact by fractions). Pass: every row."""
    if model == "tensorcore:v100" and fmt != "fp16" or fmt == "e4m3" and model in (
            "tensorcore:v100", "tensorcore:a100"):
        pytest.skip("no such tensor-core path")
    rng = np.random.default_rng(hash((model, fmt)) % 2**32)
    for k in (7, 16, 50):
        a, b = adversarial(rng, fmt, (300, k)), adversarial(rng, fmt, (300, k))
        c = ampref.quantize(rng.standard_normal(300) * 10, "float32")
        got = acc.dot(a, b, c, accumulation=model, input_format=fmt).astype(np.float64)
        def exact_dot(r: np.ndarray, s: np.ndarray, z: float) -> float:
            terms = (Fraction(float(x)) * Fraction(float(y)) for x, y in zip(r, s, strict=True))
            return float(sum(terms, Fraction(float(z))))

        exact = np.array([exact_dot(r, s, z) for r, s, z in zip(a, b, c, strict=True)])
        bound = acc.error_bound(a, b, c, accumulation=model, input_format=fmt)
        worst = np.max(np.abs(got - exact) / bound)
        assert np.all(np.abs(got - exact) <= bound), (model, fmt, k, worst)


@pytest.mark.clause("ACC-BND-002")
@given(a=arrays("fp16", 16), b=arrays("fp16", 16))
def test_one_block_is_within_the_block_fma_bound_of_the_exact_sum(
        a: np.ndarray, b: np.ndarray) -> None:
    """Inputs: hypothesis fp16 vectors of 16 (one H100 block). Expected: |result - exact|
    <= the block-FMA bound. Pass: within."""
    got = acc.dot(a, b, accumulation="tensorcore:h100", input_format="fp16")
    exact = float(sum(Fraction(float(x)) * Fraction(float(y)) for x, y in zip(a, b, strict=True)))
    assert abs(float(got) - exact) <= acc.error_bound(a, b, accumulation="tensorcore:h100",
                                                      input_format="fp16")


@pytest.mark.clause("ACC-GEMM-001")
@pytest.mark.parametrize("model,fmt", [("tensorcore:h100", "fp16"), ("tensorcore:b200", "e4m3"),
                                       ("tensorcore:a100", "tf32"), ("tensorcore:h200", "bf16"),
                                       ("sequential", "bf16"), ("pairwise", "fp16")])
def test_gemm_entries_equal_dot_products_in_k_order_and_runs_repeat_bit_for_bit(
        model: str, fmt: str) -> None:
    """Inputs: 37x70 @ 70x29 GEMMs (a zero row) under six models and formats. Expected:
    each entry equals the per-element dot in k order, and a one-thread run equals the
    default. Pass: bitwise equal both."""
    rng = np.random.default_rng(3)
    rnd = "toward_zero" if fmt == "tf32" else "nearest_even"
    A = ampref.quantize(rng.standard_normal((37, 70)) * 4, fmt, rnd, saturate=True)
    B = ampref.quantize(rng.standard_normal((70, 29)), fmt, rnd, saturate=True)
    A[2, :] = 0
    C = rng.standard_normal((37, 29)).astype(np.float32)
    D = acc.matmul(A, B, C, input_format=fmt, accumulation=model)
    ref = acc.dot(A[:, None, :], B.T[None, :, :], C, accumulation=model, input_format=fmt)
    assert_bitwise_equal(D, ref)
    assert_bitwise_equal(D, acc.matmul(A, B, C, input_format=fmt, accumulation=model, threads=1))


@pytest.mark.clause("ACC-API-001")
def test_bad_models_and_shapes_are_rejected_with_the_choices() -> None:
    """Inputs: model 'kahan', GPU 'tpu', (2, 3) @ (2, 3). Expected: ValueError listing the
    models, naming the GPU, showing both shapes; ampref.matmul is this matmul. Pass: each."""
    with pytest.raises(ValueError,
                       match="unknown accumulation model 'kahan'.*sequential.*tensorcore:<gpu>"):
        acc.matmul(np.ones((2, 2)), np.ones((2, 2)), input_format="fp16", accumulation="kahan")
    with pytest.raises(ValueError, match="unknown GPU 'tpu'"):
        acc.parse_model("tensorcore:tpu")
    with pytest.raises(ValueError, match=r"\(M, K\) @ \(K, N\), got \(2, 3\) @ \(2, 3\)"):
        acc.matmul(np.ones((2, 3)), np.ones((2, 3)), input_format="fp16")
    assert ampref.matmul is acc.matmul
