"""The general encode kernel, compiled: one source word at a time through the phases of
the NumPy specification's general kernel (``_encode_chunk`` in
:mod:`ampref.kernels.encode`), widened to uint64 so that one compiled body serves float32
and float64 sources (every intermediate of the float32 recipe fits in 64 bits and
nothing in it wraps, see the phase comments). :mod:`ampref.kernels.encode_numba` runs
it for the elements its branch-free tiers cannot take (overflow, inf, NaN, stochastic
rounding, E8M0). Stochastic words are the counter-based hash of
:mod:`ampref.kernels.srhash`, evaluated inline.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import numba as nb
import numpy as np
import numpy.typing as npt

from .jitcache import CACHE
from .params import (FNU, FNUZ, NEAREST_AWAY, NEAREST_EVEN, ODD, STOCHASTIC, TOWARD_NEGATIVE,
                     TOWARD_POSITIVE, TOWARD_ZERO, FormatSpec)
from .srhash import check_seed, keys

__all__ = ["constants", "encode_one", "general_range", "unpack"]

_M32 = np.uint64(0xFFFFFFFF)

# the constant row of one (source, format, mode) call, as uint64 (see _constants)
(_W, _SM, _EXPMAX, _T, _TOP, _M, _MEF, _MAXC, _INFC, _NANC, _HAS_INF, _HAS_NAN, _HAS_SUB,
 _ENC, _BITS, _RND, _SAT, _SUB, _K1, _K2, _OVERC) = range(21)


@lru_cache(maxsize=256)
def constants(src_bits: int, spec: FormatSpec, rnd: int, sat: bool, sub: bool,
               seed: int | None) -> npt.NDArray[np.uint64]:
    """Everything the scalar kernel needs, as non-negative integers. An array crosses
    into compiled code in a few hundred nanoseconds (a tuple of 21 scalars takes tens of
    microseconds to type); the kernels unpack it into registers (:func:`_unpack`)."""
    sm, sbias = (23, 127) if src_bits == 32 else (52, 1023)
    k1, k2 = keys(check_seed(seed)) if seed is not None else (0, 0)
    has_inf, has_nan = spec.inf_code >= 0, spec.nan_code >= 0
    # the code an infinite input takes (spec: max if saturating, else inf, NaN or max)
    overc = spec.max_code if sat else (spec.inf_code if has_inf else
                                       spec.nan_code if has_nan else spec.max_code)
    row = [src_bits, sm, (1 << (src_bits - 1 - sm)) - 1, spec.minexp + sbias,
           spec.maxexp_value + sbias + 1, spec.mantissa_bits, spec.min_exponent_field,
           spec.max_code, max(spec.inf_code, 0), max(spec.nan_code, 0), has_inf, has_nan,
           spec.has_subnormals, spec.encoding, spec.bits, rnd, sat, sub, k1, k2, overc]
    arr = np.array(row, dtype=np.uint64)
    arr.setflags(write=False)
    return arr


@nb.njit(inline="always", cache=CACHE)
def _fmix32(h: Any) -> Any:
    h ^= h >> np.uint64(16)
    h = (h * np.uint64(0x85EBCA6B)) & _M32
    h ^= h >> np.uint64(13)
    h = (h * np.uint64(0xC2B2AE35)) & _M32
    return h ^ (h >> np.uint64(16))


@nb.njit(inline="always", cache=CACHE)
def _word(k1: Any, k2: Any, i: Any) -> Any:
    """bits(seed, i) of FMT-SR-002 from the seed's keys."""
    h = _fmix32((i & _M32) ^ k1)
    return _fmix32(h ^ (i >> np.uint64(32)) ^ k2)


@nb.njit(cache=CACHE)
def _round_shift(sig: Any, d: Any, dtrue: Any, rnd: Any, neg: bool, rbits: Any,
                 width: Any) -> Any:
    """round(sig / 2^d) in direction ``rnd`` (the specification's ``_round_shift``)."""
    one = np.uint64(1)
    if rnd == TOWARD_ZERO:
        return sig >> d
    if rnd == NEAREST_EVEN:
        return (sig + ((sig >> d) & one) + (one << (d - one)) - one) >> d
    if rnd == NEAREST_AWAY:
        return (sig + (one << (d - one))) >> d
    if rnd == TOWARD_POSITIVE or rnd == TOWARD_NEGATIVE:
        away = neg if rnd == TOWARD_NEGATIVE else not neg
        return (sig + (((one << d) - one) if away else np.uint64(0))) >> d
    q = sig >> d
    rem = sig - (q << d)
    if rnd == ODD:
        return q | (one if rem != 0 else np.uint64(0))
    # stochastic (FMT-SR-001): the discarded fraction's top 32 bits against the word
    w = np.uint64(32)
    left = w - min(dtrue, w) if dtrue <= w else np.uint64(0)
    right = min(max(dtrue, w) - w, width - one)
    frac32 = (rem << left) >> right
    return q + (one if frac32 > rbits else np.uint64(0))


