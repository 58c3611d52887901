"""The loss-scale state machine: hand-checked framework sequences, invariants under
random overflow sequences (hypothesis stateful), the object API and its misuse errors."""

from __future__ import annotations

import copy
import dataclasses
import json
import pickle
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule, run_state_machine_as_test

import ampref
from ampref.scaling.scaler import LossScaler, StaticLossScaler
from ampref.scaling.machine import LossScaleWarning, ScaleFloorError, ScalerConfig, transition
from ampref.scaling.profiles import PROFILES


def run(profile: str, flags: str, **kw: object) -> list[tuple[float, str]]:
    """Drive a profile with a string of flags ('x' overflow, '.' clean)."""
    s = LossScaler.from_profile(profile, **kw)
    out = []
    for f in flags:
        try:
            s.update(found_inf=f == "x")
        except ScaleFloorError:
            out.append((s.scale, "raise"))
            break
        out.append((s.scale, s.events[-1].action))
    return out


# Hand-checked tables, transcribed from each framework's source (see specs/scaling.md)
@pytest.mark.clause("SCL-PRF-001", "SCL-GRW-001")
def test_torch_trace_from_its_documentation() -> None:
    """Inputs: torch profile from 4, interval 2, flags ``..x...``. Expected: scales 4, 8,
    4, 4, 8, 8 (GradScaler("cpu") trace in frameworks-amp-semantics.md). Pass: equal."""
    # GradScaler("cpu"), init 4, interval 2: ok->4, ok->8, inf->4, ok->4, ok->8, ok->8
    assert [s for s, _ in run("torch", "..x...", init_scale=4.0, growth_interval=2)] == \
        [4, 8, 4, 4, 8, 8]


@pytest.mark.clause("SCL-PRF-002", "SCL-GRW-002", "SCL-FLR-002")
def test_tf_keras_grows_at_counter_plus_one_at_least_interval_and_floors_at_one() -> None:
    """Inputs: tf-keras from 4, interval 2, flags ``..x..xxxx``; then a tracker of 5 and
    one clean step. Expected: 4, 8, 4, 4, 8, 4, 2, 1, 1 (floor 1), and growth to 8 from the
    over-threshold tracker (>=). Pass: both."""
    assert [s for s, _ in run("tf-keras", "..x..xxxx", init_scale=4.0, growth_interval=2)] == \
        [4, 8, 4, 4, 8, 4, 2, 1, 1]
    # an over-threshold counter still grows (>=), unlike torch's ==
    s = LossScaler.from_profile("tf-keras", init_scale=4.0, growth_interval=2)
    s.state = dataclasses.replace(s.state, growth_tracker=5)
    s.update(False)
    assert s.scale == 8.0


@pytest.mark.clause("SCL-PRF-003", "SCL-FLR-001")
def test_keras3_trace_from_its_documentation_and_no_floor() -> None:
    """Inputs: keras3 from 8, interval 2, flags ``..x..xxx``; from 1, three overflows.
    Expected: 8, 16, 8, 8, 16, 8, 4, 2, and 0.125 (no floor). Pass: both."""
    assert [s for s, _ in run("keras3", "..x..xxx", init_scale=8.0, growth_interval=2)] == \
        [8, 16, 8, 8, 16, 8, 4, 2]
    assert run("keras3", "xxx", init_scale=1.0)[-1][0] == 0.125


@pytest.mark.clause("SCL-PRF-004", "SCL-FLR-002")
def test_jmp_trace_from_its_documentation() -> None:
    """Inputs: jmp from 8, interval 2, ``..x...xx``; from 2 with min_scale 0.25, four
    overflows. Expected: 8, 16, 8, 8, 16, 16, 8, 4; and (0.25, "clamp") last. Pass: both."""
    assert [s for s, _ in run("jmp", "..x...xx", init_scale=8.0, growth_interval=2)] == \
        [8, 16, 8, 8, 16, 16, 8, 4]
    assert run("jmp", "xxxx", init_scale=2.0, min_scale=0.25)[-1] == (0.25, "clamp")


