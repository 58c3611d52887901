"""Mixed E4M3 x E5M2 tensor-core MMAs and Blackwell's block-scaled MMAs: against MMA-Sim's
recorded outputs (tests/data/mmasim_vectors.npz, scripts/record_mmasim_vectors.py), an
exact rational oracle written here, their rigorous bound and power-of-two scaling."""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction as F
from typing import Any

import ml_dtypes
import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from ampref import recipes
from ampref.accumulation import blockmma, tensorcore
from ampref.formats.table import get_format
from oracle import floor_log2, round_value
from paths import DATA as RECORDED

DATA = RECORDED / "mmasim_vectors.npz"


def _bits(x: np.ndarray) -> np.ndarray:
    return np.asarray(x, np.float32).view(np.uint32)


def _v() -> dict[str, np.ndarray]:
    with np.load(DATA) as z:
        return {k: z[k] for k in z.files}


@pytest.mark.clause("ACC-TC-007")
def test_mixed_fp8_on_h100_equals_mmasim_bit_for_bit() -> None:
    """Inputs: MMA-Sim's recorded mixed e4m3 x e5m2 dot products for H100 (dot and as GEMM
    diagonals). Expected: the recorded outputs. Pass: bitwise equal."""
    v = _v()
    a, b, c, d = (v[f"mixed/h100/{k}"] for k in "abcd")
    got = tensorcore.dot(a, b, c, gpu="h100", input_format="e4m3", b_format="e5m2")
    assert np.array_equal(_bits(got), _bits(d))
    gemm = tensorcore.gemm(a[:20], b[:20], np.repeat(c[:20, None], 20, 1), gpu="h100",
                           input_format="e4m3", b_format="e5m2")
    assert np.array_equal(_bits(np.diag(gemm)), _bits(d[:20]))  # the fast GEMM twin agrees


@pytest.mark.clause("ACC-TC-007", "ACC-TC-006")
def test_mixed_fp8_on_b200_differs_from_mmasim_only_by_the_late_addend() -> None:
    """Inputs: MMA-Sim's mixed FP8 B200 rows. Expected: equal where c = 0; differences only
    where c != 0; with the addend moved back into the block (MMA-Sim's convention) every
    row equal. Pass: all."""
    v = _v()
    a, b, c, d = (v[f"mixed/b200/{k}"] for k in "abcd")
    got = tensorcore.dot(a, b, c, gpu="b200", input_format="e4m3", b_format="e5m2")
    same = _bits(got) == _bits(d)
    assert same[c == 0].all()  # no addend: the two models are one
    assert 0 < (~same).sum() <= (c != 0).sum()
    # MMA-Sim adds c inside the block; ampref's row adds it after (fitted to real B200
    # dumps): with the addend moved back into the block, ampref reproduces MMA-Sim
    path, _, fin, fout = tensorcore.block_params("b200", "e4m3", "float32", "e5m2")
    inside = tensorcore.block_fma(a, b, c.astype(np.float64), replace(path, late_addend=False),
                                  None, fin, fout, tensorcore.get_format("e5m2"))
    assert np.array_equal(_bits(inside), _bits(d))


@pytest.mark.clause("ACC-BSC-001")
@pytest.mark.parametrize("kind", ["mxf8f6f4", "mxf4nvf4"])
def test_block_scaled_mma_equals_mmasim_bit_for_bit(kind: str) -> None:
    """Inputs: MMA-Sim's recorded mxf8f6f4 and mxf4nvf4 block-scaled rows. Expected: the
    recorded outputs. Pass: bitwise equal."""
    v = _v()
    a, b, sa, sb, c, d = (v[f"{kind}/{k}"] for k in ("a", "b", "sa", "sb", "c", "d"))
    kw = dict(a_format="e4m3", b_format="e5m2") if kind == "mxf8f6f4" else \
        dict(a_format="e2m1", scale_format="e4m3")
    got = blockmma.block_scaled_dot(a, b, c, sa, sb, kind=kind, **kw)
    assert np.array_equal(_bits(got), _bits(d))


def _fl32_rz(v: F) -> F:
    r = round_value(v, get_format("float32"), "toward_zero")
    assert not isinstance(r, float)
    return r


def _e(x: F, emin: int) -> int:
    return -126 if x == 0 else max(floor_log2(abs(x)), emin)


def _oracle_nvf4(a: list[F], b: list[F], sa: list[F], sb: list[F], c: F) -> F:
    """kind::mxf4nvf4 with UE4M3 per 16, K = 64, f = 35, from its definition."""
    terms = [(sum((a[k] * b[k] for k in range(16 * g, 16 * g + 16)), F(0)) * sa[g] * sb[g],
              _e(sa[g], -6) + _e(sb[g], -6)) for g in range(4)]
    terms.append((c, _e(c, -126)))
    E = max(x for _, x in terms)
    q = F(2) ** (E - 35)
    total = sum((F(int(t / q)) * q for t, _ in terms), F(0))  # int() truncates toward 0
    return _fl32_rz(total)


