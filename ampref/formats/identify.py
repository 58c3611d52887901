"""Which rounding rule does a black-box cast follow? (FMT-IDN-001)

Real casts into a narrow format differ exactly where a reference is needed: the
rounding mode, whether overflow saturates, whether subnormal results are flushed, and
whether a float64 input goes through float32 first (double rounding). :func:`identify`
runs a fixed battery of adversarial float64 inputs through the user's function and
compares its results, bit for bit, with every variant of :func:`ampref.quantize`:
the six deterministic rounding modes x saturate x subnormals x direct or via float32
(48 variants). It names every variant that explains all results, or, if none does, the
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

    def __str__(self) -> str:
        return (f"rounding={self.rounding}, saturate={self.saturate}, "
                f"subnormals={self.subnormals}, via={'float32' if self.via_float32 else 'none'}")


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


def variants() -> list[Variant]:
    return [Variant(rounding=r, saturate=s, subnormals=n, via_float32=v)
            for r, s, n, v in itertools.product(MODES, (False, True), (True, False),
                                                (False, True))]


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
    for v in variants():
        with np.errstate(all="ignore"):
            want = quantize(x, f, v.rounding, saturate=v.saturate, subnormals=v.subnormals,
                            via="float32" if v.via_float32 else None).astype(np.float64)
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
