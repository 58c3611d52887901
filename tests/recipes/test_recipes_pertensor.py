"""FP8 recipes: Transformer Engine delayed/current scaling rules and OCP MX block scaling."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import ampref
from ampref.recipes import (FLT_MAX, DelayedScaling, amax, current_scale, mx_quantize,
                               mx_scale_exponents, quantize_per_tensor)


@pytest.mark.clause("FP8-AMX-001")
def test_amax_ignores_nan_and_propagates_inf() -> None:
    """Inputs: [1, NaN, -3] and [1, -inf, NaN]. Expected: 3 and inf (fmaxf semantics).
    Pass: equal."""
    assert amax(np.array([1.0, np.nan, -3.0])) == 3.0
    assert amax(np.array([1.0, -np.inf, np.nan])) == np.inf


@pytest.mark.clause("FP8-DEL-001", "FP8-DEL-002")
def test_delayed_scaling_documented_cases() -> None:
    """Inputs: DelayedScaling (history 4) fed amax 2 then inf; history 1 with margin 1 fed
    1e-40 and 8. Expected: 224; 224 kept and frozen by the inf; FLT_MAX (448/amax
    overflows); 448/8/2. Pass: each."""
    r = DelayedScaling(amax_history_len=4)
    st = r.init()
    st = r.update(r.record(st, np.array([2.0])))          # normal: 448 / 2
    assert st.scale == np.float32(224.0)
    st = r.update(r.record(st, np.array([np.inf])))        # inf amax: keep previous
    assert st.scale == np.float32(224.0) and r.frozen_by_inf(st)
    r2 = DelayedScaling(amax_history_len=1, margin=1)
    s2 = r2.update(r2.record(r2.init(), np.array([1e-40], np.float32)))  # 448/amax overflows
    assert s2.scale == np.float32(FLT_MAX)
    s3 = r2.update(r2.record(r2.init(), np.array([8.0])))
    assert s3.scale == np.float32(448 / 8 / 2)             # margin halves


@pytest.mark.clause("FP8-DEL-003")
def test_history_rolls_and_max_takes_the_window() -> None:
    """Inputs: amaxes 4, 1, 2, 1, 1, 1 with history 3 ('max'); 4 then 1 with 'most_recent'.
    Expected: scales 112, 112, 112, 224, 224, 448; 448. Pass: each."""
    r = DelayedScaling(amax_history_len=3)
    st = r.init()
    for a, want in [(4.0, 112.0), (1.0, 112.0), (2.0, 112.0), (1.0, 224.0), (1.0, 224.0),
                    (1.0, 448.0)]:
        st = r.update(r.record(st, np.array([a])))
        assert st.scale == np.float32(want), (a, st.history)
    recent = DelayedScaling(amax_history_len=3, amax_compute_algo="most_recent")
    st = recent.update(recent.record(recent.update(recent.record(recent.init(), [4.0])), [1.0]))
    assert st.scale == np.float32(448.0)


@pytest.mark.clause("FP8-DEL-003")
def test_the_history_rolls_up_with_the_newest_amax_last_as_transformer_engine_documents() -> None:
    """Inputs: history 4, amaxes 1, 2, 3, 5 recorded and updated one step at a time.
    Expected: TE's documented layout ([a_N, a_1, ..., a_N-1] -> [0, a_2, ..., a_N],
    new[i] = old[i + 1], row 0 zeroed): [0, 0, 0, 1], [0, 0, 1, 2], [0, 1, 2, 3], then
    [0, 2, 3, 5] (the oldest, 1, drops out). Pass: each history exactly."""
    r = DelayedScaling(amax_history_len=4)
    st = r.init()
    for a, want in [(1.0, [0, 0, 0, 1]), (2.0, [0, 0, 1, 2]), (3.0, [0, 1, 2, 3]),
                    (5.0, [0, 2, 3, 5])]:
        st = r.update(r.record(st, np.array([a])))
        assert st.history.reshape(-1).tolist() == want, (a, st.history)


@pytest.mark.clause("FP8-DEL-004")
def test_fused_kernel_skips_a_zero_amax_while_the_unfused_path_rolls() -> None:
    """Inputs: history 2, amax 4, then a step with nothing recorded, fused and unfused.
    Expected: fused keeps history and scale; unfused rolls a 0 in and gives 112. Pass:
    both."""
    fused = DelayedScaling(amax_history_len=2)
    unfused = DelayedScaling(amax_history_len=2, kernel="unfused")
    for r in (fused, unfused):
        st = r.update(r.record(r.init(), [4.0]))
        st2 = r.update(st)  # nothing recorded this step (amax 0)
        if r.kernel == "fused":
            assert np.array_equal(st2.history, st.history) and st2.scale == st.scale
        else:
            assert st2.history[-1] == 0.0 and st2.scale == np.float32(112.0)


@pytest.mark.clause("FP8-DEL-002")
def test_fused_and_unfused_formulas_agree_away_from_over_and_underflow() -> None:
    """Inputs: 2000 amaxes over e^-30..e^30 for margins 0-3. Expected: equal scales from
    the fused and unfused formulas. Pass: equal."""
    rng = np.random.default_rng(0)
    for margin in range(4):
        f, u = DelayedScaling(amax_history_len=1, margin=margin), \
            DelayedScaling(amax_history_len=1, margin=margin, kernel="unfused")
        for a in np.exp(rng.uniform(-30, 30, 2000)).astype(np.float32):
            fs = f.update(f.record(f.init(), [a])).scale
            assert fs == u.update(u.record(u.init(), [a])).scale


@pytest.mark.clause("FP8-CUR-001")
def test_current_scaling_rules_and_the_te_reference_disagreement() -> None:
    """Inputs: current_scale of 2, 0, inf, NaN, inf (reference), 1e-3 with epsilon 1, 3
    with pow2, 1e-40 (with and without value_for_inf); quantize_per_tensor of [1, 1e9,
    -inf, NaN] at 2. Expected: 224; 1 three times; 0; 448; 128; FLT_MAX and inf; codes
    0x40, 0x7E, 0xFE, 0x7F and scale_inv 0.5. Pass: each."""
    assert current_scale(2.0) == np.float32(224.0)
    assert current_scale(0.0) == current_scale(np.inf) == current_scale(np.nan) == 1.0
    assert current_scale(np.inf, inf_amax="te-python-reference") == 0.0
    assert current_scale(1e-3, epsilon=1.0) == np.float32(448.0)
    assert current_scale(3.0, pow2=True) == 128.0  # 149.33 rounded down to 2^7
    assert current_scale(1e-40) == np.float32(FLT_MAX)
    assert np.isinf(current_scale(1e-40, value_for_inf=None))  # TE/JAX: no clamp
    codes, inv = quantize_per_tensor(np.array([1.0, 1e9, -np.inf, np.nan]), 2.0)
    assert list(codes[:3]) == [0x40, 0x7E, 0xFE] and codes[3] == 0x7F and inv == 0.5


@pytest.mark.clause("FP8-CUR-001")
def test_an_amax_or_epsilon_past_float32_reads_as_inf_without_a_warning() -> None:
    """Inputs: current_scale of amax 1e300 and -1e300, of 1 with epsilon 1e300, of 1e-40
    with value_for_inf 1e300, with NumPy warnings as errors. Expected: float32 reads them
    as ±inf (FP8-CUR-001): 1.0 for an infinite amax, 1.0 for a negative amax (below
    epsilon 0, so 0), 1.0 for epsilon inf, and inf for the clamp value inf. Pass: equal,
    no warning (each was an overflow warning from the float32 cast)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert current_scale(1e300) == current_scale(-1e300) == 1.0
        assert current_scale(1.0, epsilon=1e300) == 1.0
        assert np.isinf(current_scale(1e-40, value_for_inf=1e300))


