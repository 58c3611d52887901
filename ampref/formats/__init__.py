"""Number formats and rounding: the formats as data (``table``), the rounding modes
(``rounding``), correctly rounded casts with their integer kernel (``cast``,
``castkernel``), counter-based stochastic-rounding bits (``srhash``) and exactly rounded
float64 sums and FMA (``exactsum``). Spec: ``specs/formats.md``.

Imports: ``ampref.common`` only. The names below are this room's public face (and the
``ampref.formats`` module of earlier releases).
"""

from .table import FORMATS, Encoding, Format, format_names, get_format

__all__ = ["FORMATS", "Encoding", "Format", "format_names", "get_format"]
