"""The NumPy backend: the reference itself."""

from __future__ import annotations

from typing import Any

import numpy as np

from ampref.cast import quantize as _quantize
from ampref.srhash import random_bits as _random_bits


class NumpyBackend:
    name = "numpy"
    xp = np

    def asarray(self, x: Any, dtype: Any = None) -> Any:
        return np.asarray(x, dtype=dtype)

    def to_numpy(self, x: Any) -> Any:
        return np.asarray(x)

    def quantize(self, x: Any, fmt: Any, rounding: str = "nearest_even", *,
                 saturate: bool = False, subnormals: bool = True,
                 seed: int | None = None) -> Any:
        return _quantize(x, fmt, rounding, saturate=saturate, subnormals=subnormals, seed=seed)

    def random_bits(self, seed: int, start: int, count: int) -> Any:
        return _random_bits(seed, start, count)

    def __repr__(self) -> str:
        return "backends.get('numpy')"


BACKEND = NumpyBackend()
