"""Which framework's rules does a black-box loss-scale update follow? (``specs/scaling.md``
SCL-IDN-001)

Scalers disagree on when growth is due (the step equal to the interval, at least the
interval, modulo it, or counted since the last overflow), how the scale is stored and
multiplied (float32, float64, float64 then float32), hysteresis and its refill, the floor
(none, clamp, raise) and a cap, and whether growth to inf is refused.
:func:`identify_scaler` feeds one fixed sequence of overflow flags to
``fn(found_infs) -> scales`` (the scale after each update; a shorter list means the
scaler raised at the next update) and compares it, bit for bit, with every profile's
rules at the same ``init_scale`` and ``growth_interval``.

The flags: clean runs one short of, at, and one past the interval with overflows between
them; single, double and triple overflows (hysteresis, refills); a run of overflows long
enough to reach any floor and below (clamp, raise, collapse toward 0); clean runs long
enough to grow back, and on toward a cap or inf when that takes at most 20,000 steps.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np

from .machine import ScaleFloorError, ScalerConfig, initial_state, transition
from .profiles import PROFILES

__all__ = ["ScalerIdentification", "identify_scaler", "scaler_battery", "trajectory"]


@dataclass(frozen=True, kw_only=True)
class ScalerIdentification:
    """Matching profiles, else the closest and the first step it does not explain."""

    matches: tuple[str, ...]
    closest: str
    #: (step from 1, found_inf, got, want) of the closest profile's first difference;
    #: a missing value (the scaler raised) is None
    first: tuple[int, bool, float | None, float | None] | None = None

    def __str__(self) -> str:
        if self.matches:
            return "identify_scaler: matches " + "; ".join(self.matches)
        s, f, got, want = self.first or (0, False, None, None)
        return (f"identify_scaler: no profile explains every update; closest: {self.closest}; "
                f"first: update {s} (found_inf={f}) gave {_show(got)}, that profile gives "
                f"{_show(want)}")


def _show(v: float | None) -> str:
    if v is None:
        return "no value (raised)"
    with np.errstate(over="ignore"):
        f = np.float32(v)
    if float(f) == v or math.isnan(v):
        return f"{v!r} (float32 0x{int(f.view(np.uint32)):08x})"
    return f"{v!r} (not a float32 value)"


def scaler_battery(init_scale: float, growth_interval: int) -> list[bool]:
    """The fixed overflow flags (True = this step overflowed)."""
    g = growth_interval
    flags: list[bool] = []
    for run in (g - 1, g, g + 1, 2 * g, 2 * g + 1):
        flags += [False] * run + [True]
    for burst in (1, 2, 3, 1, 1):
        flags += [True] * burst + [False]
    down = int(abs(math.log2(init_scale))) + 40  # past any floor, toward 0
    flags += [True] * down
    up = 2 * down + 160  # back up, then toward the float32 top
    flags += [False] * min(up * g, 20_000)
    return flags


def trajectory(cfg: ScalerConfig, flags: Sequence[bool]) -> list[float]:
    """The scale after each update under ``cfg``; the list stops where the profile
    raises (DeepSpeed at its floor)."""
    st, out = initial_state(cfg), []
    for f in flags:
        try:
            st, _ = transition(cfg, st, bool(f))
        except ScaleFloorError:
            break
        out.append(float(st.scale))
    return out


def _first_difference(got: list[float], want: list[float]) -> int | None:
    for i in range(max(len(got), len(want))):
        a = got[i] if i < len(got) else None
        b = want[i] if i < len(want) else None
        if a is None or b is None or np.float64(a).view(np.uint64) != np.float64(b).view(
                np.uint64):
            return i
    return None


def identify_scaler(fn: Callable[[list[bool]], Sequence[float]], *,
                    init_scale: float = 2.0**16, growth_interval: int = 2000
                    ) -> ScalerIdentification:
    """Name the profiles whose rules ``fn`` follows at ``init_scale`` and
    ``growth_interval`` (compared as float64 bits: a float32 scale must be returned as
    its exact value).

    Raises:
        TypeError: ``fn`` is not callable.
        ValueError: a bad ``init_scale`` or ``growth_interval`` (from ScalerConfig).
    """
    if not callable(fn):
        raise TypeError(f"identify_scaler needs a callable, got {type(fn).__name__}")
    flags = scaler_battery(init_scale, growth_interval)
    got = [float(v) for v in fn(list(flags))]
    best: tuple[int, str, int | None, list[float]] | None = None
    matches = []
    for name, prof in PROFILES.items():
        cfg = replace(prof.config, init_scale=init_scale, growth_interval=growth_interval)
        want = trajectory(cfg, flags)
        i = _first_difference(got, want)
        if i is None:
            matches.append(name)
        depth = len(flags) + 1 if i is None else i
        if best is None or depth > best[0]:
            best = (depth, name, i, want)
    assert best is not None  # PROFILES is never empty
    _, closest, i, want = best
    first = None
    if i is not None:
        first = (i + 1, flags[i] if i < len(flags) else False,
                 got[i] if i < len(got) else None, want[i] if i < len(want) else None)
    return ScalerIdentification(matches=tuple(matches), closest=closest, first=first)