@pytest.mark.clause("SCL-PRF-005", "SCL-GRW-004")
def test_apex_caps_growth_at_max_scale_and_has_no_floor_by_default() -> None:
    """Inputs: apex from 2^23, interval 1, four clean steps; from 1, three overflows; from
    1 with min 0.5, two overflows. Expected: 2^24 four times (cap), 0.125 (no floor), (0.5,
    "clamp"). Pass: all three."""
    out = run("apex", "....", init_scale=2.0**23, growth_interval=1)
    assert [s for s, _ in out] == [2.0**24] * 4
    assert run("apex", "x" * 3, init_scale=1.0)[-1][0] == 0.125
    assert run("apex", "xx", init_scale=1.0, min_scale=0.5)[-1] == (0.5, "clamp")


@pytest.mark.clause("SCL-PRF-006", "SCL-HYS-001", "SCL-HYS-002", "SCL-GRW-003", "SCL-FLR-003")
def test_deepspeed_default_hysteresis_refills_only_at_growth() -> None:
    """Inputs: deepspeed from 16, window 3, min 0.25, flags ``xxx.x....x``. Expected: 16,
    8, 4, 4, 2, 2, 2, 2, 4, 4 (the reference's trace), first and last steps skipped. Pass:
    equal."""
    # window 3, hysteresis 2, from 16:
    # OF 16 h1, OF 8, OF 4, ok 4, OF 2, ok, ok, ok, ok->4 h2, OF 4 h1
    out = run("deepspeed", "xxx.x....x", init_scale=16.0, growth_interval=3, min_scale=0.25)
    assert [s for s, _ in out] == [16, 8, 4, 4, 2, 2, 2, 2, 4, 4]
    assert out[0][1] == "skip" and out[-1][1] == "skip"


@pytest.mark.clause("SCL-PRF-007", "SCL-HYS-002")
def test_deepspeed_consecutive_hysteresis_refills_on_any_clean_step() -> None:
    """Inputs: deepspeed-consecutive from 16, window 3, min 0.25, flags ``xxx.x.x``.
    Expected: 16, 8, 4, 4, 4, 4, 4 (every clean step refills). Pass: equal."""
    out = run("deepspeed-consecutive", "xxx.x.x", init_scale=16.0, growth_interval=3,
              min_scale=0.25)
    assert [s for s, _ in out] == [16, 8, 4, 4, 4, 4, 4]


@pytest.mark.clause("SCL-FLR-003")
def test_deepspeed_raises_when_asked_to_back_off_at_the_minimum() -> None:
    """Inputs: deepspeed from 4 with five overflows; from 1, two overflows. Expected: the
    run ends (1.0, "raise"); the second overflow at 1 raises ScaleFloorError naming the
    minimum and logs "raise". Pass: both."""
    out = run("deepspeed", "xxxxx", init_scale=4.0)
    assert out[-1] == (1.0, "raise")
    s = LossScaler.from_profile("deepspeed", init_scale=1.0)
    s.update(True)
    with pytest.raises(ScaleFloorError, match="already at its minimum 1.0"):
        s.update(True)
    assert s.events[-1].action == "raise"


@pytest.mark.clause("SCL-FLR-003", "SCL-AUD-001")
def test_the_raise_event_carries_the_unchanged_state_counters() -> None:
    """Inputs: deepspeed from 1.0 (its minimum), hysteresis 1 (so the first overflow backs
    off): three clean steps, then an overflow.
    Expected: ScaleFloorError; the state keeps growth tracker 3 and scale 1.0, and the
    "raise" event logs exactly those (DeepSpeed raises before it resets anything), not a
    reset tracker, at the step that overflowed: the fourth, after the clean steps' 1, 2, 3.
    Pass: the event's scale and both counters equal the state's; event steps 1, 2, 3, 4."""
    s = LossScaler.from_profile("deepspeed", init_scale=1.0, hysteresis=1)
    for _ in range(3):
        s.update(False)
    before = s.state
    with pytest.raises(ScaleFloorError, match="step 4 overflowed again"):
        s.update(True)
    ev = s.events[-1]
    assert [e.step for e in s.events] == [1, 2, 3, 4]
    assert s.state == before and before.growth_tracker == 3
    assert (ev.action, ev.scale_after, ev.growth_tracker, ev.hysteresis_tracker) == (
        "raise", before.scale, before.growth_tracker, before.hysteresis_tracker)


