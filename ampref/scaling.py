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
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import math
import os
import warnings
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import numpy as np

from .atomicio import atomic_write

__all__ = [
    "PROFILES",
    "LossScaleWarning",
    "LossScaler",
    "ScaleEvent",
    "ScaleFloorError",
    "ScalerConfig",
    "ScalerState",
    "StaticLossScaler",
    "check_flag",
    "check_state",
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
        _check_range("growth_factor", self.growth_factor, lo=1.0, lo_open=True)
        _check_range("backoff_factor", self.backoff_factor, lo=0.0, hi=1.0, lo_open=True, hi_open=True)
        _check_int("growth_interval", self.growth_interval)
        _check_int("hysteresis", self.hysteresis)
        _check_range("init_scale", self.init_scale, lo=0.0, lo_open=True)
        for name, allowed in (("growth_rule", GrowthRule), ("arith", Arith), ("floor", Floor),
                              ("refill", Refill), ("backoff_op", Literal["multiply", "divide"])):
            choices = allowed.__args__  # type: ignore[attr-defined]
            if getattr(self, name) not in choices:
                raise ValueError(f"{name} must be one of {choices}, got {getattr(self, name)!r}")
        if self.min_scale is not None:
            _check_range("min_scale", self.min_scale, lo=0.0, lo_open=True)
        if self.max_scale is not None:
            _check_range("max_scale", self.max_scale, lo=0.0, lo_open=True)
        if self.floor != "none" and self.min_scale is None:
            raise ValueError(f"floor={self.floor!r} needs a min_scale")
        if self.min_scale is not None and self.max_scale is not None and self.min_scale > self.max_scale:
            raise ValueError(f"min_scale {self.min_scale!r} exceeds max_scale {self.max_scale!r}")
        if not isinstance(self.refuse_inf_growth, (bool, np.bool_)):
            raise TypeError(f"refuse_inf_growth must be a bool, got {self.refuse_inf_growth!r}")


def _check_range(name: str, v: Any, *, lo: float | None = None, hi: float | None = None,
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


def _check_int(name: str, v: Any, lo: int = 1) -> None:
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < lo:
        what = "a positive int (>= 1)" if lo == 1 else f"an int >= {lo}"
        raise ValueError(f"{name} must be {what}, got {v!r}")


def check_flag(name: str, v: Any) -> bool:
    """``v`` as a bool; only bool and NumPy bool are accepted (a string such as "no" is
    truthy and would silently mean True).

    Raises:
        TypeError: ``v`` is not a bool (its type and value named).
    """
    if not isinstance(v, (bool, np.bool_)):
        raise TypeError(f"{name} must be a bool (True/False), got {type(v).__name__}: {v!r}")
    return bool(v)


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


def _store(x: float, arith: Arith) -> float:
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
    return _store(float(np.float64(scale) / np.float64(factor)), arith)


def initial_state(cfg: ScalerConfig) -> ScalerState:
    """The state before the first update: init_scale stored as the profile stores it.

    Raises:
        ValueError: init_scale overflows to inf or underflows to 0 in the profile's
            storage (float32 for torch, Keras, jmp, Megatron).
    """
    scale = _store(cfg.init_scale, cfg.arith)
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
        raise ValueError(f"scaler state scale 0 is unreachable with the floor min_scale={cfg.min_scale}")
    if math.isinf(sc) and (cfg.refuse_inf_growth or cfg.max_scale is not None):
        raise ValueError("scaler state scale inf is unreachable: this profile refuses growth to "
                         "inf or caps the scale")
    if floored and sc < cfg.min_scale:  # type: ignore[operator]
        raise ValueError(f"scaler state scale {sc!r} is below min_scale {cfg.min_scale!r}")
    if cfg.max_scale is not None and sc > cfg.max_scale:
        raise ValueError(f"scaler state scale {sc!r} exceeds max_scale {cfg.max_scale!r}")
    if _store(sc, cfg.arith) != sc:
        raise ValueError(f"scaler state scale {sc!r} is not a float32 value, but profiles with "
                         f"arith={cfg.arith!r} store the scale in float32")
    for name in ("growth_tracker", "hysteresis_tracker", "step", "last_overflow"):
        v = getattr(st, name)
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
            raise TypeError(f"scaler state {name} must be an int, got {type(v).__name__}: {v!r}")
    _check_int("scaler state growth_tracker", st.growth_tracker, 0)
    _check_int("scaler state step", st.step, 0)
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


def transition(cfg: ScalerConfig, st: ScalerState, found_inf: bool) -> tuple[ScalerState, ScaleEvent]:
    """The pure update rule (module docstring). Raises :class:`ScaleFloorError`."""
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
                new, action = _store(cfg.min_scale, cfg.arith), "clamp"
            scale = new
        new_st = replace(st, scale=scale, growth_tracker=0, hysteresis_tracker=hyst, step=step,
                         last_overflow=step)
        return new_st, _event(st, new_st, True, action)
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
    return new_st, _event(st, new_st, False, action)


def _event(old: ScalerState, new: ScalerState, found_inf: bool, action: str) -> ScaleEvent:
    return ScaleEvent(step=new.step, found_inf=found_inf, scale_before=old.scale,
                      scale_after=new.scale, growth_tracker=new.growth_tracker,
                      hysteresis_tracker=new.hysteresis_tracker, action=action)  # type: ignore[arg-type]


# ----------------------------------------------------------------------------- profiles
@dataclass(frozen=True)
class Profile:
    """A framework: its defaults, and which parameters it fixes (overrides refused)."""

    name: str
    config: ScalerConfig
    fixed: dict[str, str] = field(default_factory=dict)
    source: str = ""


_NO_HYST = "has no hysteresis"
_FIXED_2 = "fixes the factors at 2 and 1/2"

#: name -> profile (SCL-PRF-*). Adding a framework is adding a row.
PROFILES: dict[str, Profile] = {p.name: p for p in (
    Profile("torch", ScalerConfig(), {"hysteresis": _NO_HYST, "min_scale": "has no floor",
                                      "max_scale": "has no cap"},
            "torch/amp/grad_scaler.py, aten AmpGradScalerKernels (_amp_update_scale_)"),
    Profile("tf-keras", ScalerConfig(init_scale=2.0**15, growth_rule="at_least", arith="f32",
                                     min_scale=1.0, floor="clamp"),
            {"growth_factor": _FIXED_2, "backoff_factor": _FIXED_2, "hysteresis": _NO_HYST,
             "min_scale": "fixes its floor at 1", "max_scale": "has no cap"},
            "tf_keras/src/mixed_precision/loss_scale_optimizer.py"),
    Profile("keras3", ScalerConfig(init_scale=2.0**15, arith="f32", refuse_inf_growth=False),
            {"growth_factor": _FIXED_2, "backoff_factor": _FIXED_2, "hysteresis": _NO_HYST,
             "min_scale": "has no floor", "max_scale": "has no cap"},
            "keras/src/optimizers/loss_scale_optimizer.py"),
    Profile("jmp", ScalerConfig(growth_rule="modulo", backoff_op="divide", arith="f32",
                                min_scale=1.0, floor="clamp"),
            {"backoff_factor": "divides by growth_factor", "hysteresis": _NO_HYST,
             "max_scale": "has no cap"},
            "jmp/_src/loss_scale.py (DynamicLossScale.adjust)"),
    Profile("apex", ScalerConfig(arith="f64", max_scale=2.0**24),
            {"growth_factor": _FIXED_2 + " (scale_factor is unused)", "backoff_factor": _FIXED_2,
             "hysteresis": _NO_HYST},
            "apex/amp/scaler.py at cb65b8ed~1 (LossScaler.update_scale)"),
    Profile("deepspeed", ScalerConfig(growth_interval=1000, growth_rule="since_overflow",
                                      arith="f64", hysteresis=2, refill="growth", min_scale=1.0,
                                      floor="raise", refuse_inf_growth=False),
            {"growth_factor": _FIXED_2, "backoff_factor": _FIXED_2, "max_scale": "has no cap"},
            "deepspeed/runtime/fp16/loss_scaler.py (DynamicLossScaler.update_scale)"),
    Profile("deepspeed-consecutive", ScalerConfig(growth_interval=1000, growth_rule="since_overflow",
                                                  arith="f64", hysteresis=2, refill="any_clean",
                                                  min_scale=1.0, floor="raise",
                                                  refuse_inf_growth=False),
            {"growth_factor": _FIXED_2, "backoff_factor": _FIXED_2, "max_scale": "has no cap"},
            "deepspeed loss_scaler.py with consecutive_hysteresis=True"),
    Profile("megatron", ScalerConfig(init_scale=2.0**32, growth_interval=1000, arith="f32",
                                     hysteresis=2, refill="growth", min_scale=1.0, floor="clamp",
                                     refuse_inf_growth=False),
            {"max_scale": "has no cap"},
            "megatron/core/optimizer/grad_scaler.py (DynamicGradScaler.update)"),
)}

_OVERRIDES = ("init_scale", "growth_factor", "backoff_factor", "growth_interval", "hysteresis",
              "min_scale", "max_scale")


# ----------------------------------------------------------------------------- objects
class LossScaler:
    """Everyday wrapper around :func:`transition` with torch's call protocol.

    ``scale_loss`` -> backward -> ``unscale(grads)`` (optionally per optimizer, and
    ``ampref.nn.utils.clip_grad_norm_``) -> ``update()`` returns True when the optimizer step applies.
    """

    def __init__(self, config: ScalerConfig | None = None, *, profile: str = "custom",
                 warn_overflow_run: int = 20, warn_scale_below: float = 2.0**-24,
                 **params: Any) -> None:
        if config is not None and not isinstance(config, ScalerConfig):
            hint = (f"; for a framework's scaler use LossScaler.from_profile({config!r})"
                    if isinstance(config, str) else "")
            raise TypeError(f"LossScaler's first argument is a ScalerConfig, got "
                            f"{type(config).__name__}: {config!r}{hint}")
        if config is not None and params:
            raise TypeError("pass either a ScalerConfig or keyword parameters, not both")
        self.config = config if config is not None else ScalerConfig(**params)
        self.profile = profile
        self.state = initial_state(self.config)
        self.events: list[ScaleEvent] = []
        self.warn_overflow_run = warn_overflow_run
        self.warn_scale_below = warn_scale_below
        self._found: dict[str, bool] = {}
        self._device: tuple[Any, Any] | None = None  # (backend, state row) of this step
        self._overflow_run = 0
        self._warned: set[str] = set()

    @classmethod
    def from_profile(cls, name: str, **overrides: Any) -> LossScaler:
        """The scaler of a framework, by name (``PROFILES``), with allowed overrides.

        Raises:
            ValueError: unknown profile (choices listed), unknown override name, an
                override of a value the framework fixes, or an invalid value.
        """
        if name not in PROFILES:
            raise ValueError(f"unknown loss-scale profile {name!r}; choose one of {', '.join(PROFILES)}")
        prof = PROFILES[name]
        for key in overrides:
            if key not in _OVERRIDES:
                raise ValueError(f"unknown override {key!r} for profile {name!r}; overridable: "
                                 f"{', '.join(_OVERRIDES)}")
            if key in prof.fixed:
                raise ValueError(f"profile {name!r} {prof.fixed[key]}: cannot override {key}; "
                                 f"use ampref.LossScaler(...) for custom parameters")
        cfg = prof.config
        if overrides.get("min_scale") is not None and cfg.floor == "none":
            overrides["floor"] = "clamp"
        if name == "jmp" and "growth_factor" in overrides:
            # jmp divides by its factor; validate it before taking the reciprocal
            _check_range("growth_factor", overrides["growth_factor"], lo=1.0, lo_open=True)
            overrides["backoff_factor"] = 1.0 / float(overrides["growth_factor"])
        return cls(replace(cfg, **overrides), profile=name)

    # -- scale ---------------------------------------------------------------------
    @property
    def scale(self) -> float:
        """Current scale (a float32 value for float32-storing profiles)."""
        return self.state.scale

    def scale_loss(self, loss: Any) -> Any:
        """loss * scale (SCL-OBJ-001): a 0-d loss gives float32 (float64 for float64),
        an n-d loss keeps its dtype (computed in float32, rounded once to it). An engine
        :class:`ampref.Tensor` gives a Tensor (the multiply recorded in its graph)."""
        if callable(getattr(loss, "backward", None)):
            # an engine Tensor (recognised by its interface: this module sits below the
            # tensor layer and does not import it): the multiply joins its graph
            out = loss * float(self.scale)
            out.loss_scale = float(self.scale)  # its backward marks the gradients as scaled
            return out
        arr = np.asarray(loss)
        if arr.dtype.kind != "f":
            raise TypeError(f"scale_loss expects a floating loss, got dtype {arr.dtype}")
        if arr.dtype == np.float64:
            return arr * np.float64(np.float32(self.scale))
        with np.errstate(over="ignore"):
            out = arr.astype(np.float32) * np.float32(self.scale)
        with np.errstate(over="ignore"):  # overflow to inf is the defined result
            return out if arr.ndim == 0 or arr.dtype == np.float32 else out.astype(arr.dtype)

    # -- unscale ---------------------------------------------------------------------
    def unscale(self, grads: Any, *, optimizer: str = "default",
                allow_fp16: bool = False) -> tuple[Any, bool]:
        """Unscale gradients with torch's kernel semantics (SCL-UNS-001).

        inv = float32(1 / float64(scale)); found_inf is set if any *scaled* value is
        inf/NaN; each gradient becomes round(widen(g) * inv) in its own dtype (float16
        and float32 in float32, float64 in float64). ``grads`` is an array, a list/tuple
        or a dict of arrays (None entries pass through).

        Raises:
            RuntimeError: this optimizer's gradients were already unscaled since the
                last update (torch: "unscale_() has already been called ...").
            ValueError: float16 gradients without ``allow_fp16`` (torch refuses them).
        """
        if optimizer in self._found:
            raise RuntimeError(f"unscale() has already been called for optimizer {optimizer!r} "
                               "since the last update()")
        inv = np.float32(1.0 / np.float64(self.scale)) if self.scale != 0 else np.float32(np.inf)
        found = False

        def one(g: Any) -> Any:
            nonlocal found
            if g is None:
                return None
            a = np.asarray(g)
            if a.dtype == np.float16 and not allow_fp16:
                raise ValueError("Attempting to unscale FP16 gradients (torch refuses them; "
                                 "keep fp32 master gradients or pass allow_fp16=True)")
            if a.dtype.kind != "f":
                raise TypeError(f"gradients must be floating arrays, got dtype {a.dtype}")
            found = found or not bool(np.isfinite(a).all())
            wide = a.astype(np.float64 if a.dtype == np.float64 else np.float32)
            with np.errstate(over="ignore", invalid="ignore"):
                out = wide * (np.float64(inv) if a.dtype == np.float64 else inv)
            return out.astype(a.dtype)

        if isinstance(grads, dict):
            result: Any = {k: one(v) for k, v in grads.items()}
        elif isinstance(grads, (list, tuple)):
            result = type(grads)(one(g) for g in grads)
        else:
            result = one(grads)
        self._found[optimizer] = found
        return result, found

    def unscale_on_device(self, grads: list[Any], backend: Any, *,
                          optimizer: str = "default") -> None:
        """Unscale device gradients in place without a host sync (BKD-SCL-001).

        ``backend`` is a device backend (``ampref.backends.get("cupy")``): one kernel per
        tensor unscales it (float32(1 / float64(scale)), as :meth:`unscale`) and raises
        the step's found flag in a device copy of the state; :meth:`update` then runs
        the transition on the device and reads the result once.

        Raises:
            RuntimeError: this optimizer was already unscaled since the last update.
        """
        if optimizer in self._found:
            raise RuntimeError(f"unscale() has already been called for optimizer {optimizer!r} "
                               "since the last update()")
        if self._device is None:
            self._device = (backend, backend.scaler_row(self.state))
        elif self._device[0] is not backend:
            raise RuntimeError("gradients of two device backends in one scaler step")
        backend.unscale_(list(grads), self._device[1])
        self._found[optimizer] = False  # the device row holds the real flag

    def device_found_inf(self) -> bool:
        """The found flag of this step's device row (one read from the device); False
        when no gradient was unscaled on a device this step."""
        if self._device is None:
            return False
        backend, row = self._device
        return bool(backend.read_found(row))

    def _device_decision(self, host_found: bool) -> tuple[ScalerState, bool, str] | None:
        """Run the pending device update (if any): (state, found_inf, action)."""
        if self._device is None:
            return None
        backend, row = self._device
        self._device = None
        if host_found:
            backend.set_found(row)  # a check recorded on the host joins the device flag
        return backend.scaler_update(row, self.config)

    def record_inf(self, found_inf: bool, *, optimizer: str = "default") -> None:
        """Record an inf check done elsewhere (e.g. on a device) for ``optimizer``."""
        if optimizer in self._found:
            raise RuntimeError(f"an inf check is already recorded for optimizer {optimizer!r}")
        self._found[optimizer] = bool(found_inf)

    def is_unscaled(self, optimizer: str = "default") -> bool:
        return optimizer in self._found

    # -- update ----------------------------------------------------------------------
    def update(self, found_inf: bool | np.bool_ | None = None) -> bool:
        """One transition for the whole step; returns True when the step is applied.

        With ``found_inf=None`` the checks recorded by :meth:`unscale` (any number of
        optimizers, any number of micro-batches before) are combined: one backoff per
        update however many optimizers overflowed (SCL-OBJ-003).

        Raises:
            RuntimeError: no inf check was recorded and none was passed.
            ScaleFloorError: DeepSpeed-style floor reached.
        """
        if found_inf is None:
            if not self._found:
                raise RuntimeError("No inf checks were recorded prior to update(): call "
                                   "unscale(grads) or pass update(found_inf=...)")
            found_inf = any(self._found.values())
        found_inf = check_flag("found_inf", found_inf)
        self._found = {}
        device = self._device_decision(bool(found_inf))
        if device is not None:
            self._apply_device(*device)
            return not device[1]
        try:
            self.state, ev = transition(self.config, self.state, bool(found_inf))
        except ScaleFloorError:
            self.events.append(ScaleEvent(step=self.state.step + 1, found_inf=True,
                                          scale_before=self.state.scale, scale_after=self.state.scale,
                                          growth_tracker=0, hysteresis_tracker=self.state.hysteresis_tracker,
                                          action="raise"))
            raise
        self.events.append(ev)
        self._watch(ev)
        return ev.applied

    def _apply_device(self, st: ScalerState, found: bool, action: str) -> None:
        """Mirror a device transition on the host: state, audit event, warnings."""
        if action == "raise":
            self.events.append(ScaleEvent(step=self.state.step + 1, found_inf=True,
                                          scale_before=self.state.scale, scale_after=self.state.scale,
                                          growth_tracker=0, hysteresis_tracker=self.state.hysteresis_tracker,
                                          action="raise"))
            raise ScaleFloorError(
                f"loss scale already at its minimum {self.config.min_scale} and step "
                f"{self.state.step + 1} overflowed again: cannot decrease the scale")
        ev = _event(self.state, st, found, action)
        self.state = st
        self.events.append(ev)
        self._watch(ev)

    def _watch(self, ev: ScaleEvent) -> None:
        self._overflow_run = self._overflow_run + 1 if ev.found_inf else 0
        if self._overflow_run >= self.warn_overflow_run and "run" not in self._warned:
            self._warned.add("run")
            warnings.warn(f"{self._overflow_run} consecutive overflowing steps up to step {ev.step}: "
                          f"loss scale now {ev.scale_after:g}; every step is being skipped "
                          "(NaN/inf in the loss or the model, not only in the scale?)",
                          LossScaleWarning, stacklevel=3)
        if ev.scale_after < self.warn_scale_below and "collapse" not in self._warned:
            self._warned.add("collapse")
            warnings.warn(f"loss scale collapsed to {ev.scale_after:g} at step {ev.step} "
                          f"(below {self.warn_scale_below:g}); with no floor it can reach 0 and "
                          "then every step is skipped (set min_scale)", LossScaleWarning, stacklevel=3)

    # -- audit -----------------------------------------------------------------------
    def audit_log(self) -> list[dict[str, Any]]:
        """Every update as a dict (SCL-AUD-001)."""
        return [dataclasses.asdict(e) | {"applied": e.applied} for e in self.events]

    def skipped_steps(self) -> list[int]:
        return [e.step for e in self.events if e.found_inf]

    def export_audit(self, path: str | os.PathLike[str], fmt: str | None = None) -> None:
        """Write the audit log as CSV or JSON (by ``fmt`` or the suffix), atomically:
        a failed write never destroys an existing file (SCL-AUD-002)."""
        path = os.fspath(path)
        kind = fmt or ("json" if path.endswith(".json") else "csv" if path.endswith(".csv") else None)
        if kind not in ("csv", "json"):
            raise ValueError(f"audit export format must be 'csv' or 'json', got {kind!r} for {path!r}")
        rows = self.audit_log()
        if kind == "json":
            text = json.dumps({"profile": self.profile, "events": rows}, indent=1)
        else:
            buf = io.StringIO()
            names = [f.name for f in dataclasses.fields(ScaleEvent)] + ["applied"]
            w = csv.DictWriter(buf, fieldnames=names)
            w.writeheader()
            w.writerows(rows)
            text = buf.getvalue()
        atomic_write(path, text)

    def report(self) -> str:
        """Short text summary: steps, skipped steps, scale range and actions."""
        ev = self.events
        skipped = self.skipped_steps()
        acts = {a: sum(e.action == a for e in ev) for a in ("grow", "backoff", "clamp", "skip")}
        return (f"{self.profile} loss scaler: {len(ev)} updates, {len(skipped)} skipped "
                f"(steps {_ranges(skipped)}), scale {ev[0].scale_before if ev else self.scale:g} -> "
                f"{self.scale:g}; " + ", ".join(f"{k} {v}" for k, v in acts.items()))

    # -- state dict --------------------------------------------------------------------
    def state_dict(self, *, full: bool = False) -> dict[str, Any]:
        """The scaler's state (SCL-STA-*).

        The torch profile gives exactly ``torch.amp.GradScaler``'s five keys, so dicts move
        between the two; those keys do not hold the step counter, the last overflow or the
        hysteresis tracker. ``full=True`` (and every other profile) gives the complete
        state and configuration: ``{"profile", "config", "state"}``. Checkpoints use the
        full form, so a resumed run continues exactly (SCL-STA-003).
        """
        st, cfg = self.state, self.config
        if self.profile == "torch" and not full:
            return {"scale": st.scale, "growth_factor": cfg.growth_factor,
                    "backoff_factor": cfg.backoff_factor, "growth_interval": cfg.growth_interval,
                    "_growth_tracker": st.growth_tracker}
        return {"profile": self.profile, "config": dataclasses.asdict(cfg),
                "state": dataclasses.asdict(st)}

    def load_state_dict(self, sd: dict[str, Any]) -> None:
        """Load a dict from :meth:`state_dict` (either form) or from ``torch.amp.GradScaler``.

        Loading validates as strictly as constructing: every key must be present (no
        field falls back to a default), the configuration passes :class:`ScalerConfig`'s
        checks and the state must be reachable under it (:func:`check_state`). As torch
        does, the factors and interval of a torch dict replace the current ones.

        Raises:
            ValueError: empty dict, missing or unexpected keys, another profile's dict,
                or a value out of range (named).
            TypeError: not a dict, or a value of the wrong type (named).
        """
        if not isinstance(sd, dict):
            raise TypeError(f"load_state_dict expects a dict, got {type(sd).__name__}")
        if not sd:
            raise ValueError("the state dict is empty (saved from a disabled scaler?)")
        if set(sd) == {"profile", "config", "state"}:
            self._load_full(sd)
        elif self.profile == "torch":
            self._load_torch(sd)
        else:
            raise ValueError(f"expected keys ['config', 'profile', 'state'], got {sorted(sd)}")

    def _load_torch(self, sd: dict[str, Any]) -> None:
        keys = {"scale", "growth_factor", "backoff_factor", "growth_interval", "_growth_tracker"}
        if set(sd) != keys:
            raise ValueError(f"a torch GradScaler state dict has keys {sorted(keys)}, got {sorted(sd)}")
        vals = {k: _plain(sd[k], k) for k in keys}
        cfg = replace(self.config, growth_factor=vals["growth_factor"],
                      backoff_factor=vals["backoff_factor"], growth_interval=vals["growth_interval"])
        scale = vals["scale"]
        if isinstance(scale, (int, float)) and not isinstance(scale, bool) and math.isfinite(scale):
            scale = float(np.float32(scale))  # torch holds the scale in a float32 tensor
        st = replace(self.state, scale=scale, growth_tracker=vals["_growth_tracker"])
        check_state(cfg, st)
        self.config, self.state = cfg, st

    def _load_full(self, sd: dict[str, Any]) -> None:
        if sd["profile"] != self.profile:
            raise ValueError(f"state dict of profile {sd['profile']!r} loaded into a {self.profile!r} scaler")
        parts: dict[str, dict[str, Any]] = {}
        for part, cls in (("config", ScalerConfig), ("state", ScalerState)):
            given = sd[part]
            if not isinstance(given, dict):
                raise TypeError(f"state dict {part!r} must be a dict, got {type(given).__name__}")
            names = {f.name for f in dataclasses.fields(cls)}
            if set(given) != names:
                raise ValueError(f"state dict {part!r} must have exactly the keys {sorted(names)}; "
                                 f"missing {sorted(names - set(given)) or 'none'}, unexpected "
                                 f"{sorted(set(given) - names) or 'none'}")
            parts[part] = {k: _plain(v, f"{part}.{k}") for k, v in given.items()}
        cfg = ScalerConfig(**parts["config"])
        st = ScalerState(**parts["state"])
        check_state(cfg, st)
        self.config, self.state = cfg, st

    def set_scale(self, new_scale: float) -> None:
        """Replace the scale by the user's value (torch's ``update(new_scale)``): one
        update with action ``set``, counters untouched, pending inf checks cleared.

        Raises:
            ValueError: a scale this profile cannot hold (see :func:`check_state`).
        """
        value = _plain(new_scale, "new_scale")
        if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
            value = _store(float(value), self.config.arith)
        st = replace(self.state, scale=value, step=self.state.step + 1)
        check_state(self.config, st)
        found = any(self._found.values())
        self._found = {}
        ev = _event(self.state, st, found, "set")
        self.state = st
        self.events.append(ev)


def _plain(v: Any, name: str) -> Any:
    """A loaded value as a plain Python scalar (0-d arrays and NumPy scalars unwrapped);
    anything else is returned as is for the validators to name."""
    if isinstance(v, np.ndarray) and v.ndim == 0:
        v = v[()]
    if isinstance(v, np.generic):
        v = v.item()
    if hasattr(v, "item") and callable(v.item) and getattr(v, "ndim", None) == 0:
        v = v.item()  # a 0-d tensor of another library (torch's GradScaler state)
    return v


class StaticLossScaler(LossScaler):
    """A fixed scale: ``update`` never changes it; overflowing steps are still skipped."""

    def __init__(self, scale: float) -> None:
        _check_range("scale", scale, lo=0.0, lo_open=True)
        with np.errstate(over="ignore", under="ignore"):
            as_f32 = float(np.float32(scale))
        if not (math.isfinite(as_f32) and as_f32 > 0):
            # the scale multiplies a float32 loss: a scale that float32 cannot hold would
            # make every scaled loss inf (or 0)
            raise ValueError(f"static loss scale {scale!r} is outside float32's range "
                             f"(it becomes {as_f32!r}); choose a scale in (0, 3.4e38]")
        super().__init__(ScalerConfig(init_scale=float(scale), arith="f64"), profile="static")

    def update(self, found_inf: bool | np.bool_ | None = None) -> bool:
        if found_inf is None:
            if not self._found:
                raise RuntimeError("No inf checks were recorded prior to update()")
            found_inf = any(self._found.values())
        found_inf = check_flag("found_inf", found_inf)
        self._found = {}
        if self._device is not None:  # a fixed scale needs only the device flag
            backend, row = self._device
            self._device = None
            found_inf = bool(found_inf) or backend.read_found(row)
        st = replace(self.state, step=self.state.step + 1)
        ev = _event(self.state, st, bool(found_inf), "skip" if found_inf else "hold")
        self.state = st
        self.events.append(ev)
        return ev.applied


def _ranges(steps: list[int]) -> str:
    if not steps:
        return "none"
    out, start, prev = [], steps[0], steps[0]
    for s in steps[1:] + [None]:  # type: ignore[list-item]
        if s is not None and s == prev + 1:
            prev = s
            continue
        out.append(f"{start}" if start == prev else f"{start}-{prev}")
        if s is not None:
            start = prev = s
    return ", ".join(out)