def te_float_to_e8m0(v: np.float32) -> int:
    """Transformer Engine's software float_to_e8m0 (ptx_arch_spec.cuh), restated."""
    b = int(np.array([v], np.float32).view(np.uint32)[0])
    if np.isnan(v):
        return 0xFF
    if np.isinf(v):
        return 0xFE
    if v == 0:
        return 0
    e, m = (b >> 23) & 0xFF, b & 0x7FFFFF
    if m > 0 and e != 0xFE and not (e == 0 and m <= 0x400000):
        e += 1
    return e


@pytest.mark.clause("FP8-MX-002")
@pytest.mark.parametrize("elem", ["e4m3", "e5m2"])
def test_rceil_equals_transformer_engines_e8m0_formula(elem: str) -> None:
    """Inputs: every 97th float32 significand of three binades, e4m3 and e5m2. Expected:
    rceil's code equals TE's float_to_e8m0(fl32(x * fl32(1/max))) computed by the test's
    transcription. Pass: equal arrays."""
    f = ampref.get_format(elem)
    rng = np.random.default_rng(1)
    sig = np.arange(1 << 23, dtype=np.uint32)[::97]  # every 97th significand of a binade
    for exp in (120, 127, 140):
        a = ((np.uint32(exp) << np.uint32(23)) | sig).view(np.float32)
        ours = mx_scale_exponents(a, f, "rceil") + 127
        inv = np.float32(1) / np.float32(f.max)
        theirs = np.array([te_float_to_e8m0(np.float32(x * inv)) for x in a])
        assert np.array_equal(ours, theirs)
    del rng