@pytest.mark.clause("SCL-PRF-008", "SCL-HYS-001", "SCL-FLR-002")
def test_megatron_absorbs_hysteresis_minus_one_overflows_and_clamps_quietly() -> None:
    """Inputs: megatron from 4, interval 2, flags ``xxxx..xx``. Expected: scales 4, 2, 1,
    1, 1, 2, 2, 1 and actions skip, backoff, backoff, clamp, hold, grow, skip, backoff.
    Pass: both equal."""
    out = run("megatron", "xxxx..xx", init_scale=4.0, growth_interval=2)
    assert [s for s, _ in out] == [4, 2, 1, 1, 1, 2, 2, 1]
    assert [a for _, a in out] == ["skip", "backoff", "backoff", "clamp", "hold", "grow", "skip",
                                   "backoff"]


@pytest.mark.clause("SCL-ARI-001")
def test_scale_arithmetic_rounds_as_each_framework_does() -> None:
    """Inputs: torch from fp32(1.1) with factor 1.3; jmp from 10 with factor 3 backing off.
    Expected: torch's fp32(f64(s) * f); jmp's fp32 10 / 3 (not 10 * fp32(1/3)). Pass: equal
    to the first, unequal to the second."""
    # torch: float32(float64(s) * f); an fp32 multiply differs for this pair
    s, f = np.float32(1.1), 1.3
    torch_way = float(np.float32(np.float64(s) * np.float64(f)))
    assert run("torch", ".", init_scale=float(s), growth_factor=f,
               growth_interval=1)[0][0] == torch_way
    # jmp backs off by dividing by the growth factor, not multiplying by its inverse
    out = run("jmp", "x", init_scale=10.0, growth_factor=3.0, min_scale=1e-9)
    assert out[0][0] == float(np.float32(10.0) / np.float32(3.0))
    assert out[0][0] != float(np.float32(10.0) * np.float32(1 / 3.0))


@pytest.mark.clause("SCL-GRW-005")
def test_growth_that_would_overflow_float32_is_refused_where_the_framework_refuses_it() -> None:
    """Inputs: torch and keras3 from 2^127, interval 1, clean steps. Expected: torch holds
    2^127 (refused), keras3 grows to inf. Pass: both."""
    assert run("torch", "..", init_scale=2.0**127, growth_interval=1) == [(2.0**127, "hold")] * 2
    assert run("keras3", ".", init_scale=2.0**127, growth_interval=1) == [(float("inf"), "grow")]


# ----------------------------------------------------------------- invariants
class ScalerMachine(RuleBasedStateMachine):
    """Random overflow sequences through every profile (SCL-INV-001)."""

    def __init__(self) -> None:
        super().__init__()
        self.scalers = {n: LossScaler.from_profile(n, **({"init_scale": 4.0})) for n in PROFILES}
        self.raised: set[str] = set()
        self.last_applied: dict[str, bool] = {}
        self.last_flag = False

    @rule(found_inf=st.booleans())
    def step(self, found_inf: bool) -> None:
        self.last_flag = found_inf
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", LossScaleWarning)
            for name, s in self.scalers.items():
                if name in self.raised:
                    continue
                try:
                    self.last_applied[name] = s.update(found_inf=found_inf)
                except ScaleFloorError:
                    self.raised.add(name)

    @invariant()
    def step_is_skipped_iff_it_overflowed(self) -> None:
        for name, applied in self.last_applied.items():
            if name not in self.raised:
                assert applied == (not self.last_flag), name

    @invariant()
    def scale_and_counters_stay_in_range(self) -> None:
        for name, s in self.scalers.items():
            cfg, st_ = s.config, s.state
            assert s.scale >= 0, name
            if cfg.min_scale is not None and cfg.floor != "none":
                assert s.scale >= cfg.min_scale, name
            if cfg.refuse_inf_growth:
                assert np.isfinite(s.scale), name
            if cfg.max_scale is not None:
                assert s.scale <= cfg.max_scale, name
            assert 0 <= st_.growth_tracker <= cfg.growth_interval, name
            assert st_.hysteresis_tracker <= cfg.hysteresis, name
            if cfg.arith != "f64":
                assert float(np.float32(s.scale)) == s.scale, name  # stored as float32


