"""Correctly rounded casts to any :class:`~ampref.formats.table.Format`: quantize, encode, decode.

The rounding itself is the integer encode kernel of :mod:`ampref.kernels` (NumPy
specification or its compiled twin, whichever is active); this module checks
and prepares the input (byte order, extended precision, ``via``, seeds), decodes codes to
exact values and offers the public entry points. Clause IDs refer to
``specs/formats.md``.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import numpy as np
import numpy.typing as npt

from ampref import kernels
from ampref.common.checks import check_flag
from ampref.kernels.srhash import check_seed

from .table import FORMATS, Encoding, Format, get_format
from .rounding import RoundingMode, get_rounding

__all__ = ["as_ml_dtype", "decode", "encode", "exact_source", "quantize", "value_table"]

_VIA_CHOICES = (None, "float32")

# --------------------------------------------------------------------------------------
# Decode: codes -> exact float32 values
# --------------------------------------------------------------------------------------
def _decode_arith(codes: Any, fmt: Format) -> npt.NDArray[np.float32]:
    """Exact value of each code, computed field by field (FMT-DEC-001)."""
    c = codes.astype(np.int64)
    M, E = fmt.mantissa_bits, fmt.exponent_bits
    neg = ((c >> (fmt.bits - 1)) & 1).astype(bool) if fmt.is_signed else np.zeros(c.shape, bool)
    mag = c & ((1 << (E + M)) - 1)
    ef, mf = mag >> M, mag & ((1 << M) - 1)
    sub = (ef == 0) & fmt.has_subnormals
    sig = np.where(sub, mf, mf + (1 << M)).astype(np.float64)
    val = np.ldexp(sig, (np.where(sub, 1, ef) - fmt.bias - M).astype(np.int32))
    if fmt.encoding is Encoding.IEEE:
        top = ef == (1 << E) - 1
        val = np.where(top, np.where(mf == 0, np.inf, np.nan), val)
    elif fmt.encoding is Encoding.FN:
        val = np.where(mag == (1 << (E + M)) - 1, np.nan, val)
    elif fmt.encoding is Encoding.FNUZ or fmt.encoding is Encoding.FNU:
        val = np.where(c == fmt.nan_code, np.nan, val)
    val = np.where(neg, -val, val)
    return val.astype(np.float32)


def value_table(fmt: str | Format) -> npt.NDArray[np.float32]:
    """float32 value of every code of a format of at most 16 bits (read-only), by code.

    Raises:
        ValueError: unknown format, or one wider than 16 bits.
    """
    return _value_table(get_format(fmt))


@cache
def _value_table(fmt: Format) -> npt.NDArray[np.float32]:
    if not fmt.kernel or fmt.bits > 16:
        raise ValueError(f"value_table needs a code format of at most 16 bits, {fmt.name} has "
                         f"{fmt.bits}")
    table = _decode_arith(np.arange(1 << fmt.bits, dtype=np.uint32), fmt)
    table.setflags(write=False)
    return table


def decode(bits: npt.ArrayLike, fmt: str | Format) -> npt.NDArray[np.float32]:
    """Exact float32 values of format codes.

    NaN codes decode to a quiet float32 NaN (payloads are not carried); ±inf to ±inf;
    -0 to -0.0. Codes must fit in ``fmt.bits`` bits.

    Raises:
        TypeError: ``bits`` is not an unsigned/signed integer array.
        ValueError: a code does not fit in the format's width (first offender named).
    """
    fmt = get_format(fmt)
    arr = _check_codes(bits, fmt, "decode")
    if fmt.bits <= 16:
        return value_table(fmt)[arr.astype(np.intp)]
    if _float32_layout(fmt):
        return (arr.astype(np.uint32) << np.uint32(23 - fmt.mantissa_bits)).view(np.float32)
    return _decode_arith(arr, fmt)


def _check_codes(bits: npt.ArrayLike, fmt: Format, op: str) -> npt.NDArray[Any]:
    """Integer codes that fit in ``fmt``'s width (the first offender named)."""
    arr = np.asarray(bits)
    if arr.dtype.kind not in "ui":
        raise TypeError(f"{op} expects integer codes (uint8/uint16/uint32), got dtype {arr.dtype}")
    if not fmt.kernel:
        raise ValueError(f"{fmt.name} is a storage-only format without codes")
    if arr.size and (arr.min() < 0 or arr.max() >= (1 << fmt.bits)):
        bad = np.flatnonzero((arr.reshape(-1) < 0) | (arr.reshape(-1) >= (1 << fmt.bits)))[0]
        raise ValueError(f"code {int(arr.reshape(-1)[bad])} at flat index {bad} does not fit "
                         f"in {fmt.name}'s {fmt.bits} bits")
    return arr


