"""AMD CDNA matrix cores (MFMA) as MMA-Sim models them, GPUs as data.

MMA-Sim (Xie et al. 2025, arXiv 2511.10909, ``simulator/amd.py`` and
``simulator/arithmetic.py``) is the only published bit-level model of MFMA; there are
no hardware rows here, so every rule below is MMA-Sim's (specs/accumulation.md
ACC-MFMA-*). One output element is a chain over k ascending of steps, each step taking
a group of g products and the running fp32 (fp64) accumulator d:

* ``fma`` (f32, f64): d = fl(a_k b_k + d), one correctly rounded FMA per product;
* ``pairwise`` (f16, bf16 on CDNA1/2): the g products rounded to fp32, summed as a
  binary tree of fp32 additions (left half first), then d = fl(d + tree). On CDNA2
  subnormal inputs and c become +0 and every partial result below 2^-126 becomes a zero
  of its sign;
* ``fused`` (f16, bf16, xf32 and FNUZ FP8 on CDNA3): products exactly; each product's
  exponent is e(a) + e(b) with e(x) = max(floor(log2|x|), emin) and e(0) = -126; the
  products are truncated toward zero to 24 fraction bits below the group's largest
  exponent M and summed; with M' = max(M, e(c)) that sum is rounded *down* (toward -inf)
  to 31 fraction bits below M', c rounded down to 24, and the sum of both rounded to
  nearest-even fp32. FP8 sums even and odd k separately first (each truncated at its own
  maximum, then both rounded down to 24 bits at the larger), and drops c entirely when
  e(c) < M' - 25.

NaN results are the default quiet NaN 0x7FC00000 (MMA-Sim's; the hardware's payload is
not modelled); infinities follow IEEE, and a product beyond the fp32 range (bf16) is an
infinity of its sign in the fused step (both signs: NaN).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import numpy as np
import numpy.typing as npt

from ampref.formats.cast import quantize
from ampref.formats.exactsum import add_rounded, fma64
from ampref.formats.table import Format, get_format
from .tensorcore import exponents

__all__ = ["MFMAPath", "MatrixCoreGPU", "AMD_GPUS", "UNMODELLED", "get_amd_gpu",
           "mfma_params", "mfma_dot", "QNAN32"]


@dataclass(frozen=True, kw_only=True)
class MFMAPath:
    """How one input format is accumulated on one CDNA generation."""

    #: "fma", "pairwise" or "fused" (see the module docstring)
    op: str
    #: products per step (1 for fma)
    group: int = 1
    #: CDNA2: subnormal inputs/c to +0, partial results below 2^-126 to signed zero
    flush: bool = False
    #: CDNA3 FP8: even and odd k summed separately before they are combined
    two_stage: bool = False


@dataclass(frozen=True, kw_only=True)
class MatrixCoreGPU:
    """One AMD GPU: its CDNA generation and an MFMA path per input format."""

    name: str
    arch: str
    paths: Mapping[str, MFMAPath] = field(default_factory=dict)
    source: str = "MMA-Sim (arXiv 2511.10909), simulator/amd.py; no hardware rows here"

    def __post_init__(self) -> None:
        # a frozen row whose dict can still be edited is not frozen: keep a read-only copy
        object.__setattr__(self, "paths", MappingProxyType(dict(self.paths)))


_FMA = MFMAPath(op="fma")
_FP8 = MFMAPath(op="fused", group=16, two_stage=True)
_CDNA3 = {"float64": _FMA, "float32": _FMA, "tf32": MFMAPath(op="fused", group=4),
          # group 8: the 32x32x8 and 16x16x16 GEMM instructions (the 4-k ones use 4)
          "float16": MFMAPath(op="fused", group=8), "bfloat16": MFMAPath(op="fused", group=8),
          "float8_e4m3fnuz": _FP8, "float8_e5m2fnuz": _FP8}
#: AMD GPU name -> row. mi250's bf16 is the ``_1k`` instructions (4 per step); CDNA1's
#: bf16 instructions take 2.
AMD_GPUS: dict[str, MatrixCoreGPU] = {g.name: g for g in (
    MatrixCoreGPU(name="mi100", arch="CDNA1", paths={
        "float32": _FMA, "float16": MFMAPath(op="pairwise", group=4),
        "bfloat16": MFMAPath(op="pairwise", group=2)}),
    MatrixCoreGPU(name="mi250", arch="CDNA2", paths={
        "float64": _FMA, "float32": _FMA,
        "float16": MFMAPath(op="pairwise", group=4, flush=True),
        "bfloat16": MFMAPath(op="pairwise", group=4, flush=True)}),
    MatrixCoreGPU(name="mi300", arch="CDNA3", paths=_CDNA3),
    MatrixCoreGPU(name="mi325", arch="CDNA3", paths=_CDNA3,
                  source="MMA-Sim's CDNA3 model (MI325X is a CDNA3 part); no hardware rows"),
)}
#: known GPUs without a published bit-level model
UNMODELLED = {"mi355": "CDNA4 (MI355X): no published bit-level MFMA model"}

#: the default quiet NaN, MMA-Sim's NaN result
QNAN32 = np.array([0x7FC00000], dtype=np.uint32).view(np.float32)[0]
QNAN64 = np.array([0x7FF8000000000000], dtype=np.uint64).view(np.float64)[0]


def get_amd_gpu(name: str) -> MatrixCoreGPU:
    """Look up an AMD GPU row (case-insensitive).

    Raises:
        ValueError: unknown or unmodelled GPU (the known ones are listed).
    """
    key = str(name).lower()
    if key in UNMODELLED:
        raise ValueError(f"{key}: {UNMODELLED[key]}; modelled: {', '.join(AMD_GPUS)}")
    try:
        return AMD_GPUS[key]
    except KeyError:
        raise ValueError(f"unknown AMD GPU {name!r}; known: {', '.join(AMD_GPUS)}") from None


def mfma_params(gpu: str, a_format: str | Format, b_format: str | Format | None,
                output_format: str | Format) -> tuple[MFMAPath, Format, Format, Format]:
    """(path, A format, B format, output format) after validating the combination: both
    operands in one format except FP8 x BF8 on CDNA3; fp32 output (fp64 for fp64)."""
    g = get_amd_gpu(gpu)
    fa, fout = get_format(a_format), get_format(output_format)
    fb = get_format(b_format or fa)
    for f in (fa, fb):
        if f.name not in g.paths:
            raise ValueError(f"{g.name} ({g.arch}) has no {f.name} MFMA; it takes "
                             f"{', '.join(g.paths)}")
    if fa.name != fb.name and g.paths[fa.name] is not g.paths[fb.name]:
        raise ValueError(f"mixed MFMA operands {fa.name} x {fb.name}: only FP8 x BF8 mix")
    want = "float64" if fa.name == "float64" else "float32"
    if fout.name != want:
        raise ValueError(f"MFMA with {fa.name} inputs outputs {want}, got {fout.name}")
    return g.paths[fa.name], fa, fb, fout


def _flush(x: npt.NDArray[Any], emin: int) -> npt.NDArray[Any]:
    """CDNA2 inputs and c: a subnormal becomes +0 (its sign is lost)."""
    return np.where(np.abs(x) < 2.0**emin, 0.0, x)


def _flush_signed(x: npt.NDArray[Any]) -> npt.NDArray[Any]:
    """CDNA2 partial results: below 2^-126 becomes a zero of the same sign."""
    return np.where(np.abs(x) < 2.0**-126, x * 0.0, x)


def _pairwise(p: npt.NDArray[Any], flush: bool) -> npt.NDArray[Any]:
    """Binary tree of fp32 additions over the last axis (left half of n // 2 first)."""
    n = p.shape[-1]
    if n == 1:
        return p[..., 0]
    s = add_rounded(_pairwise(p[..., :n // 2], flush), _pairwise(p[..., n // 2:], flush),
                    get_format("float32"), "nearest_even")
    return _flush_signed(s) if flush else s


def _exp(x: npt.NDArray[Any], emin: int) -> npt.NDArray[Any]:
    """Exponents floored at ``emin``, zeros at -126 (MMA-Sim's convention)."""
    return exponents(x, emin, -126)


def _truncated_sum(p: npt.NDArray[Any], e: npt.NDArray[Any]) -> tuple[Any, Any]:
    """(sum of the products truncated to 24 bits below their largest exponent M, M)."""
    M = e.max(axis=-1)
    q = np.ldexp(1.0, (24 - M).astype(np.int64))
    return np.trunc(p * q[..., None]).sum(axis=-1) / q, M


def _down(x: npt.NDArray[Any], bits: int, M: npt.NDArray[Any]) -> npt.NDArray[Any]:
    """x rounded toward -inf to a multiple of 2^(M - bits)."""
    q = np.ldexp(1.0, (bits - M).astype(np.int64))
    return np.floor(x * q) / q


def _fused(a: Any, b: Any, d: Any, path: MFMAPath, fa: Format, fb: Format) -> Any:
    """One fused step (group of products, accumulator d), float64 in and out."""
    p = a * b  # exact
    e = _exp(a, fa.minexp) + _exp(b, fb.minexp)
    if path.two_stage:
        s0, m0 = _truncated_sum(p[..., 0::2], e[..., 0::2])
        s1, m1 = _truncated_sum(p[..., 1::2], e[..., 1::2])
        M = np.maximum(m0, m1)
        s = _down(s0, 24, M) + _down(s1, 24, M)
    else:
        s, M = _truncated_sum(p, e)
    ec = _exp(d, -126)
    M2 = np.maximum(M, ec)
    c = _down(d, 24, M2)
    if path.two_stage:
        c = np.where(ec >= M2 - 25, c, 0.0)
    # an exactly zero sum is +0 (floor(-0.0) is -0.0); a nonzero one keeps its sign
    # through the rounding, also when it underflows to zero
    res = quantize(_down(s, 31, M2) + c + 0.0, "float32", "nearest_even")
    with np.errstate(invalid="ignore", over="ignore"):
        raw = p.sum(axis=-1) + d
        big = np.abs(p) >= 2.0**128  # beyond fp32: an infinity of the product's sign
        pos, neg = (big & (p > 0)).any(axis=-1), (big & (p < 0)).any(axis=-1)
    res = np.where(pos, np.inf, np.where(neg, -np.inf, res))
    res = np.where(pos & neg, np.nan, res)
    return np.where(np.isfinite(raw), res, raw)


def _step(a: Any, b: Any, d: Any, path: MFMAPath, fa: Format, fb: Format) -> Any:
    """One step of the chain over the group in the last axis of a and b."""
    if path.op == "fused":
        return _fused(a, b, d, path, fa, fb)
    if path.op == "fma":  # fp32 products are exact in float64: one rounding per step
        return add_rounded(a[..., 0] * b[..., 0], d, get_format("float32"), "nearest_even")
    if path.flush:
        a, b = _flush(a, fa.minexp), _flush(b, fb.minexp)
    p = a * b  # exact in float64
    # each leaf is fmaf(a, b, +0): an exactly zero product gives +0
    leaf = np.where(p == 0, 0.0, quantize(p, "float32", "nearest_even"))
    g = _pairwise(_flush_signed(leaf) if path.flush else leaf, path.flush)
    s = add_rounded(d, g, get_format("float32"), "nearest_even")
    return _flush_signed(s) if path.flush else s


def mfma_dot(a: npt.NDArray[Any], b: npt.NDArray[Any], c: npt.NDArray[Any], *, gpu: str,
             a_format: str | Format, b_format: str | Format | None = None,
             output_format: str | Format = "float32") -> npt.NDArray[Any]:
    """d = a . b + c over the last axis on an AMD matrix core; inputs already validated
    (float64 arrays of representable values, c of the leading shape).

    A final group shorter than g is padded with zero pairs, which never set a group's
    maximum exponent (e = -252), so it behaves as the shorter group.

    Returns:
        float32 (float64 for fp64 inputs), NaN as 0x7FC00000.
    """
    path, fa, fb, fout = mfma_params(gpu, a_format, b_format, output_format)
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    if a.ndim == 0 or b.ndim == 0 or a.shape[-1] != b.shape[-1]:
        raise ValueError(f"a and b need the same last axis (K), got shapes {a.shape} and "
                         f"{b.shape}")
    a, b = np.broadcast_arrays(a, b)
    d = np.broadcast_to(np.asarray(c, np.float64), a.shape[:-1]).copy()
    if fout.name == "float64":
        for k in range(a.shape[-1]):
            d = fma64(a[..., k], b[..., k], d)
        return np.where(np.isnan(d), QNAN64, d)
    d = quantize(d, "float32", "nearest_even")
    if path.flush:
        d = _flush(d, -126)
    K, g = a.shape[-1], path.group
    if path.op == "fused" and K % g:
        pad = [(0, 0)] * (a.ndim - 1) + [(0, g - K % g)]
        a, b = np.pad(a, pad), np.pad(b, pad)
    with np.errstate(invalid="ignore", over="ignore"):  # NaN/inf follow IEEE on purpose
        for k0 in range(0, a.shape[-1], g):
            d = _step(a[..., k0:k0 + g], b[..., k0:k0 + g], d, path, fa, fb)
    out = np.asarray(d).astype(np.float32)
    return np.where(np.isnan(out), QNAN32, out)