@pytest.mark.clause("SCL-INV-001", "SCL-UPD-001")
def test_invariants_hold_for_every_profile_on_random_overflow_sequences() -> None:
    """Inputs: hypothesis-drawn overflow sequences through every profile from 4. Expected:
    a step is skipped iff it overflowed; scale >= 0, within floor and cap, finite where inf
    growth is refused, float32 where stored so; trackers in range. Pass: no counterexample."""
    run_state_machine_as_test(ScalerMachine)


# ----------------------------------------------------------------- object API
@pytest.mark.clause("SCL-UNS-001")
def test_unscale_uses_torchs_fp32_reciprocal_and_checks_the_scaled_values() -> None:
    """Inputs: torch scaler at 3, grads [3, 6, 1e-45] and None; then an inf gradient.
    Expected: g * fp32(1/f64(3)) bitwise, None kept, found False; then found True and the
    update backs off to 1.5. Pass: all."""
    s = LossScaler.from_profile("torch", init_scale=3.0)
    g = np.array([3.0, 6.0, 1e-45], np.float32)
    out, found = s.unscale([g, None])
    inv = np.float32(1 / np.float64(np.float32(3.0)))
    assert out[1] is None and not found
    assert out[0].tobytes() == (g * inv).tobytes()
    s.update()
    out, found = s.unscale({"w": np.array([np.inf, 1.0], np.float32)})
    assert found and np.isinf(out["w"][0])
    assert s.update() is False and s.scale == 1.5


@pytest.mark.clause("SCL-OBJ-002")
def test_misuse_is_refused_as_torch_does() -> None:
    """Inputs: update before unscale, unscale twice for one optimizer, fp16 gradients, an
    integer loss. Expected: torch's RuntimeError/ValueError messages and a TypeError for
    the loss. Pass: each raised with its message."""
    s = LossScaler.from_profile("torch")
    with pytest.raises(RuntimeError, match="No inf checks were recorded prior to update"):
        s.update()
    s.unscale([np.ones(2, np.float32)])
    with pytest.raises(RuntimeError,
                       match="unscale\\(\\) has already been called for optimizer 'default'"):
        s.unscale([np.ones(2, np.float32)])
    with pytest.raises(ValueError, match="Attempting to unscale FP16 gradients"):
        s.unscale([np.ones(2, np.float16)], optimizer="other")
    with pytest.raises(TypeError, match="floating loss"):
        s.scale_loss(np.arange(3))


@pytest.mark.clause("SCL-OBJ-003")
def test_several_optimizers_and_accumulated_micro_batches_back_off_once() -> None:
    """Inputs: torch scaler at 64, an inf gradient for optimizer enc and a NaN one for dec.
    Expected: update returns False, scale 32, one event. Pass: all three."""
    s = LossScaler.from_profile("torch", init_scale=64.0)
    s.unscale([np.array([np.inf], np.float32)], optimizer="enc")
    s.unscale([np.array([np.nan], np.float32)], optimizer="dec")
    assert s.update() is False and s.scale == 32.0 and len(s.events) == 1


@pytest.mark.clause("SCL-OBJ-001")
def test_scale_loss_follows_torch_promotion() -> None:
    """Inputs: scale 2^16; an fp16 scalar loss 2, an fp16 array of ones. Expected: fp32
    2^17 for the scalar (0-dim promotes), fp16 inf for the array (as torch). Pass: dtypes
    and values."""
    s = LossScaler.from_profile("torch", init_scale=2.0**16)
    assert s.scale_loss(np.float16(2.0)).dtype == np.float32
    assert s.scale_loss(np.float16(2.0)) == 2.0**17
    big = s.scale_loss(np.ones(3, np.float16))
    assert big.dtype == np.float16 and np.isinf(big).all()  # as torch: [inf, inf, inf]


