"""The FP8/FP4 training recipes in the engine: the linear layer's three GEMMs equal
ampref.recipes.matmul on operands quantized by the role table, gradients are
straight-through, and the train modes resume bit for bit."""

from __future__ import annotations

import json
from dataclasses import replace
from fractions import Fraction as Fr
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from ampref.engine.functional import quantized as F
from ampref import recipes
from ampref.recipes.roles import GEMM_RECIPES
from ampref.engine.creation import tensor
from ampref.training.train import train
from ampref.training.config import MODES, TrainConfig, TrainError

SMALL = TrainConfig(steps=6, batch=8, context=16, width=32, heads=2, blocks=1,
                    checkpoint_every=3)


def _bits(a: np.ndarray) -> np.ndarray:
    return np.asarray(a, np.float32).view(np.uint32)


def _q(a: np.ndarray, op: recipes.roles.Operand, seed: int, slot: int) -> recipes.Quantized:
    kw = dict(tile=op.tile, **op.options())
    if op.stochastic:
        kw.update(rounding="stochastic", seed=seed * 8 + slot)
    return recipes.quantize(np.ascontiguousarray(a), op.recipe, **kw)


@pytest.mark.clause("TRN-QNT-001", "TRN-QNT-003")
@pytest.mark.parametrize("name", [n for n in GEMM_RECIPES if n != "fp8-delayed"])
def test_the_three_gemms_equal_recipes_matmul_on_the_role_table_operands(name: str) -> None:
    """Inputs: 48x32 activations, 24x32 weights, a 48x24 output gradient through
    quantized_linear for each recipe (seed 5). Expected: fprop, dgrad and wgrad equal
    recipes.matmul on the operands the role table quantizes (transposed or re-quantized,
    padded for Hadamard). Pass: bitwise equal all three."""
    rng = np.random.default_rng(1)
    X = rng.standard_normal((48, 32)).astype(np.float32)
    W = (rng.standard_normal((24, 32)) * 0.2).astype(np.float32)
    Gy = rng.standard_normal((48, 24)).astype(np.float32)
    x, w = tensor(X, requires_grad=True), tensor(W, requires_grad=True)
    y = F.quantized_linear(x, w, recipe=name, seed=5)
    y.backward(tensor(Gy))
    rec = GEMM_RECIPES[name]
    qx, qw = _q(X, rec.fprop[0], 5, 0), _q(W, rec.fprop[1], 5, 1)
    assert np.array_equal(_bits(y.data), _bits(recipes.matmul(qx, qw)))
    qg = _q(Gy, rec.dgrad[0], 5, 2)
    if rec.per_tensor:
        qwt = replace(qw, codes=qw.codes.T.copy())
        qgt, qxt = replace(qg, codes=qg.codes.T.copy()), replace(qx, codes=qx.codes.T.copy())
    else:
        qwt = _q(W.T, rec.dgrad[1], 5, 3)
        pad = (0, (-48) % 16) if rec.wgrad[0].hadamard else (0, 0)
        qgt = _q(np.pad(Gy.T, ((0, 0), pad)), rec.wgrad[0], 5, 4)
        qxt = _q(np.pad(X.T, ((0, 0), pad)), rec.wgrad[1], 5, 5)
    assert np.array_equal(_bits(x.grad.data), _bits(recipes.matmul(qg, qwt)))
    assert np.array_equal(_bits(w.grad.data), _bits(recipes.matmul(qgt, qxt)))


@pytest.mark.clause("TRN-QNT-003")
def test_gradients_are_straight_through_with_no_gradient_through_the_scales() -> None:
    """dx = deq(g) @ deq(W) exactly (Fraction oracle): no term from d(scale)/dx."""
    rng = np.random.default_rng(2)
    X = rng.standard_normal((4, 8)).astype(np.float32)
    W = rng.standard_normal((3, 8)).astype(np.float32)
    x, w = tensor(X, requires_grad=True), tensor(W, requires_grad=True)
    F.quantized_linear(x, w, recipe="fp8-current").sum().backward()
    g = recipes.quantize(np.ones((4, 3), np.float32), "fp8_current", fp8_format="e5m2")
    qw = recipes.quantize(W, "fp8_current")
    eg = g.codes.view(ml_dtypes.float8_e5m2).astype(np.float64)
    ew = qw.codes.view(ml_dtypes.float8_e4m3fn).astype(np.float64)
    sg, sw = Fr(float(g.scales)), Fr(float(qw.scales))
    sprod = Fr(float(np.float32(g.scales) * np.float32(qw.scales)))
    for i in range(4):
        for j in range(8):
            exact = sum((Fr(float(eg[i, k])) * Fr(float(ew[k, j])) for k in range(3)), Fr(0))
            want = np.float32(np.float32(float(exact)) * np.float32(float(sprod)))
            assert _bits(x.grad.data[i, j]) == _bits(want), (i, j, sg, sw)


