"""Element rounding of the recipes: saturating nearest-even per profile, and Transformer
Engine's stochastic rounding onto the E2M1 grid (specs/recipes.md REC-ELM-*, REC-SR-*).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from ampref.formats.cast import encode
from ampref.formats.table import get_format
from ampref.kernels.srhash import check_seed, random_bits
from .catalog import Profile

__all__ = ["encode_elements", "stochastic_e2m1", "sr_words", "SR_BITS_PER_ELEMENT"]

#: random bits each element consumes under stochastic rounding (TE: one 32-bit word per
#: four E2M1 elements, byte j of word i for element 4i + j)
SR_BITS_PER_ELEMENT = 8


def encode_elements(xs: npt.NDArray[np.float32], element: str,
                    profile: Profile) -> npt.NDArray[np.uint8]:
    """Codes of already-scaled float32 values, nearest-even with saturation (REC-ELM-001).

    FP8 elements: NaN stays NaN (cvt.rn.satfinite and torch agree), +-inf and overflow
    clamp to +-max. FP4/FP6 elements have no NaN: profile ``fp4_nan="max"`` gives +max
    (PTX satfinite; torch's clamp-then-cast), ``"zero"`` gives +0 (TE's Python reference
    table). ``fp4_negative_zero="positive"`` encodes -0 as +0 (TE's reference table);
    negative values that round to zero keep the sign in every profile.
    """
    fmt = get_format(element)
    if fmt.has_nan:
        return encode(xs, fmt, saturate=True).astype(np.uint8)
    nan = np.isnan(xs)
    clean = np.where(nan, np.float32(np.inf), xs)
    codes = encode(clean, fmt, saturate=True).astype(np.uint8)
    if profile.fp4_nan == "zero":
        codes = np.where(nan, np.uint8(0), codes)
    if profile.fp4_negative_zero == "positive":
        codes = np.where(xs == 0, np.uint8(0), codes)
    return codes


def sr_words(n: int, seed: int | None, random_bits_in: Any) -> npt.NDArray[np.uint32]:
    """The ceil(n/4) random words for n elements: the caller's ``random_bits`` or, from
    ``seed``, words 0.. of :func:`ampref.kernels.srhash.random_bits` (REC-SR-002).

    Raises:
        ValueError: neither or both given, a bad seed, or the wrong number of words.
    """
    need = -(-n // 4)
    if random_bits_in is None:
        if seed is None:
            raise ValueError("stochastic rounding needs seed= (an int) or random_bits= "
                             f"({need} uint32 words, one per 4 elements)")
        return random_bits(check_seed(seed), 0, need)
    if seed is not None:
        raise ValueError("give either seed= or random_bits=, not both")
    w = np.asarray(random_bits_in)
    if w.dtype.kind not in "ui":
        raise TypeError(f"random_bits must be unsigned 32-bit words, got dtype {w.dtype}")
    if w.size and (int(w.min()) < 0 or int(w.max()) >= 1 << 32):  # would wrap silently
        raise ValueError(f"random_bits must be words in [0, 2**32), got range "
                         f"[{int(w.min())}, {int(w.max())}]")
    w = w.reshape(-1)
    if w.size != need:
        raise ValueError(f"random_bits must hold {need} words (one per 4 of {n} elements), "
                         f"got {w.size}")
    return w.astype(np.uint32)


def stochastic_e2m1(xs: npt.NDArray[np.float32],
                    words: npt.NDArray[np.uint32]) -> npt.NDArray[np.uint8]:
    """TE's stochastic rounding to E2M1 (``stochastic_round_fp4_e2m1``; REC-SR-001).

    u = byte / 256 (byte j of word i for flat element 4i + j); t = fl32(|x| + u * step)
    with step 0.5 below 2, 1 in [2, 4), 2 from 4 (one fmaf rounding); the result is
    floor(t / step_t) * step_t with step_t taken from t, at most 6, with x's sign.
    NaN gives +6, +-inf and overflow +-6, -0 stays -0.
    """
    flat = xs.reshape(-1)
    idx = np.arange(flat.size)
    u = ((words[idx // 4] >> (8 * (idx % 4)).astype(np.uint32)) & 0xFF).astype(np.float64) / 256
    a = np.abs(flat).astype(np.float64)
    step = np.where(a >= 4, 2.0, np.where(a >= 2, 1.0, 0.5))
    # |x| + u*step is exact in float64 whenever it can matter (u*step has 8 bits at
    # 2^-9 or above, |x| 24 bits), so rounding it to float32 is fmaf's single rounding
    with np.errstate(invalid="ignore", over="ignore"):
        t = (a + u * step).astype(np.float32).astype(np.float64)
        step_t = np.where(t >= 4, 2.0, np.where(t >= 2, 1.0, 0.5))
        q = np.fmin(np.floor(t / step_t) * step_t, 6.0)  # fminf: NaN -> 6
    sign = np.where(np.isnan(flat), 1.0, np.copysign(1.0, flat))
    return encode((q * sign).astype(np.float32), "float4_e2m1fn").astype(
        np.uint8).reshape(xs.shape)
