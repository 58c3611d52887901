"""Implementations written here from the public texts, independently of ampref, that the
identification and assert-matches tests hand over as black boxes (the "user's kernel"):
an OCP MX quantizer, a float32 GEMM loop and a textbook loss scaler. Each has a switch
that plants one known bug."""

from __future__ import annotations

from fractions import Fraction

import ml_dtypes
import numpy as np


def ocp_floor_mxfp8(x: np.ndarray, *, half_away: bool = False) -> np.ndarray:
    """OCP MX v1.0 section 6.3: per block of 32, X = 2^(floor(log2 amax) - emax_elem),
    clamped to E8M0's range; elements x / X rounded to nearest-even (``half_away``: ties
    away from zero, the planted bug) with saturation to the element's max (E4M3: emax 8,
    max 448). Finite inputs only (the OCP text leaves NaN/inf blocks to implementations)."""
    b = x.reshape(x.shape[0], -1, 32).astype(np.float64)
    amax = np.max(np.abs(b), axis=-1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        e = np.floor(np.log2(amax)) - 8
    e = np.clip(np.where(amax > 0, e, -127), -127, 127)
    scale = np.exp2(e)
    y = np.clip(b / scale, -448, 448)
    if half_away:  # round the magnitude's halfway cases up: nudge exact ties outward
        lo = y.astype(np.float32).astype(ml_dtypes.float8_e4m3fn).astype(np.float64)
        nxt = _e4m3_next_away(lo)
        tie = np.abs(y - lo) == np.abs(nxt - y)
        q = np.where(tie & (np.abs(nxt) > np.abs(lo)), nxt, lo)
    else:
        q = y.astype(np.float32).astype(ml_dtypes.float8_e4m3fn).astype(np.float64)
    return (q * scale).reshape(x.shape).astype(np.float32)


def _e4m3_next_away(v: np.ndarray) -> np.ndarray:
    """The E4M3 value one step further from zero than ``v`` (its code + 1 in magnitude)."""
    codes = v.astype(np.float32).astype(ml_dtypes.float8_e4m3fn).view(np.uint8)
    mag = np.minimum((codes & 0x7F) + 1, 0x7E)  # 0x7E is 448, the largest finite
    away = ((codes & 0x80) | mag).astype(np.uint8).view(ml_dtypes.float8_e4m3fn)
    return np.where(v == 0, v, away.astype(np.float64))


def round_f32(q: Fraction) -> np.float32:
    """The float32 nearest to the rational ``q`` (ties to even), without double rounding:
    float64 first, then a tie in float32 is decided against ``q`` itself."""
    f = np.float32(float(q))
    for g in (np.nextafter(f, np.float32(-np.inf)), np.nextafter(f, np.float32(np.inf))):
        if np.isfinite(g) and abs(Fraction(float(g)) - q) < abs(Fraction(float(f)) - q):
            f = g
    return f


def gemm_f32_loop(a: np.ndarray, b: np.ndarray, *, fused: bool = False) -> np.ndarray:
    """C[i, j] = sum over k ascending, each product rounded to float32 and each addition
    rounded to float32 (``fused``: acc + a*b rounded once from its exact value, an FMA)."""
    m, k = a.shape
    n = b.shape[1]
    out = np.zeros((m, n), np.float32)
    for i in range(m):
        for j in range(n):
            acc = np.float32(0.0)
            for t in range(k):
                if fused:
                    acc = round_f32(Fraction(float(acc)) + Fraction(float(a[i, t]))
                                    * Fraction(float(b[t, j])))
                else:
                    acc = np.float32(acc + np.float32(float(a[i, t]) * float(b[t, j])))
            out[i, j] = acc
    return out


def textbook_scaler(flags: list[bool], *, init: float = 2.0**16, interval: int = 3,
                    float32: bool = True, late_growth: bool = False) -> list[float]:
    """Halve on an overflow (reset the counter), double after ``interval`` clean steps in a
    row; the scale kept as a float32 (``float32=False``: a Python float, so it can grow past
    float32's range). ``late_growth`` plants an off-by-one: growth after interval + 1."""
    scale, clean, out = init, 0, []
    for f in flags:
        if f:
            scale, clean = scale * 0.5, 0
        else:
            clean += 1
            if clean == interval + (1 if late_growth else 0):
                grown = scale * 2.0
                with np.errstate(over="ignore"):  # refused: growth to inf
                    if not float32 or np.isfinite(np.float32(grown)):
                        scale = grown
                clean = 0
        if float32:
            scale = float(np.float32(scale))
        out.append(scale)
    return out
