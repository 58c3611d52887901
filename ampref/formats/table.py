"""Number formats as data.

A :class:`Format` is a frozen, keyword-only description of a binary floating-point
format: exponent and mantissa widths, bias and how the special values are encoded.
Every limit (``max``, ``tiny``, ``smallest_subnormal``, ``eps``, ...) is *derived*
from those few fields and carries the name NumPy's ``finfo`` uses for it. The kernels
in :mod:`ampref.formats.cast` read nothing but these fields, so adding a format is adding a
row to :data:`FORMATS` (spec clause FMT-DEF-001).

Size (about 320 lines): the Format dataclass is mostly its derived limits, one short
property each, next to the table they derive from.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from fractions import Fraction
from functools import cached_property

from ampref.kernels.params import ENCODING_NAMES, FormatSpec

__all__ = ["FORMATS", "Encoding", "Format", "format_names", "get_format"]


class Encoding(enum.Enum):
    """How a format spends its codes on inf and NaN (LLVM/ml_dtypes vocabulary).

    * ``IEEE``: all-ones exponent is reserved: mantissa 0 is ±inf, anything else NaN.
    * ``FN``: finite; the all-ones exponent holds normals, only the all-ones magnitude
      code (S.1...1.1...1) is NaN. No inf. Has -0.
    * ``FNUZ``: finite, unsigned zero; every exponent holds normals and the single NaN
      sits at the negative-zero code (0b1000...0). No inf, no -0.
    * ``FINITE``: every code is a finite number (MX FP4/FP6). No inf, no NaN.
    * ``FNU``: finite, unsigned (E8M0): no sign bit, no zero, no subnormals,
      all-ones code is NaN.
    """

    IEEE = "ieee"
    FN = "fn"
    FNUZ = "fnuz"
    FINITE = "finite"
    FNU = "fnu"

    @property
    def code(self) -> int:
        """The encoding's int code in the kernels (:mod:`ampref.kernels.params`)."""
        return ENCODING_NAMES.index(self.value)


