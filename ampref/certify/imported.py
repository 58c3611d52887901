"""Test results of a run on another machine as evidence (``specs/certify.md`` CRT-GPU-001):
``scripts/gpu_check.sh`` writes ``gpu_tests.xml`` (JUnit) and ``device.txt``; passed to
``ampref certify --import-results DIR``, their outcomes count for the tests this run
could only skip (no GPU here), each marked with the run it came from and that run's
environment. An imported result never replaces one this run obtained itself, and an
imported failure is a failure.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

__all__ = ["import_runs"]


def _outcomes(junit: Path) -> dict[str, str]:
    """nodeid -> passed | failed | skipped, from a pytest JUnit file (rootdir-relative
    class names, as pytest writes them)."""
    out = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        cls, name = case.get("classname", ""), case.get("name", "")
        parts = cls.split(".")
        nodeid = "/".join(parts) + ".py::" + name if parts and parts[0] == "tests" else ""
        if not nodeid:
            continue
        if case.find("failure") is not None or case.find("error") is not None:
            out[nodeid] = "failed"
        elif case.find("skipped") is not None:
            out[nodeid] = "skipped"
        else:
            out[nodeid] = "passed"
    return out


def import_runs(folders: list[Path], items: dict[str, Any]) -> list[dict[str, Any]]:
    """Merge the JUnit results of each folder holding ``gpu_tests.xml`` into ``items``
    (this run's tests) where this run skipped or did not run the test; return one record
    per imported run (folder, device description, counts used)."""
    runs = []
    for folder in folders:
        junit = Path(folder) / "gpu_tests.xml"
        if not junit.is_file():
            continue
        device = Path(folder) / "device.txt"
        env = device.read_text(encoding="utf-8", errors="replace").strip() if device.is_file() \
            else "no device.txt"
        used = {"passed": 0, "failed": 0}
        for nodeid, outcome in _outcomes(junit).items():
            rec = items.get(nodeid)
            if rec is None or rec["outcome"] in ("passed", "failed") or outcome == "skipped":
                continue
            rec["outcome"], rec["imported_from"] = outcome, str(folder)
            rec["reason"] = f"{outcome} on the imported run {folder}" + \
                ("" if outcome == "passed" else f": {rec['reason']}")
            used[outcome] += 1
        runs.append({"folder": str(folder), "environment": env, **used})
    return runs