# --------------------------------------------------------------------------------------
# Public entry points
# --------------------------------------------------------------------------------------
def _prepare(x: npt.ArrayLike, fmt: str | Format, rounding: str | RoundingMode, via: str | None,
             seed: int | None) -> tuple[Any, Format, RoundingMode, int | None, Any]:
    fmt = get_format(fmt)
    rnd = get_rounding(rounding)
    arr = exact_source(np.asarray(x))
    out_dtype = arr.dtype if arr.dtype in (np.float32, np.float64) else np.dtype(np.float32)
    if arr.dtype not in (np.float32, np.float64):
        arr = arr.astype(np.float32)  # float16/bfloat16/fp8 widen exactly
    if via not in _VIA_CHOICES:
        raise ValueError(f"via must be one of {_VIA_CHOICES}, got {via!r}")
    if via == "float32" and arr.dtype == np.float64:
        with np.errstate(over="ignore"):
            # round-to-nearest-even: the double rounding of FMT-DBL-002
            arr = arr.astype(np.float32)
    if seed is not None:  # checked under every mode: a bad seed is never silently unused
        seed = check_seed(seed)
    if rnd is RoundingMode.STOCHASTIC and seed is None:
        raise ValueError("rounding='stochastic' needs seed=<int in [0, 2**64)>; "
                         "random bits are a function of (seed, element index)")
    return arr, fmt, rnd, seed, out_dtype


def exact_source(arr: npt.NDArray[Any]) -> npt.NDArray[Any]:
    """``arr`` as a native-byte-order float array the kernels can round once (FMT-API-003).

    Non-native byte order (``'>f8'``) is converted exactly; extended precision
    (longdouble) is accepted only where every element is a float64 value, since the
    kernels round from at most 64 source bits: anything else would be a double rounding.

    Raises:
        TypeError: not a floating array.
        ValueError: a longdouble element that float64 cannot hold exactly (named).
    """
    if arr.dtype.kind != "f" and not _is_ml_float(arr.dtype):
        raise TypeError(f"quantize/encode expect a floating array (float32 or float64), "
                        f"got dtype {arr.dtype}")
    if arr.dtype.kind == "f" and not arr.dtype.isnative:
        arr = arr.astype(arr.dtype.newbyteorder("="))  # same values, native layout
    if arr.dtype.kind == "f" and arr.dtype.itemsize > 8:
        wide = arr.astype(np.float64)
        with np.errstate(invalid="ignore"):
            lost = (wide.astype(arr.dtype) != arr) & ~np.isnan(arr)
        if lost.any():
            i = int(np.flatnonzero(lost.reshape(-1))[0])
            raise ValueError(f"{arr.dtype} element {i} ({arr.reshape(-1)[i]!r}) is not a float64 "
                             "value; ampref rounds from float32/float64 exactly and would round "
                             "this one twice: round it to float64 yourself (or pass float64)")
        arr = wide
    return arr


def _is_ml_float(dtype: np.dtype[Any]) -> bool:
    return dtype.kind == "V" and dtype.itemsize <= 2 and "float" in dtype.name


