"""The encode kernel, NumPy specification: float32/float64 bit patterns -> codes of any
format, one chunk at a time, in three tiers (one constant shift for the normal range, a
subnormal tier, the general kernel for the rest). The public API is
:mod:`ampref.formats.cast`; the compiled twin with the same signature is
:mod:`ampref.kernels.encode_numba`, proven equal to this one bit for bit.

Every step works on the unsigned-integer bit view of the source (uint32 for float32,
uint64 for float64) with explicit masks for NaN, inf, zero, subnormal and overflow.
Nothing here relies on float arithmetic, out-of-range float->int casts or subnormal
float behaviour, so a CuPy port with the same integer recipe produces the same bits.
Clause IDs refer to ``specs/formats.md``.

Size (about 330 lines): one kernel in three tiers whose phases must be read together
(the style guide's exception for the rounding kernel).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from .params import (FNU, FNUZ, IEEE, NEAREST_AWAY, NEAREST_EVEN, ODD, STOCHASTIC, TOWARD_NEGATIVE,
                     TOWARD_POSITIVE, TOWARD_ZERO, FormatSpec, code_dtype)
from .srhash import random_bits

__all__ = ["encode_bits", "quantize_bits"]

_CHUNK = 32768  # elements per kernel pass: keeps every temporary in L2 cache


@dataclass(frozen=True, kw_only=True)
class _Source:
    """Bit layout of a source float type (IEEE binary32 or binary64)."""

    dtype: Any
    udtype: Any
    width: int
    mant: int
    bias: int

    @property
    def minexp(self) -> int:
        return 1 - self.bias


_F32 = _Source(dtype=np.float32, udtype=np.uint32, width=32, mant=23, bias=127)
_F64 = _Source(dtype=np.float64, udtype=np.uint64, width=64, mant=52, bias=1023)


# --------------------------------------------------------------------------------------
# Rounding a non-negative integer significand by a right shift (FMT-RND-001..007)
# --------------------------------------------------------------------------------------
def _round_shift(sig: Any, d: Any, dtrue: Any, rnd: int, neg: Any,
                 rbits: Any) -> Any:
    """round(sig / 2^d) in direction ``rnd`` for magnitudes; ``neg`` marks negative inputs.

    ``d`` >= 1 is the (possibly capped) shift; ``dtrue`` the uncapped one, needed only
    by stochastic rounding, whose probability is floor(frac * 2^32) / 2^32 with frac
    the discarded fraction of the quantum (FMT-SR-001).
    """
    one = sig.dtype.type(1)
    if rnd == TOWARD_ZERO:
        return sig >> d
    if rnd == NEAREST_EVEN:
        # add half-1, plus 1 if the kept part is odd: ties then carry only from odd
        t = sig >> d
        t &= one
        t += (one << (d - one)) - one
        t += sig
        t >>= d
        return t
    if rnd == NEAREST_AWAY:
        return (sig + (one << (d - one))) >> d
    if rnd in (TOWARD_POSITIVE, TOWARD_NEGATIVE):
        away = neg if rnd == TOWARD_NEGATIVE else ~neg
        return (sig + np.where(away, (one << d) - one, sig.dtype.type(0))) >> d
    q = sig >> d
    rem = sig - (q << d)
    if rnd == ODD:
        return q | (rem != 0).astype(sig.dtype)
    if rnd == STOCHASTIC:
        w = sig.dtype.type(32)
        left = np.where(dtrue <= w, w - np.minimum(dtrue, w), sig.dtype.type(0))
        right = np.minimum(np.maximum(dtrue, w) - w, sig.dtype.type(sig.dtype.itemsize * 8 - 1))
        frac32 = (rem << left) >> right
        return q + (frac32 > rbits.astype(sig.dtype)).astype(sig.dtype)
    raise ValueError(f"unhandled rounding mode {rnd!r}")


def _overflow_goes_down(rnd: int, neg: Any) -> Any:
    """True where the mode rounds an overflowing magnitude down to max (FMT-OVF-002)."""
    if rnd in (TOWARD_ZERO, ODD):
        return np.ones_like(neg)
    if rnd == TOWARD_POSITIVE:
        return neg
    if rnd == TOWARD_NEGATIVE:
        return ~neg
    return np.zeros_like(neg)


# --------------------------------------------------------------------------------------
# The encode kernel: source bits -> format codes, one chunk at a time
# --------------------------------------------------------------------------------------
def _encode_chunk(u: Any, src: _Source, fmt: FormatSpec, rnd: int, sat: bool,
                  subnormals: bool, rbits: Any) -> tuple[Any, Any]:
    """Encode one chunk. Returns (codes as src.udtype, mask of NaN inputs)."""
    # why long: one kernel: its phases (classify, normal tier, below-normal tier, overflow,
    # specials) share masks and scratch that splitting would pass around
    U = src.udtype
    M = fmt.mantissa_bits

    # Phase 1: split the source into sign, exponent field and integer significand.
    sign = u >> U(src.width - 1)
    neg = sign.astype(bool)
    mag = u & U((1 << (src.width - 1)) - 1)
    ef = mag >> U(src.mant)
    is_nan = mag > U(((1 << (src.width - 1 - src.mant)) - 1) << src.mant)
    is_inf = ef == U((1 << (src.width - 1 - src.mant)) - 1)
    is_inf &= ~is_nan
    sig = (mag & U((1 << src.mant) - 1)) | ((ef != 0).astype(U) << U(src.mant))
    efe = np.maximum(ef, U(1))  # source subnormals share the exponent of the smallest normal

    # Phase 2: shift d from the source quantum to the target quantum. T is the source
    # exponent field of the target's smallest normal; below it the target quantum is
    # fixed (subnormals) or, without subnormal codes, the smallest normal itself.
    T = fmt.minexp + src.bias
    below = np.maximum(efe, U(T)) - efe
    d0 = src.mant - M
    dtrue = below + U(d0)
    if not fmt.has_subnormals:
        dtrue = dtrue + np.where(below > 0, U(M), U(0))
    d = np.minimum(dtrue, U(src.mant + 2))  # beyond this every mode's answer is settled

    # Phase 3: round the significand.
    q = _round_shift(sig, d, dtrue, rnd, neg, rbits)
    is_zero = q == 0
    if not fmt.has_subnormals:
        q = np.where(below > 0, q << U(M), q)

    # Phase 4: assemble the magnitude code; a carry out of the significand bumps the
    # exponent by itself. Exponents past the top are clamped to "one above max".
    top = fmt.maxexp_value + src.bias + 1
    base = (np.minimum(np.maximum(efe, U(T)), U(top)) - U(T) + U(fmt.min_exponent_field)) << U(M)
    code = base + q - U(1 << M)

    # Phase 5: overflow, then specials, then the sign.
    max_code = U(fmt.max_code)
    over = (code > max_code) & ~is_zero & ~is_nan & ~is_inf
    if sat or not (fmt.has_inf or fmt.has_nan):
        over_code = np.full_like(code, max_code)
    else:
        over_code = np.where(_overflow_goes_down(rnd, neg), max_code,
                             U(fmt.inf_code if fmt.has_inf else fmt.nan_code))
    code = np.where(over, over_code, code)
    if not subnormals:
        is_zero |= code < U(fmt.min_exponent_field << M)
    code = np.where(is_zero, U(0), code)
    inf_code = fmt.max_code if sat else (fmt.inf_code if fmt.has_inf else
                                          fmt.nan_code if fmt.has_nan else fmt.max_code)
    code = np.where(is_inf, U(inf_code), code)
    code = _apply_sign_and_nan(code, neg, is_zero, is_nan, fmt, U)
    return code, is_nan


def _apply_sign_and_nan(code: Any, neg: Any, is_zero: Any, is_nan: Any, fmt: FormatSpec,
                        U: Any) -> Any:
    """Attach the sign per the encoding and write NaN codes (FMT-SPC-001..006)."""
    nan = U(max(fmt.nan_code, 0))
    if fmt.encoding == FNU:
        # unsigned: negatives and NaN -> NaN; exact zeros are caught by the caller
        return np.where(neg | is_nan, nan, code)
    signed = code | (neg.astype(U) << U(fmt.bits - 1))
    if fmt.encoding == FNUZ:
        signed = np.where(is_zero, U(0), signed)  # no negative zero
        return np.where(is_nan, nan, signed)
    nan_signed = nan | (neg.astype(U) << U(fmt.bits - 1))
    return np.where(is_nan, nan_signed, signed)


def _fast_path_ok(src: _Source, fmt: FormatSpec) -> bool:
    """Formats whose in-range elements round with one constant shift (FMT-IMP-001)."""
    return (fmt.mantissa_bits >= 1 and src.mant > fmt.mantissa_bits
            and fmt.minexp >= src.minexp and fmt.encoding != FNU)


def _fast_chunk(u: Any, src: _Source, fmt: FormatSpec, rnd: int, rbits: Any,
                subnormals: bool = True) -> tuple[Any, Any]:
    """Codes for elements inside the target's normal range, plus a mask of the rest.

    Inside the normal range the target quantum is a fixed 2^d0 source quanta, so
    rebiasing the exponent field and one rounding shift of the whole magnitude gives
    the code; a carry out of the mantissa increments the exponent by itself. Elements
    below the range, overflowing, inf or NaN are flagged for the slower tiers.
    """
    U = src.udtype
    d0 = src.mant - fmt.mantissa_bits
    rebias = (fmt.minexp + src.bias - fmt.min_exponent_field) << src.mant
    if _same_layout(src, fmt):
        # bf16/tf32 from float32: the sign lands in place and source subnormals are the
        # format's subnormals, so rounding the signed word by one shift is the answer
        code = _round_shift(u, U(d0), U(d0), rnd, u >> U(src.width - 1) == 1
                            if _needs_sign(rnd) else None, rbits)
        mag = u & U((1 << (src.width - 1)) - 1)
        # NaN payloads can carry into the sign bit (0x7fffffff -> 0x8000): flag NaN
        # inputs by their bits, overflow and inf by the code
        slow = mag > U(((1 << (src.width - 1 - src.mant)) - 1) << src.mant)
        slow |= (code & U((1 << (fmt.bits - 1)) - 1)) > U(fmt.max_code)
        if not subnormals:  # subnormal results come only from subnormal sources here
            slow |= mag < U(1 << src.mant)
        return code, slow
    threshold = (fmt.minexp + src.bias) << src.mant  # source bits of the smallest normal
    mag = u & U((1 << (src.width - 1)) - 1)
    slow = mag < U(threshold) if threshold else None
    if rebias:
        mag -= U(rebias)  # elements below the threshold wrap; they are redone below
    neg = u > U((1 << (src.width - 1)) - 1) if _needs_sign(rnd) else None
    code = _round_shift(mag, U(d0), U(d0), rnd, neg, rbits)
    over = code > U(fmt.max_code)
    slow = over if slow is None else (slow | over)
    sign = u >> U(src.width - 1)
    sign <<= U(fmt.bits - 1)
    code |= sign
    return code, slow


def _same_layout(src: _Source, fmt: FormatSpec) -> bool:
    """Same exponent field and bias as the source (bf16, tf32 from float32)."""
    return (fmt.exponent_bits == src.width - 1 - src.mant and fmt.bias == src.bias
            and fmt.encoding == IEEE)


def _needs_sign(rnd: int) -> bool:
    return rnd in (TOWARD_POSITIVE, TOWARD_NEGATIVE)


def _below_chunk(u: Any, src: _Source, fmt: FormatSpec, rnd: int, subnormals: bool,
                 rbits: Any) -> tuple[Any, Any]:
    """Codes for finite elements below the target's normal range (subnormal results).

    The quantum is the format's smallest subnormal, so the shift grows by one per
    binade below the smallest normal; a carry out reaches the smallest normal code by
    itself. Returns (codes, mask of elements that still need the general kernel).
    """
    U = src.udtype
    mag = u & U((1 << (src.width - 1)) - 1)
    ef = mag >> U(src.mant)
    sig = (mag & U((1 << src.mant) - 1)) | ((ef != 0).astype(U) << U(src.mant))
    efe = np.maximum(ef, U(1))
    dtrue = U(fmt.minexp + src.bias + src.mant - fmt.mantissa_bits) - efe
    d = np.minimum(dtrue, U(src.mant + 2))
    neg = u > U((1 << (src.width - 1)) - 1)
    code = _round_shift(sig, d, dtrue, rnd, neg, rbits)
    if not subnormals:
        code = np.where(code < U(1 << fmt.mantissa_bits), U(0), code)
    zero = code == 0
    keep_sign = ~zero if fmt.encoding == FNUZ else np.ones_like(zero)
    code |= (neg & keep_sign).astype(U) << U(fmt.bits - 1)
    return code, np.zeros_like(zero)


def _overflow_codes(neg: Any, fmt: FormatSpec, rnd: int, sat: bool, U: Any) -> Any:
    """Signed codes for finite inputs whose rounded magnitude exceeds max (FMT-OVF-*)."""
    max_code = U(fmt.max_code)
    if sat or not (fmt.has_inf or fmt.has_nan):
        mag = np.full(neg.shape, max_code, dtype=U)
    else:
        mag = np.where(_overflow_goes_down(rnd, neg), max_code,
                       U(fmt.inf_code if fmt.has_inf else fmt.nan_code))
    if fmt.encoding == FNUZ:
        return np.where(mag == U(fmt.nan_code), mag, mag | (neg.astype(U) << U(fmt.bits - 1)))
    return mag | (neg.astype(U) << U(fmt.bits - 1))


def _finish_slow(out: Any, nans: Any, where: Any, us: Any, src: _Source, fmt: FormatSpec,
                 rnd: int, sat: bool, subnormals: bool, rs: Any) -> None:
    """Finite overflow gets its code directly; inf and NaN go to the general kernel."""
    U = src.udtype
    special = (us & U((1 << (src.width - 1)) - 1)) >= U(((1 << (src.width - 1 - src.mant)) - 1)
                                                       << src.mant)
    fin = ~special
    if fin.any():
        out[where[fin]] = _overflow_codes(us[fin] >> U(src.width - 1) == 1, fmt, rnd, sat, U)
    if special.any():
        codes, is_nan = _encode_chunk(us[special], src, fmt, rnd, sat, subnormals,
                                      None if rs is None else rs[special])
        out[where[special]] = codes
        nans[where[special]] = is_nan


def encode_bits(x: npt.NDArray[Any], fmt: FormatSpec, rnd: int, sat: bool,
                 subnormals: bool, seed: int | None, words: Any = None) -> tuple[Any, Any]:
    """Codes of all of ``x`` and, for formats without a NaN code, the mask of NaN inputs
    (their codes cannot say it; None for formats with a NaN code). Stochastic words come
    from (seed, flat index) or ``words``."""
    # why long: the chunk loop of the encode kernel with its tier dispatch; the phases are
    # commented
    src = _F32 if x.dtype == np.float32 else _F64
    if fmt.minexp < src.minexp or fmt.mantissa_bits >= src.mant:
        # the format reaches below the source's normal range (E8M0 from float32) or is
        # as precise as the source (float32 from float32): widen exactly, so every
        # shift is >= 1 and no source subnormal lies inside the format's range
        with np.errstate(invalid="ignore"):  # signalling NaNs quieten; still NaN
            x, src = x.astype(np.float64), _F64
    flat = np.ascontiguousarray(x).reshape(-1).view(src.udtype)
    out = np.empty(flat.shape, dtype=code_dtype(fmt))
    nans = np.zeros(flat.shape, dtype=bool)
    fast = _fast_path_ok(src, fmt)
    for start in range(0, flat.size, _CHUNK):
        u = flat[start:start + _CHUNK]
        stop = start + u.size
        rbits = None
        if rnd == STOCHASTIC:
            rbits = (words.reshape(-1)[start:stop] if words is not None
                     else random_bits(seed, start, u.size))  # type: ignore[arg-type]
        if fast:
            out[start:stop], slow = _fast_chunk(u, src, fmt, rnd, rbits, subnormals)
            if not slow.any():
                continue
            idx = np.flatnonzero(slow)
            us = u[idx]
            rs = None if rbits is None else rbits[idx]
            # middle tier: finite, nonzero-or-zero magnitudes below the normal range
            mag = us & src.udtype((1 << (src.width - 1)) - 1)
            low = mag < src.udtype((fmt.minexp + src.bias) << src.mant)
            if low.any():
                li = np.flatnonzero(low)
                out[start + idx[li]] = _below_chunk(us[li], src, fmt, rnd, subnormals,
                                                    None if rs is None else rs[li])[0]
                idx, us = idx[~low], us[~low]
                rs = None if rs is None else rs[~low]
            if idx.size:
                _finish_slow(out, nans, start + idx, us, src, fmt, rnd, sat, subnormals, rs)
        else:
            out[start:stop], nans[start:stop] = _encode_chunk(u, src, fmt, rnd, sat,
                                                              subnormals, rbits)
    if fmt.encoding == FNU:
        out[(flat << src.udtype(1)) == 0] = fmt.nan_code  # E8M0 has no zero: ±0 -> NaN
    return out.reshape(x.shape), None if fmt.has_nan else nans.reshape(x.shape)


def quantize_bits(x: npt.NDArray[Any], fmt: FormatSpec, rnd: int, sat: bool, subnormals: bool,
                  seed: int | None, words: Any, table: Any) -> npt.NDArray[np.float32]:
    """The rounded values of ``x`` as float32: :func:`encode_bits`, then each code's value
    from ``table`` (the format's value of every code), or, for an empty ``table``, the
    code shifted into a float32 word (formats laid out like float32). A NaN input to a
    format without NaN gives NaN."""
    codes, nans = encode_bits(x, fmt, rnd, sat, subnormals, seed, words)
    if table.size:
        vals = table[codes.astype(np.intp)]
    else:
        vals = (codes.astype(np.uint32) << np.uint32(23 - fmt.mantissa_bits)).view(np.float32)
    if nans is not None and nans.any():
        vals = np.where(nans, np.float32(np.nan), vals)
    return vals
