"""The loss scaler's state dicts (``specs/scaling.md`` SCL-STA-*): torch's five-key form
and the full form that checkpoints use, and loading either as strictly as constructing.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import replace
from typing import Any

import numpy as np

from .machine import ScalerConfig, ScalerState, check_state

__all__ = ["TORCH_KEYS", "load", "plain", "state_dict"]

#: the keys of ``torch.amp.GradScaler.state_dict()``
TORCH_KEYS = frozenset({"scale", "growth_factor", "backoff_factor", "growth_interval",
                        "_growth_tracker"})


def state_dict(profile: str, cfg: ScalerConfig, st: ScalerState, *,
               full: bool = False) -> dict[str, Any]:
    """The scaler's state (SCL-STA-*).

    The torch profile gives exactly ``torch.amp.GradScaler``'s five keys, so dicts move
    between the two; those keys do not hold the step counter, the last overflow or the
    hysteresis tracker. ``full=True`` (and every other profile) gives the complete
    state and configuration: ``{"profile", "config", "state"}``. Checkpoints use the
    full form, so a resumed run continues exactly (SCL-STA-003).
    """
    if profile == "torch" and not full:
        return {"scale": st.scale, "growth_factor": cfg.growth_factor,
                "backoff_factor": cfg.backoff_factor, "growth_interval": cfg.growth_interval,
                "_growth_tracker": st.growth_tracker}
    return {"profile": profile, "config": dataclasses.asdict(cfg),
            "state": dataclasses.asdict(st)}


def load(sd: dict[str, Any], profile: str, cfg: ScalerConfig,
         st: ScalerState) -> tuple[ScalerConfig, ScalerState]:
    """(config, state) of a scaler of ``profile`` after loading ``sd`` (either form of
    :func:`state_dict`, or ``torch.amp.GradScaler``'s dict for the torch profile).

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
        return _load_full(sd, profile)
    if profile == "torch":
        return _load_torch(sd, cfg, st)
    raise ValueError(f"expected keys ['config', 'profile', 'state'], got {sorted(sd)}")


def _load_torch(sd: dict[str, Any], cfg: ScalerConfig,
                st: ScalerState) -> tuple[ScalerConfig, ScalerState]:
    if set(sd) != TORCH_KEYS:
        raise ValueError(f"a torch GradScaler state dict has keys {sorted(TORCH_KEYS)}, got "
                         f"{sorted(sd)}")
    vals = {k: plain(sd[k], k) for k in TORCH_KEYS}
    cfg = replace(cfg, growth_factor=vals["growth_factor"],
                  backoff_factor=vals["backoff_factor"],
                  growth_interval=vals["growth_interval"])
    scale = vals["scale"]
    if isinstance(scale, (int, float)) and not isinstance(scale, bool) and math.isfinite(scale):
        scale = float(np.float32(scale))  # torch holds the scale in a float32 tensor
    st = replace(st, scale=scale, growth_tracker=vals["_growth_tracker"])
    check_state(cfg, st)
    return cfg, st


def _load_full(sd: dict[str, Any], profile: str) -> tuple[ScalerConfig, ScalerState]:
    if sd["profile"] != profile:
        raise ValueError(f"state dict of profile {sd['profile']!r} loaded into a "
                         f"{profile!r} scaler")
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
        parts[part] = {k: plain(v, f"{part}.{k}") for k, v in given.items()}
    cfg = ScalerConfig(**parts["config"])
    st = ScalerState(**parts["state"])
    check_state(cfg, st)
    return cfg, st


def plain(v: Any, name: str) -> Any:
    """A loaded value as a plain Python scalar (0-d arrays and NumPy scalars unwrapped);
    anything else is returned as is for the validators to name."""
    if isinstance(v, np.ndarray) and v.ndim == 0:
        v = v[()]
    if isinstance(v, np.generic):
        v = v.item()
    if hasattr(v, "item") and callable(v.item) and getattr(v, "ndim", None) == 0:
        v = v.item()  # a 0-d tensor of another library (torch's GradScaler state)
    return v
