"""The encode kernel, compiled (numba): the same signature and the same bits as the NumPy
specification :mod:`ampref.kernels.encode`.

Like the specification, it works in tiers: a branch-free loop computes the first two
tiers (normal range, below it) in the source's own word width and flags the rest, which
the general kernel of :mod:`ampref.kernels.general_numba` finishes one element at a
time; formats laid out like float32 (bfloat16, tf32) under nearest-even take a single
shift. Blocks of a large array run on threads (:mod:`ampref.kernels.threads`).
Equality with the specification is tested exhaustively for float16 and bfloat16 and on
strided sweeps of every format and mode (``tests/kernels``).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import numba as nb
import numpy as np
import numpy.typing as npt

from .jitcache import CACHE
from .params import (FNU, FNUZ, IEEE, NEAREST_AWAY, NEAREST_EVEN, ODD, STOCHASTIC,
                     TOWARD_NEGATIVE, TOWARD_POSITIVE, TOWARD_ZERO, FormatSpec, code_dtype)
from .arrays import frozen
from .general_numba import constants, general_range, unpack
from .threads import run_blocks

__all__ = ["encode_bits", "quantize_bits"]

_NO_MASK = np.empty(0, np.bool_)
_NO_WORDS = np.empty(0, np.uint32)


@nb.njit(inline="always", cache=CACHE)
def _round_word(v: Any, d: Any, rnd: Any, neg: bool, one: Any, zero: Any) -> Any:
    """round(v / 2^d) for d >= 1 in the word's own width (deterministic modes); ``one``
    and ``zero`` carry the word type."""
    if rnd == NEAREST_EVEN:
        return (v + ((v >> d) & one) + (one << (d - one)) - one) >> d
    if rnd == NEAREST_AWAY:
        return (v + (one << (d - one))) >> d
    if rnd == TOWARD_POSITIVE or rnd == TOWARD_NEGATIVE:
        away = neg if rnd == TOWARD_NEGATIVE else not neg
        return (v + (((one << d) - one) if away else zero)) >> d
    if rnd == ODD:
        return (v >> d) | (one if (v & ((one << d) - one)) != zero else zero)
    return v >> d


@nb.njit(inline="always", cache=CACHE)
def _tier_one(x: Any, f: Any, rnd: Any, one: Any, zero: Any) -> tuple[Any, bool]:
    """(signed code, needs the general kernel) of one source word: the specification's
    first two tiers (``_fast_chunk``, ``_below_chunk``) in the word's own width, both
    computed and one selected, so the loop has no data-dependent branch. Inside the
    normal range the code is the rebiased magnitude rounded by one constant shift; below
    it the significand is rounded by a shift that grows one bit per binade. Overflow,
    inf and NaN are flagged (their rebiased magnitude exceeds max_code)."""
    threshold, rebias, d0, maxc, sshift, signbit, cbelow, dcap, mant, flush, fnuz = f
    sm = dcap - one - one
    neg = x >= signbit
    mag = x & (signbit - one)
    normal = _round_word(mag - rebias, d0, rnd, neg, one, zero)
    ef = mag >> sm
    efe = max(ef, one)
    sig = (mag & ((one << sm) - one)) | ((one if ef != zero else zero) << sm)
    d = max(min(cbelow - efe, dcap), one)  # wraps (and is unused) for normal elements
    below = _round_word(sig, d, rnd, neg, one, zero)
    if flush != zero and below < (one << mant):
        below = zero
    is_below = mag < threshold
    code = below if is_below else normal
    sign = (x >> sshift) & (signbit >> sshift)
    if fnuz != zero and code == zero:
        sign = zero  # no negative zero
    return code | sign, (not is_below) and normal > maxc


@nb.njit(cache=CACHE)
def _fast_range(u: Any, out: Any, slow: Any, f: Any) -> None:
    """Tiers one and two over a block; one loop per common mode so that each is free of
    branches and vectorises."""
    rnd = f[11]
    t = (f[0], f[1], f[2], f[3], f[4], f[5], f[6], f[7], f[8], f[9], f[10])
    one, zero = u.dtype.type(1), u.dtype.type(0)
    if rnd == NEAREST_EVEN:
        for i in range(u.size):
            out[i], slow[i] = _tier_one(u[i], t, NEAREST_EVEN, one, zero)
    elif rnd == TOWARD_ZERO:
        for i in range(u.size):
            out[i], slow[i] = _tier_one(u[i], t, TOWARD_ZERO, one, zero)
    else:
        for i in range(u.size):
            out[i], slow[i] = _tier_one(u[i], t, rnd, one, zero)


@nb.njit(cache=CACHE)
def _block(u: Any, out: Any, nans: Any, slow: Any, c: Any, f: Any, words: Any, lo: int,
           hi: int) -> None:
    """Elements lo..hi-1: the first tier, then the general kernel where it flagged."""
    c = unpack(c)
    u, out, slow = u[lo:hi], out[lo:hi], slow[lo:hi]
    nans = nans[lo:hi] if nans.size else nans
    w = words[lo:hi] if words.size else words
    if f[0] == 0:  # no first tier for this format/mode: the general kernel throughout
        general_range(u, out, nans, c, w, lo, slow[:0])
        return
    _fast_range(u, out, slow, f)
    if nans.size:
        nans[:] = False
    general_range(u, out, nans, c, w, lo, slow)


@nb.njit(cache=CACHE, nogil=True)
def _encode_blocks(u: Any, out: Any, nans: Any, slow: Any, c: Any, f: Any, words: Any,
                   lo: int, hi: int) -> None:
    _block(u, out, nans, slow, c, f, words, lo, hi)


@lru_cache(maxsize=256)
def _first_tier(src_bits: int, spec: FormatSpec, rnd: int, sub: bool) -> npt.NDArray[Any]:
    """Constants of tiers one and two in the source's word type, or a row starting with 0
    where the specification has no such tiers (``_fast_path_ok``) or the mode needs
    random words."""
    word = np.uint32 if src_bits == 32 else np.uint64
    sm, sbias = (23, 127) if src_bits == 32 else (52, 1023)
    ok = (spec.mantissa_bits >= 1 and sm > spec.mantissa_bits
          and spec.minexp >= 1 - sbias and spec.encoding != FNU and rnd != STOCHASTIC)
    row: tuple[int, ...] = (0,) * 12
    if ok:
        m = spec.mantissa_bits
        threshold = (spec.minexp + sbias) << sm  # source bits of the smallest normal
        rebias = (spec.minexp + sbias - spec.min_exponent_field) << sm
        row = (threshold, rebias, sm - m, spec.max_code, src_bits - spec.bits,
               1 << (src_bits - 1), spec.minexp + sbias + sm - m, sm + 2, m, not sub,
               spec.encoding == FNUZ, rnd)
    arr = np.array(row, dtype=word)
    arr.setflags(write=False)
    return arr


@nb.njit(cache=CACHE, nogil=True)
def _same_layout_nearest_even(u: Any, out: Any, shift: Any, lo: int, hi: int) -> None:
    """bfloat16/tf32 from float32 under nearest-even, no saturation: round the word by
    one shift (ties to even by adding the kept part's low bit), NaN inputs keep their
    sign and become the quiet NaN code. Branch-free, so the loop vectorises."""
    one = np.uint32(1)
    half = (one << (shift - one)) - one
    nan_lo = (np.uint32(0xFF) << (np.uint32(23) - shift)) | (one << (np.uint32(22) - shift))
    u, out = u[lo:hi], out[lo:hi]
    for i in range(u.size):
        x = u[i]
        isnan = (x & np.uint32(0x7FFFFFFF)) > np.uint32(0x7F800000)
        r = (x + half + ((x >> shift) & one)) >> shift
        qnan = ((x >> np.uint32(31)) << (np.uint32(31) - shift)) | nan_lo
        out[i] = qnan if isnan else r


def _same_layout(src: np.dtype[Any], spec: FormatSpec) -> bool:
    return (src == np.float32 and spec.encoding == IEEE and spec.exponent_bits == 8
            and spec.bias == 127 and spec.mantissa_bits < 23)


def _prepare(x: npt.NDArray[Any], fmt: FormatSpec, rnd: int, sat: bool, subnormals: bool,
             seed: int | None, words: Any) -> tuple[Any, ...]:
    """Source words (widened to float64 where the specification widens), output arrays
    and the constant rows of one call."""
    src = np.dtype(x.dtype)
    if fmt.minexp < (-126 if src == np.float32 else -1022) or fmt.mantissa_bits >= (
            23 if src == np.float32 else 52):
        with np.errstate(invalid="ignore"):  # the specification widens these exactly too
            x, src = x.astype(np.float64), np.dtype(np.float64)
    u = frozen(x).reshape(-1).view(np.uint32 if src == np.float32 else np.uint64)
    out = np.empty(u.shape, dtype=code_dtype(fmt))
    # the NaN mask matters only where the format has no NaN code (see the specification)
    nans = np.empty(u.shape if fmt.nan_code < 0 else 0, dtype=np.bool_)
    bits = 32 if src == np.float32 else 64
    c = constants(bits, fmt, rnd, sat, subnormals,
                   seed if rnd == STOCHASTIC and words is None else None)
    w = frozen(words if words is not None else _NO_WORDS, np.uint32).reshape(-1)
    return u, src, out, nans, c, _first_tier(bits, fmt, rnd, subnormals), w


def encode_bits(x: npt.NDArray[Any], fmt: FormatSpec, rnd: int, sat: bool, subnormals: bool,
                seed: int | None, words: Any = None) -> tuple[Any, Any]:
    """Same contract and bits as :func:`ampref.kernels.encode.encode_bits`."""
    u, src, out, nans, c, f, w = _prepare(x, fmt, rnd, sat, subnormals, seed, words)
    if rnd == NEAREST_EVEN and not sat and subnormals and _same_layout(src, fmt):
        run_blocks(_same_layout_nearest_even, u.size, u, out, np.uint32(23 - fmt.mantissa_bits))
    else:
        slow = np.empty(u.shape, dtype=np.bool_)
        run_blocks(_encode_blocks, u.size, u, out, nans, slow, c, f, w)
    return out.reshape(x.shape), None if fmt.nan_code >= 0 else nans.reshape(x.shape)


def quantize_bits(x: npt.NDArray[Any], fmt: FormatSpec, rnd: int, sat: bool, subnormals: bool,
                  seed: int | None, words: Any, table: Any) -> npt.NDArray[np.float32]:
    """Same contract and bits as :func:`ampref.kernels.encode.quantize_bits`; the values
    are gathered block by block while the block's codes are still in cache."""
    no_nan = fmt.nan_code < 0
    if rnd == NEAREST_EVEN and not sat and subnormals and _same_layout(np.dtype(x.dtype), fmt):
        codes, _ = encode_bits(x, fmt, rnd, sat, subnormals, seed, words)
        vals = np.empty(codes.size, np.float32)
        run_blocks(_values_blocks, codes.size, codes.reshape(-1), _NO_MASK, table,
                   fmt.mantissa_bits, False, vals)
        return vals.reshape(codes.shape)
    u, src, out, nans, c, f, w = _prepare(x, fmt, rnd, sat, subnormals, seed, words)
    vals = np.empty(u.shape, np.float32)
    slow = np.empty(u.shape, dtype=np.bool_)
    run_blocks(_quantize_blocks, u.size, u, out, nans, slow, c, f, w, table, fmt.mantissa_bits,
               no_nan, vals)
    return vals.reshape(x.shape)


@nb.njit(cache=CACHE, nogil=True)
def _quantize_blocks(u: Any, out: Any, nans: Any, slow: Any, c: Any, f: Any, words: Any,
                     table: Any, mant: int, no_nan: bool, vals: Any, lo: int, hi: int) -> None:
    _block(u, out, nans, slow, c, f, words, lo, hi)
    _values(out, nans, table, mant, no_nan, vals, lo, hi)


@nb.njit(cache=CACHE, nogil=True)
def _values_blocks(codes: Any, nans: Any, table: Any, mant: int, no_nan: bool, vals: Any,
                   lo: int, hi: int) -> None:
    _values(codes, nans, table, mant, no_nan, vals, lo, hi)


@nb.njit(cache=CACHE)
def _values(codes: Any, nans: Any, table: Any, mant: int, no_nan: bool, out: Any, lo: int,
            hi: int) -> None:
    """Each code's float32 value: from ``table``, or (empty table) the code shifted into
    a float32 word; NaN where the input was NaN and the format has no NaN."""
    codes, nans, out = codes[lo:hi], nans[lo:hi], out[lo:hi]
    if table.size:
        for i in range(codes.size):
            out[i] = table[codes[i]]
    else:
        bits = out.view(np.uint32)
        for i in range(codes.size):
            bits[i] = np.uint32(codes[i]) << np.uint32(23 - mant)
    if no_nan:
        for i in range(codes.size):
            if nans[i]:
                out[i] = np.float32(np.nan)
