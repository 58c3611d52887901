"""The everyday loss scaler: torch's call protocol around the pure state machine of
:mod:`ampref.scaling.machine` (``scale_loss`` -> backward -> ``unscale`` -> ``update``),
on the host (arithmetic in :mod:`~ampref.scaling.unscale`) or with the gradients on a
device, with an audit log (:mod:`~ampref.scaling.audit`) and the state dicts of SCL-STA-*
(:mod:`~ampref.scaling.statedict`).
"""

from __future__ import annotations

import math
import os
import warnings
from dataclasses import replace
from typing import Any

import numpy as np

from ampref.common.checks import check_count, check_flag, check_real

from .audit import AuditLog
from .machine import (LossScaleWarning, ScaleEvent, ScaleFloorError, ScalerConfig, ScalerState,
                      check_range, check_state, initial_state, make_event, store_scale,
                      transition)
from .profiles import OVERRIDES, PROFILES
from .statedict import load, plain, state_dict
from .unscale import unscale_arrays

__all__ = ["LossScaler", "StaticLossScaler"]


class LossScaler:
    """Everyday wrapper around :func:`transition` with torch's call protocol.

    ``scale_loss`` -> backward -> ``unscale(grads)`` (optionally per optimizer, and
    ``ampref.nn.utils.clip_grad_norm_``) -> ``update()`` returns True when the optimizer
    step applies.
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
        if not isinstance(profile, str):
            raise TypeError(f"LossScaler profile is a label (str), got "
                            f"{type(profile).__name__}: {profile!r}")
        warn_overflow_run = check_count("warn_overflow_run", warn_overflow_run)
        warn_scale_below = check_real("warn_scale_below", warn_scale_below, lo=0.0)
        self.config = config if config is not None else ScalerConfig(**params)
        self.profile = profile
        self.state = initial_state(self.config)
        #: the audit log (SCL-AUD-*): one event per update
        self.audit = AuditLog(profile)
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
            raise ValueError(f"unknown loss-scale profile {name!r}; choose one of "
                             f"{', '.join(PROFILES)}")
        prof = PROFILES[name]
        for key in overrides:
            if key not in OVERRIDES:
                raise ValueError(f"unknown override {key!r} for profile {name!r}; overridable: "
                                 f"{', '.join(OVERRIDES)}")
            if key in prof.fixed:
                raise ValueError(f"profile {name!r} {prof.fixed[key]}: cannot override {key}; "
                                 f"use ampref.LossScaler(...) for custom parameters")
        cfg = prof.config
        if overrides.get("min_scale") is not None and cfg.floor == "none":
            overrides["floor"] = "clamp"
        if name == "jmp" and "growth_factor" in overrides:
            # jmp divides by its factor; validate it before taking the reciprocal
            check_range("growth_factor", overrides["growth_factor"], lo=1.0, lo_open=True)
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
        self._check_not_unscaled(optimizer)
        result, found = unscale_arrays(grads, self.scale, allow_fp16=allow_fp16)
        self._record_check(optimizer, found)
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
        self._check_not_unscaled(optimizer)
        if self._device is None:
            self._device = (backend, backend.scaler_row(self.state))
        elif self._device[0] is not backend:
            raise RuntimeError("gradients of two device backends in one scaler step")
        backend.unscale_(list(grads), self._device[1])
        self._record_check(optimizer, False)  # the device row holds the real flag

    # one found-inf path for host and device unscaling: refuse a second unscale of the
    # same optimizer before update(), record the check that update() combines
    def _check_not_unscaled(self, optimizer: str) -> None:
        if optimizer in self._found:
            raise RuntimeError(f"unscale() has already been called for optimizer {optimizer!r} "
                               "since the last update()")

    def _record_check(self, optimizer: str, found: bool) -> None:
        self._found[optimizer] = found

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
            self._log_raise()
            raise
        self.audit.append(ev)
        self._watch(ev)
        return ev.applied

    def _apply_device(self, st: ScalerState, found: bool, action: str) -> None:
        """Mirror a device transition on the host: state, audit event, warnings."""
        if action == "raise":
            self._log_raise()
            raise ScaleFloorError(
                f"loss scale already at its minimum {self.config.min_scale} and step "
                f"{self.state.step + 1} overflowed again: cannot decrease the scale")
        ev = make_event(self.state, st, found, action)
        self.state = st
        self.audit.append(ev)
        self._watch(ev)

    def _log_raise(self) -> None:
        """The audit event of an overflow at the floor (DeepSpeed raises before it touches
        its counters): the state is unchanged, and the event carries its counters as they are."""
        st = self.state
        self.audit.append(ScaleEvent(step=st.step + 1, found_inf=True, scale_before=st.scale,
                                     scale_after=st.scale, growth_tracker=st.growth_tracker,
                                     hysteresis_tracker=st.hysteresis_tracker, action="raise"))

    def _watch(self, ev: ScaleEvent) -> None:
        self._overflow_run = self._overflow_run + 1 if ev.found_inf else 0
        if self._overflow_run >= self.warn_overflow_run and "run" not in self._warned:
            self._warned.add("run")
            warnings.warn(f"{self._overflow_run} consecutive overflowing steps up to step "
                          f"{ev.step}: "
                          f"loss scale now {ev.scale_after:g}; every step is being skipped "
                          "(NaN/inf in the loss or the model, not only in the scale?)",
                          LossScaleWarning, stacklevel=3)
        if ev.scale_after < self.warn_scale_below and "collapse" not in self._warned:
            self._warned.add("collapse")
            warnings.warn(f"loss scale collapsed to {ev.scale_after:g} at step {ev.step} "
                          f"(below {self.warn_scale_below:g}); with no floor it can reach 0 and "
                          "then every step is skipped (set min_scale)", LossScaleWarning,
                          stacklevel=3)

    # -- audit (kept in self.audit) ------------------------------------------------------
    @property
    def events(self) -> list[ScaleEvent]:
        return self.audit.events

    def audit_log(self) -> list[dict[str, Any]]:
        """Every update as a dict (SCL-AUD-001)."""
        return self.audit.rows()

    def skipped_steps(self) -> list[int]:
        return self.audit.skipped_steps()

    def export_audit(self, path: str | os.PathLike[str], fmt: str | None = None) -> None:
        """Write the audit log as CSV or JSON, atomically (SCL-AUD-002)."""
        self.audit.export(path, fmt)

    def report(self) -> str:
        """Short text summary: steps, skipped steps, scale range and actions."""
        return self.audit.summary(self.scale)

    # -- state dict --------------------------------------------------------------------
    def state_dict(self, *, full: bool = False) -> dict[str, Any]:
        """The scaler's state (SCL-STA-*): torch's five keys for the torch profile, else
        (and with ``full=True``) ``{"profile", "config", "state"}``; see
        :func:`ampref.scaling.statedict.state_dict`."""
        return state_dict(self.profile, self.config, self.state, full=full)

    def load_state_dict(self, sd: dict[str, Any]) -> None:
        """Load a dict from :meth:`state_dict` (either form) or from ``torch.amp.GradScaler``,
        validated as strictly as constructing (:func:`ampref.scaling.statedict.load`).

        Raises:
            ValueError: empty dict, missing or unexpected keys, another profile's dict,
                or a value out of range (named).
            TypeError: not a dict, or a value of the wrong type (named).
        """
        self.config, self.state = load(sd, self.profile, self.config, self.state)

    def set_scale(self, new_scale: float) -> None:
        """Replace the scale by the user's value (torch's ``update(new_scale)``): one
        update with action ``set``, counters untouched, pending inf checks cleared.

        Raises:
            ValueError: a scale this profile cannot hold (see :func:`check_state`).
        """
        value = plain(new_scale, "new_scale")
        if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
            value = store_scale(float(value), self.config.arith)
        st = replace(self.state, scale=value, step=self.state.step + 1)
        check_state(self.config, st)
        found = any(self._found.values())
        self._found = {}
        ev = make_event(self.state, st, found, "set")
        self.state = st
        self.audit.append(ev)



class StaticLossScaler(LossScaler):
    """A fixed scale: ``update`` never changes it; overflowing steps are still skipped."""

    def __init__(self, scale: float) -> None:
        check_range("scale", scale, lo=0.0, lo_open=True)
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
        ev = make_event(self.state, st, bool(found_inf), "skip" if found_inf else "hold")
        self.state = st
        self.audit.append(ev)
        return ev.applied
