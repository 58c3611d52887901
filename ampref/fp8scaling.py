"""FP8 scaling recipes: delayed and current per-tensor scaling (Transformer Engine) and
MX block scaling with E8M0 scales (OCP MX), on top of :mod:`ampref.cast`.

Clause IDs refer to ``specs/scaling.md`` (FP8-*). All scale arithmetic is float32, as
in the CUDA kernels; exponents are taken from bits (frexp), never from float32 log2.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from .cast import encode, quantize
from .formats import Encoding, Format, get_format

__all__ = ["amax", "DelayedScaling", "DelayedState", "current_scale", "quantize_per_tensor",
           "mx_scale_exponents", "mx_quantize", "MX_ELEMENTS", "MX_RULES"]

FLT_MAX = float(np.finfo(np.float32).max)
MX_RULES = ("floor", "ceil", "even", "rceil")
#: element formats of the OCP MX v1.0 spec (MXFP8, MXFP6, MXFP4)
MX_ELEMENTS = ("float8_e4m3fn", "float8_e5m2", "float6_e2m3fn", "float6_e3m2fn", "float4_e2m1fn")


def amax(x: npt.ArrayLike) -> np.float32:
    """max |x| ignoring NaN, inf propagating (CUDA fmaxf semantics; FP8-AMX-001)."""
    a = np.abs(np.asarray(x, dtype=np.float32)).reshape(-1)
    return np.float32(np.fmax.reduce(a, initial=0.0))


def _fp8_max(fmt: str | Format) -> np.float32:
    f = get_format(fmt)
    if f.name not in ("float8_e4m3fn", "float8_e5m2", "float4_e2m1fn"):
        raise ValueError(f"FP8 recipes scale to e4m3, e5m2 (or e2m1), got {f.name}")
    return np.float32(f.max)


# ----------------------------------------------------------------------- delayed scaling
@dataclass(frozen=True)
class DelayedState:
    """Scale and amax history (row 0 is this step's staging slot)."""

    scale: np.float32
    history: npt.NDArray[np.float32]


@dataclass(frozen=True, kw_only=True)
class DelayedScaling:
    """Transformer Engine's DelayedScaling for one quantizer (FP8-DEL-*).

    ``kernel="fused"`` is the default CUDA bulk update (scale = (fp8_max * 2^-margin) /
    amax, and a zero staged amax leaves history and scale untouched); ``"unfused"`` is
    the Python path (scale = (fp8_max / amax) / 2^margin, always rolls).
    """

    fp8_format: str = "e4m3"
    margin: int = 0
    amax_history_len: int = 1024
    amax_compute_algo: Literal["max", "most_recent"] = "max"
    kernel: Literal["fused", "unfused"] = "fused"

    def __post_init__(self) -> None:
        _fp8_max(self.fp8_format)
        if not isinstance(self.amax_history_len, int) or self.amax_history_len < 1:
            raise ValueError(f"amax_history_len must be a positive int, got "
                             f"{self.amax_history_len!r}")
        if self.amax_compute_algo not in ("max", "most_recent"):
            raise ValueError(f"amax_compute_algo must be 'max' or 'most_recent', got "
                             f"{self.amax_compute_algo!r}")
        if self.kernel not in ("fused", "unfused"):
            raise ValueError(f"kernel must be 'fused' or 'unfused', got {self.kernel!r}")
        if not isinstance(self.margin, int) or self.margin < 0:
            raise ValueError(f"margin must be a non-negative int, got {self.margin!r}")

    def init(self) -> DelayedState:
        return DelayedState(np.float32(1.0), np.zeros(self.amax_history_len, np.float32))

    def record(self, st: DelayedState, x: npt.ArrayLike) -> DelayedState:
        """Stage this step's amax of ``x`` in history row 0."""
        self._check_state(st)
        h = st.history.copy()
        h[0] = np.fmax(h[0], amax(x))
        return replace(st, history=h)

    def update(self, st: DelayedState) -> DelayedState:
        """Compute the new scale from the history, then roll it (FP8-DEL-002..004).

        Raises:
            TypeError: ``st`` is not a :class:`DelayedState` of this recipe's history length.
        """
        self._check_state(st)
        h = st.history
        if self.kernel == "fused" and h[0] == 0:
            return st  # module did not run: nothing staged, nothing changes
        a = np.float32(np.fmax.reduce(h)) if self.amax_compute_algo == "max" else h[0]
        fmax = _fp8_max(self.fp8_format)
        with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
            if self.kernel == "fused":
                sf = np.float32(fmax * np.float32(2.0**-self.margin)) / a
            else:
                sf = (fmax / a) / np.float32(2.0**self.margin)
        sf = np.float32(sf)
        if not (a > 0) or not np.isfinite(a):
            sf = st.scale
        elif np.isinf(sf):
            sf = np.float32(FLT_MAX)
        rolled = np.roll(h, -1)
        rolled[0] = 0
        return DelayedState(np.float32(sf), rolled)

    def _check_state(self, st: Any) -> None:
        if not isinstance(st, DelayedState):
            raise TypeError(f"expected a DelayedState (from DelayedScaling.init()), got "
                            f"{type(st).__name__}: {st!r}")
        if np.shape(st.history) != (self.amax_history_len,):
            raise TypeError(f"DelayedState history has shape {np.shape(st.history)}, this recipe "
                            f"keeps {self.amax_history_len} entries")

    def frozen_by_inf(self, st: DelayedState) -> bool:
        """True while an inf amax in the window keeps the scale frozen (diagnostic)."""
        return self.amax_compute_algo == "max" and bool(np.isinf(st.history).any())


# ----------------------------------------------------------------------- current scaling
def current_scale(amax_value: float, fp8_format: str = "e4m3", *, epsilon: float = 0.0,
                  pow2: bool = False, value_for_inf: float | None = FLT_MAX,
                  inf_amax: Literal["cuda", "te-python-reference"] = "cuda") -> np.float32:
    """Transformer Engine's compute_scale_from_amax (FP8-CUR-001).

    amax < epsilon -> epsilon (NaN passes); amax in {0, inf, NaN} -> 1.0 (CUDA), except
    ``inf_amax="te-python-reference"`` (TE's test reference) which gives 0.0 for +inf;
    scale = float32(fp8_max / amax); an infinite scale -> ``value_for_inf`` (FLT_MAX per
    tensor, the input dtype's max for block scaling, ``None`` keeps inf as TE/JAX does);
    ``pow2`` clears the fraction bits (rounds down to a power of two).
    """
    a = np.float32(amax_value)
    if a < np.float32(epsilon):
        a = np.float32(epsilon)
    if np.isinf(a) and inf_amax == "te-python-reference":
        return np.float32(0.0)
    if np.isinf(a) or a == 0 or np.isnan(a):
        return np.float32(1.0)
    with np.errstate(over="ignore"):
        s = np.float32(_fp8_max(fp8_format) / a)
    if np.isinf(s) and value_for_inf is not None:
        s = np.float32(value_for_inf)
    if pow2:
        s = np.array([s], np.float32).view(np.uint32) & np.uint32(0xFF800000)
        s = s.view(np.float32)[0]
    return np.float32(s)


def quantize_per_tensor(x: npt.ArrayLike, scale: float, fp8_format: str = "e4m3"
                        ) -> tuple[npt.NDArray[np.uint8], np.float32]:
    """FP8 codes of fp32(x * scale) with satfinite nearest-even, and scale_inv = fl32(1/scale).

    Raises:
        ValueError: ``scale`` not a positive finite float32 value (0, negative, NaN and inf
            would turn every element into 0, NaN or ±max).
    """
    if isinstance(scale, bool) or not isinstance(scale, (int, float, np.floating, np.integer)):
        raise TypeError(f"scale must be a number, got {type(scale).__name__}: {scale!r}")
    with np.errstate(over="ignore"):
        s32 = np.float32(scale)
    if not (np.isfinite(s32) and s32 > 0):
        raise ValueError(f"scale must be a positive finite float32 value, got {scale!r}")
    xs = np.asarray(x, np.float32) * s32
    codes = encode(xs, fp8_format, saturate=True)
    with np.errstate(divide="ignore"):
        inv = np.float32(np.float64(1.0) / np.float64(np.float32(scale)))
    return codes, inv


# ------------------------------------------------------------------------ MX blocks
def _floor_log2(a: npt.NDArray[Any]) -> npt.NDArray[np.int64]:
    _, e = np.frexp(a)
    return (e - 1).astype(np.int64)


def mx_scale_exponents(block_amax: npt.ArrayLike, elem: str | Format,
                       rule: str = "floor") -> npt.NDArray[np.int64]:
    """Unbiased E8M0 exponent per block (FP8-MX-002). NaN/inf amax -> 128 (NaN code 0xFF);
    amax 0 -> -127; results clamped to [-127, 127].

    * floor (OCP MX v1.0): floor(log2 amax) - emax_elem
    * ceil: ceil(log2 amax) - emax_elem
    * even: floor(log2 of amax rounded to the element's mantissa bits, nearest-even) - emax_elem
    * rceil (Transformer Engine, cuBLAS): ceil(log2(amax / elem_max)), computed exactly
    """
    f = get_format(elem)
    if rule not in MX_RULES:
        raise ValueError(f"unknown MX scale rule {rule!r}; choose one of {', '.join(MX_RULES)}")
    a = np.asarray(block_amax, np.float64)
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


def mx_quantize(x: npt.ArrayLike, elem: str | Format = "e4m3", *, block: int = 32,
                rule: str = "floor") -> dict[str, Any]:
    """MX quantization along the last axis in blocks of ``block`` (FP8-MX-001).

    Returns ``scale_codes`` (E8M0 codes, uint8, one per block), ``elements`` (element
    values, float32; nearest-even with saturation of normal values, as OCP/torchao/
    gfloat do), ``dequantized`` (elements * scale, float32).

    Raises:
        ValueError: last axis not a multiple of ``block``, unknown rule or element format.
    """
    f = get_format(elem)
    if f.name not in MX_ELEMENTS:
        raise ValueError(f"MX element format must be one of {', '.join(MX_ELEMENTS)} (OCP MX "
                         f"v1.0), got {f.name}")
    if isinstance(block, bool) or not isinstance(block, (int, np.integer)) or block < 1:
        raise ValueError(f"MX block size must be a positive int, got {block!r}")
    arr = np.asarray(x, np.float32)
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