@nb.njit(cache=CACHE)
def encode_one(u: Any, c: Any, rbits: Any) -> tuple[Any, bool]:
    """(code, input is NaN) of one source word ``u`` (uint64) under the row ``c``."""
    # why long: the general kernel's five phases on one element, in the specification's
    # order; splitting them would pass a dozen scalars between functions
    one, zero = np.uint64(1), np.uint64(0)
    W, SM, M = c[_W], c[_SM], c[_M]
    # Phase 1: sign, exponent field, integer significand
    neg = (u >> (W - one)) != zero
    mag = u & ((one << (W - one)) - one)
    ef = mag >> SM
    is_nan = mag > (c[_EXPMAX] << SM)
    is_inf = (ef == c[_EXPMAX]) and not is_nan
    sig = (mag & ((one << SM) - one)) | ((one if ef != zero else zero) << SM)
    efe = max(ef, one)
    # Phase 2: shift from the source quantum to the target quantum (T >= 1: formats
    # reaching below the source's normal range were widened to float64 first)
    T = c[_T]
    below = max(efe, T) - efe
    dtrue = below + (SM - M)
    if c[_HAS_SUB] == zero and below > zero:
        dtrue += M
    d = min(dtrue, SM + np.uint64(2))
    # Phase 3: round the significand
    q = _round_shift(sig, d, dtrue, c[_RND], neg, rbits, W)
    is_zero = q == zero
    if c[_HAS_SUB] == zero and below > zero:
        q = q << M
    # Phase 4: the magnitude code; a carry out of the significand bumps the exponent.
    # For a zero q under a zero exponent base this wraps, and is_zero overrides it below.
    base = (min(max(efe, T), c[_TOP]) - T + c[_MEF]) << M
    code = base + q - (one << M)
    # Phase 5: overflow, flush, specials, sign
    maxc = c[_MAXC]
    if code > maxc and not is_zero and not is_nan and not is_inf:
        if c[_SAT] != zero or (c[_HAS_INF] == zero and c[_HAS_NAN] == zero):
            code = maxc
        else:
            rnd = c[_RND]
            down = (rnd == TOWARD_ZERO or rnd == ODD or (rnd == TOWARD_POSITIVE and neg)
                    or (rnd == TOWARD_NEGATIVE and not neg))
            code = maxc if down else (c[_INFC] if c[_HAS_INF] != zero else c[_NANC])
    if c[_SUB] == zero and code < (c[_MEF] << M):
        is_zero = True
    if is_zero:
        code = zero
    if is_inf:
        code = c[_OVERC]
    nan = c[_NANC]
    enc = c[_ENC]
    signbit = (one if neg else zero) << (c[_BITS] - one)
    if enc == FNU:
        code = nan if (neg or is_nan) else code
        if mag == zero:
            code = nan  # E8M0 has no zero: +-0 -> NaN
    elif enc == FNUZ:
        code = nan if is_nan else (zero if is_zero else code | signbit)
    else:
        code = (nan | signbit) if is_nan else (code | signbit)
    return code, is_nan


@nb.njit(inline="always", cache=CACHE)
def unpack(c: Any) -> Any:
    """The constant row as a tuple: values in registers, not reloads from memory."""
    return (c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7], c[8], c[9], c[10], c[11], c[12],
            c[13], c[14], c[15], c[16], c[17], c[18], c[19], c[20])


@nb.njit(cache=CACHE)
def general_range(u: Any, out: Any, nans: Any, c: Any, words: Any, base: int,
                   only: Any) -> None:
    """The general kernel over a block whose first element has flat index ``base``
    (where ``only`` is set, if it is given). Blocks are slices: indexing from 0 lets the
    compiler drop negative-index checks, which otherwise cost 5x here."""
    use_words = words.size > 0
    stochastic = c[_RND] == STOCHASTIC
    check = only.size > 0
    record = nans.size > 0
    for i in range(u.size):
        if check and not only[i]:
            continue
        rb = np.uint64(0)
        if stochastic:
            rb = (np.uint64(words[i]) if use_words
                  else _word(c[_K1], c[_K2], np.uint64(base + i)))
        code, isnan = encode_one(np.uint64(u[i]), c, rb)
        out[i] = code
        if record:
            nans[i] = isnan


