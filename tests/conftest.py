"""Shared test configuration: one hypothesis profile (the clause marker is registered in
pyproject.toml), and a guard that fails the session when a test wrote into the checkout
(``git status`` must read the same after the suite as before it)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

sys.path.insert(0, str(Path(__file__).parent))  # lets tests import the oracle module

settings.register_profile(
    "ampref", deadline=None, derandomize=bool(os.environ.get("CI")), max_examples=200,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile("ampref")


_CHECKOUT = Path(__file__).resolve().parent.parent


def _status() -> set[str] | None:
    """The checkout's changed and untracked (not ignored) paths, or None outside git."""
    if not (_CHECKOUT / ".git").exists():
        return None
    try:
        out = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"],
                             cwd=_CHECKOUT, capture_output=True, text=True, timeout=60,
                             check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return set(out.splitlines())


def pytest_sessionstart(session: pytest.Session) -> None:
    session.config.stash[_BEFORE] = _status()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    before, after = session.config.stash.get(_BEFORE, None), _status()
    if before is None or after is None or after <= before:
        return
    new = sorted(after - before)
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line(f"the suite wrote into the checkout {_CHECKOUT}: {new[:10]}",
                            red=True)
    session.exitstatus = pytest.ExitCode.TESTS_FAILED


_BEFORE = pytest.StashKey[set[str] | None]()