@pytest.mark.clause("SCL-OBJ-001")
def test_a_float64_loss_is_scaled_in_float64() -> None:
    """Inputs: scale 2^16; float64 losses 1 + 2^-40 (not a float32) as a scalar and an
    array. Expected: float64 2^16 + 2^-24 exactly (torch: a float64 tensor times the
    0-dim float32 scale stays float64; a float32 product would lose the 2^-24). Pass:
    dtype and bit pattern."""
    s = LossScaler.from_profile("torch", init_scale=2.0**16)
    want = np.float64(2.0**16 + 2.0**-24)
    for loss in (np.float64(1 + 2.0**-40), np.full(2, 1 + 2.0**-40)):
        got = np.asarray(s.scale_loss(loss))
        assert got.dtype == np.float64
        assert (got.view(np.uint64) == want.view(np.uint64)).all(), \
            f"{got.view(np.uint64)} != {want.view(np.uint64):#x}"


@pytest.mark.clause("SCL-STA-002", "SCL-STA-003")
@pytest.mark.parametrize("name", list(PROFILES))
def test_every_field_survives_state_dict_copy_and_pickle_round_trips(name: str) -> None:
    """Inputs: each profile with every allowed override, six updates ``.x..x.``. Expected:
    state_dict(full) through JSON, deepcopy and pickle restore config and state exactly
    (step 6, last overflow 5); loading into another profile raises. Pass: all."""
    overrides = {k: v for k, v in dict(init_scale=1024.0, growth_interval=7, min_scale=0.125,
                                       hysteresis=3, max_scale=2.0**30, growth_factor=3.0,
                                       backoff_factor=0.25).items()
                 if k not in PROFILES[name].fixed}
    if name == "jmp":
        overrides.pop("backoff_factor", None)
    s = LossScaler.from_profile(name, **overrides)
    for f in ".x..x.":
        s.update(f == "x")
    sd = json.loads(json.dumps(s.state_dict(full=True)))
    t = LossScaler.from_profile(name)
    t.load_state_dict(sd)
    assert t.config == s.config and t.state == s.state
    assert s.state.step == 6 and s.state.last_overflow == 5
    for clone in (copy.deepcopy(s), pickle.loads(pickle.dumps(s))):
        assert clone.config == s.config and clone.state == s.state
    with pytest.raises(ValueError, match="loaded into a"):
        LossScaler.from_profile("apex" if name != "apex" else "jmp").load_state_dict(sd)


@pytest.mark.clause("SCL-STA-001")
def test_torch_state_dict_has_exactly_gradscalers_five_keys() -> None:
    """Inputs: torch scaler's state_dict; an empty and a partial dict to load. Expected:
    exactly GradScaler's five keys; both loads refused with ValueError. Pass: all."""
    s = LossScaler.from_profile("torch")
    assert set(s.state_dict()) == {"scale", "growth_factor", "backoff_factor", "growth_interval",
                                   "_growth_tracker"}
    with pytest.raises(ValueError, match="empty"):
        s.load_state_dict({})
    with pytest.raises(ValueError, match="has keys"):
        s.load_state_dict({"scale": 1.0})


