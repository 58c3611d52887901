"""MX block scaling (E8M0 scale per block of 32): the OCP rules computed exactly, and the
arithmetic of Transformer Engine's kernels and of torchao (specs/recipes.md REC-MX-*).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from ampref.common.checks import real_array, real_float32
from ampref.formats.cast import encode, quantize
from ampref.formats.table import Encoding, Format, get_format
from .catalog import Profile
from .elements import encode_elements

__all__ = ["mx_scale_exponents", "mx_quantize", "mx_blocks", "MX_RULES", "MX_ELEMENTS"]

MX_RULES = ("floor", "ceil", "even", "rceil")
#: element formats of the OCP MX v1.0 spec (MXFP8, MXFP6, MXFP4)
MX_ELEMENTS = ("float8_e4m3fn", "float8_e5m2", "float6_e2m3fn", "float6_e3m2fn", "float4_e2m1fn")
_NAN = 0xFF


def _floor_log2(a: npt.NDArray[Any]) -> npt.NDArray[np.int64]:
    _, e = np.frexp(a)
    return (e - 1).astype(np.int64)


def mx_scale_exponents(block_amax: npt.ArrayLike, elem: str | Format,
                       rule: str = "floor") -> npt.NDArray[np.int64]:
    """Unbiased E8M0 exponent per block, exact (FP8-MX-002). NaN/inf amax -> 128 (NaN code
    0xFF); amax 0 -> -127; results clamped to [-127, 127].

    * floor (OCP MX v1.0): floor(log2 amax) - emax_elem
    * ceil: ceil(log2 amax) - emax_elem
    * even: floor(log2 of amax rounded to the element's mantissa bits, nearest-even) - emax_elem
    * rceil (cuBLAS; TE up to its float32 arithmetic): ceil(log2(amax / elem_max)), exact
    """
    f = get_format(elem)
    if rule not in MX_RULES:
        raise ValueError(f"unknown MX scale rule {rule!r}; choose one of {', '.join(MX_RULES)}")
    a = real_array("block_amax", block_amax).astype(np.float64)
    bad = ~np.isfinite(a)
    safe = np.where(bad | (a <= 0), 1.0, a)
    emax = f.maxexp_value
    fl = _floor_log2(safe)
    if rule == "floor":
        k = fl - emax
    elif rule == "ceil":
        k = fl + (safe > np.ldexp(1.0, fl)) - emax
    elif rule == "even":
        wide = Format(name="even-tmp", exponent_bits=8, mantissa_bits=f.mantissa_bits,
                      bias=127, encoding=Encoding.IEEE)
        k = _floor_log2(quantize(safe, wide)) - emax
    else:
        k = fl - _floor_log2(np.array(f.max))  # candidate; bump while amax > max * 2^k
        k = np.where(safe > f.max * np.ldexp(1.0, k), k + 1, k)
        k = np.where(safe <= f.max * np.ldexp(1.0, k - 1), k - 1, k)
    k = np.where(a == 0, -127, k)
    k = np.clip(k, -127, 127)
    return np.where(bad, 128, k)


# ------------------------------------------------------------- scale code per profile
def _codes_ocp(a: Any, f: Format, rule: str) -> Any:
    k = mx_scale_exponents(a, f, rule)
    return np.where(k == 128, _NAN, k + 127).astype(np.uint8)


def _codes_te(a: Any, f: Format) -> Any:
    """float_to_e8m0(amax * fl32(1/max)) rounding up (ptx_arch_spec.cuh; REC-MX-002)."""
    with np.errstate(over="ignore", invalid="ignore"):
        d = (a * np.float32(1 / np.float32(f.max))).astype(np.float32)
    u = d.view(np.uint32)
    e, m = (u >> 23) & 0xFF, u & 0x7FFFFF
    up = (m > 0) & (e != 0xFE) & ~((e == 0) & (m <= 0x400000))
    code = (e + up).astype(np.int64)
    code = np.where(d == 0, 0, code)
    code = np.where(np.isinf(d), 0xFE, code)
    return np.where(np.isnan(d), _NAN, code).astype(np.uint8)


def _codes_torchao(a: Any, f: Format, rule: str) -> Any:
    """torchao to_mx (mx_tensor.py; REC-MX-003): FLOOR/CEIL/EVEN from the amax bits,
    RCEIL as ceil(log2f(amax / max))."""
    nan = np.isnan(a)
    if rule == "rceil":
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            d = (a / np.float32(f.max)).astype(np.float32)
            lg = np.log2(d.astype(np.float64)).astype(np.float32)  # log2f, correctly rounded
            k = np.clip(np.ceil(np.nan_to_num(lg, nan=0.0, posinf=0.0)), -127, 127)
        code = (k + 127).astype(np.int64)
        code = np.where(np.isinf(d), 0xFE, code)
        return np.where(np.isnan(d), _NAN, code).astype(np.uint8)
    bits = a.view(np.int32).astype(np.int64)
    if rule == "even":  # add half an element ulp to the amax bits, drop the fraction
        bits = (bits + (1 << (23 - f.mantissa_bits - 1))) & 0xFF800000
    exp = ((bits >> 23) & 0xFF) - 127
    if rule == "ceil":
        exp = exp + ((bits & 0x7FFFFF) > 0)
    k = np.clip(exp - _floor_log2(np.array(f.max)), -127, 128)
    return np.where(nan, _NAN, k + 127).astype(np.uint8)


def _multiplier(code: Any, mode: str) -> Any:
    """float32 factor applied to the elements of each block."""
    c = code.astype(np.int64)
    if mode == "te":  # exp2f_rcp: 254 -> 2^-127, 255 -> NaN
        m = np.where(c == 254, np.float32(2.0**-127),
                     (np.clip(254 - c, 0, 254) << 23).astype(np.uint32).view(np.float32))
        return np.where(c == _NAN, np.float32(np.nan), m).astype(np.float32)
    if mode == "torchao-rceil":  # code 0 multiplies by 1 (torchao's fallback)
        m = np.exp2((127 - c).astype(np.float32))
        m = np.where(c == 254, np.float32(2.0**-127), np.where(c == 0, np.float32(1), m))
        return np.where(c == _NAN, np.float32(np.nan), m).astype(np.float32)
    raise ValueError(mode)


def mx_blocks(blocks: npt.NDArray[np.float32], amax: npt.NDArray[np.float32], element: str,
              profile: Profile, rule: str) -> tuple[Any, Any]:
    """(element codes per block, E8M0 scale codes) for float32 blocks (..., block)."""
    f = get_format(element)
    if profile.mx == "ocp":
        codes = _codes_ocp(amax, f, rule)
        k = np.where(codes == _NAN, 0, codes.astype(np.int64) - 127)
        scaled = blocks.astype(np.float64) / np.ldexp(1.0, k)[..., None]  # exact
        return encode(np.nan_to_num(scaled, nan=0.0), f, saturate=True), codes
    if profile.mx == "te":
        codes = _codes_te(amax, f)
        with np.errstate(invalid="ignore", over="ignore"):
            xs = (blocks * _multiplier(codes, "te")[..., None]).astype(np.float32)
        return encode_elements(xs, element, profile), codes
    codes = _codes_torchao(amax, f, rule)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        if rule == "rceil":
            xs = blocks * _multiplier(codes, "torchao-rceil")[..., None]
        else:  # divide by the scale, floored at the smallest normal float32 (2^-126)
            sc = (codes.astype(np.uint32) << 23).view(np.float32)
            xs = blocks / np.maximum(sc, np.float32(2.0**-126))[..., None]
    return encode_elements(xs.astype(np.float32), element, profile), codes


def mx_quantize(x: npt.ArrayLike, elem: str | Format = "e4m3", *, block: int = 32,
                rule: str = "floor") -> dict[str, Any]:
    """OCP MX quantization along the last axis in blocks of ``block`` (FP8-MX-001), exact.

    Returns ``scale_codes`` (E8M0, uint8, one per block), ``elements`` (element values,
    float32, saturating nearest-even) and ``dequantized`` (elements * scale; NaN in a
    block whose amax is NaN or inf). :func:`ampref.recipes.quantize` with profile
    ``"ocp"`` is the same computation with the common result type.

    Raises:
        ValueError: last axis not a multiple of ``block``, unknown rule or element format.
    """
    f = get_format(elem)
    if f.name not in MX_ELEMENTS:
        raise ValueError(f"MX element format must be one of {', '.join(MX_ELEMENTS)} (OCP MX "
                         f"v1.0), got {f.name}")
    if isinstance(block, bool) or not isinstance(block, (int, np.integer)) or block < 1:
        raise ValueError(f"MX block size must be a positive int, got {block!r}")
    arr = real_float32("x", x)
    if arr.ndim == 0 or arr.shape[-1] % block:
        raise ValueError(f"the last axis ({arr.shape[-1] if arr.ndim else 0}) must be a multiple "
                         f"of the block size {block}")
    blocks = arr.reshape(*arr.shape[:-1], arr.shape[-1] // block, block).astype(np.float64)
    # np.max propagates NaN: a block holding NaN or inf gets the NaN scale (FP8-MX-001)
    k = mx_scale_exponents(np.max(np.abs(blocks), axis=-1), f, rule)
    nan_block = k == 128
    kk = np.where(nan_block, 0, k)
    scaled = blocks / np.ldexp(1.0, kk)[..., None]  # exact: power-of-two scaling in float64
    elems = quantize(np.nan_to_num(scaled, nan=0.0), f, saturate=True)
    deq = elems * np.ldexp(1.0, kk)[..., None]
    deq = np.where(nan_block[..., None], np.nan, deq)
    codes = np.where(nan_block, 0xFF, kk + 127).astype(np.uint8)
    shape = arr.shape
    return {"scale_codes": codes, "elements": elems.reshape(shape).astype(np.float32),
            "dequantized": deq.reshape(shape).astype(np.float32)}
