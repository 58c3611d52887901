"""Each recipe and implementation profile holds the values its specification or source
states (tests/data/pinned_rows.toml)."""

from __future__ import annotations

import pytest
from pinned import mismatches

from ampref.recipes.catalog import PROFILES, RECIPES


@pytest.mark.clause("REC-CAT-001")
def test_every_recipe_row_is_its_published_block_layout() -> None:
    """Inputs: every row of RECIPES. Expected: element and scale formats, tiles and the
    global-scale flag as OCP MX v1.0, NVFP4 and DeepSeek-V3 define them. Pass: no
    difference."""
    assert not mismatches("recipes", RECIPES), "\n".join(mismatches("recipes", RECIPES))


@pytest.mark.clause("REC-PRF-001")
def test_every_recipe_profile_is_its_implementations_arithmetic() -> None:
    """Inputs: every row of PROFILES. Expected: amax, epsilon, MX rules, FP4 NaN and -0
    handling, block power-of-two default, recipes shipped, as the cited implementation
    does. Pass: no difference."""
    problems = mismatches("recipe_profiles", PROFILES)
    assert not problems, "\n".join(problems)
