"""Which rounding rule does a black-box cast follow? (FMT-IDN-001)

Real casts into a narrow format differ exactly where a reference is needed: the
rounding mode, whether overflow saturates, whether subnormal results are flushed, and
whether a float64 input goes through float32 first (double rounding). :func:`identify`
runs a fixed battery of adversarial float64 inputs through the user's function and
compares its results, bit for bit, with every variant of :func:`ampref.quantize`:
the six deterministic rounding modes x saturate x subnormals x direct or via float32
(48 variants), and for formats narrower than float16/bfloat16 the same through that
format (a conversion float32 -> float16 -> e4m3fn rounds three times). It names every
variant that explains all results, or, if none does, the
closest variant and the first input it does not explain, in hex.

The battery, per format: every rounding midpoint between neighbouring finite values of
the format (from float32's view: the exact midpoint and its float64 and float32
neighbours), values one float32 ulp above and below midpoints (what tells double
rounding apart), the subnormal boundary and half the smallest subnormal, max, the
overflow threshold and beyond, ±0, ±inf, NaN and seeded random values over the whole
range. NaN results compare as NaN (any payload).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from .cast import quantize, value_table
from .rounding import RoundingMode
from .table import Format, get_format

__all__ = ["Identification", "Variant", "battery", "identify", "variants"]

#: the deterministic modes (stochastic rounding cannot be told from one draw)
MODES = tuple(m.value for m in RoundingMode if m is not RoundingMode.STOCHASTIC)


@dataclass(frozen=True, kw_only=True)
class Variant:
    """One configuration of the reference cast."""

    rounding: str
    saturate: bool
    subnormals: bool
    via_float32: bool
    #: a 16-bit format the value is rounded to (nearest-even, overflow to inf) before the
    #: final cast, after float32 if ``via_float32``: conversion code that goes
    #: float32 -> float16 -> FP8 rounds three times (FMT-IDN-003)
    via_format: str | None = None

    def path(self) -> str:
        """The intermediate formats, in order: 'none', 'float32', 'float32 -> float16'."""
        steps = (["float32"] if self.via_float32 else []) + (
            [self.via_format] if self.via_format else [])
        return " -> ".join(steps) or "none"

    def __str__(self) -> str:
        return (f"rounding={self.rounding}, saturate={self.saturate}, "
                f"subnormals={self.subnormals}, via={self.path()}")

    def apply(self, x: npt.NDArray[np.float64], fmt: Format) -> npt.NDArray[np.float64]:
        """This variant's cast of float64 ``x`` into ``fmt`` (as float64 values)."""
        if self.via_format is not None:
            x = np.asarray(quantize(x, self.via_format, via="float32" if self.via_float32
                                    else None), np.float64)
            return quantize(x, fmt, self.rounding, saturate=self.saturate,
                            subnormals=self.subnormals).astype(np.float64)
        return quantize(x, fmt, self.rounding, saturate=self.saturate,
                        subnormals=self.subnormals,
                        via="float32" if self.via_float32 else None).astype(np.float64)


@dataclass(frozen=True, kw_only=True)
class Identification:
    """The answer: every matching variant, else the closest one and where it fails."""

    format: str
    inputs: int
    matches: tuple[Variant, ...]
    closest: Variant
    mismatches: int
    #: (input as float64 hex, input, got, want) of the first input the closest misses
    first: tuple[str, float, float, float] | None = field(default=None)

    def __str__(self) -> str:
        head = f"identify({self.format}, {self.inputs} inputs): "
        if self.matches:
            return head + f"{len(self.matches)} variant(s) explain every result\n" + \
                "\n".join(f"  {v}" for v in self.matches)
        h, x, got, want = self.first or ("", float("nan"), float("nan"), float("nan"))
        return (head + f"no variant explains every result; closest: {self.closest} "
                f"({self.mismatches} mismatches); first: input {x!r} ({h}) gave {got!r}, "
                f"that variant gives {want!r}")


#: 16-bit formats a conversion may pass through on its way to a narrower one
INTERMEDIATES = ("float16", "bfloat16")


def variants(fmt: str | Format | None = None) -> list[Variant]:
    """The reference cast's variants: 6 modes x saturate x subnormals x direct or via
    float32 (48); for a ``fmt`` narrower than a 16-bit format, also through that format
    (directly or after float32), so a three-step conversion is named."""
    base = [Variant(rounding=r, saturate=s, subnormals=n, via_float32=v)
            for r, s, n, v in itertools.product(MODES, (False, True), (True, False),
                                                (False, True))]
    if fmt is None:
        return base
    f = get_format(fmt)
    extra = [Variant(rounding=v.rounding, saturate=v.saturate, subnormals=v.subnormals,
                     via_float32=v.via_float32, via_format=m)
             for m in _intermediates(f) for v in base]
    return base + extra


