"""Bit casts between floats and integers inside compiled kernels (LLVM bitcasts: no
memory, no call), for kernels that read or assemble exponent fields."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

from llvmlite import ir
from numba import types
from numba.extending import intrinsic

__all__ = ["as_bits", "as_float", "as_float32"]


@intrinsic
def _as_bits(typingctx: Any, x: Any) -> Any:
    """The bit pattern of a float64 as uint64."""
    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        return builder.bitcast(args[0], ir.IntType(64))
    return types.uint64(types.float64), codegen


@intrinsic
def _as_float(typingctx: Any, u: Any) -> Any:
    """The float64 whose bit pattern is the uint64 ``u``."""
    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        return builder.bitcast(args[0], ir.DoubleType())
    return types.float64(types.uint64), codegen


@intrinsic
def _as_float32(typingctx: Any, u: Any) -> Any:
    """The float32 whose bit pattern is the uint32 ``u``."""
    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        return builder.bitcast(args[0], ir.FloatType())
    return types.float32(types.uint32), codegen


#: the intrinsics with the call signatures compiled code uses (mypy sees the typing hook's)
as_bits = cast(Callable[[Any], Any], _as_bits)
as_float = cast(Callable[[Any], Any], _as_float)
as_float32 = cast(Callable[[Any], Any], _as_float32)
