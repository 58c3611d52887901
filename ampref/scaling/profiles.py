"""The framework loss scalers as data: one :class:`Profile` row per framework, each a
:class:`~ampref.scaling.machine.ScalerConfig` of the one state machine plus the
parameters that framework fixes, with its source file (``specs/scaling.md`` SCL-PRF-*).
Adding a framework is adding a row.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType

from .machine import ScalerConfig

__all__ = ["OVERRIDES", "PROFILES", "Profile"]


@dataclass(frozen=True, kw_only=True)
class Profile:
    """A framework: its defaults, and which parameters it fixes (overrides refused)."""

    name: str
    config: ScalerConfig
    fixed: Mapping[str, str] = field(default_factory=dict)
    source: str = ""

    def __post_init__(self) -> None:
        # a frozen row whose dict can still be edited is not frozen: keep a read-only copy
        object.__setattr__(self, "fixed", MappingProxyType(dict(self.fixed)))


_NO_HYST = "has no hysteresis"
_FIXED_2 = "fixes the factors at 2 and 1/2"

_DEEPSPEED = Profile(
    name="deepspeed",
    config=ScalerConfig(growth_interval=1000, growth_rule="since_overflow", arith="f64",
                        hysteresis=2, refill="growth", min_scale=1.0, floor="raise",
                        refuse_inf_growth=False),
    fixed={"growth_factor": _FIXED_2, "backoff_factor": _FIXED_2, "max_scale": "has no cap"},
    source="deepspeed/runtime/fp16/loss_scaler.py (DynamicLossScaler.update_scale)")

#: name -> profile (SCL-PRF-*). Adding a framework is adding a row.
PROFILES: dict[str, Profile] = {p.name: p for p in (
    Profile(name="torch", config=ScalerConfig(),
            fixed={"hysteresis": _NO_HYST, "min_scale": "has no floor",
                   "max_scale": "has no cap"},
            source="torch/amp/grad_scaler.py, aten AmpGradScalerKernels (_amp_update_scale_)"),
    Profile(name="tf-keras",
            config=ScalerConfig(init_scale=2.0**15, growth_rule="at_least", arith="f32",
                                min_scale=1.0, floor="clamp"),
            fixed={"growth_factor": _FIXED_2, "backoff_factor": _FIXED_2,
                   "hysteresis": _NO_HYST, "min_scale": "fixes its floor at 1",
                   "max_scale": "has no cap"},
            source="tf_keras/src/mixed_precision/loss_scale_optimizer.py"),
    Profile(name="keras3",
            config=ScalerConfig(init_scale=2.0**15, arith="f32", refuse_inf_growth=False),
            fixed={"growth_factor": _FIXED_2, "backoff_factor": _FIXED_2,
                   "hysteresis": _NO_HYST, "min_scale": "has no floor",
                   "max_scale": "has no cap"},
            source="keras/src/optimizers/loss_scale_optimizer.py"),
    Profile(name="jmp",
            config=ScalerConfig(growth_rule="modulo", backoff_op="divide", arith="f32",
                                min_scale=1.0, floor="clamp"),
            fixed={"backoff_factor": "divides by growth_factor", "hysteresis": _NO_HYST,
                   "max_scale": "has no cap"},
            source="jmp/_src/loss_scale.py (DynamicLossScale.adjust)"),
    Profile(name="apex", config=ScalerConfig(arith="f64", max_scale=2.0**24),
            fixed={"growth_factor": _FIXED_2 + " (scale_factor is unused)",
                   "backoff_factor": _FIXED_2, "hysteresis": _NO_HYST},
            source="apex/amp/scaler.py at cb65b8ed~1 (LossScaler.update_scale)"),
    _DEEPSPEED,
    # the same scaler with consecutive_hysteresis=True: any clean step refills
    replace(_DEEPSPEED, name="deepspeed-consecutive",
            config=replace(_DEEPSPEED.config, refill="any_clean"),
            source="deepspeed loss_scaler.py with consecutive_hysteresis=True"),
    Profile(name="megatron",
            config=ScalerConfig(init_scale=2.0**32, growth_interval=1000, arith="f32",
                                hysteresis=2, refill="growth", min_scale=1.0, floor="clamp",
                                refuse_inf_growth=False),
            fixed={"max_scale": "has no cap"},
            source="megatron/core/optimizer/grad_scaler.py (DynamicGradScaler.update)"),
)}

OVERRIDES = ("init_scale", "growth_factor", "backoff_factor", "growth_interval", "hysteresis",
              "min_scale", "max_scale")
