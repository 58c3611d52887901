"""Block-scaled MMA of Blackwell tensor cores (``tcgen05.mma`` kind::mxf8f6f4 and
kind::mxf4nvf4, sm_120 ``mma.block_scale``), as MMA-Sim models them (Xie et al. 2025,
arXiv 2511.10909); specs/accumulation.md ACC-BSC-*.

One instruction computes d = sum_k a_k b_k sa_k sb_k + c over its K (32 for mxf8f6f4,
64 for mxf4nvf4):

* mxf8f6f4 (one E8M0 scale per 32): every product is a term whose exponent is the sum
  of the four operands' exponents (element exponents floored at their format's minimum,
  scale exponents at -127);
* mxf4nvf4 (E8M0 per 32 or 16, or UE4M3 per 16, the sign of UE4M3 ignored): each group
  of 16 E2M1 products is summed exactly and scaled by the two scales; the term's exponent
  is the sum of the two *scale* exponents only;
* c is a term with its own exponent (a zero c counts as 2^-126); E is the largest term
  exponent; each term is truncated toward zero to a multiple of 2^(E - f), f = 25 for
  K = 32 and 35 for K = 64; the exact sum is rounded toward zero to float32. NaN in a
  scale or c gives NaN; other NaN/inf follow IEEE on the exact sum.

Longer K chains instructions, each result the next one's c. All arithmetic is exact in
float64 (terms below 2^53).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from ampref.formats.cast import quantize
from ampref.formats.table import get_format
from .tensorcore import CANONICAL_NAN, check_inputs, exponents

__all__ = ["BlockScaledMMA", "BLOCK_SCALED", "block_scaled_dot"]


@dataclass(frozen=True, kw_only=True)
class BlockScaledMMA:
    """One block-scaled instruction kind on one GPU (a row of data)."""

    kind: str
    k: int                       #: products per instruction
    frac_bits: int               #: fraction bits kept when aligning (f)
    elements: tuple[str, ...]    #: element formats it takes
    scales: tuple[tuple[str, int], ...]  #: (scale format, elements per scale)
    source: str = "MMA-Sim (arXiv 2511.10909), simulator/arithmetic.py; no hardware dumps"


_F8F6F4 = ("float8_e4m3fn", "float8_e5m2", "float6_e2m3fn", "float6_e3m2fn", "float4_e2m1fn")
_ROWS = (BlockScaledMMA(kind="mxf8f6f4", k=32, frac_bits=25, elements=_F8F6F4,
                        scales=(("float8_e8m0fnu", 32),)),
         BlockScaledMMA(kind="mxf4nvf4", k=64, frac_bits=35, elements=("float4_e2m1fn",),
                        scales=(("float8_e8m0fnu", 32), ("float8_e8m0fnu", 16),
                                ("float8_e4m3fn", 16))))
#: GPU -> instruction kind -> row (B200 tcgen05.mma and RTX Blackwell mma.block_scale)
BLOCK_SCALED: dict[str, dict[str, BlockScaledMMA]] = {
    g: {r.kind: r for r in _ROWS} for g in ("b200", "rtx5090")}


def _exp(x: npt.NDArray[Any], emin: int) -> npt.NDArray[Any]:
    """Exponents floored at ``emin``, zeros at -126 (MMA-Sim's convention)."""
    return exponents(x, emin, -126)


def _row(gpu: str, kind: str) -> BlockScaledMMA:
    if gpu not in BLOCK_SCALED:
        raise ValueError(f"no block-scaled MMA model for GPU {gpu!r}; known: "
                         f"{', '.join(BLOCK_SCALED)}")
    if kind not in BLOCK_SCALED[gpu]:
        raise ValueError(f"unknown block-scaled kind {kind!r}; choose one of "
                         f"{', '.join(BLOCK_SCALED[gpu])}")
    return BLOCK_SCALED[gpu][kind]


def _instruction(a: Any, b: Any, c: Any, sa: Any, sb: Any, row: BlockScaledMMA,
                 fa: Any, fb: Any, fs: Any, per: int) -> npt.NDArray[np.float64]:
    """One instruction over K = row.k for every leading index (float64 in and out)."""
    if row.kind == "mxf8f6f4":
        rep = row.k // sa.shape[-1]
        sa_e, sb_e = np.repeat(sa, rep, -1), np.repeat(sb, rep, -1)
        t = a * b * sa_e * sb_e  # exact: <= 4-bit significands, power-of-two scales
        # a zero element counts with exponent -126 in the sum of exponents (MMA-Sim; no
        # hardware rows decide it, specs/accumulation.md ACC-BSC-002)
        x = _exp(a, fa.minexp) + _exp(b, fb.minexp) + _exp(sa_e, -127) + _exp(sb_e, -127)
    else:
        p = a * b
        g = p.reshape(*p.shape[:-1], row.k // 16, 16).sum(-1)  # exact group sums
        s_a = np.abs(sa) if fs.name == "float8_e4m3fn" else sa  # UE4M3: sign ignored
        s_b = np.abs(sb) if fs.name == "float8_e4m3fn" else sb
        ga, gb = np.repeat(s_a, per // 16, -1), np.repeat(s_b, per // 16, -1)
        t = g * ga * gb
        x = _exp(ga, fs.minexp) + _exp(gb, fs.minexp)
    xc = _exp(c, -126)
    E = np.maximum(x.max(axis=-1), xc)
    inv_q = np.ldexp(1.0, (row.frac_bits - E).astype(np.int64))
    with np.errstate(invalid="ignore", over="ignore"):
        units = np.trunc(t * inv_q[..., None]).sum(-1) + np.trunc(c * inv_q)
        s = quantize(units / inv_q, "float32", "toward_zero")
        raw = t.sum(-1) + c  # specials: IEEE on the exact sum
    s = np.where(np.isfinite(raw), s, raw)
    nan = np.isnan(sa).any(-1) | np.isnan(sb).any(-1) | np.isnan(c)
    return np.where(nan, np.nan, s)


def block_scaled_dot(a: npt.ArrayLike, b: npt.ArrayLike, c: npt.ArrayLike | None,
                     scale_a: npt.ArrayLike, scale_b: npt.ArrayLike, *, gpu: str = "b200",
                     kind: str = "mxf8f6f4", a_format: str = "e4m3",
                     b_format: str | None = None,
                     scale_format: str = "e8m0") -> npt.NDArray[np.float32]:
    """d = a . b (block-scaled) + c over the last axis, K a multiple of the instruction's.

    ``a``, ``b``: element values (..., K) representable in their formats; ``scale_a``,
    ``scale_b``: decoded scale values (..., K / elements per scale); ``c``: (...).

    Raises:
        ValueError: unknown GPU/kind/format combination (choices named), K not a
            multiple of the instruction, scales of the wrong shape, or an element or
            scale that is not a value of its format (element named).
        TypeError: operands that are not real numbers.
    """
    row = _row(gpu, kind)
    fa, fb = get_format(a_format), get_format(b_format or a_format)
    fs = get_format(scale_format)
    for f in (fa, fb):
        if f.name not in row.elements:
            raise ValueError(f"{kind} takes {', '.join(row.elements)} elements, got {f.name}")
    # elements and scales must be values of their formats: the hardware reads codes, so a
    # value between two codes has no meaning here (it would be silently rounded)
    codes = "block-scaled MMA reads codes: quantize with ampref.quantize first"
    A = check_inputs(a, fa, "a", False, "nearest_even", codes)
    B = check_inputs(b, fb, "b", False, "nearest_even", codes)
    # not broadcast up front: per-operand work (exponents) stays at the operand's size
    if A.ndim == 0 or B.ndim == 0 or A.shape[-1] != B.shape[-1]:
        raise ValueError(f"a and b need the same last axis (K), got {A.shape} and {B.shape}")
    K = A.shape[-1]
    if K % row.k:
        raise ValueError(f"K = {K} is not a multiple of {kind}'s K = {row.k}")
    SA = check_inputs(scale_a, fs, "scale_a", False, "nearest_even", codes)
    SB = check_inputs(scale_b, fs, "scale_b", False, "nearest_even", codes)
    per = K // SA.shape[-1] if SA.ndim and SA.shape[-1] else 0
    if (fs.name, per) not in row.scales or SB.shape[-1:] != SA.shape[-1:]:
        raise ValueError(f"{kind} takes scales {row.scales} (format, elements per scale); got "
                         f"{fs.name} with {per} elements per scale, scale shapes "
                         f"{SA.shape} and {SB.shape}")
    lead = np.broadcast_shapes(A.shape[:-1], B.shape[:-1], SA.shape[:-1], SB.shape[:-1])
    d = np.zeros(lead) if c is None else quantize(
        np.broadcast_to(np.asarray(c, np.float64), lead), "float32").astype(np.float64)
    spi = row.k // per  # scales per instruction
    for i, k0 in enumerate(range(0, K, row.k)):
        d = _instruction(A[..., k0:k0 + row.k], B[..., k0:k0 + row.k], d,
                         SA[..., i * spi:(i + 1) * spi], SB[..., i * spi:(i + 1) * spi], row,
                         fa, fb, fs, per)
    return np.where(np.isnan(d), CANONICAL_NAN, d).astype(np.float32)
