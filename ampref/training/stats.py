"""Training statistics: log2 histograms and per-layer counts of gradient elements that
underflow or overflow when rounded into a low-precision format (TRN-CMP-001, TRN-RPT-001).

Used by :mod:`ampref.training.train` to record them and by
:mod:`ampref.training.report` to plot them.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ampref.engine.tensor import Tensor

__all__ = ["LOG2_BINS", "StepStats", "log2_hist"]

#: bin edges of the log2 |value| histograms (2 binades per bin, float32's whole range)
LOG2_BINS = np.arange(-150, 130, 2)


def log2_hist(values: np.ndarray) -> list[int]:
    """Counts of log2 |v| per :data:`LOG2_BINS` bin over the finite nonzero values."""
    v = np.abs(values[np.isfinite(values) & (values != 0)]).astype(np.float64)
    if not v.size:
        return [0] * (len(LOG2_BINS) - 1)
    return np.histogram(np.log2(v), bins=LOG2_BINS)[0].tolist()


class StepStats:
    """Per-layer counts of gradient elements rounded into a low format during backward.

    On a device the counts stay there while backward runs (each would otherwise be a host
    synchronisation per rounded gradient); reading :attr:`layers` brings all of them
    over in one transfer."""

    def __init__(self) -> None:
        self._layers: dict[str, list[int]] = {}  # name -> [elements, underflow, overflow]
        self._pending: list[tuple[str, Any]] = []  # (name, int64 [underflow, overflow])
        self._backend: Any = None
        self.raw_grads: dict[str, list[np.ndarray]] = {}
        self.keep_raw = False

    def __call__(self, t: Tensor, raw: Any, rounded: Any) -> None:
        name = t.name or "other intermediates"
        xp = t.backend.xp  # counted where the gradients live; only the counts travel
        self._layers.setdefault(name, [0, 0, 0])[0] += raw.size
        # a device backend's one-launch count (BKD-STA-001), else the array operations
        fused = getattr(t.backend, "rounding_counts", None)
        pair = fused(raw, rounded) if fused is not None else None
        if pair is None:
            finite = xp.isfinite(raw)
            pair = xp.stack([xp.asarray(c, dtype=xp.int64) for c in (
                xp.count_nonzero((raw != 0) & finite & (rounded == 0)),
                xp.count_nonzero(finite & ~xp.isfinite(rounded)))])
        self._pending.append((name, pair))
        self._backend = t.backend
        if self.keep_raw:
            self.raw_grads.setdefault(name, []).append(t.backend.to_numpy(raw).reshape(-1))

    @property
    def layers(self) -> dict[str, list[int]]:
        """name -> [elements, underflow, overflow], with every pending count read."""
        if self._pending:
            xp = self._backend.xp
            counts = self._backend.to_numpy(xp.concatenate([p for _, p in self._pending]))
            for k, (name, _) in enumerate(self._pending):
                c = self._layers[name]
                c[1] += int(counts[2 * k])
                c[2] += int(counts[2 * k + 1])
            self._pending.clear()
        return self._layers
