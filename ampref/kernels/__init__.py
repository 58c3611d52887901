"""Kernels: the array loops on integer bit views and exact float64 values that everything
above computes with, each in two implementations with one signature: the NumPy
specification (readable, the oracle) and a compiled twin (numba) proven equal to it bit
for bit. Which one runs is one switch (:mod:`~ampref.kernels.switch`): ``set_kernels``,
``use_kernels``, ``AMPREF_KERNELS``; compiled by default where numba is installed.

Here: the parameters a kernel reads (``params``: formats and rounding modes as ints),
counter-based random bits (``srhash``), the encode kernel (``encode`` / ``encode_numba``).

Imports: NumPy and numba only; no other ampref room (kernels take plain integers, so the
rooms above translate their data into ``params`` rows).
"""

from __future__ import annotations

from typing import Any

import numpy.typing as npt

from . import encode
from .params import FormatSpec
from .switch import CHOICES, compiled, compiled_available, get_kernels, set_kernels, use_kernels

__all__ = ["CHOICES", "compiled", "compiled_available", "encode_bits", "get_kernels",
           "quantize_bits", "set_kernels", "use_kernels"]


def encode_bits(x: npt.NDArray[Any], fmt: FormatSpec, rnd: int, sat: bool, subnormals: bool,
                seed: int | None, words: Any = None) -> tuple[Any, Any]:
    """Codes and NaN mask of ``x`` rounded to ``fmt`` (:func:`ampref.kernels.encode.
    encode_bits`), by the active implementation."""
    if compiled():
        from . import encode_numba

        return encode_numba.encode_bits(x, fmt, rnd, sat, subnormals, seed, words)
    return encode.encode_bits(x, fmt, rnd, sat, subnormals, seed, words)


def quantize_bits(x: npt.NDArray[Any], fmt: FormatSpec, rnd: int, sat: bool, subnormals: bool,
                  seed: int | None, words: Any, table: Any) -> Any:
    """float32 values of ``x`` rounded to ``fmt`` (:func:`ampref.kernels.encode.
    quantize_bits`), by the active implementation."""
    if compiled():
        from . import encode_numba

        return encode_numba.quantize_bits(x, fmt, rnd, sat, subnormals, seed, words, table)
    return encode.quantize_bits(x, fmt, rnd, sat, subnormals, seed, words, table)
