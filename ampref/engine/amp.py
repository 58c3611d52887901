"""``ampref.amp``: torch's ``GradScaler`` and ``autocast`` call shapes on ampref's numerics.

The canonical torch AMP loop runs with only the imports changed::

    scaler = ampref.amp.GradScaler("cpu")             # profile="megatron", ... for others
    for x, y in batches:
        with ampref.autocast(device_type="cuda", dtype=ampref.float16):
            loss = F.cross_entropy(model(x), y)
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
        ampref.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad(set_to_none=True)

:class:`GradScaler` is a thin protocol layer over :class:`ampref.scaling.scaler.LossScaler`
(one state machine): per-optimizer stages and torch's misuse errors live here, the
scale arithmetic, the transition and the audit log live there (SCL-GSC-*).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from typing import Any

from ampref.policy.autocast import autocast
from ampref.backends import DeviceScaling  # type: ignore[attr-defined]  # mapped from backends/
from .optim import Optimizer
from ampref.scaling.scaler import LossScaler
from ampref.common.checks import check_flag
from ampref.scaling.profiles import PROFILES
from .tensor import Tensor

__all__ = ["GradScaler", "autocast"]

#: torch.amp.GradScaler's devices; the numerics are the same on both (the scaler's state
#: machine runs on the host, gradients are unscaled where they live)
DEVICES = ("cuda", "cpu")
_TORCH_DEFAULTS = {"init_scale": 2.0**16, "growth_factor": 2.0, "backoff_factor": 0.5,
                   "growth_interval": 2000}


class _Stage(enum.Enum):
    READY = "ready"
    UNSCALED = "unscaled"
    STEPPED = "stepped"


class GradScaler:
    """Dynamic loss scaling with ``torch.amp.GradScaler``'s interface (SCL-GSC-001).

    Args:
        device: ``"cuda"`` or ``"cpu"`` (torch's argument; ampref's numerics do not
            depend on it).
        init_scale, growth_factor, backoff_factor, growth_interval: torch's parameters.
            Under another ``profile`` a value equal to torch's default means "the
            profile's own default"; any other value overrides it (where the profile
            allows, see :data:`ampref.scaling.profiles.PROFILES`).
        enabled: False makes every method a pass-through, as torch.
        profile: ampref's extra: the framework whose scaler state machine runs
            (``"torch"``, ``"megatron"``, ``"deepspeed"``, ...).

    Raises:
        ValueError: unknown device or profile, or a parameter out of range (named).
        TypeError: ``enabled`` is not a bool.
    """

    def __init__(self, device: str = "cuda", init_scale: float = 2.0**16,
                 growth_factor: float = 2.0, backoff_factor: float = 0.5,
                 growth_interval: int = 2000, enabled: bool = True, *,
                 profile: str = "torch") -> None:
        if device not in DEVICES:
            raise ValueError(f"GradScaler device must be one of {', '.join(DEVICES)}, got "
                             f"{device!r}")
        self.device = device
        self._enabled = check_flag("enabled", enabled)
        if profile not in PROFILES:
            raise ValueError(f"unknown loss-scale profile {profile!r}; choose one of "
                             f"{', '.join(PROFILES)}")
        given = {"init_scale": init_scale, "growth_factor": growth_factor,
                 "backoff_factor": backoff_factor, "growth_interval": growth_interval}
        if profile != "torch":
            given = {k: v for k, v in given.items() if v != _TORCH_DEFAULTS[k]}
        #: the state machine, with its audit log (``audit_log()``, ``report()``)
        self.loss_scaler = LossScaler.from_profile(profile, **given)
        self._stages: dict[int, _Stage] = {}
        self._found: dict[int, bool | None] = {}  # None: no gradient to check

    # -- scaling ------------------------------------------------------------------------
    def scale(self, outputs: Any) -> Any:
        """outputs * scale: a Tensor (its backward marks the gradients as scaled), an
        array, or a list/tuple of them (same structure). Disabled: returned unchanged."""
        if not self._enabled:
            return outputs
        if isinstance(outputs, (list, tuple)):
            return type(outputs)(self.scale(o) for o in outputs)
        return self.loss_scaler.scale_loss(outputs)

    def unscale_(self, optimizer: Optimizer) -> None:
        """Divide ``optimizer``'s gradients by the scale in place and record whether any
        is inf/NaN (torch's kernel arithmetic, SCL-UNS-001).

        Raises:
            RuntimeError: called twice for this optimizer before ``update()``, or after
                ``step()`` (torch's messages).
            ValueError: gradients of float16 parameters (torch: "Attempting to unscale
                FP16 gradients.").
        """
        if not self._enabled:
            return
        stage = self._stages.get(id(optimizer), _Stage.READY)
        if stage is _Stage.UNSCALED:
            raise RuntimeError("unscale_() has already been called on this optimizer since the "
                               "last update().")
        if stage is _Stage.STEPPED:
            raise RuntimeError("unscale_() is being called after step().")
        params = [p for p in _params_of(optimizer) if p.grad is not None]
        low = [p for p in params if p.format.name in ("float16", "bfloat16")]
        if low:
            raise ValueError(f"Attempting to unscale FP16 gradients. ({len(low)} parameter(s) "
                             f"of format {low[0].format.name}; keep float32 parameters under "
                             "autocast, or use the optimizer's master weights with LossScaler)")
        key = f"optimizer-{id(optimizer)}"
        if params and isinstance(params[0].backend, DeviceScaling):
            self.loss_scaler.unscale_on_device([p.grad for p in params], params[0].backend,
                                               optimizer=key)
            found: bool = self.loss_scaler.device_found_inf()
        else:
            grads, found = self.loss_scaler.unscale([p.grad for p in params], optimizer=key)
            for p, g in zip(params, grads, strict=True):
                p.grad = g
        for p in params:
            p.grad_scale = None
        self._found[id(optimizer)] = bool(found) if params else None
        self._stages[id(optimizer)] = _Stage.UNSCALED

    def step(self, optimizer: Optimizer, *args: Any, return_found_inf: bool = False,
             **kwargs: Any) -> Any:
        """Unscale (unless done) and call ``optimizer.step(*args, **kwargs)`` only if no
        gradient is inf/NaN.

        Returns ``optimizer.step``'s value (ampref's optimizers: True) or None when the
        step is skipped; with ``return_found_inf=True`` (ampref's keyword, proposed for
        torch in pytorch/pytorch#142472) it returns ``found_inf`` instead: True when
        this step was skipped.

        Raises:
            RuntimeError: ``step()`` twice before ``update()``, a ``closure`` argument,
                or no gradients at all ("No inf checks were recorded for this optimizer.").
        """
        return_found_inf = check_flag("return_found_inf", return_found_inf)
        if not self._enabled:
            ret: Any = optimizer.step(*args, **kwargs)
            return False if return_found_inf else ret
        if "closure" in kwargs:
            raise RuntimeError("Closure use is not currently supported if GradScaler is enabled.")
        stage = self._stages.get(id(optimizer), _Stage.READY)
        if stage is _Stage.STEPPED:
            raise RuntimeError("step() has already been called since the last update().")
        if stage is _Stage.READY:
            self.unscale_(optimizer)
        checked = self._found.get(id(optimizer))
        if checked is None:
            raise RuntimeError("No inf checks were recorded for this optimizer.")
        applied: Any = None if checked else optimizer.step(*args, **kwargs)
        self._stages[id(optimizer)] = _Stage.STEPPED
        return checked if return_found_inf else applied

    def update(self, new_scale: float | None = None) -> None:
        """One transition of the scale for this iteration (torch's ``update``).

        With ``new_scale`` the scale is set to that value (action ``set`` in the audit
        log; counters unchanged). Otherwise the inf checks of every optimizer unscaled
        since the last update combine with OR into one transition (SCL-OBJ-003).

        Raises:
            RuntimeError: no inf check was recorded ("No inf checks were recorded prior
                to update.").
            ValueError: a ``new_scale`` the profile cannot hold.
        """
        if not self._enabled:
            return
        if new_scale is not None:
            self.loss_scaler.set_scale(new_scale)
        else:
            checks = [f for f in self._found.values() if f is not None]
            if not checks:
                raise RuntimeError("No inf checks were recorded prior to update.")
            self.loss_scaler.update(found_inf=any(checks))
        self._stages.clear()
        self._found.clear()

    # -- torch's accessors ----------------------------------------------------------------
    def get_scale(self) -> float:
        """The current scale (1.0 when disabled)."""
        return float(self.loss_scaler.scale) if self._enabled else 1.0

    def get_growth_factor(self) -> float:
        return self.loss_scaler.config.growth_factor

    def get_backoff_factor(self) -> float:
        return self.loss_scaler.config.backoff_factor

    def get_growth_interval(self) -> int:
        return self.loss_scaler.config.growth_interval

    def is_enabled(self) -> bool:
        return self._enabled

    def state_dict(self) -> dict[str, Any]:
        """torch profile: torch's five keys; other profiles: the complete state
        (SCL-STA-*); disabled: ``{}``, as torch."""
        return self.loss_scaler.state_dict() if self._enabled else {}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Load a dict of :meth:`state_dict` or of ``torch.amp.GradScaler`` (validated as
        strictly as construction, SCL-STA-003).

        Raises:
            RuntimeError: an empty dict (torch's message).
            ValueError, TypeError: see :meth:`ampref.LossScaler.load_state_dict`.
        """
        if not self._enabled:
            return
        if isinstance(state_dict, dict) and len(state_dict) == 0:
            raise RuntimeError("The source state dict is empty, possibly because it was saved "
                               "from a disabled instance of GradScaler.")
        self.loss_scaler.load_state_dict(state_dict)

    def __repr__(self) -> str:
        scale = self.get_scale()
        return (f"ampref.amp.GradScaler({self.device!r}, profile={self.loss_scaler.profile!r}, "
                f"scale={scale:g}, enabled={self._enabled})")


def _params_of(optimizer: Any) -> list[Tensor]:
    params = getattr(optimizer, "params", None)
    if not isinstance(params, Iterable):
        raise TypeError(f"GradScaler needs an ampref optimizer (with .params), got "
                        f"{type(optimizer).__name__}")
    return list(params)

