"""ampref.recipes against exact oracles written here with Fractions and ml_dtypes' value
tables (not with ampref's cast), plus the edge cases, compare, GEMM, stochastic rounding,
the Hadamard transform and bad input."""

from __future__ import annotations

from fractions import Fraction as F

import ml_dtypes
import numpy as np
import pytest

from ampref import encode, recipes
from ampref.formats.table import get_format
from oracle import round_value, sr_bits

FLT_MAX = F(int(np.finfo(np.float32).max))
F32 = get_format("float32")


def fl32(v: F) -> F:
    """v rounded to float32, nearest-even (the shared rational oracle, tests/oracle.py)."""
    r = round_value(v, F32)
    assert not isinstance(r, float), f"{v} overflows float32"
    return r


def _table(dtype: type) -> list[tuple[int, F]]:
    codes = np.arange(256 if np.dtype(dtype).itemsize == 1 else 0, dtype=np.uint8)
    vals = codes.view(dtype).astype(np.float64)
    return [(int(c), F(float(v))) for c, v in zip(codes, vals, strict=True) if np.isfinite(v)]


E4M3 = _table(ml_dtypes.float8_e4m3fn)
E2M1 = [(c, F(float(v))) for c, v in enumerate(
    np.arange(16, dtype=np.uint8).view(ml_dtypes.float4_e2m1fn).astype(np.float64))]


def rne_sat(v: F, table: list[tuple[int, F]]) -> int:
    """Code of the nearest value (ties to the even code), saturating at the max."""
    top = max(x for _, x in table)
    v = max(min(v, top), -top)
    best = min(abs(x - v) for _, x in table)
    cands = [c for c, x in table if abs(x - v) == best and (x != 0 or (v < 0) == (c >= 0x08
             if table is E2M1 else c >= 0x80))]
    return min(cands, key=lambda c: (c & 1, c))


def _x(seed: int, shape: tuple[int, int]) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape) * np.exp2(rng.integers(-12, 12, (shape[0], 1)))
    return x.astype(np.float32)


@pytest.mark.clause("REC-NV4-001", "REC-NV4-002", "REC-NV4-003", "REC-ELM-001", "REC-API-001")
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_nvfp4_te_equals_the_fraction_oracle(seed: int) -> None:
    """Inputs: 4x64 float32 rows scaled by 2^-12..2^11 (seeds 0-2), NVFP4 under te.
    Expected (exact fractions): S_enc = min(fl32(2688/amax), FLT_MAX), global scale
    fl32(1/S_enc); each 16-block's E4M3 code rne_sat(fl32(amax_b * fl32(S_enc/6))); each
    element rne_sat(fl32(v * multiplier)) in E2M1. Pass: global scale, every scale and
    element code equal."""
    x = _x(seed, (4, 64))
    q = recipes.quantize(x, "nvfp4", profile="te")
    A = max(abs(F(float(v))) for v in x.reshape(-1))
    s_enc = min(fl32(F(2688) / A), FLT_MAX)
    s_dec = fl32(1 / s_enc)
    m = fl32(s_enc * fl32(F(1, 6)))
    assert F(float(q.global_scale)) == s_dec
    for i in range(4):
        for b in range(4):
            blk = [F(float(v)) for v in x[i, 16 * b:16 * b + 16]]
            sb_code = rne_sat(fl32(max(abs(v) for v in blk) * m), E4M3)
            assert q.scale_codes[i, b] == sb_code, (i, b)
            sb = dict(E4M3)[sb_code]
            den = fl32(sb * s_dec)
            mult = FLT_MAX if den == 0 else min(fl32(1 / den), FLT_MAX)  # 1/0 = inf -> fminf
            want = [rne_sat(fl32(v * mult), E2M1) for v in blk]
            assert q.codes[i, 16 * b:16 * b + 16].tolist() == want, (i, b)


@pytest.mark.clause("REC-MX-002", "REC-ELM-001")
@pytest.mark.parametrize("seed", [3, 4])
def test_mxfp8_te_equals_the_fraction_oracle(seed: int) -> None:
    """Inputs: 3x64 float32 rows (seeds 3, 4), MXFP8 E4M3 under te. Expected: per 32-block
    d = fl32(amax * fl32(1/448)), scale code the smallest k with 2^k >= d (+127, clamped),
    elements rne_sat(fl32(v * 2^-k)) in E4M3. Pass: every scale and element code equal."""
    x = _x(seed, (3, 64))
    q = recipes.quantize(x, "mxfp8_e4m3", profile="te")
    for i in range(3):
        for b in range(2):
            blk = [F(float(v)) for v in x[i, 32 * b:32 * b + 32]]
            d = fl32(max(abs(v) for v in blk) * fl32(F(1, 448)))
            k = -127
            while F(2) ** k < d:
                k += 1
            code = min(max(k + 127, 0), 254)
            assert q.scale_codes[i, b] == code
            mult = F(2) ** (127 - code)
            assert q.codes[i, 32 * b:32 * b + 32].tolist() == [
                rne_sat(fl32(v * mult), E4M3) for v in blk]