@dataclass(frozen=True, kw_only=True)
class Format:
    """A binary floating-point format.

    Value of a code with sign ``s``, exponent field ``E`` and mantissa field ``M``:
    ``(-1)^s * 2^(E - bias) * (1 + M / 2^mantissa_bits)`` for a normal code and
    ``(-1)^s * 2^(1 - bias) * (M / 2^mantissa_bits)`` for a subnormal one (``E == 0``,
    only in formats whose encoding has subnormals).
    """

    #: Canonical name, ml_dtypes spelling where ml_dtypes has the format.
    name: str
    #: Width of the exponent field.
    exponent_bits: int
    #: Stored fraction bits (the implicit leading bit is not counted).
    mantissa_bits: int
    #: Exponent bias.
    bias: int
    #: Special-value encoding.
    encoding: Encoding
    #: Other names accepted by :func:`get_format` (case-insensitive).
    aliases: tuple[str, ...] = field(default=())
    #: Attribute name of the matching dtype in ``ml_dtypes`` (or ``numpy``), if any.
    dtype_name: str | None = None
    #: False for storage-only formats wider than float32 (float64): every float32 and
    #: float64 value is exactly representable, so quantizing to them is the identity and
    #: they need no rounding kernel (they have no ``encode``).
    kernel: bool = True

    def __post_init__(self) -> None:
        if self.exponent_bits < 1 or self.mantissa_bits < 0:
            raise ValueError(
                f"format {self.name!r}: exponent_bits must be >= 1 and mantissa_bits >= 0, "
                f"got {self.exponent_bits} and {self.mantissa_bits}"
            )
        if self.kernel and (self.exponent_bits > 8 or self.mantissa_bits > 23):
            raise ValueError(
                f"format {self.name!r}: ampref's kernels support exponent_bits <= 8 and "
                f"mantissa_bits <= 23 (float32-sized formats), got "
                f"{self.exponent_bits} and {self.mantissa_bits}"
            )

    # -- capabilities ------------------------------------------------------------
    @property
    def is_signed(self) -> bool:
        """True if the format has a sign bit."""
        return self.encoding is not Encoding.FNU

    @property
    def has_inf(self) -> bool:
        return self.encoding is Encoding.IEEE

    @property
    def has_nan(self) -> bool:
        return self.encoding is not Encoding.FINITE

    @property
    def has_negative_zero(self) -> bool:
        return self.encoding in (Encoding.IEEE, Encoding.FN, Encoding.FINITE)

    @property
    def has_zero(self) -> bool:
        return self.encoding is not Encoding.FNU

    @property
    def wide(self) -> bool:
        """True for the storage-only float64: the engine keeps float64 values and computes
        in float64 (every other format is stored in float32 and computed in float32)."""
        return not self.kernel

    @property
    def covers_float32(self) -> bool:
        """True if every float32 value is a value of this format (float32, float64): a
        parameter in it is its own float32 master."""
        return (self.encoding is Encoding.IEEE and self.exponent_bits >= 8
                and self.mantissa_bits >= 23)

    @property
    def has_subnormals(self) -> bool:
        """True if exponent field 0 encodes subnormals (False only for E8M0-like)."""
        return self.encoding is not Encoding.FNU

    @cached_property
    def spec(self) -> FormatSpec:
        """The fields the rounding kernels read, as plain ints (:mod:`ampref.kernels`)."""
        return FormatSpec(bits=self.bits, exponent_bits=self.exponent_bits,
                          mantissa_bits=self.mantissa_bits, bias=self.bias,
                          encoding=self.encoding.code, minexp=self.minexp,
                          maxexp_value=self.maxexp_value,
                          min_exponent_field=self.min_exponent_field, max_code=self.max_code,
                          inf_code=-1 if self.inf_code is None else self.inf_code,
                          nan_code=-1 if self.nan_code is None else self.nan_code,
                          has_subnormals=self.has_subnormals)

    # -- layout --------------------------------------------------------------------
    @property
    def bits(self) -> int:
        """Total width in bits (finfo ``bits``)."""
        return int(self.is_signed) + self.exponent_bits + self.mantissa_bits

    @property
    def nmant(self) -> int:
        return self.mantissa_bits

    @property
    def nexp(self) -> int:
        return self.exponent_bits

    @property
    def precision_bits(self) -> int:
        """Significand precision p including the implicit bit."""
        return self.mantissa_bits + 1

    @property
    def min_exponent_field(self) -> int:
        """Smallest exponent field value of a normal number."""
        return 1 if self.has_subnormals else 0

    @property
    def max_exponent_field(self) -> int:
        """Largest exponent field value of a finite number."""
        top = (1 << self.exponent_bits) - 1
        if self.encoding in (Encoding.IEEE, Encoding.FNU):
            return top - 1
        return top

    @property
    def max_mantissa_field(self) -> int:
        """Largest mantissa field at the largest finite exponent."""
        top = (1 << self.mantissa_bits) - 1
        return top - 1 if self.encoding is Encoding.FN else top

    @property
    def minexp(self) -> int:
        """Exponent of the smallest normal number (finfo ``minexp``)."""
        return self.min_exponent_field - self.bias

    @property
    def maxexp_value(self) -> int:
        """Exponent of the largest finite number (``emax``)."""
        return self.max_exponent_field - self.bias

    @property
    def max_code(self) -> int:
        """Magnitude code (sign bit clear) of the largest finite value."""
        return (self.max_exponent_field << self.mantissa_bits) | self.max_mantissa_field

    @property
    def inf_code(self) -> int | None:
        """Magnitude code of +inf, or None."""
        return self.max_code + 1 if self.has_inf else None

    @property
    def nan_code(self) -> int | None:
        """Canonical (quiet, positive) NaN code, or None.

        IEEE: all-ones exponent with the top mantissa bit set (quiet NaN); FN: the
        all-ones magnitude code; FNUZ: the negative-zero code; FNU: all ones.
        """
        m = self.mantissa_bits
        if self.encoding is Encoding.IEEE:
            return (((1 << self.exponent_bits) - 1) << m) | (1 << max(m - 1, 0))
        if self.encoding is Encoding.FN:
            return (1 << (self.exponent_bits + m)) - 1
        if self.encoding is Encoding.FNUZ:
            return 1 << (self.bits - 1)
        if self.encoding is Encoding.FNU:
            return (1 << self.bits) - 1
        return None

    @property
    def sign_mask(self) -> int:
        return (1 << (self.bits - 1)) if self.is_signed else 0

    @property
    def code_dtype(self) -> str:
        """Unsigned container for codes: ``uint8``, ``uint16`` or ``uint32``."""
        return "uint8" if self.bits <= 8 else "uint16" if self.bits <= 16 else "uint32"

    # -- limits with NumPy finfo names (exact Fractions and Python floats) ----------
    @property
    def max_exact(self) -> Fraction:
        frac = Fraction(self.max_mantissa_field, 1 << self.mantissa_bits)
        return (1 + frac) * Fraction(2) ** self.maxexp_value

    @property
    def max(self) -> float:
        """Largest finite value."""
        return float(self.max_exact)

    @property
    def min(self) -> float:
        """Most negative finite value (``tiny`` for unsigned formats)."""
        return -self.max if self.is_signed else self.tiny

    @property
    def tiny(self) -> float:
        """Smallest positive normal value (finfo ``tiny`` / ``smallest_normal``)."""
        return float(Fraction(2) ** self.minexp)

    @property
    def smallest_normal(self) -> float:
        return self.tiny

    @property
    def smallest_subnormal(self) -> float:
        """Smallest positive value (``tiny`` when the format has no subnormals)."""
        if not self.has_subnormals:
            return self.tiny
        return float(Fraction(2) ** (self.minexp - self.mantissa_bits))

    @property
    def eps(self) -> float:
        """Distance from 1.0 to the next larger value (2^-mantissa_bits)."""
        return float(Fraction(1, 1 << self.mantissa_bits))

    @property
    def machep(self) -> int:
        return -self.mantissa_bits

    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return f"ampref.Format({self.name})"