@pytest.mark.clause("TRN-QNT-002")
def test_delayed_scaling_keeps_one_amax_history_per_tensor_across_calls() -> None:
    """Inputs: two fp8-delayed calls sharing a QuantState, one with a fresh state.
    Expected: histories for x and w, x's scale 448/amax after the first call, and a
    different result from the fresh state. Pass: all."""
    rng = np.random.default_rng(3)
    x = tensor(rng.standard_normal((16, 16)).astype(np.float32) * 100)
    w = tensor(rng.standard_normal((8, 16)).astype(np.float32))
    st = F.QuantState()
    F.quantized_linear(x, w, recipe="fp8-delayed", state=st)
    assert set(st.delayed) == {"x", "w"}
    assert st.delayed["x"].scale == np.float32(448) / np.float32(np.abs(x.data).max())
    y1 = F.quantized_linear(x, w, recipe="fp8-delayed", state=st)
    y0 = F.quantized_linear(x, w, recipe="fp8-delayed")  # fresh state: scale 1
    assert not np.array_equal(y1.data, y0.data)


@pytest.mark.clause("TRN-QNT-002", "TRN-QNT-004")
def test_a_quant_state_collects_operand_statistics_only_when_asked() -> None:
    """Inputs: one mxfp8 call with a default QuantState and one with collect=True (the
    training run's per-layer switch). Expected: the default state keeps no statistics
    (collecting costs a pass over each operand), the collecting one has amax and
    underflow for x and w, x's amax equal to max |x|. Pass: all."""
    rng = np.random.default_rng(4)
    x = tensor(rng.standard_normal((16, 32)).astype(np.float32))
    w = tensor(rng.standard_normal((8, 32)).astype(np.float32))
    quiet, loud = F.QuantState(), F.QuantState(collect=True)
    F.quantized_linear(x, w, recipe="mxfp8", state=quiet)
    F.quantized_linear(x, w, recipe="mxfp8", state=loud)
    assert quiet.stats == {} and set(loud.stats) == {"x", "w"}
    assert loud.stats["x"]["amax"] == float(np.abs(x.data).max())


@pytest.mark.clause("TRN-QNT-006", "TRN-RES-001")
@pytest.mark.parametrize("mode", [m for m in MODES if MODES[m].recipe])
def test_recipe_modes_resume_bit_for_bit_and_repeat_run_to_run(tmp_path: Path,
                                                               mode: str) -> None:
    """Inputs: each recipe training mode run whole and stopped at 4 then resumed. Expected:
    identical final weights and quantization series; a what-if table. Pass: all."""
    cfg = replace(SMALL, precision=mode)
    train(cfg, tmp_path / "a", progress=False, report=False)
    train(cfg, tmp_path / "b", progress=False, report=False, stop_after=4)
    train(cfg, tmp_path / "b", resume=True, progress=False, report=False)
    fa, fb = (np.load(tmp_path / k / "final.npz") for k in ("a", "b"))
    assert all(np.array_equal(_bits(fa[k]), _bits(fb[k])) for k in fa.files)
    ma = json.loads((tmp_path / "a" / "metrics.json").read_text())
    mb = json.loads((tmp_path / "b" / "metrics.json").read_text())
    assert ma["quant_series"] == mb["quant_series"] and ma["what_if"]


@pytest.mark.clause("TRN-QNT-006")
def test_recipe_profile_is_checked() -> None:
    """Inputs: recipe_profile 'jax'; torchao with fp8-delayed. Expected: TrainError naming
    each. Pass: both."""
    with pytest.raises(TrainError, match="unknown --recipe-profile 'jax'"):
        TrainConfig(precision="nvfp4", recipe_profile="jax")
    with pytest.raises(TrainError, match="torchao has no fp8-delayed"):
        TrainConfig(precision="fp8-delayed", recipe_profile="torchao")