def encode(x: npt.ArrayLike, fmt: str | Format, rounding: str | RoundingMode = "nearest_even",
           *, saturate: bool = False, subnormals: bool = True, via: str | None = None,
           seed: int | None = None) -> npt.NDArray[np.unsignedinteger[Any]]:
    """Round ``x`` to ``fmt`` and return the codes (uint8, uint16 or uint32).

    Same arguments and semantics as :func:`quantize`. A NaN input to a format without
    NaN (FP4/FP6) cannot be encoded and raises ``ValueError``.
    """
    saturate, subnormals = _flags(saturate, subnormals)
    arr, fmt, rnd, seed, _ = _prepare(x, fmt, rounding, via, seed)
    if not fmt.kernel:
        raise ValueError(f"{fmt.name} is a storage-only format without codes; encode "
                         f"targets one of {', '.join(FORMATS)}")
    codes, nans = kernels.encode_bits(arr, fmt.spec, rnd.code, saturate, subnormals, seed)
    if nans is not None and nans.any():
        idx = int(np.flatnonzero(nans.reshape(-1))[0])
        raise ValueError(f"{fmt.name} has no NaN encoding, but input element {idx} is NaN")
    return codes.astype(fmt.code_dtype, copy=False)


def quantize(x: npt.ArrayLike, fmt: str | Format, rounding: str | RoundingMode = "nearest_even",
             *, saturate: bool = False, subnormals: bool = True, via: str | None = None,
             seed: int | None = None) -> npt.NDArray[np.floating[Any]]:
    """Round every element of ``x`` to a value of ``fmt``; same dtype as ``x``.

    The exact value of each float32/float64 input is rounded once (correct rounding,
    FMT-RND-001); ``via="float32"`` first rounds float64 input to float32 with
    nearest-even, reproducing torch and ml_dtypes (double rounding, FMT-DBL-002).

    Args:
        x: float32 or float64 array (float16/bfloat16/fp8 arrays widen exactly and give
            float32).
        fmt: a :class:`Format` or name/alias (``"fp16"``, ``"bf16"``, ``"e4m3"`` ...).
        rounding: one of :class:`RoundingMode`'s names.
        saturate: clamp overflow and ±inf to ±max (NaN stays NaN).
        subnormals: if False, results that would be subnormal become signed zero
            (+0 in FNUZ formats). Inputs are not flushed first: a subnormal input is
            rounded from its exact value and only the result is flushed.
        via: ``None`` or ``"float32"``.
        seed: required for ``"stochastic"``: random bits are a hash of
            (seed, flat element index), see :mod:`ampref.kernels.srhash`.

    Specials (FMT-SPC-*): NaN stays NaN (quiet); ±0 keeps its sign where the format
    has -0 (FNUZ: +0; E8M0 has no zero: 0 -> NaN, and positive values below 2^-127
    -> 2^-127); ±inf -> ±inf (IEEE), NaN (FN/FNUZ/E8M0), ±max (FP4/FP6, or
    ``saturate``). Overflow: to inf where the format has it, else NaN (FN/FNUZ,
    matching ml_dtypes), else ±max (FP4/FP6); directed modes that round the magnitude
    down (toward zero, odd, toward the other infinity) give ±max (FMT-OVF-*).

    Raises:
        TypeError: ``x`` is not floating, or ``fmt``/``rounding`` has the wrong type.
        ValueError: unknown format, mode or ``via``; stochastic without a valid seed.
    """
    saturate, subnormals = _flags(saturate, subnormals)
    arr, fmt, rnd, seed, out_dtype = _prepare(x, fmt, rounding, via, seed)
    if not fmt.kernel:
        return arr.astype(out_dtype)  # float64 holds every float32/float64 value exactly
    return _quantized(arr, fmt, rnd.code, saturate, subnormals, seed, None).astype(
        out_dtype, copy=False)


