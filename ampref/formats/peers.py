"""What peers' casts do, by version: each row says which rule of ``quantize`` a peer's
cast follows, for which versions, and where that was measured or read
(``specs/formats.md`` FMT-DBL-002, FMT-PEER-001).

A peer's behaviour is a fact about a release, not a constant: torch's CPU cast to
float8_e4m3fn returned NaN for finite overflow and for ±inf up to 2.11 and saturates
to ±448 from 2.12 on (pytorch/pytorch#178817). Tests pick the row of the installed
version instead of assuming one; a version no row covers is reported as unrecorded.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["PeerCast", "PEER_CASTS", "peer_cast", "release"]


@dataclass(frozen=True, kw_only=True)
class PeerCast:
    """One peer cast rule over a version range ``[since, until)``."""

    #: the peer package and the device its cast runs on
    peer: str
    device: str
    #: float64 -> this format (ampref's format name)
    fmt: str
    #: releases covered: since <= version < until (None: open)
    since: tuple[int, int, int] | None
    until: tuple[int, int, int] | None
    #: the equivalent ``quantize`` arguments
    rounding: str
    saturate: bool
    via: str
    #: where the row comes from (a measurement with its version, or the change that set it)
    source: str


PEER_CASTS: tuple[PeerCast, ...] = (
    PeerCast(peer="torch", device="cpu", fmt="float8_e4m3fn", since=None, until=(2, 12, 0),
             rounding="nearest_even", saturate=False, via="float32",
             source="measured on torch 2.11.0 (h100-records/suite-py312.log: 0x7f/0xff NaN "
                    "where 2.13 gives 448); pytorch/pytorch#178817 changed it for 2.12"),
    PeerCast(peer="torch", device="cpu", fmt="float8_e4m3fn", since=(2, 12, 0), until=None,
             rounding="nearest_even", saturate=True, via="float32",
             source="pytorch/pytorch#178817 (merged 2026-04-17, in 2.12: 'Properly saturate "
                    "E4M3 on finite-overflow on CPU/C++ conversion code'); measured on "
                    "torch 2.13.0 (tests/formats/test_cast.py)"),
    PeerCast(peer="torch", device="cuda", fmt="float8_e4m3fn", since=(2, 11, 0), until=(2, 12, 0),
             rounding="nearest_even", saturate=False, via="float32",
             source="measured on torch 2.11.0+cu130, H100, all 2^32 float32 inputs "
                    "(h100-records/casts.json, identify-casts-dumps.log)"),
    PeerCast(peer="ml_dtypes", device="cpu", fmt="float8_e8m0fnu", since=None, until=(0, 5, 1),
             rounding="ties_to_even_code", saturate=False, via="none",
             source="measured on ml_dtypes 0.5.0: a tie between two powers of two goes to "
                    "the even code (3.0 -> 2, 0.75 -> 0.5); pyproject requires >= 0.5.1"),
    PeerCast(peer="ml_dtypes", device="cpu", fmt="float8_e8m0fnu", since=(0, 5, 1), until=None,
             rounding="nearest_even", saturate=False, via="none",
             source="measured on ml_dtypes 0.5.1, 0.5.4 and 0.6.0: equal to ampref's encode "
                    "(a tie goes to the larger power of two: 3.0 -> 4, 0.75 -> 1)"),
    PeerCast(peer="torch", device="cpu", fmt="float8_e5m2", since=(2, 11, 0), until=None,
             rounding="nearest_even", saturate=False, via="float32",
             source="measured on torch 2.11.0 and 2.13.0 (NaN written as 0x7f/0xff)"),
)


def release(version: str) -> tuple[int, int, int]:
    """``"2.13.0+cpu"`` -> (2, 13, 0); a missing patch number counts as 0.

    Raises:
        ValueError: a version string that does not start with MAJOR.MINOR.
    """
    m = re.match(r"(\d+)\.(\d+)(?:\.(\d+))?", version)
    if m is None:
        raise ValueError(f"version must start with MAJOR.MINOR, got {version!r}")
    return int(m.group(1)), int(m.group(2)), int(m.group(3) or 0)


def peer_cast(peer: str, device: str, fmt: str, version: str) -> PeerCast | None:
    """The row for ``peer``'s cast to ``fmt`` on ``device`` in release ``version``, or
    None where no row covers that release (unrecorded, not assumed)."""
    v = release(version)
    for row in PEER_CASTS:
        if (row.peer, row.device, row.fmt) != (peer, device, fmt):
            continue
        if (row.since is None or v >= row.since) and (row.until is None or v < row.until):
            return row
    return None