@pytest.mark.clause("REC-SCL-001", "REC-SCL-004", "REC-TIL-001")
def test_fp8_block_te_power_of_two_scales_equal_the_oracle() -> None:
    """Inputs: 3x200 float32 rows: one full and one zero-padded 1x128 block each. Expected:
    scale 2^p with p the largest power of two <= fl32(448/amax), stored as fl32(1/2^p);
    elements rne_sat(fl32(v * 2^p)) in E4M3. Pass: scales and codes equal."""
    x = _x(5, (3, 200))  # 200 = one full and one partial (zero padded) 1x128 block
    q = recipes.quantize(x, "fp8_block", profile="te")
    assert q.scales.shape == (3, 2)
    for i in range(3):
        for b, (lo, hi) in enumerate(((0, 128), (128, 200))):
            blk = [F(float(v)) for v in x[i, lo:hi]]
            s = fl32(448 / max(abs(v) for v in blk))
            p = 0
            while F(2) ** (p + 1) <= s:
                p += 1
            while F(2) ** p > s:
                p -= 1
            scale = F(2) ** p
            assert F(float(q.scales[i, b])) == fl32(1 / scale)
            assert q.codes[i, lo:hi].tolist() == [rne_sat(fl32(v * scale), E4M3) for v in blk]


ALL = [(r, p) for r in recipes.RECIPES for p in recipes.PROFILES
       if r in recipes.PROFILES[p].recipes]


@pytest.mark.clause("REC-API-001", "REC-DEQ-001", "REC-AMX-001", "REC-CAT-001", "REC-PRF-001")
@pytest.mark.parametrize("recipe,profile", ALL)
def test_every_recipe_edge_cases(recipe: str, profile: str) -> None:
    """Inputs: every (recipe, profile) pair on zeros, on ones with one 1e30 element, on a
    -0/1 pattern. Expected: +0 codes for zeros (torchao NVFP4 aside); finite values with
    the huge element kept, other blocks exact (per-tensor scales flush 1.0); -0 kept or
    made +0 as the profile says; dequantize equal to ml_dtypes' decoding times the scales.
    Pass: all, bitwise for dequantize."""
    shape = (32, 256) if recipe != "fp8_block" else (128, 256)
    z = recipes.quantize(np.zeros(shape, np.float32), recipe, profile=profile)
    if not (profile == "torchao" and recipe == "nvfp4"):  # torchao: 0/0 scales (REC-NV4-001)
        assert not z.values.any() and not z.codes.any(), "all-zero blocks give +0 codes"
    x = np.ones(shape, np.float32)
    x[0, 3] = 1e30  # one huge element: its block saturates nothing, others stay exact
    q = recipes.quantize(x, recipe, profile=profile)
    assert np.all(np.isfinite(q.values))
    # block recipes keep the other blocks exact; a per-tensor scale (fp8_current, NVFP4's
    # global scale) flushes 1.0 next to 1e30 to zero: what the recipe means
    per_tensor = recipe.startswith("fp8_current") or recipe == "nvfp4"
    assert q.values[0, 3] > 0 and q.values[-1, -1] == (0.0 if per_tensor else 1.0)
    nz = np.full(shape, -0.0, np.float32)
    nz[:, ::2] = 1.0
    qn = recipes.quantize(nz, recipe, profile=profile)
    neg = qn.codes[:, 1] >> (7 if qn.element.startswith("float8") else
                             (3 if "e2m1" in qn.element else 5))
    assert bool(neg[0]) == (recipes.PROFILES[profile].fp4_negative_zero == "keep"
                            or "e2m1" not in qn.element)
    # REC-DEQ-001 from ml_dtypes' decoding (not ampref's): fl32(fl32(e * s_block) * g)
    e = q.codes.view(getattr(ml_dtypes, q.element)).astype(np.float64)
    r, c = q.tile
    s_el = (np.float64(q.scales) if (r, c) == (0, 0) else
            np.repeat(np.repeat(np.float64(q.scales), r, 0), c, 1)[:shape[0], :shape[1]])
    want = (e * s_el).astype(np.float32)
    if q.global_scale is not None:
        want = (want * np.float32(q.global_scale)).astype(np.float32)
    assert np.array_equal(want.view(np.uint32), recipes.dequantize(q).view(np.uint32)), \
        f"{recipe}/{profile}: first differing value " \
        f"{hex(int(recipes.dequantize(q).view(np.uint32)[want != recipes.dequantize(q)][0]))}"


