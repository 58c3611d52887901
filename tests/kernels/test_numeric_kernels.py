"""The compiled certified GEMM and sums, tensor-core GEMM model, verification oracle and
Adam update against their NumPy specifications, bit for bit (ENG-MM-002, ACC-TC-011,
FMT-VER-003, ENG-OPT-006); the certified results also against the exact rational oracle,
and the tensor-core GEMM against the recorded GPU dumps under both kernels."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
from hypothesis import given
from hypothesis import strategies as st

import ampref
from ampref import nn, optim
from ampref.accumulation import certified, tensorcore
from ampref.accumulation.gpus import GPUS
from ampref.certify import verify
from ampref.engine.rng import Generator
from ampref.formats.rounding import RoundingMode
from ampref.formats.table import FORMATS, get_format
from ampref.testing import assert_bitwise_equal
from oracle import round_value
from paths import DATA

pytest.importorskip("numba")


def _both(fn: Any, *args: Any, **kw: Any) -> tuple[Any, Any]:
    with ampref.use_kernels("numpy"):
        spec = fn(*args, **kw)
    with ampref.use_kernels("compiled"):
        fast = fn(*args, **kw)
    return spec, fast


def _spiky(rng: np.random.Generator, shape: tuple[int, ...], spread: int) -> npt.NDArray[Any]:
    """float32 values over 2*spread binades, zeros sprinkled in: many elements the bound
    cannot certify, so the exact fallback runs too."""
    x = rng.standard_normal(shape) * 2.0 ** rng.integers(-spread, spread + 1, shape)
    x[rng.random(shape) < 0.1] = 0.0
    return x.astype(np.float32)


@pytest.mark.clause("ENG-MM-002")
@pytest.mark.parametrize("spread", [0, 8, 40, 120])
def test_certified_matmuls_agree_bit_for_bit_plain_and_batched(spread: int) -> None:
    """Inputs: 12 random shapes up to 24 per dimension, batched and plain, exponent spreads
    0, 8, 40, 120. Expected: the compiled certified matmul equals the NumPy specification.
    Pass: bitwise equal."""
    rng = np.random.default_rng(spread)
    for _ in range(12):
        P, M, K, N = (int(v) for v in rng.integers(1, 24, 4))
        a, b = _spiky(rng, (P, M, K), spread), _spiky(rng, (P, K, N), spread)
        spec, fast = _both(certified.matmul_f32, a, b)
        assert_bitwise_equal(fast, spec, msg=f"batched {P}x{M}x{K}x{N} spread {spread}: ")
        spec, fast = _both(certified.matmul_f32, a[0], b[0])
        assert_bitwise_equal(fast, spec, msg=f"{M}x{K}x{N} spread {spread}: ")


@pytest.mark.clause("ENG-MM-002")
def test_certified_matmul_specials_propagate_identically() -> None:
    """Inputs: a 9x7 @ 7x5 matmul with inf, NaN, -inf and a row of 3e38 (overflow).
    Expected: the same bits from both kernels. Pass: bitwise equal."""
    rng = np.random.default_rng(3)
    a, b = _spiky(rng, (9, 7), 20), _spiky(rng, (7, 5), 20)
    a[0, 0], a[1, 2], b[3, 4] = np.inf, np.nan, -np.inf
    a[2] = 3.0e38  # float32 overflow of the result
    spec, fast = _both(certified.matmul_f32, a, b)
    assert_bitwise_equal(fast, spec)


def _exact_f32(terms: list[Fraction]) -> np.float32:
    v = round_value(sum(terms, Fraction(0)), get_format("float32"))
    return np.float32(v)


@pytest.mark.clause("ENG-MM-002")
@given(data=st.data())
def test_the_compiled_exact_fallback_equals_the_rational_oracle(data: st.DataObject) -> None:
    """Inputs: hypothesis dot products the bound cannot certify (mantissas and exponents
    over float32's range, ties, subnormal and overflowing results). Expected: the exact sum
    rounded once by the rational oracle. Pass: bitwise equal."""
    # dot products the bound cannot certify: cancellation to ties, subnormal and
    # overflowing results, products over the whole float32 range
    k = data.draw(st.integers(1, 12))
    exps = data.draw(st.lists(st.integers(-149, 127), min_size=k, max_size=k))
    mants = data.draw(st.lists(st.integers(-(1 << 24) + 1, (1 << 24) - 1), min_size=k,
                               max_size=k))
    a = np.array([float(np.ldexp(m, e - 23)) for m, e in zip(mants, exps, strict=True)])
    a = a.astype(np.float32)
    b = np.array(data.draw(st.lists(st.sampled_from([1.0, -1.0, 0.5, 3.0, 2.0**-20]),
                                    min_size=k, max_size=k)), np.float32)
    a = np.where(np.isfinite(a), a, np.float32(1.0)).astype(np.float32)
    got = certified.matmul_f32(a.reshape(1, k), b.reshape(k, 1))[0, 0]
    want = _exact_f32([Fraction(float(x)) * Fraction(float(y)) for x, y in zip(a, b, strict=True)])
    assert_bitwise_equal(np.float32(got), want, msg=f"a={a.tolist()} b={b.tolist()}: ")


@pytest.mark.clause("ENG-RED-002")
@pytest.mark.parametrize("axis", [None, 0, 1, 2, (0, 2), (1, 2)])
@pytest.mark.parametrize("keepdims", [False, True])
def test_certified_sums_agree_bit_for_bit(axis: Any, keepdims: bool) -> None:
    """Inputs: a 5x7x9 array at spreads 0, 30, 120 summed over every axis choice, with and
    without keepdims. Expected: equal shapes and bits from both kernels. Pass: bitwise
    equal."""
    rng = np.random.default_rng(11)
    for spread in (0, 30, 120):
        x = _spiky(rng, (5, 7, 9), spread)
        spec, fast = _both(certified.sum_f32, x, axis, keepdims)
        assert spec.shape == fast.shape
        assert_bitwise_equal(fast, spec, msg=f"axis={axis} spread={spread}: ")


def _tc_pairs() -> list[tuple[str, str, str]]:
    pairs = []
    for g in GPUS.values():
        for fin in g.inputs:
            f = get_format(fin)
            if f.name == "float64":
                continue
            outs = ["float32"] + (["float16"] if f.name == "float16" or f.bits <= 8 else [])
            pairs += [(g.name, f.name, o) for o in outs]
    return pairs


@pytest.mark.clause("ACC-TC-011")
@pytest.mark.parametrize("gpu,fin,fout", _tc_pairs())
def test_the_tensor_core_gemm_agrees_for_every_gpu_input_and_output(gpu: str, fin: str,
                                                                    fout: str) -> None:
    """Inputs: per GPU, input and output format, 13x70 @ 70x11 operands at scales 1, 2^-40,
    2^40 with zero rows. Expected: the compiled GEMM equals the NumPy model (or both refuse
    the combination). Pass: bitwise equal."""
    rng = np.random.default_rng(len(gpu) * 7 + len(fin))
    for scale in (1.0, 2.0**-40, 2.0**40):
        M, K, N = 13, 70, 11
        A = ampref.quantize(rng.standard_normal((M, K)).astype(np.float32) * 4, fin)
        BT = ampref.quantize((rng.standard_normal((N, K)) * scale).astype(np.float32), fin)
        A[0, :9] = 0.0
        BT[2] = 0.0
        C = (rng.standard_normal((M, N)) * scale).astype(np.float32)
        try:
            spec, fast = _both(tensorcore.gemm, A, BT, C, gpu=gpu, input_format=fin,
                               output_format=fout)
        except ValueError as e:  # a combination the GPU row refuses, refused by both
            assert "output_format" in str(e) or "no" in str(e)
            return
        assert_bitwise_equal(fast, spec, msg=f"{gpu} {fin}->{fout} scale {scale}: ")


@pytest.mark.clause("ACC-TC-011", "ACC-TC-001")
def test_the_compiled_gemm_reproduces_the_recorded_gpu_dumps() -> None:
    """Inputs: the 16 recorded dump sets (V100, A100, A2, B200 tensor-core outputs), 600
    dot products each run as GEMM diagonals. Expected: the recorded outputs. Pass: bitwise
    equal on all 9,600."""
    dumps = np.load(DATA / "tensorcore_dumps.npz")
    names = {"fp16": "float16", "bf16": "bfloat16", "tf32": "tf32", "E4M3": "e4m3",
             "E5M2": "e5m2"}
    checked = 0
    for key in sorted({k.split("/")[0] for k in dumps.files}):
        gpu, fmt, out = key.split("_")
        a, b, c, d = (dumps[f"{key}/{x}"].view(np.float32) for x in "abcd")
        fout = "float32" if out == "fp32" else "float16"
        for lo in range(0, 600, 60):  # diagonal blocks: row i of a against row i of b
            rows = slice(lo, lo + 60)
            cm = np.diag(c[rows]).astype(np.float32) if c.ndim == 1 else None
            cc = np.zeros((60, 60), np.float32)
            np.fill_diagonal(cc, c[rows])
            got = tensorcore.gemm(a[rows], b[rows], cc, gpu=gpu.lower(),
                                  input_format=names[fmt], output_format=fout)
            assert_bitwise_equal(np.diag(got), d[rows], msg=f"{key} rows {lo}..: ")
            del cm
            checked += 60
    assert checked == 16 * 600


@pytest.mark.clause("FMT-VER-003")
@pytest.mark.parametrize("fmt", [f for f in FORMATS.values() if f.kernel], ids=lambda f: f.name)
def test_the_compiled_oracle_equals_the_numpy_oracle(fmt: Any) -> None:
    """Inputs: every 40,961st float32 bit pattern and random words, each kernel format,
    every mode, saturate and flush flags. Expected: the compiled float64 oracle equals the
    NumPy one. Pass: bitwise equal."""
    from ampref.kernels import oracle_numba

    x = np.arange(0, 1 << 32, 40961, dtype=np.uint64).astype(np.uint32).view(np.float32)
    words = np.random.default_rng(5).integers(0, 1 << 32, x.size).astype(np.uint32)
    of = oracle_numba.OracleFormat(
        minexp=fmt.minexp, mantissa_bits=fmt.mantissa_bits, max=fmt.max,
        has_subnormals=fmt.has_subnormals, has_inf=fmt.has_inf, has_nan=fmt.has_nan,
        has_zero=fmt.has_zero, is_signed=fmt.is_signed, has_negative_zero=fmt.has_negative_zero)
    for rnd in RoundingMode:
        for sat in (False, True):
            for sub in (True, False):
                spec = verify.reference_quantize(x, fmt, rnd, saturate=sat, subnormals=sub,
                                                 rbits=words)
                fast = oracle_numba.reference_quantize(x, of, rnd.code, saturate=sat,
                                                       subnormals=sub, rbits=words)
                assert_bitwise_equal(fast, spec, msg=f"{fmt.name} {rnd.value} {sat} {sub}: ")


@pytest.mark.clause("FMT-VER-003")
def test_a_verification_block_gives_the_same_certificate_under_both_kernels() -> None:
    """Inputs: a 2^18-pattern e4m3 verification block. Expected: identical counts (checked,
    mismatches, peer counts) under both kernels, all checked, no mismatch. Pass: equal."""
    args = (0x3F000000, 0x3F000000 + (1 << 18), 1, "float8_e4m3fn", "nearest_even", False,
            True, 0)
    spec, fast = _both(verify.verify_block, *args)
    assert (spec.checked, spec.mismatches, spec.peer_checked, spec.peer_mismatches,
            spec.peer_excluded) == (fast.checked, fast.mismatches, fast.peer_checked,
                                    fast.peer_mismatches, fast.peer_excluded)
    assert fast.checked == 1 << 18 and fast.ok


def _train(opt_cls: Any, **kw: Any) -> list[npt.NDArray[Any]]:
    g = Generator(0)
    x, y = ampref.tensor(g.normal((64, 32))), g.integers(10, (64,))
    model = nn.MLP([32, 64, 10], seed=1)
    opt = opt_cls(model.parameters(), lr=1e-2, **kw)
    for _ in range(4):
        opt.zero_grad()
        ampref.functional.cross_entropy(model(x), y).backward()
        opt.step()
    return [p.data.copy() for p in model.parameters()]


@pytest.mark.clause("ENG-OPT-006")
@pytest.mark.parametrize("opt_cls,kw", [(optim.AdamW, {}), (optim.Adam, {"weight_decay": 0.1}),
                                        (optim.Adam, {}), (optim.SGD, {"momentum": 0.9})])
def test_training_steps_give_the_same_weights_under_both_kernels(opt_cls: Any,
                                                                 kw: dict[str, Any]) -> None:
    """Inputs: training steps with AdamW, Adam (decay and not), SGD (momentum). Expected:
    identical weights from the compiled and NumPy optimizer kernels. Pass: bitwise equal."""
    spec, fast = _both(_train, opt_cls, **kw)
    for s, f in zip(spec, fast, strict=True):
        assert_bitwise_equal(f, s, msg=f"{opt_cls.__name__} {kw}: ")