@pytest.mark.clause("SCL-PRF-000")
def test_profiles_and_parameters_are_validated_with_the_allowed_values() -> None:
    """Inputs: an unknown profile, overrides the framework fixes, an unknown override,
    factors and interval out of range, floor='raise' without min. Expected: ValueError
    naming the value and the allowed choices or range. Pass: each message matches."""
    with pytest.raises(ValueError,
                       match="unknown loss-scale profile 'fairseq'; choose one of torch"):
        LossScaler.from_profile("fairseq")
    with pytest.raises(ValueError,
                       match="profile 'apex' fixes the factors.*cannot override growth_factor"):
        LossScaler.from_profile("apex", growth_factor=3.0)
    with pytest.raises(ValueError, match="profile 'torch' has no hysteresis"):
        LossScaler.from_profile("torch", hysteresis=2)
    with pytest.raises(ValueError, match="unknown override 'scale_window'"):
        LossScaler.from_profile("deepspeed", scale_window=5)
    with pytest.raises(ValueError,
                       match=r"growth_factor must satisfy 1.0 < growth_factor.*got 1.0"):
        LossScaler(growth_factor=1.0)
    with pytest.raises(ValueError,
                       match=r"backoff_factor must satisfy 0.0 < backoff_factor < 1.0.*got 1.5"):
        LossScaler(backoff_factor=1.5)
    for edge in (1.0, 0.0):  # both bounds open: a factor of 1 never backs off
        with pytest.raises(ValueError, match=f"backoff_factor.*got {edge}"):
            LossScaler(backoff_factor=edge)
    assert LossScaler(backoff_factor=0.999).config.backoff_factor == 0.999
    with pytest.raises(ValueError, match="growth_interval must be a positive int.*got 0"):
        LossScaler.from_profile("torch", growth_interval=0)
    with pytest.raises(ValueError, match="floor='raise' needs a min_scale"):
        ScalerConfig(floor="raise")


@pytest.mark.clause("SCL-AUD-001", "SCL-AUD-002", "SCL-UPD-002")
def test_audit_log_exports_atomically_and_reports_skipped_steps(tmp_path: Path) -> None:
    """Inputs: torch from 8, interval 2, ``..xx.x..``; CSV and JSON export; an export that
    fails midway; a .txt path. Expected: the action list, skipped steps 3, 4, 6 and their
    report line, both files written, the previous JSON intact after the failure with no
    temp file left, ValueError for .txt. Pass: all."""
    s = LossScaler.from_profile("torch", init_scale=8.0, growth_interval=2)
    for f in "..xx.x..":
        s.update(f == "x")
    log = s.audit_log()
    assert [e["action"] for e in log] == ["hold", "grow", "backoff", "backoff", "hold", "backoff",
                                          "hold", "grow"]
    assert s.skipped_steps() == [3, 4, 6]
    assert "3 skipped (steps 3-4, 6)" in s.report()
    s.export_audit(tmp_path / "audit.csv")
    s.export_audit(tmp_path / "audit.json")
    assert (tmp_path / "audit.csv").read_text().splitlines()[0].startswith("step,found_inf")
    assert json.loads((tmp_path / "audit.json").read_text())["events"][2]["scale_after"] == 8.0
    before = (tmp_path / "audit.json").read_text()
    s.events.append(object())  # type: ignore[arg-type]  # makes serialisation fail midway
    with pytest.raises(TypeError):
        s.export_audit(tmp_path / "audit.json")
    assert (tmp_path / "audit.json").read_text() == before  # previous file intact
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".tmp-")]
    with pytest.raises(ValueError, match="'csv' or 'json'"):
        s.export_audit(tmp_path / "audit.txt")


@pytest.mark.clause("SCL-AUD-003")
def test_warnings_name_a_collapsing_scale_and_a_run_of_overflows() -> None:
    """Inputs: torch from 1, thirty overflows. Expected: LossScaleWarnings saying the scale
    collapsed and naming the run of consecutive overflows. Pass: both phrases present."""
    s = LossScaler.from_profile("torch", init_scale=1.0)
    with pytest.warns(LossScaleWarning) as rec:
        for _ in range(30):
            s.update(True)
    msgs = " ".join(str(w.message) for w in rec)
    assert "collapsed to" in msgs and "consecutive overflowing steps" in msgs


@pytest.mark.clause("SCL-AUD-003")
def test_the_default_warnings_fire_just_past_their_thresholds() -> None:
    """Inputs: torch scalers from 2^-20 with overflows only: four backoffs reach exactly
    2^-24, a fifth 2^-25; runs of 19 and 20 overflows from 2^20. Expected: no collapse
    warning at 2^-24 (the default threshold, compared strictly), one at 2^-25; no run
    warning after 19 consecutive overflows, one after 20. Pass: as stated."""
    def messages(init: float, overflows: int) -> str:
        s = LossScaler.from_profile("torch", init_scale=init)
        with warnings.catch_warnings(record=True) as rec:
            warnings.simplefilter("always")
            for _ in range(overflows):
                s.update(True)
        return " ".join(str(w.message) for w in rec)

    assert "collapsed" not in messages(2.0**-20, 4)
    assert "collapsed to 2.98023e-08" in messages(2.0**-20, 5)
    assert "consecutive" not in messages(2.0**20, 19)
    assert "20 consecutive overflowing steps" in messages(2.0**20, 20)


