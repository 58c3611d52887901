"""The NumPy backend: the reference itself."""

from __future__ import annotations

from typing import Any

import numpy as np

from ampref.accumulation import models as _acc
from ampref.accumulation import certified as _cert
from ampref.accumulation.registry import resolve
from ampref.formats.cast import quantize as _quantize
from ampref.kernels.srhash import random_bits as _random_bits


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

    def matmul(self, a: Any, b: Any, accumulation: str = "exact", input_format: Any = None) -> Any:
        """Exact model: fl32(exact a @ b) via certified float64 BLAS (ENG-MM-001).
        Other models (``sequential``, ``tensorcore:<gpu>``, ...) go through
        :func:`ampref.accumulation.models.matmul` per 2-D slice."""
        if a.dtype == np.float64 or b.dtype == np.float64:
            return np.matmul(np.asarray(a, np.float64), np.asarray(b, np.float64))
        if resolve(accumulation).kernel == "exact":  # the registry parses every name
            prec = input_format.precision_bits if input_format is not None else 24
            return _cert.matmul_f32(a, b, prec)
        fin = input_format if input_format is not None else "float32"
        lead = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
        A = np.broadcast_to(a, lead + a.shape[-2:])
        B = np.broadcast_to(b, lead + b.shape[-2:])
        out = np.empty(lead + (a.shape[-2], b.shape[-1]), dtype=np.float32)
        for ix in np.ndindex(*lead):
            out[ix] = _acc.matmul(A[ix], B[ix], input_format=fin, accumulation=accumulation)
        return out

    def sum(self, x: Any, axis: Any = None, keepdims: bool = False) -> Any:
        if x.dtype == np.float64:
            return np.sum(x, axis=axis, keepdims=keepdims)
        return _cert.sum_f32(x, axis, keepdims)

    def segment_sum(self, x: Any, starts: Any) -> Any:
        if x.dtype == np.float64:
            return np.add.reduceat(x, starts, axis=0)
        return _cert.segment_sum_f32(x, starts)

    def erfc(self, x: Any) -> Any:
        from scipy.special import erfc

        return erfc(x)

    def __repr__(self) -> str:
        return "ampref.backends.get('numpy')"


BACKEND = NumpyBackend()