@pytest.mark.clause("TRN-QNT-004")
def test_operand_statistics_count_underflow_clipping_and_relative_mse() -> None:
    """Inputs: an MX block with tiny values; FP8 current and MX blocks at and beyond the
    saturation point. Expected: underflow 29/32 of the block, the relative MSE from
    ml_dtypes-decoded values, 0 % saturation at 448 and at 384, 1/32 for 3.9 * 2^7 > 464.
    Pass: each."""
    x = np.full((1, 32), 1e-9, np.float32)
    x[0, 0], x[0, 1], x[0, 2] = 448.0 * 2**-8 * 1.0, 0.0, 3.0  # block max 3 -> scale 2^-6
    q = recipes.quantize(x, "mxfp8_e4m3", profile="ocp")  # floor: 3 -> 2^(1-8) scale
    st = F.operand_stats(x, q)
    e = q.codes.view(ml_dtypes.float8_e4m3fn).astype(np.float64) * float(q.scales[0, 0])
    assert st["underflow_pct"] == 100 * np.count_nonzero((x != 0) & (e == 0)) / 32 == 100 * 29 / 32
    assert st["rel_mse"] == pytest.approx(np.sum((e - x) ** 2) / np.sum(x.astype(np.float64) ** 2),
                                          rel=1e-12)
    assert st["saturation_pct"] == 0.0 and st["amax"] == 3.0
    pair = np.array([[500.0, 1.0]], np.float32)
    big = recipes.quantize(pair, "fp8_current")  # scale 448/500 maps the amax to the max
    assert F.operand_stats(pair, big)["saturation_pct"] == 0.0
    hard = np.array([[3.0] + [1.0] * 31], np.float32)
    qh = recipes.quantize(hard, "mxfp8_e4m3", profile="ocp")  # floor: 3 -> scaled 3*2^7 = 384
    assert F.operand_stats(hard, qh)["saturation_pct"] == 0.0
    over = np.array([[3.9] + [1.0] * 31], np.float32)  # floor: 3.9 * 2^7 = 499.2 > 464: clipped
    qo = recipes.quantize(over, "mxfp8_e4m3", profile="ocp")
    assert F.operand_stats(over, qo)["saturation_pct"] == 100 / 32


@pytest.mark.clause("TRN-QNT-005", "TRN-RPT-001")
def test_what_if_quantizes_each_tensor_under_every_other_recipe_and_profile(
        tmp_path: Path) -> None:
    """Inputs: one layer's x and g through what_if; a 3-step mxfp8 run with the report.
    Expected: every implemented (mode, profile) pair for both roles, a row's MSE equal to
    operand_stats on that quantization; the report links the quantization plot and the
    what-if table. Pass: all."""
    from ampref.training.quantreport import what_if
    rng = np.random.default_rng(4)
    ops = {"l": {"x": rng.standard_normal((32, 256)).astype(np.float32),
                 "g": rng.standard_normal((32, 256)).astype(np.float32) * 1e-4}}
    rows = what_if(ops)
    combos = {(r["mode"], r["profile"]) for r in rows}
    assert ("fp8-delayed", "te") not in combos and ("nvfp4", "torchao") in combos
    assert len(rows) == 2 * len(combos)
    r = next(r for r in rows if r["mode"] == "mxfp8" and r["profile"] == "torchao"
             and r["role"] == "x")
    q = recipes.quantize(ops["l"]["x"], "mxfp8_e4m3", profile="torchao", tile=(1, 32))
    assert r["rel_mse"] == F.operand_stats(ops["l"]["x"], q)["rel_mse"]
    cfg = replace(SMALL, precision="mxfp8", steps=3)
    train(cfg, tmp_path, progress=False, report=True)
    md = (tmp_path / "report.md").read_text()
    assert "![quantization per layer](quantization.png)" in md and "What-if at step 2" in md
    assert (tmp_path / "quantization.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.clause("TRN-QNT-006")
def test_the_torchao_profile_trains_with_torchaos_arithmetic(tmp_path: Path) -> None:
    """Inputs: 2-step fp8-block runs under te and torchao. Expected: torchao recorded in
    the config and a different first scale range (non-power-of-two scales). Pass: both."""
    cfg = replace(SMALL, precision="fp8-block", steps=2)
    train(cfg, tmp_path / "te", progress=False, report=False)
    train(replace(cfg, recipe_profile="torchao"), tmp_path / "ao", progress=False, report=False)
    te, ao = (json.loads((tmp_path / k / "metrics.json").read_text()) for k in ("te", "ao"))
    assert ao["config"]["recipe_profile"] == "torchao"
    # torchao's FP8 block scales are not powers of two: the scale range differs at step 0
    key = "block0.attn.qkv/x"
    assert te["quant_series"][key][0] != ao["quant_series"][key][0]
