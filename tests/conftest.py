"""Shared test configuration: one hypothesis profile, a backend fixture, clause markers."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

sys.path.insert(0, str(Path(__file__).parent))  # lets tests import the oracle module

settings.register_profile(
    "ampref", deadline=None, derandomize=bool(os.environ.get("CI")), max_examples=200,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile("ampref")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "clause(*ids): spec clauses this test verifies")


@pytest.fixture(params=["numpy", "cupy"])
def backend(request: pytest.FixtureRequest) -> Any:
    """Each array backend; CuPy is skipped where it or a GPU is missing."""
    from ampref import backends

    if request.param == "cupy":
        pytest.importorskip("cupy")
        if not backends.available("cupy"):
            pytest.skip("no CUDA device")
    return backends.get(request.param)
