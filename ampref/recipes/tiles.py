"""Tiles, float32 scale arithmetic and the quantization result (specs/recipes.md REC-TIL-*).

Every recipe sees its input as a 2-D matrix (rows = all leading axes, columns = the last
axis) cut into ``rows x cols`` tiles. A partial tile at the right or bottom edge is
padded with zeros, as Transformer Engine pads (zeros never change a block's amax); the
padding is dropped again from every result.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np
import numpy.typing as npt

from ampref.formats.cast import value_table

__all__ = ["Quantized", "as_float32", "to_blocks", "from_blocks", "block_amax", "f32",
           "FLT_MAX", "dequantize"]

FLT_MAX = np.float32(np.finfo(np.float32).max)
_F32 = np.float32


def f32(v: Any) -> Any:
    """``v`` as float32 (arrays and scalars); float32 IEEE ops on the results round once."""
    return np.asarray(v, dtype=_F32)


def as_float32(x: Any, where: str) -> npt.NDArray[np.float32]:
    """The input as float32: float16/bfloat16/float32 widen exactly, float64 rounds to
    nearest-even (the stacks take fp32/bf16/fp16 tensors only).

    Raises:
        TypeError: ``x`` is not an array of floating-point numbers.
    """
    arr = np.asarray(x)
    kind_ok = arr.dtype.kind == "f" or (arr.dtype.kind == "V" and "float" in arr.dtype.name)
    if not kind_ok:
        raise TypeError(f"{where} needs a floating-point array (float32, float64, float16 or "
                        f"bfloat16), got dtype {arr.dtype}")
    if arr.ndim == 0:
        raise ValueError(f"{where} needs at least one axis, got a 0-d array")
    with np.errstate(over="ignore"):  # float64 past float32's range rounds to ±inf
        return arr.astype(_F32)


def to_blocks(x2: npt.NDArray[Any], tile: tuple[int, int]) -> npt.NDArray[Any]:
    """(M, N) -> (ceil(M/r), ceil(N/c), r*c): tiles in row-major order, zero padded."""
    r, c = tile
    M, N = x2.shape
    Mp, Np = -(-M // r) * r, -(-N // c) * c
    if (Mp, Np) != (M, N):
        x2 = np.pad(x2, ((0, Mp - M), (0, Np - N)))
    if r == 1:  # 1 x c tiles are a view
        return x2.reshape(Mp, Np // c, c)
    return x2.reshape(Mp // r, r, Np // c, c).transpose(0, 2, 1, 3).reshape(Mp // r, Np // c,
                                                                          r * c)


def from_blocks(b: npt.NDArray[Any], shape: tuple[int, int],
                tile: tuple[int, int]) -> npt.NDArray[Any]:
    """Inverse of :func:`to_blocks`, padding dropped."""
    r, c = tile
    Mt, Nt, _ = b.shape
    if r == 1:
        return b.reshape(Mt, Nt * c)[:shape[0], :shape[1]]
    return b.reshape(Mt, Nt, r, c).transpose(0, 2, 1, 3).reshape(Mt * r, Nt * c)[
        :shape[0], :shape[1]]


def block_amax(blocks: npt.NDArray[np.float32], rule: str) -> npt.NDArray[np.float32]:
    """max |x| per block (last axis): ``"fmaxf"`` ignores NaN (a block of NaN only gives
    0), ``"torch"`` propagates NaN; +-inf gives inf in both (REC-AMX-001).

    One reduction over the last axis. (A fold in halves for power-of-two widths stood here,
    meant to be faster, but a precedence slip, ``n & (n - 1) == 0``, kept it from ever
    running; measured 2026-11-29 on a 2-core AMD EPYC with NumPy 2.4.6 it is 0.4-0.9x the
    reduction's speed on 16-, 32- and 128-wide blocks, so it is gone.)"""
    op = np.fmax if rule == "fmaxf" else np.maximum
    out = op.reduce(np.abs(blocks), axis=-1, initial=0.0)
    return np.asarray(out, _F32)


@dataclass(frozen=True, kw_only=True)
class Quantized:
    """The result of :func:`ampref.recipes.quantize` (REC-API-001).

    ``values`` are the dequantized float32 numbers (x's shape); ``codes`` the element
    codes (uint8, unpacked, x's shape); ``scales`` the decoded float32 block scales (one
    per tile: x.shape[:-1] + (ceil(N/c),) for 1 x c tiles, (ceil(M/r), ceil(N/c)) for 2-D
    tiles, () per tensor); ``scale_codes`` the same in the scale format (uint8 for E8M0/
    E4M3, the float32 bits as uint32 for FP32 scales); ``global_scale`` the FP32
    per-tensor decode scale (NVFP4) or None; ``state`` the next DelayedState for
    ``fp8_delayed``. The decoded scales are *decode* scales: value = code x scale
    (x global_scale).
    """

    recipe: str
    profile: str
    element: str
    tile: tuple[int, int]
    codes: npt.NDArray[np.uint8] = field(repr=False)
    scales: npt.NDArray[np.float32] = field(repr=False)
    scale_codes: npt.NDArray[Any] = field(repr=False)
    global_scale: Any = None
    amax: Any = None
    state: Any = None
    options: dict[str, Any] = field(default_factory=dict)

    @cached_property
    def values(self) -> npt.NDArray[np.float32]:
        """Dequantized float32 values (REC-DEQ-001), computed on first use."""
        return dequantize(self.codes, self.element, self.scales, self.tile, self.codes.shape,
                          self.global_scale)


def dequantize(codes: npt.NDArray[Any], element: str, scales: npt.NDArray[np.float32],
               tile: tuple[int, int], shape: tuple[int, ...],
               global_scale: Any = None) -> npt.NDArray[np.float32]:
    """value = fl32(fl32(decode(code) * block_scale) * global_scale) (REC-DEQ-001).

    decode(code) * block_scale is exact for every recipe here whose result is a float32
    normal number (an E2M1 or E4M3 element times an E4M3 or power-of-two scale); the
    global scale multiplies once, rounding to nearest-even. NaN codes or scales give NaN.
    """
    e = value_table(element)[codes]  # exact values by table lookup (codes are uint8)
    with np.errstate(over="ignore", invalid="ignore"):
        if tile == (0, 0):
            out = e * f32(scales)
        else:
            r, c = tile
            M, N = int(np.prod(shape[:-1])), shape[-1]
            s2 = np.asarray(scales, _F32).reshape(-(-M // r), -(-N // c))
            Mp, Np = s2.shape[0] * r, s2.shape[1] * c
            e2 = e.reshape(M, N)
            if (Mp, Np) != (M, N):
                e2 = np.pad(e2, ((0, Mp - M), (0, Np - N)))
            blocks = e2.reshape(s2.shape[0], r, s2.shape[1], c) * s2[:, None, :, None]
            out = blocks.reshape(Mp, Np)[:M, :N].reshape(shape)
        if global_scale is not None:
            g = f32(global_scale)
            if g.ndim == 0:
                out = out * g
            else:  # row-scaled NVFP4: one global scale per row of the 2-D view
                out = (out.reshape(g.shape[0], -1) * g[:, None]).reshape(shape)
    return np.asarray(out, _F32)