@pytest.mark.clause("FP8-MX-001", "FP8-MX-002")
def test_mx_rules_on_spot_values() -> None:
    """Inputs: listed amaxes under floor, rceil, ceil, even (e4m3) and 2^200 under floor
    (e2m1). Expected: the listed exponents (e.g. 15.9 rounds to 16 under even: -4). Pass:
    equal."""
    e = mx_scale_exponents(np.array([448.0, 500.0, 1.0, 0.0, np.nan]), "e4m3", "floor")
    assert list(e) == [0, 0, -8, -127, 128]
    assert list(mx_scale_exponents(np.array([500.0, 448.0, 256.0]), "e4m3", "rceil")) == [1, 0, 0]
    assert list(mx_scale_exponents(np.array([500.0, 256.0]), "e4m3", "ceil")) == [1, 0]
    # even: 15.9 rounds to 16 with 3 mantissa bits, so the floor moves up a binade
    assert list(mx_scale_exponents(np.array([15.9, 15.0]), "e4m3", "even")) == [-4, -5]
    assert list(mx_scale_exponents(np.array([2.0**200]), "e2m1", "floor")) == [127]


@pytest.mark.clause("FP8-MX-001", "FP8-MX-003")
def test_floor_rule_saturates_a_quarter_of_e4m3_block_maxima_rceil_none() -> None:
    """Inputs: 4096 blocks whose maxima span one binade uniformly. Expected: floor
    saturates 25 % of the maxima (those beyond 448 * 2^k), rceil none. Pass: within 0.001."""
    sig = 1 + np.arange(4096) / 4096.0            # uniform significands of one binade
    x = np.zeros((4096, 32))
    x[:, 0] = sig * 2.0**5
    for rule, frac in (("floor", 0.25), ("rceil", 0.0)):
        out = mx_quantize(x, "e4m3", rule=rule)
        scale = np.ldexp(1.0, out["scale_codes"][:, 0].astype(int) - 127)
        clipped = np.mean(x[:, 0] / scale > 448)  # block maximum beyond E4M3's max: saturated
        assert abs(clipped - frac) < 0.001, (rule, clipped)


@pytest.mark.clause("FP8-MX-001")
def test_mx_quantize_divides_by_the_shared_scale_and_rounds_ties_to_even() -> None:
    """Inputs: one 32-element block, e2m1, floor rule: 24, 1, 3, 5, 7, 10, 14, -14 and
    zeros. Expected, derived by hand from OCP MX v1.0 section 6.3: amax 24 gives shared
    exponent floor(log2 24) - emax(E2M1) = 4 - 2 = 2 (code 129); elements x / 4 rounded
    nearest-even on the E2M1 grid: 6, 0 (0.25 ties to 0), 1 (0.75 ties to 1.0), 1 (1.25),
    2 (1.75), 2 (2.5), 4 (3.5), -4; dequantized 4 times those. Pass: exact equality."""
    x = np.zeros((1, 32), np.float32)
    x[0, :8] = [24, 1, 3, 5, 7, 10, 14, -14]
    out = mx_quantize(x, "e2m1", rule="floor")
    assert out["scale_codes"].tolist() == [[129]]
    assert out["elements"][0, :8].tolist() == [6, 0, 1, 1, 2, 2, 4, -4]
    assert out["dequantized"][0, :8].tolist() == [24, 0, 4, 4, 8, 8, 16, -16]
    assert not out["elements"][0, 8:].any()


