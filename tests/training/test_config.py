"""TrainConfig refuses every bad field by name before any run starts (TRN-ERR-001)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from ampref.training.config import TrainConfig, TrainError

BASE = TrainConfig(precision="nvfp4", steps=4, batch=4, context=8, width=16, heads=2)


@pytest.mark.clause("TRN-ERR-001")
@pytest.mark.parametrize("changes,error,msg", [
    ({"steps": 0}, TrainError, "--steps must be an integer >= 1, got 0"),
    ({"steps": True}, TypeError, "TrainConfig.steps must be an int, got bool True"),
    ({"steps": np.int64(3)}, TypeError, "TrainConfig.steps must be an int, got int64"),
    ({"hist_every": True}, TypeError, "TrainConfig.hist_every must be an int, got bool"),
    ({"seed": True}, TypeError, "TrainConfig.seed must be an int, got bool"),
    ({"seed": 2**32}, TrainError, "--seed must be an integer in [0, 2**32), got 4294967296"),
    ({"seed": -1}, TrainError, "--seed must be an integer in [0, 2**32), got -1"),
    ({"lr": "0.1"}, TypeError, "TrainConfig.lr must be a float, got str '0.1'"),
    ({"lr": True}, TypeError, "TrainConfig.lr must be a float, got bool True"),
    ({"inject_nonfinite": None}, TypeError, "TrainConfig.inject_nonfinite must be a float"),
    ({"static_scale": "8"}, TypeError, "TrainConfig.static_scale must be a float, got str"),
    ({"init_scale": -1.0}, TrainError, "TrainConfig.init_scale must be a positive float32 value"),
    ({"init_scale": float("nan")}, TrainError, "TrainConfig.init_scale must be a positive"),
    ({"init_scale": float("inf")}, TrainError, "TrainConfig.init_scale must be a positive"),
    ({"init_scale": 0.0}, TrainError, "TrainConfig.init_scale must be a positive"),
    ({"init_scale": 1e39}, TrainError, "(at most 3.4e38), got 1e+39"),
    ({"skip_steps": 2}, TypeError, "TrainConfig.skip_steps must be a tuple of integer steps"),
    ({"skip_steps": ("1",)}, TypeError, "skip_steps must be a tuple of integer steps, got ('1',)"),
    ({"skip_steps": (True,)}, TypeError, "skip_steps must be a tuple of integer steps"),
    ({"skip_steps": (-1,)}, TrainError, "skip_steps must lie in [0, --steps 4), got [-1]"),
    ({"skip_steps": (1, 4)}, TrainError, "skip_steps must lie in [0, --steps 4), got [4]"),
    ({"data": 5}, TypeError, "TrainConfig.data must be a path as str or None, got int 5"),
])
def test_a_bad_field_is_refused_by_name(changes: dict[str, object], error: type[Exception],
                                        msg: str) -> None:
    """Inputs: a small nvfp4 configuration (4 steps) with one field wrong: zero steps, a
    bool, a NumPy integer or a string where Python's int or float belongs, a seed outside
    [0, 2^32) (nvfp4 derives 64-bit stochastic-rounding seeds from it, TRN-QNT-003), an
    initial loss scale that is not a positive finite float32, skipped steps of the wrong
    type or outside the run, a data path that is not a str. Expected: the listed error
    type with the listed message, raised on construction. Pass: each."""
    with pytest.raises(error) as e:
        replace(BASE, **changes)  # type: ignore[arg-type]
    assert msg in str(e.value)


@pytest.mark.clause("TRN-ERR-001")
def test_the_edges_of_each_range_are_accepted() -> None:
    """Inputs: the base configuration at the last value of each range: seed 2^32 - 1,
    init scale float32's max, an int init scale, skipped steps 0 and steps - 1, one step.
    Expected: each constructs. Pass: no error."""
    f32_max = float(np.finfo(np.float32).max)
    for changes in ({"seed": 2**32 - 1}, {"init_scale": f32_max}, {"init_scale": 8},
                    {"skip_steps": (0, 3)}, {"steps": 1}):
        assert replace(BASE, **changes) is not None  # type: ignore[arg-type]