@pytest.mark.clause("REC-MX-002", "REC-MX-001", "REC-AMX-001")
def test_te_mx_special_amax_codes() -> None:
    """Inputs: 4x32 ones with an inf, a NaN and a subnormal row under te and ocp. Expected:
    te scale codes 0x77, 0xFE, 0x77, 0x00 (fmaxf ignores NaN, which stays in its element);
    ocp codes 0xFF for inf and NaN blocks. Pass: each."""
    x = np.ones((4, 32), np.float32)
    x[1, 0], x[2, 0] = np.inf, np.nan
    x[3] = 1e-41  # subnormal amax: d <= 2^-127 gives code 0
    q = recipes.quantize(x, "mxfp8_e4m3", profile="te")
    assert q.scale_codes[:, 0].tolist() == [0x77, 0xFE, 0x77, 0x00]  # ceil(log2(1/448)) = -8
    assert np.isnan(q.values[2, 0]) and q.values[2, 1] == 1.0  # fmaxf ignored the NaN
    ocp = recipes.quantize(x, "mxfp8_e4m3", profile="ocp")
    assert ocp.scale_codes[1:3, 0].tolist() == [0xFF, 0xFF]


@pytest.mark.clause("REC-ELM-001", "REC-NV4-003")
def test_nvfp4_midpoints_round_to_even_and_te_reference_positive_zero() -> None:
    """Inputs: E2M1 midpoints 0.25..5.0 and 6.0, with a -0. Expected: te codes 0, 2, 2, 4,
    4, 6, 6, 7 (ties to even) and 0x8 for -0; te-reference gives 0 for -0. Pass: equal."""
    mid = np.array([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 6.0] * 2, np.float32)
    mid[8] = -0.0
    q = recipes.quantize(mid[None], "nvfp4", profile="te")
    assert q.codes[0, :8].tolist() == [0, 2, 2, 4, 4, 6, 6, 7]
    assert q.codes[0, 8] == 0x8
    assert recipes.quantize(mid[None], "nvfp4", profile="te-reference").codes[0, 8] == 0


