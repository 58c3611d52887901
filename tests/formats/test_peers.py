"""Peers' casts by release are data (FMT-PEER-001): rows cover disjoint release ranges,
each names its source, and the installed ml_dtypes (and torch, where present) fall in a
row whose rule the live cast follows."""

from __future__ import annotations

from collections import defaultdict

import ml_dtypes
import numpy as np
import pytest

import ampref
from ampref.formats.peers import PEER_CASTS, peer_cast, release


@pytest.mark.clause("FMT-PEER-001")
def test_rows_of_one_peer_cast_cover_disjoint_releases_and_cite_a_source() -> None:
    """Input: PEER_CASTS. Expected: per (peer, device, format) the ranges do not overlap,
    every row cites a source. Pass: no two ranges of a key share a release."""
    ranges = defaultdict(list)
    for row in PEER_CASTS:
        assert row.source.strip(), row
        ranges[(row.peer, row.device, row.fmt)].append(
            (row.since or (0, 0, 0), row.until or (999, 0, 0)))
    for key, spans in ranges.items():
        spans.sort()
        for (_, hi), (lo, _) in zip(spans, spans[1:], strict=False):
            assert hi <= lo, f"{key}: overlapping release ranges {spans}"


@pytest.mark.clause("FMT-PEER-001")
def test_release_reads_local_and_short_version_strings() -> None:
    """Input: '2.13.0+cpu', '0.5', '1.26.4'. Expected: (2, 13, 0), (0, 5, 0), (1, 26, 4);
    'abc' raises ValueError naming it."""
    assert release("2.13.0+cpu") == (2, 13, 0)
    assert release("0.5") == (0, 5, 0)
    assert release("1.26.4") == (1, 26, 4)
    with pytest.raises(ValueError, match="'abc'"):
        release("abc")


@pytest.mark.clause("FMT-PEER-001")
def test_the_installed_ml_dtypes_e8m0_cast_follows_its_rows_rule() -> None:
    """Input: ties between powers of two (0.75, 1.5, 3.0, 6.0, 1.5*2^-125) through the
    installed ml_dtypes' float32 -> float8_e8m0fnu cast. Expected: the row of that
    release says nearest_even (ampref's encode) for every release pyproject allows.
    Pass: codes equal bitwise."""
    row = peer_cast("ml_dtypes", "cpu", "float8_e8m0fnu", ml_dtypes.__version__)
    assert row is not None and row.rounding == "nearest_even", (ml_dtypes.__version__, row)
    x = np.array([0.75, 1.5, 3.0, 6.0, 1.5 * 2.0**-125], np.float32)
    theirs = x.astype(ml_dtypes.float8_e8m0fnu).view(np.uint8)
    assert ampref.encode(x, "e8m0").tolist() == theirs.tolist()
