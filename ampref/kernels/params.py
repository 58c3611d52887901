"""What a kernel knows of a format and a rounding mode: plain integers.

The kernels (NumPy and compiled alike) take a :class:`FormatSpec`, a tuple of ints that
:attr:`ampref.formats.table.Format.spec` derives from a format row, and a rounding mode
as its int code, so one signature serves both implementations (numba compiles tuples of
ints and ints, not dataclasses or enums). The codes are positions in
:data:`MODE_NAMES` and :data:`ENCODING_NAMES`, whose spellings are the values of
``RoundingMode`` and ``Encoding``.
"""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["ENCODING_NAMES", "FINITE", "FN", "FNU", "FNUZ", "FormatSpec", "IEEE",
           "MODE_NAMES", "NEAREST_AWAY", "NEAREST_EVEN", "ODD", "STOCHASTIC", "TOWARD_NEGATIVE",
           "TOWARD_POSITIVE", "TOWARD_ZERO", "code_dtype"]

#: rounding modes by code (``RoundingMode`` values, in this order)
MODE_NAMES = ("nearest_even", "nearest_away", "toward_zero", "toward_positive",
              "toward_negative", "odd", "stochastic")
(NEAREST_EVEN, NEAREST_AWAY, TOWARD_ZERO, TOWARD_POSITIVE, TOWARD_NEGATIVE, ODD,
 STOCHASTIC) = range(len(MODE_NAMES))

#: special-value encodings by code (``Encoding`` values, in this order)
ENCODING_NAMES = ("ieee", "fn", "fnuz", "finite", "fnu")
IEEE, FN, FNUZ, FINITE, FNU = range(len(ENCODING_NAMES))


class FormatSpec(NamedTuple):
    """The fields of a format that the rounding kernels read, as ints.

    ``inf_code``/``nan_code`` are -1 where the format has no such code. Everything else
    a kernel needs (has_inf, has_nan, code width) follows from these.
    """

    bits: int
    exponent_bits: int
    mantissa_bits: int
    bias: int
    encoding: int
    minexp: int
    maxexp_value: int
    min_exponent_field: int
    max_code: int
    inf_code: int
    nan_code: int
    has_subnormals: bool

    @property
    def has_inf(self) -> bool:
        return self.inf_code >= 0

    @property
    def has_nan(self) -> bool:
        return self.nan_code >= 0


def code_dtype(spec: FormatSpec) -> str:
    """The unsigned integer dtype that holds the format's codes."""
    return "uint8" if spec.bits <= 8 else "uint16" if spec.bits <= 16 else "uint32"