@pytest.mark.clause("ACC-BSC-001")
def test_block_scaled_mma_equals_the_rational_oracle() -> None:
    """Inputs: 40 random E2M1 rows of 64 with UE4M3 scales (subnormal, max, ordinary) and
    addends. Expected: the exact rational model of mxf4nvf4. Pass: equal values."""
    rng = np.random.default_rng(7)
    grid = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6])
    for _ in range(40):
        a = rng.choice(grid, 64) * rng.choice([-1, 1], 64)
        b = rng.choice(grid, 64) * rng.choice([-1, 1], 64)
        # UE4M3 scales across the range: a subnormal (2^-9), the max (448), ordinary ones
        sa = rng.permutation([0.5, 3.0, 448.0, 0.001953125])
        sb = rng.permutation([2.0, 0.375, 1.0, 0.0078125])
        c = np.float32(rng.standard_normal() * 100)
        got = blockmma.block_scaled_dot(a, b, c, sa, sb, kind="mxf4nvf4", a_format="e2m1",
                                        scale_format="e4m3")
        want = _oracle_nvf4([F(x) for x in a], [F(x) for x in b], [F(x) for x in sa],
                            [F(x) for x in sb], F(float(c)))
        assert F(float(got)) == want


@pytest.mark.clause("ACC-BSC-003")
def test_block_scaled_results_lie_within_the_bound_and_powers_of_two_commute() -> None:
    """Inputs: 200 MXFP8 row pairs of 64; their scales times 4 and 8. Expected: |result -
    exact| within the stated per-instruction bound; scaling by 32 scales the result
    exactly. Pass: both."""
    rng = np.random.default_rng(8)
    a = recipes.quantize(rng.standard_normal((200, 64)).astype(np.float32), "mxfp8_e4m3")
    b = recipes.quantize(rng.standard_normal((200, 64)).astype(np.float32), "mxfp8_e4m3")
    ea, eb = (q.values / np.repeat(q.scales, 32, 1) for q in (a, b))
    sa, sb = a.scales.astype(np.float64), b.scales.astype(np.float64)
    d = blockmma.block_scaled_dot(ea, eb, None, sa, sb, kind="mxf8f6f4")
    exact = (np.float64(a.values) * np.float64(b.values)).sum(1)
    # per instruction: each of the 33 terms loses < 2^(E - 25), E <= log2 of the largest
    # term; the float32 result loses < 1 ulp toward zero; two chained instructions
    big = np.abs(np.float64(a.values) * np.float64(b.values)).max(1)
    bound = 2 * (33 * big * 2.0**-24 + np.abs(exact) * 2.0**-22)
    assert np.all(np.abs(np.float64(d) - exact) <= bound)
    up = blockmma.block_scaled_dot(ea, eb, None, sa * 4, sb * 8, kind="mxf8f6f4")
    assert np.array_equal(_bits(up), _bits(d * np.float32(32)))


@pytest.mark.clause("ACC-BSC-002", "REC-GEM-003")
def test_recipes_matmul_on_b200_runs_the_block_scaled_instruction_model() -> None:
    """Inputs: NVFP4 operands multiplied under tensorcore:b200; kind 'mxf9'; K = 48; fp16 x
    e5m2 on H100. Expected: the block-scaled instruction result times alpha; ValueErrors
    naming the kind, K and the mixed formats. Pass: all."""
    rng = np.random.default_rng(9)
    x, w = rng.standard_normal((3, 64)).astype(np.float32), rng.standard_normal(
        (2, 64)).astype(np.float32)
    qx, qw = recipes.quantize(x, "nvfp4"), recipes.quantize(w, "nvfp4")
    y = recipes.matmul(qx, qw, accumulation="tensorcore:b200")
    ex, ew = (q.codes.view(__import__("ml_dtypes").float4_e2m1fn).astype(np.float64)
              for q in (qx, qw))
    raw = blockmma.block_scaled_dot(ex[:, None], ew[None], None, qx.scales[:, None].astype(
        np.float64), qw.scales[None].astype(np.float64), kind="mxf4nvf4", a_format="e2m1",
        scale_format="e4m3")
    alpha = np.float32(qx.global_scale) * np.float32(qw.global_scale)
    assert np.array_equal(_bits(y), _bits(raw * alpha))
    with pytest.raises(ValueError, match="unknown block-scaled kind 'mxf9'"):
        blockmma.block_scaled_dot(ex, ew[:3], None, qx.scales, qx.scales, kind="mxf9")
    with pytest.raises(ValueError, match="K = 48 is not a multiple of mxf4nvf4's K = 64"):
        blockmma.block_scaled_dot(np.zeros(48), np.zeros(48), None, np.ones(3), np.ones(3),
                                  kind="mxf4nvf4", a_format="e2m1", scale_format="e4m3")
    with pytest.raises(ValueError, match="mixed operands float16 x float8_e5m2"):
        tensorcore.dot(np.ones(4), np.ones(4), gpu="h100", input_format="fp16",
                       b_format="e5m2")