@pytest.mark.clause("REC-SR-001", "REC-SR-002")
def test_stochastic_rounding_uses_one_byte_per_element_as_te() -> None:
    """Inputs: a 1x16 NVFP4 block with words supplying bytes 0x80, 0xFF, 0x00 to elements
    1-3; seeded runs; 512 rows of 1.25. Expected: TE's formula t = fl32(|x| + byte/256
    step) truncated to the grid (exact fractions); the same codes for the same seed; a mean
    within 0.01 of 1.25 (unbiased). Pass: all."""
    x = np.full((1, 16), 0.3, np.float32) * np.float32(6)  # block amax -> multiplier 1
    x[0, 0] = 6.0
    words = np.array([0x00FF8040, 0, 0, 0], np.uint32)
    q = recipes.quantize(x, "nvfp4", rounding="stochastic", random_bits=words)
    s_dec, sb = F(float(q.global_scale)), F(float(q.scales[0, 0]))
    mult = min(fl32(1 / fl32(sb * s_dec)), FLT_MAX)
    for j, byte in enumerate((0x80, 0xFF, 0x00)):  # byte 0 (0x40) went to element 0
        ax = abs(fl32(F(float(x[0, j + 1])) * mult))
        step = F(2) if ax >= 4 else F(1) if ax >= 2 else F(1, 2)
        t = fl32(ax + F(byte, 256) * step)
        step_t = F(2) if t >= 4 else F(1) if t >= 2 else F(1, 2)
        want = min((t // step_t) * step_t, F(6))
        assert dict(E2M1)[int(q.codes[0, j + 1])] == want
    a = recipes.quantize(x, "nvfp4", rounding="stochastic", seed=7)
    b = recipes.quantize(x, "nvfp4", rounding="stochastic", seed=7)
    assert np.array_equal(a.codes, b.codes)
    big = np.tile(np.array([6.0] + [1.25] * 15, np.float32), (512, 1))
    mean = recipes.quantize(big, "nvfp4", rounding="stochastic", seed=1).values[:, 1:].mean()
    assert abs(mean - 1.25) < 0.01  # unbiased: 1.25 rounds to 1 or 1.5 half the time



@pytest.mark.clause("REC-SR-002")
def test_a_seed_stands_for_the_words_from_index_zero_of_its_stream() -> None:
    """Inputs: a 4x32 matrix of values off the E2M1 grid, rounding="stochastic" with
    seed=7, and with random_bits= the words 0..31 of seed 7 drawn one by one by the
    spec recipe on MurmurHash3's finaliser (tests/oracle.py), and the words 1..32. Expected: the
    seeded codes equal those of words 0..31 and differ from those of words 1..32 (so the
    comparison sees a shifted stream). Pass: code arrays equal / not equal."""
    x = (np.random.default_rng(3).uniform(0.1, 5.9, (4, 32))).astype(np.float32)
    seeded = recipes.quantize(x, "nvfp4", rounding="stochastic", seed=7).codes
    words = [np.array([sr_bits(7, i) for i in range(start, start + 32)],
                      np.uint32) for start in (0, 1)]
    at = [recipes.quantize(x, "nvfp4", rounding="stochastic", random_bits=w).codes
          for w in words]
    assert np.array_equal(seeded, at[0])
    assert not np.array_equal(seeded, at[1])


E2M1_STEPS = [(0.0, 0.5), (0.5, 1.0), (1.5, 2.0), (2.0, 3.0), (3.0, 4.0), (4.0, 6.0)]


@pytest.mark.clause("REC-SR-001")
def test_stochastic_e2m1_rounds_up_exactly_when_the_byte_reaches_the_gap() -> None:
    """Inputs: for each E2M1 step (lo, hi) and gap g/256 of the step (g = 1, 128, 255),
    |x| = hi - g/256 * step, both signs, each with bytes g (the byte equal to the gap),
    g - 1, 0 and 255, packed four per word as REC-SR-002 lays them out. Expected: hi
    when byte >= g (|x| + byte/256 step reaches hi), else lo, with x's sign (exact
    rational arithmetic). Pass: every E2M1 code equal."""
    from ampref.recipes.elements import stochastic_e2m1

    xs, bytes_, want = [], [], []
    for lo, hi in E2M1_STEPS:
        for g in (1, 128, 255):
            ax = F(hi) - F(g, 256) * (F(hi) - F(lo))
            for b in sorted({g, g - 1, 0, 255}):
                for sign in (1, -1):
                    xs.append(float(sign * ax))
                    bytes_.append(b)
                    want.append(sign * (hi if b >= g else lo))
    pad = (-len(xs)) % 4
    xs += [0.0] * pad
    bytes_ += [0] * pad
    want += [0.0] * pad
    x = np.array(xs, np.float32)
    assert all(F(float(v)) == F(s) for v, s in zip(x, xs, strict=True))  # exact inputs
    packed = np.array(bytes_, np.uint32).reshape(-1, 4)
    words = (packed << np.array([0, 8, 16, 24], np.uint32)).sum(axis=1).astype(np.uint32)
    got = stochastic_e2m1(x, words)
    expect = encode(np.array(want, np.float32), "float4_e2m1fn")
    bad = np.flatnonzero(got != expect)
    assert bad.size == 0, (f"{bad.size} differ; first x = {xs[bad[0]]}, byte "
                           f"{bytes_[bad[0]]}: code {int(got[bad[0]]):#x}, want "
                           f"{int(expect[bad[0]]):#x}")


#: Transformer Engine's wgrad sign vector, transcribed from TE at commit d0067d0d
#: (2026-08-22): transformer_engine/pytorch/custom_recipes/reference_nvfp4.py:335
#: get_wgrad_sign_vector, equal to transformer_engine/jax/quantize/hadamard.py:8
TE_WGRAD_SIGNS = (1, 1, 1, -1, 1, -1, -1, -1, -1, -1, -1, 1, -1, 1, -1, -1)


@pytest.mark.clause("REC-RHT-001")
def test_the_sign_vector_is_transformer_engines() -> None:
    """Inputs: ampref's SIGNS. Expected: TE's get_wgrad_sign_vector transcribed above,
    and TE's JAX bitmask form of it (bit i set where sign i is -1:
    get_sign_from_vector) 0xD7E8. Pass: equal (a flipped sign changes every RHT
    output and no other test would see it: the transform's other checks use the same
    vector on both sides)."""
    assert recipes.hadamard.SIGNS == TE_WGRAD_SIGNS
    assert sum(1 << i for i, v in enumerate(recipes.hadamard.SIGNS) if v == -1) == 0xD7E8


@pytest.mark.clause("REC-RHT-001")
def test_hadamard_is_te_signed_sylvester_and_orthogonal() -> None:
    """Inputs: the 16x16 Hadamard matrix; a 2x32 block transformed with exact accumulation;
    NVFP4 with hadamard=True. Expected: H H^T = 16 I, TE's sign vector as first column, the
    transform equal to float64 x H / 4 rounded once, amax taken after the transform. Pass:
    all."""
    h = recipes.hadamard_matrix()
    assert np.array_equal(h @ h.T, 16 * np.eye(16))
    assert h[:, 0].tolist() == list(TE_WGRAD_SIGNS)
    x = _x(8, (2, 32))
    y = recipes.rht(x, "exact")
    want = (x.astype(np.float64).reshape(-1, 16) @ (h * 0.25)).reshape(2, 32)
    assert np.array_equal(y, want.astype(np.float32))  # 16 products of 2^-2 x, no cancel err
    q = recipes.quantize(x, "nvfp4", hadamard=True)
    assert np.float32(q.amax) == np.abs(recipes.rht(x)).max()


@pytest.mark.clause("REC-CMP-001")
def test_compare_names_the_block_scale_rule_between_te_and_torchao() -> None:
    """Inputs: 16x64 data compared under te, torchao and ocp for NVFP4. Expected: ocp
    skipped with a reason; one pair with differing scales and elements, each cause naming a
    REC clause, and a printable first difference in hex. Pass: all."""
    x = _x(9, (16, 64))
    c = recipes.compare(x, "nvfp4", ("te", "torchao", "ocp"))
    assert c.skipped == {"ocp": "ocp has no nvfp4"}
    (p,) = c.pairs
    assert p.scales > 0 and p.elements > 0
    assert all("REC-" in why for why in p.causes)
    assert "te vs torchao" in str(c) and p.first[0]["x"].startswith("0x")
    none = recipes.compare(x, "nvfp4", ("te", "torchao"), first=0)
    (q,) = none.pairs  # first=0: the counts stay, the listing is empty
    assert (q.scales, q.elements, q.first) == (p.scales, p.elements, [])


@pytest.mark.clause("REC-CMP-001")
def test_compare_counts_each_differing_element_once_under_its_cause() -> None:
    """Inputs: the 16x64 data above under te and torchao for NVFP4. Expected, from the two
    profiles' own quantize outputs: ``elements`` = the element codes that differ, all of
    them (here) in blocks whose scale codes differ, so ``causes`` holds one block-scale
    cause with exactly that count. Pass: equal counts (not a cause per element twice)."""
    x = _x(9, (16, 64))
    qa, qb = (recipes.quantize(x, "nvfp4", profile=p) for p in ("te", "torchao"))
    differ = qa.codes != qb.codes
    in_rescaled_block = np.repeat(qa.scale_codes != qb.scale_codes, 16, axis=1)
    assert differ.sum() > 0 and not (differ & ~in_rescaled_block).any()
    (p,) = recipes.compare(x, "nvfp4", ("te", "torchao")).pairs
    assert p.elements == int(differ.sum())
    assert p.causes == {"block scale: te vs torchao rule (REC-NV4-002)": int(differ.sum())}


@pytest.mark.clause("REC-AMX-001")
@pytest.mark.parametrize("n", [1, 3, 7, 15, 16, 31, 33, 128])
def test_block_amax_is_numpys_max_for_every_block_length(n: int) -> None:
    """Inputs: 4 blocks of n float32 values (n a power of two, one less, or other), one
    block holding a NaN, one a -inf. Expected: per block np.fmax.reduce of |x| from 0
    under the "fmaxf" rule (NaN ignored) and np.maximum.reduce under "torch" (NaN kept),
    whichever internal path (halving folds or one reduction) the length takes. Pass:
    bitwise equal."""
    from ampref.recipes.tiles import block_amax

    rng = np.random.default_rng(n)
    x = (rng.standard_normal((4, n)) * 2.0 ** rng.integers(-20, 20, (4, n))).astype(np.float32)
    x[1, n // 2] = np.nan
    x[2, n - 1] = -np.inf
    for rule, op in (("fmaxf", np.fmax), ("torch", np.maximum)):
        want = op.reduce(np.abs(x), axis=-1, initial=np.float32(0)).astype(np.float32)
        got = block_amax(x, rule)
        assert got.tobytes().hex() == want.tobytes().hex(), (rule, n)


@pytest.mark.clause("REC-GEM-001")
def test_fp8_block_gemm_follows_te_fma_order() -> None:
    """Inputs: 2x256 and 3x256 FP8 1x128-block operands. Expected: per 128-block partial
    sums fl32(exact sum), then acc = fl32(fl32(part * sa) * sb + acc) in block order (exact
    fractions). Pass: every output equal."""
    a, b = _x(10, (2, 256)), _x(11, (3, 256))
    qa = recipes.quantize(a, "fp8_block", tile=(1, 128))
    qb = recipes.quantize(b, "fp8_block", tile=(1, 128))
    y = recipes.matmul(qa, qb)
    ea, eb = ([[F(float(v)) for v in r] for r in q.codes.view(ml_dtypes.float8_e4m3fn).astype(
        np.float64)] for q in (qa, qb))
    for i in range(2):
        for j in range(3):
            acc = F(0)
            for c in range(2):
                part = fl32(sum((ea[i][k] * eb[j][k] for k in range(128 * c, 128 * c + 128)), F(0)))
                acc = fl32(fl32(part * F(float(qa.scales[i, c]))) * F(float(qb.scales[j, c]))
                           + acc)
            assert F(float(y[i, j])) == acc


@pytest.mark.clause("REC-GEM-002")
def test_nvfp4_gemm_is_decode_then_exact_accumulate_times_alpha() -> None:
    """Inputs: 2x32 and 2x32 NVFP4 operands. Expected: elements times block scales decoded
    by ml_dtypes, the exact dot rounded to float32, times alpha = fl32(global_a *
    global_b), rounded once. Pass: every output equal."""
    a, b = _x(12, (2, 32)), _x(13, (2, 32))
    qa, qb = recipes.quantize(a, "nvfp4"), recipes.quantize(b, "nvfp4")
    y = recipes.matmul(qa, qb)
    def dec(q: recipes.Quantized) -> np.ndarray:  # element x block scale, via ml_dtypes
        e = q.codes.view(ml_dtypes.float4_e2m1fn).astype(np.float64)
        return e * np.repeat(q.scale_codes.view(ml_dtypes.float8_e4m3fn).astype(np.float64),
                             16, axis=1)

    da, db = dec(qa), dec(qb)
    alpha = F(float(np.float32(qa.global_scale) * np.float32(qb.global_scale)))
    for i in range(2):
        for j in range(2):
            dot = fl32(sum((F(float(u)) * F(float(v)) for u, v in zip(da[i], db[j], strict=True)),
                           F(0)))
            assert F(float(y[i, j])) == fl32(dot * alpha)


@pytest.mark.clause("REC-API-002")
def test_bad_input_names_the_value_and_the_choices() -> None:
    """Inputs: unknown recipe, profile, option, tile; stochastic without seed and on MX;
    integer data; an unknown scale rule; 3-D data with 2-D tiles; bad epsilon, fp8_format
    and pow2; a Hadamard size not a multiple of 16. Expected: ValueError/TypeError naming
    the value and the choices. Pass: each message matches."""
    x = np.ones((16, 32), np.float32)
    with pytest.raises(ValueError, match="unknown recipe 'nvfp5'; choose one of nvfp4"):
        recipes.quantize(x, "nvfp5")
    with pytest.raises(ValueError, match="unknown profile 'jax'"):
        recipes.quantize(x, "nvfp4", profile="jax")
    with pytest.raises(ValueError, match="profile 'ocp' does not implement recipe 'nvfp4'"):
        recipes.quantize(x, "nvfp4", profile="ocp")
    with pytest.raises(ValueError, match="unknown option 'blocksize'.*options: hadamard"):
        recipes.quantize(x, "nvfp4", blocksize=16)
    with pytest.raises(ValueError, match=r"tile \(1, 8\) is not one of"):
        recipes.quantize(x, "nvfp4", tile=(1, 8))
    with pytest.raises(ValueError, match="needs seed="):
        recipes.quantize(x, "nvfp4", rounding="stochastic")
    with pytest.raises(ValueError, match="stochastic rounding is specified for NVFP4"):
        recipes.quantize(x, "mxfp4", rounding="stochastic", seed=1)
    with pytest.raises(TypeError, match="floating-point array .* got dtype int64"):
        recipes.quantize(np.ones((2, 32), np.int64), "mxfp4")
    with pytest.raises(ValueError, match="unknown scale_rule 'floor' for profile 'te'"):
        recipes.quantize(x, "mxfp8_e4m3", scale_rule="floor")
    with pytest.raises(ValueError, match="2-D tiles"):
        recipes.quantize(np.ones((2, 16, 32), np.float32), "nvfp4", tile=(16, 16))
    with pytest.raises(TypeError, match="epsilon must be a number, got str"):
        recipes.quantize(x, "fp8_current", epsilon="tiny")
    with pytest.raises(ValueError, match="epsilon must be a finite number >= 0, got -1"):
        recipes.quantize(x, "fp8_block", epsilon=-1)
    with pytest.raises(ValueError, match="unknown fp8_format 'e3m4'; choose e4m3 or e5m2"):
        recipes.quantize(x, "fp8_current", fp8_format="e3m4")
    with pytest.raises(TypeError, match="pow2 must be a bool"):
        recipes.quantize(x, "fp8_block", pow2="yes")
    with pytest.raises(ValueError, match="multiple of 16"):
        recipes.quantize(np.ones((2, 24), np.float32), "nvfp4", hadamard=True)



@pytest.mark.clause("REC-PRF-001")
def test_a_user_profile_is_a_row_of_data() -> None:
    """Inputs: te's profile with amax='torch' as a user's row; a block with a NaN.
    Expected: the user's profile gives the NaN scale code 0xFF, te's fmaxf does not. Pass:
    both."""
    from dataclasses import replace
    mine = replace(recipes.PROFILES["te"], name="te-torch-amax", amax="torch")
    x = _x(19, (2, 32))
    x[0, 3] = np.nan
    q = recipes.quantize(x, "mxfp8_e4m3", profile=mine)
    assert q.scale_codes[0, 0] == 0xFF  # NaN propagates into the amax under "torch"
    assert recipes.quantize(x, "mxfp8_e4m3").scale_codes[0, 0] != 0xFF  # fmaxf ignores it


@pytest.mark.clause("REC-NV4-005")
def test_row_scaled_nvfp4_has_one_global_scale_per_row_equal_to_each_row_alone() -> None:
    """Inputs: 4x64 data with row_scaled=True. Expected: 4 global scales; each row's codes
    and global scale equal that row quantized alone. Pass: equal."""
    x = _x(15, (4, 64))
    q = recipes.quantize(x, "nvfp4", row_scaled=True)
    assert q.global_scale.shape == (4,)
    for i in range(4):
        alone = recipes.quantize(x[i:i + 1], "nvfp4")
        assert np.array_equal(q.codes[i], alone.codes[0])
        assert q.global_scale[i] == alone.global_scale


@pytest.mark.clause("REC-MX-004", "REC-MX-001", "REC-TIL-001")
def test_mx_32x32_tiles_scale_and_round_all_1024_elements_of_a_tile_together() -> None:
    """Input: a 64 x 96 matrix with a different magnitude per 32x32 tile (one tile with a
    planted large element), quantized to MXFP8 E4M3 with tile=(32, 32) under the exact
    OCP profile. Expected: a 2 x 3 grid of scales, each tile's code 127 + floor(log2 of
    the tile's amax) - 8, and every element code the E4M3 code of x / 2^k rounded once,
    saturating, with the tile's k (oracle: exact power-of-two division, ampref.encode);
    1x32 row blocks give other codes. Pass: scale codes and all 6144 element codes equal."""
    rng = np.random.default_rng(40)
    x = rng.standard_normal((64, 96)).astype(np.float32)
    x *= np.repeat(np.repeat(2.0 ** rng.integers(-20, 20, (2, 3)), 32, 0), 32, 1).astype(
        np.float32)
    x[5, 40] = 3e4 * abs(x[5, 40]) + 1.0
    q = recipes.quantize(x, "mxfp8_e4m3", profile="ocp", tile=(32, 32))
    assert q.scale_codes.shape == (2, 3)
    tiles = np.abs(x.astype(np.float64)).reshape(2, 32, 3, 32).max(axis=(1, 3))
    k = np.floor(np.log2(tiles)).astype(np.int64) - 8
    assert q.scale_codes.astype(np.int64).tolist() == (k + 127).tolist()
    kk = np.repeat(np.repeat(k, 32, 0), 32, 1).astype(np.float64)
    want = encode(x.astype(np.float64) / np.exp2(kk), "e4m3", saturate=True)
    got = q.codes.view(np.uint8)
    assert np.array_equal(got, want), np.argwhere(got != want)[:3]
    rows = recipes.quantize(x, "mxfp8_e4m3", profile="ocp")
    assert not np.array_equal(rows.codes.view(np.uint8), want)


@pytest.mark.clause("REC-GEM-002")
def test_nvfp4_gemm_under_the_h100_tensor_core_model_is_within_its_rigorous_bound() -> None:
    """Inputs: 4x64 and 3x64 NVFP4 operands multiplied under tensorcore:h100. Expected:
    |result - exact * alpha| within the model's error bound times alpha plus one float32
    rounding. Pass: every element within."""
    from ampref import error_bound
    qa, qb = recipes.quantize(_x(17, (4, 64)), "nvfp4"), recipes.quantize(_x(18, (3, 64)), "nvfp4")
    tc = recipes.matmul(qa, qb, accumulation="tensorcore:h100")
    da, db = (q.codes.view(ml_dtypes.float4_e2m1fn).astype(np.float64) * np.repeat(
        q.scales.astype(np.float64), 16, axis=1) for q in (qa, qb))
    exact = da @ db.T
    bound = error_bound(da[:, None, :], db[None, :, :], accumulation="tensorcore:h100",
                        input_format="bfloat16")
    alpha = np.float64(np.float32(qa.global_scale) * np.float32(qb.global_scale))
    err = np.abs(tc.astype(np.float64) - exact * alpha)
    # the model's rounding of the dot (bound) scaled by alpha, plus one float32 rounding of
    # the product by alpha
    assert np.all(err <= bound * alpha + np.abs(exact * alpha) * 2.0**-24 + 1e-300), err


@pytest.mark.clause("REC-NV4-001", "REC-AMX-001")
def test_nvfp4_te_global_scale_special_cases() -> None:
    """Inputs: all zeros (te and te-reference), an inf, a NaN, a subnormal amax. Expected:
    global scale 1 for zeros (te) and 1/FLT_MAX (te-reference); 1 for inf with the inf
    element +6; 1/2688 with NaN elements +max; 1/FLT_MAX for the subnormal amax. Pass:
    each."""
    zero = recipes.quantize(np.zeros((2, 16), np.float32), "nvfp4")
    assert float(zero.global_scale) == 1.0  # amax 0 -> S_enc 1 (the kernel's rule)
    ref = recipes.quantize(np.zeros((2, 16), np.float32), "nvfp4", profile="te-reference")
    assert float(ref.global_scale) == float(np.float32(1) / np.float32(FLT_MAX))  # no such rule
    inf = np.ones((2, 16), np.float32)
    inf[0, 0] = np.inf
    qi = recipes.quantize(inf, "nvfp4")
    assert float(qi.global_scale) == 1.0  # S_enc = 2688/inf = 0 -> 1
    assert qi.codes[0, 0] == 0x7  # inf saturates to +6
    nan = np.ones((2, 16), np.float32)
    nan[1, 3] = np.nan
    qn = recipes.quantize(nan, "nvfp4")  # fmaxf: the NaN is not the amax
    assert float(qn.global_scale) == float(np.float32(1) / np.float32(2688.0))
    assert qn.codes[1, 3] == 0x7 and qn.codes[0, 0] == 0x7  # NaN -> +max (satfinite)
    sub = np.full((1, 16), 1e-40, np.float32)  # subnormal amax: S_enc overflows -> FLT_MAX
    qs = recipes.quantize(sub, "nvfp4")
    assert float(qs.global_scale) == float(np.float32(1) / np.float32(FLT_MAX))


@pytest.mark.clause("REC-MX-001")
@pytest.mark.parametrize("elem", ["float8_e4m3fn", "float8_e5m2", "float6_e2m3fn",
                                  "float6_e3m2fn", "float4_e2m1fn"])
def test_mx_rceil_exponent_at_an_exact_power_of_two_multiple_of_the_element_max(
        elem: str) -> None:
    """Inputs: block amax = elem_max * 2^j exactly (j = -20, -1, 0, 3), the next float64
    above it and the float64 just below it. Expected: rceil's k = ceil(log2(amax /
    elem_max)) by exact rational comparison: j, j + 1, j. Pass: every exponent equal."""
    from ampref.recipes import mx_scale_exponents

    fmax = F(float(get_format(elem).max))
    amax, want = [], []
    for j in (-20, -1, 0, 3):
        edge = fmax * F(2) ** j
        for v in (float(edge), np.nextafter(float(edge), np.inf),
                  np.nextafter(float(edge), 0.0)):
            amax.append(v)
            k = j - 2  # the smallest k with v <= fmax * 2^k, found exactly
            while F(v) > fmax * F(2) ** k:
                k += 1
            want.append(k)
    got = mx_scale_exponents(np.array(amax), elem, "rceil")
    assert got.tolist() == want, (amax, got.tolist(), want)


@pytest.mark.clause("REC-MX-002")
def test_te_e8m0_keeps_the_half_subnormal_scale_without_rounding_up() -> None:
    """Inputs: an e4m3 MX block whose amax makes d = fl32(amax * fl32(1/448)) exactly
    2^-127 (subnormal, mantissa field 0x400000), and amax one float32 step larger.
    Expected (TE's float_to_e8m0, REC-MX-002: no round-up for e == 0 and m <= 0x400000):
    scale code 0x00 for the first; the second (m > 0x400000) rounds up to 0x01.
    Pass: both codes."""
    r = np.float32(1 / np.float32(448.0))
    target = np.float32(2.0**-127)
    cand = np.float32(float(target) / float(r))
    for _ in range(64):  # walk to an amax whose product rounds exactly onto 2^-127
        d = np.float32(cand * r)
        if d == target:
            break
        cand = np.nextafter(cand, np.float32(np.inf) if d < target else np.float32(0))
    assert np.float32(cand * r) == target
    up = cand
    while np.float32(up * r) == target:
        up = np.nextafter(up, np.float32(np.inf))
    x = np.zeros((2, 32), np.float32)
    x[0, 0], x[1, 0] = cand, up
    q = recipes.quantize(x, "mxfp8_e4m3", profile="te")
    assert q.scale_codes[:, 0].tolist() == [0x00, 0x01]