@pytest.mark.clause("SCL-OBJ-004")
def test_static_scaler_never_moves_but_skips_overflowing_steps() -> None:
    """Inputs: StaticLossScaler(128): one overflow, one clean step; StaticLossScaler(0).
    Expected: False then True, scale 128, actions skip and hold; ValueError for 0. Pass:
    all."""
    s = StaticLossScaler(128.0)
    assert s.update(found_inf=True) is False and s.update(found_inf=False) is True
    assert s.scale == 128.0 and [e.action for e in s.events] == ["skip", "hold"]
    with pytest.raises(ValueError, match="scale must satisfy"):
        StaticLossScaler(0.0)
    # a scale of 1 (no scaling) and below are legal; one float32 cannot hold is not
    assert [StaticLossScaler(v).scale for v in (1.0, 0.5)] == [1.0, 0.5]
    with pytest.raises(ValueError, match="outside float32's range"):
        StaticLossScaler(1e-50)


def test_transition_is_pure() -> None:
    cfg = PROFILES["torch"].config
    st0 = ampref.scaling.initial_state(cfg)
    a = transition(cfg, st0, True)
    b = transition(cfg, st0, True)
    assert a == b and st0.scale == 2.0**16


@pytest.mark.clause("SCL-STA-003")
@pytest.mark.parametrize("field,value,err", [
    ("scale", -1.0, "must be >= 0 and not NaN"),
    ("scale", float("nan"), "must be >= 0 and not NaN"),
    ("scale", float("inf"), "scale inf is unreachable"),
    ("scale", None, "scale must be a number"),
    ("scale", "65536", "scale must be a number"),
    ("scale", 0.1, "not a float32 value"),
    ("growth_tracker", -1, "growth_tracker must be an int >= 0"),
    ("growth_tracker", 2.5, "growth_tracker must be an int"),
    ("step", -3, "step must be an int >= 0"),
    ("last_overflow", 99, "last_overflow must lie in"),
    ("hysteresis_tracker", 5, "exceeds the configured hysteresis"),
])
def test_loading_refuses_unreachable_states_as_construction_does(
        field: str, value: object, err: str) -> None:
    """Inputs: a torch full state dict with one field set to an unreachable or wrongly
    typed value (table). Expected: ValueError/TypeError with the tabled message. Pass:
    raised and matched."""
    s = LossScaler.from_profile("torch")
    sd = s.state_dict(full=True)
    sd["state"][field] = value
    with pytest.raises((ValueError, TypeError), match=err):
        LossScaler.from_profile("torch").load_state_dict(sd)


@pytest.mark.clause("SCL-STA-003")
def test_a_torch_dict_with_bad_values_is_refused_not_truncated() -> None:
    """Inputs: torch's five-key dict with a fractional interval, scale 0, NaN scale,
    negative tracker, a string factor. Expected: scale 0 loads (reachable by backoff);
    every other value raises naming the field. Pass: all."""
    s = LossScaler.from_profile("torch")
    for key, value, err in (("growth_interval", 2.5, "growth_interval must be a positive int"),
                            ("scale", 0.0, None), ("scale", float("nan"), "not NaN"),
                            ("_growth_tracker", -2, "growth_tracker must be an int >= 0"),
                            ("growth_factor", "2", "growth_factor must be a number")):
        sd = s.state_dict()
        sd[key] = value
        if err is None:  # torch's scale can reach 0 by repeated backoff: reachable, loadable
            LossScaler.from_profile("torch").load_state_dict(sd)
            continue
        with pytest.raises((ValueError, TypeError), match=err):
            LossScaler.from_profile("torch").load_state_dict(sd)


