"""Stochastic-rounding boundary cases shared by the formats, kernels and device tests.

FMT-SR-001 rounds |x| in [lo, hi) up iff floor(frac * 2^32) > r, frac = (|x| - lo) /
(hi - lo), r the element's 32-bit word. The decision flips between r = floor(frac * 2^32)
(down) and r = floor(frac * 2^32) - 1 (up); sampled tests meet that point with
probability 2^-32, so these cases build it on purpose: x from a chosen word, with the
expected result known by construction (exact rational arithmetic, no code under test).
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from ampref.formats.cast import value_table
from ampref.formats.table import Format

TWO32 = 1 << 32
# words that sit on the edges of the 32-bit range, and inside it
EDGE_WORDS = (0, 1, 2, 1 << 31, TWO32 - 2, TWO32 - 1)
# numerators k of fractions k/2^32: the smallest, a half, the largest; each also with half
# a unit more (a discarded part longer than 32 bits: floor keeps k)
FRACTIONS = (Fraction(1), Fraction(3, 2), Fraction(1 << 31), Fraction((1 << 31) + 1, 1),
             Fraction(TWO32 - 1), Fraction(2 * TWO32 - 1, 2))


def neighbour_pairs(fmt: Format) -> list[tuple[float, float]]:
    """(lo, hi) magnitude pairs to round between: around 1, the lowest subnormal step
    (0 to the smallest subnormal) where the format has subnormals, and the last binade's
    top step (the two largest finite values)."""
    v = np.unique(np.abs(value_table(fmt)[np.isfinite(value_table(fmt))]).astype(np.float64))
    one = int(np.searchsorted(v, 1.0))
    pairs = [(float(v[one]), float(v[one + 1])), (float(v[-2]), float(v[-1]))]
    if fmt.has_subnormals:
        pairs.append((0.0, float(v[1])))
    return pairs


def representable(value: Fraction, dtype: type) -> bool:
    """True if ``value`` is exactly a value of the NumPy float ``dtype``."""
    return Fraction(float(dtype(float(value)))) == value


def exact(value: Fraction) -> float:
    """``value`` as a float64, refusing one it cannot hold exactly."""
    assert representable(value, np.float64), f"{value} is not a float64 value"
    return float(value)


def between(lo: float, hi: float, frac: Fraction) -> Fraction:
    """lo + frac * (hi - lo), exactly."""
    return Fraction(lo) + frac * (Fraction(hi) - Fraction(lo))


def expected(lo: float, hi: float, frac: Fraction, word: int) -> float:
    """FMT-SR-001's result magnitude for the fraction ``frac`` and word ``word``."""
    return hi if (frac * TWO32).__floor__() > word else lo


def _fractions() -> list[Fraction]:
    # k/2^32 for the numerators above, and d/2^D on coarser grids (a float32 source
    # discarding D bits has only these): 1/2^D, 1/2, 1 - 1/2^D
    out = [f / TWO32 for f in FRACTIONS]
    for d in (4, 8, 13, 16, 20, 29):
        out += [Fraction(1, 1 << d), Fraction(1, 2), 1 - Fraction(1, 1 << d)]
    return out


def word_cases(fmt: Format, dtype: type = np.float64) -> tuple[np.ndarray, np.ndarray,
                                                               np.ndarray]:
    """Every (pair, fraction, word) of the tables that ``dtype`` can hold, both signs:
    inputs (``dtype``), their words (uint32) and the expected results (float64). The word
    equals floor(frac * 2^32), is one below it, and is each of EDGE_WORDS."""
    xs, ws, want = [], [], []
    for lo, hi in neighbour_pairs(fmt):
        for frac in _fractions():
            x = between(lo, hi, frac)
            if not representable(x, dtype):
                continue
            k = (frac * TWO32).__floor__()
            for w in sorted(w for w in {k, k - 1, *EDGE_WORDS} if 0 <= w < TWO32):
                for sign in (1, -1):
                    xs.append(float(sign * x))
                    ws.append(w)
                    want.append(sign * expected(lo, hi, frac, w))
    return np.array(xs, dtype), np.array(ws, np.uint32), np.array(want, np.float64)


def seeded_cases(fmt: Format, words: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """Inputs whose fraction sits at each element's own seeded word ``words[n]`` (the
    words of flat indices 0..): element n has frac = w/2^32 (down) when n % 3 == 0,
    (w + 1)/2^32 (up; w/2^32 for the largest word) when n % 3 == 1, (w + 1/2)/2^32 (down)
    when n % 3 == 2, between the pairs of :func:`neighbour_pairs` in turn. Returns the
    float64 inputs and the expected results."""
    pairs = neighbour_pairs(fmt)
    xs, want = [], []
    for i in range(0, len(words), 3):
        lo, hi = pairs[(i // 3) % len(pairs)]
        for j, extra in enumerate((Fraction(0), Fraction(1), Fraction(1, 2))):
            w = words[i + j]
            frac = (w + extra) / TWO32
            if frac >= 1:
                frac = Fraction(w, TWO32)
            xs.append(exact(between(lo, hi, frac)))
            want.append(expected(lo, hi, frac, w))
    return np.array(xs, np.float64), np.array(want, np.float64)
