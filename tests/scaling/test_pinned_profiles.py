"""Each framework's scaler profile holds the defaults and rules its source has
(tests/data/pinned_rows.toml, transcribed from frameworks-amp-semantics.md)."""

from __future__ import annotations

import pytest
from pinned import mismatches

from ampref.scaling.profiles import PROFILES


@pytest.mark.clause("SCL-PRF-001", "SCL-PRF-002", "SCL-PRF-003", "SCL-PRF-004",
                    "SCL-PRF-005", "SCL-PRF-006", "SCL-PRF-007", "SCL-PRF-008")
def test_every_scaler_profile_is_its_frameworks_published_defaults_and_rules() -> None:
    """Inputs: every row of PROFILES. Expected: init scale, factors, interval, growth
    rule, arithmetic, hysteresis and refill, floor, cap and the inf-growth check as the
    framework's source sets them (each pinned entry quotes it). Pass: no difference."""
    problems = mismatches("scaler_profiles", PROFILES)
    assert not problems, "\n".join(problems)
