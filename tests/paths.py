"""Folders the tests read: the repository root and the recorded test data."""

from __future__ import annotations

from pathlib import Path

#: the repository checkout (specs/, docs/, scripts/ beside tests/)
ROOT = Path(__file__).resolve().parents[1]
#: recorded vectors and traces, each with the script in scripts/ that regenerates it
DATA = ROOT / "tests" / "data"