@pytest.mark.clause("SCL-STA-003")
def test_a_missing_field_never_falls_back_to_a_default() -> None:
    """Inputs: a deepspeed state dict without config.hysteresis. Expected: ValueError
    naming the missing field. Pass: raised."""
    s = LossScaler.from_profile("deepspeed")
    sd = s.state_dict()
    del sd["config"]["hysteresis"]
    with pytest.raises(ValueError, match=r"missing \['hysteresis'\]"):
        LossScaler.from_profile("deepspeed").load_state_dict(sd)


@pytest.mark.clause("SCL-STA-003", "SCL-PRF-000")
def test_construction_refuses_scales_the_profile_cannot_hold_and_inverted_bounds() -> None:
    """Inputs: init scales that become inf or 0 in float32, min above max, a zero growth
    factor, a profile name as config, a static scale beyond float32; and min equal to max.
    Expected: each refused with its message; min == max (a constant band) accepted. Pass:
    all."""
    with pytest.raises(ValueError, match=r"init_scale 1e\+39 becomes inf when stored as float32"):
        LossScaler.from_profile("torch", init_scale=1e39)
    with pytest.raises(ValueError, match=r"init_scale 1e-50 becomes 0.0"):
        LossScaler.from_profile("torch", init_scale=1e-50)
    with pytest.raises(ValueError, match="min_scale 8.0 exceeds max_scale 4.0"):
        ScalerConfig(min_scale=8.0, max_scale=4.0, floor="clamp")
    assert ScalerConfig(min_scale=4.0, max_scale=4.0, floor="clamp").max_scale == 4.0
    with pytest.raises(ValueError, match="growth_factor must satisfy 1.0 < growth_factor.*got 0.0"):
        LossScaler.from_profile("jmp", growth_factor=0)
    with pytest.raises(TypeError, match=r"use LossScaler.from_profile\('torch'\)"):
        LossScaler("torch")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="static loss scale 1e\\+39 is outside float32's range"):
        StaticLossScaler(1e39)


@pytest.mark.clause("SCL-STA-003")
def test_set_scale_refuses_a_bool_and_non_finite_values_naming_them() -> None:
    """SCL-OBJ-001. Inputs: set_scale(True) (a truthy flag, not a scale), set_scale(nan).
    Expected: TypeError naming bool; ValueError naming nan; the scale unchanged after
    each. Pass: the exceptions, messages and scale."""
    s = LossScaler.from_profile("torch", init_scale=8.0)
    with pytest.raises(TypeError, match="bool"):
        s.set_scale(True)
    with pytest.raises(ValueError, match="nan"):
        s.set_scale(float("nan"))
    assert s.scale == 8.0


@pytest.mark.clause("SCL-STA-003")
def test_set_scale_takes_a_0d_tensor_or_array_as_torchs_update_new_scale_does() -> None:
    """SCL-OBJ-001. Inputs: set_scale of a 0-d torch tensor 1024 (torch's
    ``update(new_scale=tensor)`` form), a 0-d NumPy array 512 and a NumPy float32 256.
    Expected: each is read as its value: scales 1024, 512, 256, held as Python floats.
    Pass: equal, type float."""
    torch = pytest.importorskip("torch")
    s = LossScaler.from_profile("torch", init_scale=8.0)
    cases: list[tuple[Any, float]] = [(torch.tensor(1024.0), 1024.0), (np.array(512.0), 512.0),
                                      (np.float32(256.0), 256.0)]
    for value, want in cases:
        s.set_scale(value)
        assert s.scale == want and type(s.scale) is float


def test_found_inf_must_be_a_bool_not_a_truthy_string() -> None:
    """Inputs: update("no"), update(np.bool_(False)). Expected: TypeError naming the str;
    NumPy's bool accepted (True returned). Pass: both."""
    s = LossScaler.from_profile("torch")
    with pytest.raises(TypeError, match="found_inf must be a bool.*str: 'no'"):
        s.update("no")  # type: ignore[arg-type]
    assert s.update(np.bool_(False)) is True
