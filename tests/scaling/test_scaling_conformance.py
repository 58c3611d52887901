"""Loss-scaler profiles against the real libraries: recorded traces (always) and live
runs (when torch / jmp are installed). Every step compares the float32 bit pattern of
the scale and the growth counter."""

from __future__ import annotations

import importlib.util
import json
from typing import Any

import numpy as np
import pytest

from ampref.scaling.scaler import LossScaler
from paths import DATA as RECORDED
from paths import ROOT

# the recorded traces deliberately drive the scale to 0: the collapse warning is expected
pytestmark = pytest.mark.filterwarnings("ignore::ampref.scaling.LossScaleWarning")

DATA = RECORDED / "scaler_traces.json"
TRACES = json.loads(DATA.read_text())
_spec = importlib.util.spec_from_file_location(
    "record_scaler_traces", ROOT / "scripts" / "record_scaler_traces.py")
recorder = importlib.util.module_from_spec(_spec)  # type: ignore[arg-type]
_spec.loader.exec_module(recorder)  # type: ignore[union-attr]


def ampref_trace(case: dict[str, Any]) -> list[tuple[str, int]]:
    if case["lib"] == "torch":
        s = LossScaler.from_profile("torch", init_scale=case["init_scale"],
                                    growth_factor=case["growth_factor"],
                                    backoff_factor=case["backoff_factor"],
                                    growth_interval=case["growth_interval"])
        if case.get("tracker0"):
            sd = s.state_dict()
            sd["_growth_tracker"] = case["tracker0"]
            s.load_state_dict(sd)
    else:
        s = LossScaler.from_profile("jmp", init_scale=case["init_scale"],
                                    growth_factor=float(case["factor"]),
                                    growth_interval=case["period"], min_scale=case["min_scale"])
    out = []
    for of in case["overflows"]:
        s.update(found_inf=bool(of))
        bits = int(np.array([np.float32(s.scale)]).view(np.uint32)[0])
        out.append((f"{bits:08x}", s.state.growth_tracker))
    return out


def assert_same(ours: list[tuple[str, int]], theirs: list[Any], what: str) -> None:
    for i, (a, b) in enumerate(zip(ours, theirs, strict=True)):
        assert tuple(a) == tuple(b), (f"{what}: step {i + 1}: ampref (scale 0x{a[0]}, "
                                      f"counter {a[1]}) vs library (scale 0x{b[0]}, "
                                      f"counter {b[1]})")
    assert len(ours) == len(theirs)


def test_recorded_traces_cover_the_hard_cases() -> None:
    libs = {c["lib"] for c in TRACES}
    assert libs == {"torch", "jmp"}
    torch_cases = [c for c in TRACES if c["lib"] == "torch"]
    assert any(t[0] == "00000000" for c in torch_cases for t in c["trace"])  # scale reached 0
    assert any(t[0] == "7f000000" for c in torch_cases for t in c["trace"])  # 2^127 ceiling
    assert any(c.get("tracker0") for c in torch_cases)                      # equality trap
    assert any(c["growth_factor"] not in (2.0,) for c in torch_cases)


@pytest.mark.clause("SCL-PRF-001", "SCL-ARI-001", "SCL-GRW-001", "SCL-GRW-005", "SCL-STA-001")
@pytest.mark.parametrize("i", [i for i, c in enumerate(TRACES) if c["lib"] == "torch"])
def test_torch_profile_reproduces_recorded_gradscaler_traces(i: int) -> None:
    """Inputs: each recorded torch GradScaler case (init, factors, interval, overflow
    flags; tests/data/scaler_traces.json). Expected: the recorded (scale bits, tracker)
    after every update. Pass: equal step for step."""
    case = TRACES[i]
    assert_same(ampref_trace(case), case["trace"], f"torch {case['version']} case {i}")


@pytest.mark.clause("SCL-PRF-004", "SCL-GRW-003")
@pytest.mark.parametrize("i", [i for i, c in enumerate(TRACES) if c["lib"] == "jmp"])
def test_jmp_profile_reproduces_recorded_dynamic_loss_scale_traces(i: int) -> None:
    """Inputs: each recorded jmp DynamicLossScale case. Expected: the recorded scale and
    counter after every update. Pass: equal step for step."""
    case = TRACES[i]
    assert_same(ampref_trace(case), case["trace"], f"jmp {case['version']} case {i}")


@pytest.mark.clause("SCL-PRF-001")
def test_torch_profile_matches_a_live_gradscaler_on_random_sequences() -> None:
    """Inputs: five random configurations (odd factors included) and 600 random flags each,
    run through the installed torch's GradScaler. Expected: ampref's trace equals torch's.
    Pass: equal step for step."""
    pytest.importorskip("torch")
    rng = np.random.default_rng(7)
    for _ in range(5):
        case = dict(lib="torch", init_scale=float(rng.choice([2.0**16, 3.0, 0.7])),
                    growth_factor=float(rng.choice([2.0, 1.3, 2.9])),
                    backoff_factor=float(rng.choice([0.5, 0.61, 0.125])),
                    growth_interval=int(rng.integers(1, 8)),
                    overflows=[int(v) for v in rng.random(600) < rng.uniform(0.02, 0.7)])
        live = recorder.torch_trace(**{k: v for k, v in case.items() if k != "lib"})
        assert_same(ampref_trace(case), live, "live torch")


@pytest.mark.clause("SCL-PRF-004")
def test_jmp_profile_matches_live_jmp() -> None:
    """Inputs: 300 random flags through the installed jmp with factor 3, period 3, min
    0.25. Expected: ampref's trace equals jmp's. Pass: equal."""
    pytest.importorskip("jmp")
    rng = np.random.default_rng(8)
    case = dict(lib="jmp", init_scale=3.0, factor=3, period=3, min_scale=0.25,
                overflows=[int(v) for v in rng.random(300) < 0.4])
    live = recorder.jmp_trace(**{k: v for k, v in case.items() if k != "lib"})
    assert_same(ampref_trace(case), live, "live jmp")


@pytest.mark.clause("SCL-STA-001")
def test_torch_state_dict_round_trips_with_a_real_gradscaler() -> None:
    """Inputs: a real GradScaler's state dict loaded into ampref, one update, and ampref's
    dict loaded back into torch. Expected: scale 1024 and factor 1.5 read; torch's dict
    equals ampref's; the same keys. Pass: all."""
    torch = pytest.importorskip("torch")
    real = torch.amp.GradScaler("cpu", init_scale=1024.0, growth_factor=1.5, backoff_factor=0.25,
                                growth_interval=7)
    real.scale(torch.ones(1))
    ours = LossScaler.from_profile("torch")
    ours.load_state_dict(real.state_dict())
    assert ours.scale == 1024.0 and ours.config.growth_factor == 1.5
    ours.update(found_inf=False)
    back = torch.amp.GradScaler("cpu")
    back.load_state_dict(ours.state_dict())
    assert back.state_dict() == ours.state_dict()
    assert set(ours.state_dict()) == set(real.state_dict())