@pytest.mark.clause("FP8-MX-001")
def test_mx_quantize_shapes_codes_and_errors() -> None:
    """Inputs: a 2x32 ramp with a NaN, e2m1 floor; a length 40; rule 'round';
    amax_compute_algo 'mean'. Expected: (2, 1) scales with 0xFF for the NaN block, that
    block NaN, E2M1 values elsewhere; ValueErrors naming each bad value. Pass: all."""
    x = np.linspace(-3, 3, 64, dtype=np.float32).reshape(2, 32)
    x[1, 3] = np.nan
    out = mx_quantize(x, "e2m1", rule="floor")
    assert out["scale_codes"].shape == (2, 1) and out["scale_codes"][1, 0] == 0xFF
    assert np.isnan(out["dequantized"][1]).all()
    assert set(np.abs(out["elements"][0])) <= {0, 0.5, 1, 1.5, 2, 3, 4, 6}
    with pytest.raises(ValueError, match="multiple of the block size 32"):
        mx_quantize(np.ones(40), "e4m3")
    with pytest.raises(ValueError, match="unknown MX scale rule 'round'"):
        mx_quantize(np.ones(32), "e4m3", rule="round")
    with pytest.raises(ValueError, match="amax_compute_algo"):
        DelayedScaling(amax_compute_algo="mean")  # type: ignore[arg-type]


@pytest.mark.clause("FP8-DEL-001", "REC-API-001")
def test_delayed_quantize_multiplies_by_this_steps_scale_and_decodes_with_its_reciprocal() -> None:
    """Inputs: a DelayedScaling state of scale 128 (history 1, amax 3.5: 448/3.5) and 64
    float32 values of amax below 3.5, among them the e4m3 ties 1.0625/128 and 1.1875/128,
    through ``quantize(x, "fp8_delayed", state=...)``. Expected (ml_dtypes as the
    oracle): codes = float8_e4m3fn(fl32(x * 128)) (ties to even: 1.0 and 1.25), scales =
    1/128, values = decode(code) / 128, and the returned state the recipe's next one
    (scale 448 / amax(x)), while this step's codes use the old 128. Pass: codes bitwise,
    scale and values bitwise, state scale equal."""
    ml = pytest.importorskip("ml_dtypes")
    r = DelayedScaling(amax_history_len=1)
    st = r.update(r.record(r.init(), np.array([3.5], np.float32)))
    assert st.scale == np.float32(128.0)
    x = (np.random.default_rng(5).uniform(-3.0, 3.0, 64)).astype(np.float32)
    x[:2] = np.float32(1.0625 / 128), np.float32(1.1875 / 128)
    q = ampref.recipes.quantize(x, "fp8_delayed", state=st, amax_history_len=1)
    want = (x * np.float32(128)).astype(np.float32).astype(ml.float8_e4m3fn)
    assert q.codes.tobytes().hex() == want.view(np.uint8).tobytes().hex()
    assert [float(v) for v in want[:2].astype(np.float32)] == [1.0, 1.25]
    assert np.float32(q.scales).view(np.uint32) == np.float32(1 / 128).view(np.uint32)
    dec = (want.astype(np.float32) * np.float32(1 / 128)).astype(np.float32)
    assert q.values.view(np.uint32).tobytes().hex() == dec.view(np.uint32).tobytes().hex()
    assert q.state.scale == np.float32(448 / np.float32(np.abs(x).max()))


@pytest.mark.clause("FP8-DEL-001", "API-ERR-001")
@pytest.mark.parametrize("kwargs,message", [
    ({"amax_history_len": 0}, "amax_history_len must be a positive int, got 0"),
    ({"amax_history_len": 2.0}, "amax_history_len must be a positive int, got 2.0"),
    ({"margin": -1}, "margin must be a non-negative int, got -1"),
    ({"amax_compute_algo": "mean"}, "amax_compute_algo must be 'max' or 'most_recent'"),
    ({"kernel": "cuda"}, "kernel must be 'fused' or 'unfused'"),
])
def test_delayed_scaling_refuses_bad_configurations_by_name(kwargs: dict,
                                                            message: str) -> None:
    """Inputs: DelayedScaling with a history of 0 or 2.0 rows, margin -1, algorithm
    'mean', kernel 'cuda'. Expected: ValueError naming the field and the value. Pass:
    each message."""
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        DelayedScaling(**kwargs)
