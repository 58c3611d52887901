"""Fault injection for ``ampref train --inject-nonfinite`` (TRN-INJ-001): at a seeded
fraction of steps one gradient element becomes inf or NaN, chosen by the counter-based
hash, so the same steps are poisoned on every machine and after every resume."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ampref.kernels.srhash import random_bits_scalar
from ampref.engine.tensor import Tensor

__all__ = ["FaultInjection"]


@dataclass(frozen=True, kw_only=True)
class FaultInjection:
    """Which steps get a non-finite gradient element, and which element."""

    seed: int
    rate: float

    def injected_at(self, step: int) -> bool:
        """True when step ``step`` is poisoned: hash(seed ^ 0xFA17, step) < rate * 2^32."""
        return self.rate > 0 and random_bits_scalar(self.seed ^ 0xFA17, step) < self.rate * 2.0**32

    def plant(self, params: Sequence[Tensor], step: int) -> None:
        """Write inf or NaN (by the hash) into one element of one parameter gradient."""
        self.plant_arrays([p.grad for p in params if p.grad is not None], step)

    def plant_arrays(self, grads: Sequence[np.ndarray], step: int,
                     value: float | None = None, rank: int | None = None) -> None:
        """Write ``value`` (default: inf or NaN by the hash) into the hashed element of the
        hashed array of ``grads``, in place. With ``rank`` the element is hashed from
        (step, rank), so two ranks planting at one step hit different elements."""
        counter = step if rank is None else (step << 16) | rank
        k = random_bits_scalar(self.seed ^ 0xFA18, counter)
        flat = grads[k % len(grads)].reshape(-1)
        flat[(k >> 8) % flat.size] = (np.inf if k & 1 else np.nan) if value is None else value

    def rank_at(self, step: int, ranks: int) -> int:
        """The rank whose local gradient is poisoned at an injected step (DPL-TRN-001)."""
        return random_bits_scalar(self.seed ^ 0xFA19, step) % ranks
