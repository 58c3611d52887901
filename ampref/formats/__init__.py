"""Number formats and rounding: the formats as data (``table``), the rounding modes
(``rounding``), correctly rounded casts over the encode kernel of ``ampref.kernels``
(``cast``) and exactly rounded float64 sums and FMA (``exactsum``). Spec:
``specs/formats.md``.

Imports: ``ampref.common`` and ``ampref.kernels``. The names below are this room's public
face (and the ``ampref.formats`` module of earlier releases).
"""

from .table import FORMATS, Encoding, Format, format_names, get_format

__all__ = ["FORMATS", "Encoding", "Format", "format_names", "get_format"]