_ELEMENTS = {"e4m3": ml_dtypes.float8_e4m3fn, "e5m2": ml_dtypes.float8_e5m2,
             "e2m3": ml_dtypes.float6_e2m3fn, "e3m2": ml_dtypes.float6_e3m2fn,
             "e2m1": ml_dtypes.float4_e2m1fn}


@st.composite
def _mxf8f6f4(draw: st.DrawFn) -> tuple[Any, ...]:
    """One kind::mxf8f6f4 instruction: elements from random codes (finite), E8M0 scales
    from random exponents, a float32 c."""
    fa, fb = draw(st.sampled_from(sorted(_ELEMENTS))), draw(st.sampled_from(sorted(_ELEMENTS)))
    vals = []
    for f in (fa, fb):
        bits = 4 if f == "e2m1" else 6 if f.startswith("e2m3") or f.startswith("e3m2") else 8
        codes = np.array(draw(st.lists(st.integers(0, 2**bits - 1), min_size=32, max_size=32)),
                         np.uint8)
        v = codes.view(_ELEMENTS[f]).astype(np.float64)
        vals.append(np.where(np.isfinite(v), v, 0.0))
    sa, sb = (np.exp2(float(draw(st.integers(-20, 20)))) for _ in range(2))
    c = np.float32(draw(st.floats(-1e6, 1e6, width=32)))
    return fa, fb, vals[0], vals[1], np.array([sa]), np.array([sb]), np.float64(c)


@pytest.mark.clause("ACC-BSC-003")
@given(case=_mxf8f6f4())
def test_any_block_scaled_instruction_lies_within_its_rigorous_bound(case: tuple) -> None:
    """|d - exact| < (K + 1) 2^(E - f) + 1 ulp of d, with 2^E bounded by the largest
    term magnitude (a zero element counting as 2^-126, a subnormal as 2^emin)."""
    fa, fb, a, b, sa, sb, c = case
    d = float(blockmma.block_scaled_dot(a, b, c, sa, sb, kind="mxf8f6f4", a_format=fa,
                                        b_format=fb)[()])
    exact = sum(F(x) * F(y) for x, y in zip(a, b, strict=True)) * F(sa[0]) * F(sb[0]) + F(c)
    ta, tb = (np.where(v == 0, 2.0**-126, np.maximum(np.abs(v), 2.0 ** get_format(f).minexp))
              for v, f in ((a, fa), (b, fb)))
    top = max(F(float((ta * tb).max())) * F(sa[0]) * F(sb[0]), F(max(abs(c), 2.0**-126)))
    bound = 33 * top * F(2) ** -24 + F(abs(d)) * F(2) ** -23 + F(2) ** -149
    assert abs(F(d) - exact) < bound


@pytest.mark.clause("ACC-BSC-003")
@given(case=_mxf8f6f4(), ka=st.integers(-8, 8), kb=st.integers(-8, 8))
def test_scaling_the_block_scales_by_powers_of_two_scales_a_c_free_result(
        case: tuple, ka: int, kb: int) -> None:
    """Inputs: hypothesis mxf8f6f4 cases chained twice, c = 0, scales times 2^ka and 2^kb.
    Expected: the result times 2^(ka + kb) exactly while it stays normal. Pass: bitwise
    equal."""
    fa, fb, a, b, sa, sb, _ = case
    a2, b2 = np.tile(a, 2), np.tile(b, 2)  # two chained instructions, c = 0
    sa2, sb2 = np.tile(sa, 2), np.tile(sb, 2)
    d = blockmma.block_scaled_dot(a2, b2, None, sa2, sb2, kind="mxf8f6f4", a_format=fa,
                                  b_format=fb)
    assume(d == 0 or 2.0**-100 < abs(float(d)) < 2.0**100)  # stays normal when scaled
    up = blockmma.block_scaled_dot(a2, b2, None, sa2 * 2.0**ka, sb2 * 2.0**kb,
                                   kind="mxf8f6f4", a_format=fa, b_format=fb)
    assert _bits(up).tolist() == _bits(np.float32(d) * np.float32(2.0 ** (ka + kb))).tolist()