def quantize_with_words(x: npt.NDArray[Any], fmt: str | Format, words: Any, *,
                        saturate: bool = False, subnormals: bool = True) -> Any:
    """Stochastic quantize with caller-supplied 32-bit random words (one per element).

    For verification and for backends that draw words for other index layouts; the
    public :func:`quantize` draws ``words`` from (seed, flat index).
    """
    saturate, subnormals = _flags(saturate, subnormals)
    fmt = get_format(fmt)
    arr = np.asarray(x)
    raw = np.asarray(words)
    if raw.dtype.kind not in "iu" or (raw.size and (int(raw.min()) < 0
                                                    or int(raw.max()) >= 1 << 32)):
        raise ValueError(f"words must be integers in [0, 2**32) (one 32-bit random word per "
                         f"element), got dtype {raw.dtype}"
                         + (f", range [{int(raw.min())}, {int(raw.max())}]"
                            if raw.size and raw.dtype.kind in "iu" else ""))
    w = raw.astype(np.uint32)
    if w.shape != arr.shape:
        raise ValueError(f"words must have x's shape {arr.shape}, got {w.shape}")
    return _quantized(arr, fmt, RoundingMode.STOCHASTIC.code, saturate, subnormals, None,
                      w).astype(arr.dtype, copy=False)


def _flags(saturate: Any, subnormals: Any) -> tuple[bool, bool]:
    """The two cast flags as bools (a string such as "no" would read as True)."""
    return check_flag("saturate", saturate), check_flag("subnormals", subnormals)


def _float32_layout(fmt: Format) -> bool:
    """True if codes shifted left by 23 - M are the float32 bit patterns (fp32, tf32)."""
    return fmt.encoding is Encoding.IEEE and fmt.exponent_bits == 8 and fmt.bias == 127


def _quantized(arr: Any, fmt: Format, rnd: int, saturate: bool, subnormals: bool,
               seed: int | None, words: Any) -> Any:
    """float32 values of ``arr`` rounded to ``fmt``: by code from the value table (at most
    16 bits), the code shifted into a float32 word (float32-layout formats), else decoded
    field by field."""
    if fmt.bits <= 16 or _float32_layout(fmt):
        table = value_table(fmt) if fmt.bits <= 16 else _NO_TABLE
        return kernels.quantize_bits(arr, fmt.spec, rnd, saturate, subnormals, seed, words, table)
    codes, nans = kernels.encode_bits(arr, fmt.spec, rnd, saturate, subnormals, seed, words)
    vals = _decode_arith(codes, fmt)
    if nans is not None and nans.any():
        vals = np.where(nans, np.float32(np.nan), vals)
    return vals


_NO_TABLE = np.empty(0, np.float32)
_NO_TABLE.setflags(write=False)  # read-only like the value tables: one compiled version


def as_ml_dtype(bits: npt.ArrayLike, fmt: str | Format) -> npt.NDArray[Any]:
    """View codes as the matching ``ml_dtypes`` (or NumPy float16/float32) array.

    Raises:
        ValueError: ml_dtypes has no dtype for this format (tf32), or is not installed.
    """
    fmt = get_format(fmt)
    if fmt.dtype_name is None:
        raise ValueError(f"{fmt.name} has no ml_dtypes/NumPy dtype; use ampref.decode instead")
    codes = _check_codes(bits, fmt, "as_ml_dtype")
    if hasattr(np, fmt.dtype_name):
        dtype = np.dtype(getattr(np, fmt.dtype_name))
    else:
        try:
            import ml_dtypes
        except ImportError as e:  # pragma: no cover - ml_dtypes is a dependency
            raise ValueError("ml_dtypes is not installed") from e
        dtype = np.dtype(getattr(ml_dtypes, fmt.dtype_name))
    return codes.astype(f"uint{dtype.itemsize * 8}").view(dtype)
