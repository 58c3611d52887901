"""Dynamic loss scaling: one parameterised state machine, every framework a profile.

Reference algorithm (``specs/scaling.md`` SCL-UPD-*), executed by :func:`transition`::

    on update(found_inf):
        step += 1
        if found_inf:                                   # the optimizer step is skipped
            growth_tracker = 0; last_overflow = step    # SCL-UPD-002
            hysteresis_tracker -= 1
            if hysteresis_tracker > 0: action = "skip"          # absorbed (SCL-HYS-001)
            elif floor == "raise" and scale == min_scale: raise ScaleFloorError
            else:
                scale = R(scale * backoff)  (or R(scale / growth) when backoff_op="divide")
                if min_scale is not None and floor != "none": scale = max(scale, min_scale)
                action = "backoff" (or "clamp" when the floor bit)
        else:                                           # the optimizer step is applied
            if refill == "any_clean": hysteresis_tracker = hysteresis
            growth_tracker += 1
            if growth_due(growth_rule):                 # SCL-GRW-001..004
                growth_tracker = 0
                if refill == "growth": hysteresis_tracker = hysteresis
                cand = R(scale * growth)
                if max_scale is not None: cand = min(cand, max_scale)
                if refuse_inf and not finite(cand): action = "hold"   # SCL-GRW-005
                else: scale = cand; action = "grow"
            else: action = "hold"

``R`` is the framework's scale arithmetic (SCL-ARI-001): ``f64_to_f32`` =
float32(float64(scale) * factor) (torch), ``f32`` = an IEEE float32 multiply (Keras, jmp,
Megatron tensors), ``f64`` = Python floats (Apex, DeepSpeed).

The framework profiles (data rows of this machine's parameters) are in
:mod:`ampref.scaling.profiles`; the scaler object in :mod:`ampref.scaling.scaler`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, Literal

import numpy as np

from ampref.common.checks import check_flag, check_instance

__all__ = [
    "LossScaleWarning",
    "ScaleEvent",
    "ScaleFloorError",
    "ScalerConfig",
    "ScalerState",
    "check_int",
    "check_range",
    "check_state",
    "initial_state",
    "make_event",
    "store_scale",
    "transition",
]

GrowthRule = Literal["equal", "at_least", "modulo", "since_overflow"]
Arith = Literal["f64_to_f32", "f32", "f64"]
Floor = Literal["none", "clamp", "raise"]
Refill = Literal["any_clean", "growth"]


class ScaleFloorError(RuntimeError):
    """Backoff requested while the scale already sits at ``min_scale`` (DeepSpeed)."""


class LossScaleWarning(UserWarning):
    """The scale collapsed toward zero or overflows keep coming."""


@dataclass(frozen=True, kw_only=True)
class ScalerConfig:
    """Every parameter of the dynamic loss-scale state machine (data, not code)."""

    init_scale: float = 2.0**16
    growth_factor: float = 2.0
    backoff_factor: float = 0.5
    growth_interval: int = 2000
    growth_rule: GrowthRule = "equal"
    backoff_op: Literal["multiply", "divide"] = "multiply"
    arith: Arith = "f64_to_f32"
    hysteresis: int = 1
    refill: Refill = "any_clean"
    min_scale: float | None = None
    floor: Floor = "none"
    max_scale: float | None = None
    refuse_inf_growth: bool = True

    def __post_init__(self) -> None:
        check_range("growth_factor", self.growth_factor, lo=1.0, lo_open=True)
        check_range("backoff_factor", self.backoff_factor, lo=0.0, hi=1.0, lo_open=True,
                    hi_open=True)
        check_int("growth_interval", self.growth_interval)
        check_int("hysteresis", self.hysteresis)
        check_range("init_scale", self.init_scale, lo=0.0, lo_open=True)
        for name, allowed in (("growth_rule", GrowthRule), ("arith", Arith), ("floor", Floor),
                              ("refill", Refill), ("backoff_op", Literal["multiply", "divide"])):
            choices = allowed.__args__  # type: ignore[attr-defined]
            if getattr(self, name) not in choices:
                raise ValueError(f"{name} must be one of {choices}, got {getattr(self, name)!r}")
        if self.min_scale is not None:
            check_range("min_scale", self.min_scale, lo=0.0, lo_open=True)
        if self.max_scale is not None:
            check_range("max_scale", self.max_scale, lo=0.0, lo_open=True)
        if self.floor != "none" and self.min_scale is None:
            raise ValueError(f"floor={self.floor!r} needs a min_scale")
        both = self.min_scale is not None and self.max_scale is not None
        if both and self.min_scale > self.max_scale:  # type: ignore[operator]
            raise ValueError(f"min_scale {self.min_scale!r} exceeds max_scale {self.max_scale!r}")
        if not isinstance(self.refuse_inf_growth, (bool, np.bool_)):
            raise TypeError(f"refuse_inf_growth must be a bool, got {self.refuse_inf_growth!r}")


def check_range(name: str, v: Any, *, lo: float | None = None, hi: float | None = None,
                 lo_open: bool = False, hi_open: bool = False) -> None:
    if isinstance(v, bool) or not isinstance(v, (int, float, np.floating, np.integer)):
        raise TypeError(f"{name} must be a number, got {type(v).__name__}: {v!r}")
    v = float(v)
    bad = not math.isfinite(v)
    if lo is not None:
        bad |= v <= lo if lo_open else v < lo
    if hi is not None:
        bad |= v >= hi if hi_open else v > hi
    if bad:
        lo_s = "" if lo is None else f"{lo} {'<' if lo_open else '<='} "
        hi_s = "" if hi is None else f" {'<' if hi_open else '<='} {hi}"
        raise ValueError(f"{name} must satisfy {lo_s}{name}{hi_s} (finite), got {v!r}")


def check_int(name: str, v: Any, lo: int = 1) -> None:
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < lo:
        what = "a positive int (>= 1)" if lo == 1 else f"an int >= {lo}"
        raise ValueError(f"{name} must be {what}, got {v!r}")


@dataclass(frozen=True, kw_only=True)
class ScalerState:
    """Immutable state: the scale (rounded as the profile stores it) and counters."""

    scale: float
    growth_tracker: int = 0
    hysteresis_tracker: int = 1
    step: int = 0
    last_overflow: int = 0


@dataclass(frozen=True, kw_only=True)
class ScaleEvent:
    """One update, for the audit log (SCL-AUD-001)."""

    step: int
    found_inf: bool
    scale_before: float
    scale_after: float
    growth_tracker: int
    hysteresis_tracker: int
    action: Literal["grow", "backoff", "hold", "skip", "clamp", "raise", "set"]

    @property
    def applied(self) -> bool:
        """True when the optimizer step was applied (no overflow)."""
        return not self.found_inf


def store_scale(x: float, arith: Arith) -> float:
    if arith in ("f64_to_f32", "f32"):
        with np.errstate(over="ignore"):  # overflow to inf is the stored value; callers check
            return float(np.float32(x))
    return float(x)


def _mul(scale: float, factor: float, arith: Arith) -> float:
    if arith == "f64_to_f32":
        with np.errstate(over="ignore"):
            return float(np.float32(np.float64(scale) * np.float64(factor)))
    if arith == "f32":
        with np.errstate(over="ignore", under="ignore"):
            return float(np.float32(scale) * np.float32(factor))
    return scale * factor if math.isfinite(scale * factor) else math.inf


def _div(scale: float, factor: float, arith: Arith) -> float:
    if arith == "f32":
        with np.errstate(under="ignore"):
            return float(np.float32(scale) / np.float32(factor))
    return store_scale(float(np.float64(scale) / np.float64(factor)), arith)


def initial_state(cfg: ScalerConfig) -> ScalerState:
    """The state before the first update: init_scale stored as the profile stores it.

    Raises:
        ValueError: init_scale overflows to inf or underflows to 0 in the profile's
            storage (float32 for torch, Keras, jmp, Megatron).
    """
    check_instance("cfg", cfg, ScalerConfig, "initial_state")
    scale = store_scale(cfg.init_scale, cfg.arith)
    if not (math.isfinite(scale) and scale > 0):
        raise ValueError(f"init_scale {cfg.init_scale!r} becomes {scale!r} when stored as "
                         f"{'float32' if cfg.arith != 'f64' else 'float64'} (arith={cfg.arith!r}); "
                         "give a scale the profile can hold")
    if cfg.max_scale is not None:
        scale = min(scale, cfg.max_scale)
    return ScalerState(scale=scale, hysteresis_tracker=cfg.hysteresis)


def check_state(cfg: ScalerConfig, st: ScalerState) -> None:
    """Refuse a state the machine of ``cfg`` can never be in (SCL-STA-003).

    Reachable: a scale that is a number, not NaN, stored as the profile stores it
    (float32 values for float32 profiles), at least ``min_scale`` with a floor and at
    most ``max_scale`` with a cap, 0 only without a floor (repeated backoff underflows),
    inf only where growth to inf is not refused; integer counters with ``growth_tracker
    >= 0``, ``hysteresis_tracker <= hysteresis``, ``0 <= last_overflow <= step``.

    Raises:
        TypeError: a field of the wrong type (named).
        ValueError: a value out of its range (named, with the range).
    """
    sc = st.scale
    if isinstance(sc, bool) or not isinstance(sc, (int, float, np.floating, np.integer)):
        raise TypeError(f"scaler state scale must be a number, got {type(sc).__name__}: {sc!r}")
    sc = float(sc)
    floored = cfg.floor != "none" and cfg.min_scale is not None
    if math.isnan(sc) or sc < 0:
        raise ValueError(f"scaler state scale must be >= 0 and not NaN, got {sc!r}")
    if sc == 0 and floored:
        raise ValueError(f"scaler state scale 0 is unreachable with the floor "
                         f"min_scale={cfg.min_scale}")
    if math.isinf(sc) and (cfg.refuse_inf_growth or cfg.max_scale is not None):
        raise ValueError("scaler state scale inf is unreachable: this profile refuses growth to "
                         "inf or caps the scale")
    if floored and sc < cfg.min_scale:  # type: ignore[operator]
        raise ValueError(f"scaler state scale {sc!r} is below min_scale {cfg.min_scale!r}")
    if cfg.max_scale is not None and sc > cfg.max_scale:
        raise ValueError(f"scaler state scale {sc!r} exceeds max_scale {cfg.max_scale!r}")
    if store_scale(sc, cfg.arith) != sc:
        raise ValueError(f"scaler state scale {sc!r} is not a float32 value, but profiles with "
                         f"arith={cfg.arith!r} store the scale in float32")
    for name in ("growth_tracker", "hysteresis_tracker", "step", "last_overflow"):
        v = getattr(st, name)
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
            raise TypeError(f"scaler state {name} must be an int, got {type(v).__name__}: {v!r}")
    check_int("scaler state growth_tracker", st.growth_tracker, 0)
    check_int("scaler state step", st.step, 0)
    if not 0 <= st.last_overflow <= st.step:
        raise ValueError(f"scaler state last_overflow must lie in [0, step={st.step}], got "
                         f"{st.last_overflow!r}")
    if st.hysteresis_tracker > cfg.hysteresis:
        raise ValueError(f"scaler state hysteresis_tracker {st.hysteresis_tracker} exceeds the "
                         f"configured hysteresis {cfg.hysteresis}")


def _growth_due(cfg: ScalerConfig, st: ScalerState, tracker: int, step: int) -> bool:
    if cfg.growth_rule == "equal":
        return tracker == cfg.growth_interval
    if cfg.growth_rule == "at_least":
        return tracker >= cfg.growth_interval
    if cfg.growth_rule == "modulo":  # jmp: the stored counter equals period - 1
        return st.growth_tracker == cfg.growth_interval - 1
    stable = step - st.last_overflow - 1  # DeepSpeed: clean steps since the last overflow
    return stable > 0 and stable % cfg.growth_interval == 0


def transition(cfg: ScalerConfig, st: ScalerState,
               found_inf: bool) -> tuple[ScalerState, ScaleEvent]:
    """The pure update rule (module docstring). Raises :class:`ScaleFloorError`, and
    TypeError for a ``cfg``, ``st`` or ``found_inf`` of another type."""
    check_instance("cfg", cfg, ScalerConfig, "transition")
    check_instance("st", st, ScalerState, "transition")
    found_inf = check_flag("found_inf", found_inf)
    step = st.step + 1
    if found_inf:
        hyst = st.hysteresis_tracker - 1
        scale, action = st.scale, "skip"
        if hyst <= 0:
            if cfg.floor == "raise" and st.scale == cfg.min_scale:
                raise ScaleFloorError(
                    f"loss scale already at its minimum {cfg.min_scale} and step {step} "
                    "overflowed again: cannot decrease the scale (DeepSpeed raises here)")
            new = (_div(st.scale, cfg.growth_factor, cfg.arith) if cfg.backoff_op == "divide"
                   else _mul(st.scale, cfg.backoff_factor, cfg.arith))
            action = "backoff"
            if cfg.min_scale is not None and cfg.floor != "none" and new < cfg.min_scale:
                new, action = store_scale(cfg.min_scale, cfg.arith), "clamp"
            scale = new
        new_st = replace(st, scale=scale, growth_tracker=0, hysteresis_tracker=hyst, step=step,
                         last_overflow=step)
        return new_st, make_event(st, new_st, True, action)
    hyst = cfg.hysteresis if cfg.refill == "any_clean" else st.hysteresis_tracker
    tracker = st.growth_tracker + 1
    scale, action = st.scale, "hold"
    if _growth_due(cfg, st, tracker, step):
        tracker = 0
        if cfg.refill == "growth":
            hyst = cfg.hysteresis
        cand = _mul(st.scale, cfg.growth_factor, cfg.arith)
        if cfg.max_scale is not None:
            cand = min(cand, cfg.max_scale)
        if not (cfg.refuse_inf_growth and not math.isfinite(cand)):
            scale, action = cand, "grow"
    elif cfg.growth_rule == "modulo":
        tracker = tracker % cfg.growth_interval
    new_st = replace(st, scale=scale, growth_tracker=tracker, hysteresis_tracker=hyst, step=step)
    return new_st, make_event(st, new_st, False, action)


def make_event(old: ScalerState, new: ScalerState, found_inf: bool, action: str) -> ScaleEvent:
    return ScaleEvent(step=new.step, found_inf=found_inf, scale_before=old.scale,
                      scale_after=new.scale, growth_tracker=new.growth_tracker,
                      hysteresis_tracker=new.hysteresis_tracker, action=action)  # type: ignore[arg-type]