def _fmt(name: str, e: int, m: int, bias: int, enc: Encoding, *aliases: str,
         dtype: str | None = None) -> Format:
    return Format(name=name, exponent_bits=e, mantissa_bits=m, bias=bias, encoding=enc,
                  aliases=aliases, dtype_name=dtype)


_I, _FN, _FNUZ, _FIN, _FNU = (Encoding.IEEE, Encoding.FN, Encoding.FNUZ,
                              Encoding.FINITE, Encoding.FNU)

#: Every shipped format, by canonical name. Adding a format is adding a row here.
FORMATS: dict[str, Format] = {f.name: f for f in (
    _fmt("float32", 8, 23, 127, _I, "fp32", "f32", "single", "full", dtype="float32"),
    _fmt("float16", 5, 10, 15, _I, "fp16", "f16", "half", "binary16", dtype="float16"),
    _fmt("bfloat16", 8, 7, 127, _I, "bf16", "brain", dtype="bfloat16"),
    _fmt("tf32", 8, 10, 127, _I, "tensorfloat32", "tensorfloat-32"),
    _fmt("float8_e4m3fn", 4, 3, 7, _FN, "e4m3", "e4m3fn", "fp8_e4m3", "fp8-e4m3",
         dtype="float8_e4m3fn"),
    _fmt("float8_e5m2", 5, 2, 15, _I, "e5m2", "fp8_e5m2", "fp8-e5m2", dtype="float8_e5m2"),
    _fmt("float8_e4m3fnuz", 4, 3, 8, _FNUZ, "e4m3fnuz", dtype="float8_e4m3fnuz"),
    _fmt("float8_e5m2fnuz", 5, 2, 16, _FNUZ, "e5m2fnuz", dtype="float8_e5m2fnuz"),
    _fmt("float8_e8m0fnu", 8, 0, 127, _FNU, "e8m0", "e8m0fnu", "ue8m0", dtype="float8_e8m0fnu"),
    _fmt("float6_e2m3fn", 2, 3, 1, _FIN, "e2m3", "fp6_e2m3", dtype="float6_e2m3fn"),
    _fmt("float6_e3m2fn", 3, 2, 3, _FIN, "e3m2", "fp6_e3m2", dtype="float6_e3m2fn"),
    _fmt("float4_e2m1fn", 2, 1, 1, _FIN, "e2m1", "fp4", "fp4_e2m1", dtype="float4_e2m1fn"),
)}

#: Storage-only formats of the engine (float64 for exact gradient checks): accepted by
#: :func:`get_format` and :func:`quantize` (identity), not encodable, not in ``FORMATS``.
WIDE_FORMATS: dict[str, Format] = {f.name: f for f in (
    Format(name="float64", exponent_bits=11, mantissa_bits=52, bias=1023, encoding=_I,
           aliases=("fp64", "f64", "double"), dtype_name="float64", kernel=False),
)}

# The inverse map is derived, never written by hand.
_BY_NAME: dict[str, Format] = {
    alias.lower(): f for f in (*FORMATS.values(), *WIDE_FORMATS.values())
    for alias in (f.name, *f.aliases)
}


def format_names() -> list[str]:
    """Canonical names of all known formats."""
    return list(FORMATS)


def get_format(fmt: str | Format) -> Format:
    """Look up a format by name or alias (case-insensitive); formats pass through.

    Raises:
        ValueError: unknown name; the message lists the known names.
        TypeError: neither a string nor a :class:`Format`.
    """
    if isinstance(fmt, Format):
        return fmt
    if not isinstance(fmt, str):
        raise TypeError(f"format must be a str or ampref.Format, got {type(fmt).__name__}: {fmt!r}")
    try:
        return _BY_NAME[fmt.lower()]
    except KeyError:
        raise ValueError(
            f"unknown format {fmt!r}; known formats: {', '.join([*FORMATS, *WIDE_FORMATS])} "
            f"(aliases: {', '.join(sorted(a for f in FORMATS.values() for a in f.aliases))})"
        ) from None