def _intermediates(f: Format) -> list[str]:
    """The 16-bit formats strictly wider than ``f`` in precision and range."""
    out = []
    for name in INTERMEDIATES:
        m = get_format(name)
        if f.precision_bits < m.precision_bits and f.max <= m.max and f.name != m.name:
            out.append(name)
    return out


def battery(fmt: str | Format, *, seed: int = 0, random: int = 2000) -> npt.NDArray[np.float64]:
    """The fixed adversarial inputs (float64) for casts into ``fmt`` (deterministic for
    a given seed)."""
    f = get_format(fmt)
    vals = np.unique(np.abs(value_table(f).astype(np.float64)))
    vals = vals[np.isfinite(vals)]
    mids = (vals[:-1] + vals[1:]) / 2  # exact in float64: formats have <= 24 bits
    up32 = np.nextafter(mids.astype(np.float32), np.float32(np.inf)).astype(np.float64)
    dn32 = np.nextafter(mids.astype(np.float32), np.float32(-np.inf)).astype(np.float64)
    near = np.concatenate([mids, np.nextafter(mids, np.inf), np.nextafter(mids, -np.inf),
                           up32, dn32, (mids + up32) / 2, (mids + dn32) / 2])
    top = float(vals[-1])
    ulp_top = top - float(vals[-2])
    edges = np.array([0.0, f.smallest_subnormal / 2, f.smallest_subnormal * 0.75, f.tiny,
                      top, top + ulp_top / 2, top + ulp_top / 4, top + ulp_top, 2 * top,
                      1e300, np.inf, np.nan])
    rng = np.random.default_rng(seed)
    lo, hi = np.log2(f.smallest_subnormal / 4), np.log2(top * 4)
    rand = np.exp2(rng.uniform(lo, hi, random))
    # a quarter of a 16-bit ulp either side of each midpoint: where rounding through
    # that format first moves the value onto the midpoint (a three-step conversion)
    mid32 = mids.astype(np.float32)
    for m in _intermediates(f):
        up = quantize(mid32, m, "toward_positive").astype(np.float64)
        dn = quantize(mid32, m, "toward_negative").astype(np.float64)
        near = np.concatenate([near, (mids + up) / 2, (mids + dn) / 2,
                               mids + (up - dn) / 4, mids - (up - dn) / 4])
    pos = np.concatenate([near, edges, rand])
    pos = pos[(pos >= 0) | np.isnan(pos)]
    return np.concatenate([pos, -pos])


def _same(a: npt.NDArray[np.float64], b: npt.NDArray[np.float64]) -> npt.NDArray[np.bool_]:
    """Bitwise equal as float64, any NaN equal to any NaN."""
    return (a.view(np.uint64) == b.view(np.uint64)) | (np.isnan(a) & np.isnan(b))


def identify(fn: Callable[[npt.NDArray[np.float64]], Any], fmt: str | Format, *,
             seed: int = 0) -> Identification:
    """Run ``fn`` (float64 array -> array of values of ``fmt``, any float dtype, or
    ml_dtypes values) on the battery and name the variants of :func:`ampref.quantize`
    it matches.

    ``fn`` receives one float64 array; its result is read as float64 values (an
    ml_dtypes array converts exactly). A result that is not a value of ``fmt`` is simply
    unexplained.

    Raises:
        ValueError: ``fn``'s result has another shape than its input.
        TypeError: ``fn`` is not callable.
    """
    if not callable(fn):
        raise TypeError(f"identify needs a callable, got {type(fn).__name__}")
    f = get_format(fmt)
    x = battery(f, seed=seed)
    got = np.asarray(np.asarray(fn(x.copy())).astype(np.float64))
    if got.shape != x.shape:
        raise ValueError(f"fn returned shape {got.shape} for input shape {x.shape}")
    best: tuple[int, Variant, Any] | None = None
    matches = []
    for v in variants(f):
        with np.errstate(all="ignore"):
            want = v.apply(x, f)
        ok = _same(got, want)
        bad = int((~ok).sum())
        if bad == 0:
            matches.append(v)
        if best is None or bad < best[0]:
            best = (bad, v, (ok, want))
    if best is None:  # variants() is never empty; kept for the type checker
        raise RuntimeError("no variants to compare with")
    bad, closest, (ok, want) = best
    first = None
    if bad:
        i = int(np.flatnonzero(~ok)[0])
        first = (f"0x{int(x[i:i + 1].view(np.uint64)[0]):016x}", float(x[i]), float(got[i]),
                 float(want[i]))
    return Identification(format=f.name, inputs=int(x.size), matches=tuple(matches),
                          closest=closest, mismatches=bad, first=first)
