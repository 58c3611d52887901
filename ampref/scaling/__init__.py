"""Loss scaling: the one parameterised state machine (``machine``), every framework's
scaler as a data row (``profiles``), the scaler object with torch's call protocol
(``scaler``), its host unscale arithmetic (``unscale``), state dicts (``statedict``) and
audit log (``audit``). Spec: ``specs/scaling.md``.

Imports: ``ampref.common`` only (engine tensors are recognised by their interface). The
names below are the ``ampref.scaling`` module of earlier releases.
"""

from .machine import (LossScaleWarning, ScaleEvent, ScaleFloorError, ScalerConfig, ScalerState,
                      check_int, check_range, check_state, initial_state, make_event,
                      store_scale, transition)
from .profiles import OVERRIDES, PROFILES, Profile

__all__ = [
    "OVERRIDES", "PROFILES", "LossScaleWarning", "Profile", "ScaleEvent", "ScaleFloorError",
    "ScalerConfig", "ScalerState", "check_int", "check_range", "check_state", "initial_state",
    "make_event", "store_scale", "transition",
]
