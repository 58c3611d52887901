"""Rounding modes by name (IEEE 754 vocabulary plus round-to-odd and stochastic)."""

from __future__ import annotations

import enum

from ampref.kernels.params import MODE_NAMES

__all__ = ["RoundingMode", "get_rounding"]


class RoundingMode(enum.Enum):
    """Rounding directions understood by :func:`ampref.quantize`.

    * ``nearest_even``: roundTiesToEven (default).
    * ``nearest_away``: roundTiesToAway (ties away from zero).
    * ``toward_zero``: truncation (roundTowardZero).
    * ``toward_positive`` / ``toward_negative``: roundTowardPositive / -Negative.
    * ``odd``: round to odd (truncate, then set the last bit if inexact); the safe
      first step of a double rounding (Boldo & Melquiond 2008).
    * ``stochastic``: round away from zero with probability equal to the discarded
      fraction of a quantum, using counter-based random bits (see
      :mod:`ampref.kernels.srhash`).
    """

    NEAREST_EVEN = "nearest_even"
    NEAREST_AWAY = "nearest_away"
    TOWARD_ZERO = "toward_zero"
    TOWARD_POSITIVE = "toward_positive"
    TOWARD_NEGATIVE = "toward_negative"
    ODD = "odd"
    STOCHASTIC = "stochastic"

    @property
    def code(self) -> int:
        """The mode's int code in the kernels (:mod:`ampref.kernels.params`)."""
        return MODE_NAMES.index(self.value)


def get_rounding(rounding: str | RoundingMode) -> RoundingMode:
    """Parse a rounding mode name.

    Raises:
        ValueError: unknown name; the message lists the known ones.
        TypeError: neither a string nor a :class:`RoundingMode`.
    """
    if isinstance(rounding, RoundingMode):
        return rounding
    if not isinstance(rounding, str):
        raise TypeError(
            f"rounding must be a str or ampref.RoundingMode, got {type(rounding).__name__}"
        )
    try:
        return RoundingMode(rounding)
    except ValueError:
        raise ValueError(
            f"unknown rounding mode {rounding!r}; choose one of "
            f"{', '.join(m.value for m in RoundingMode)}"
        ) from None
