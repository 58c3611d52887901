"""Shared test configuration: one hypothesis profile (the clause marker is registered in
pyproject.toml)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from hypothesis import HealthCheck, settings

sys.path.insert(0, str(Path(__file__).parent))  # lets tests import the oracle module

settings.register_profile(
    "ampref", deadline=None, derandomize=bool(os.environ.get("CI")), max_examples=200,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile("ampref")
