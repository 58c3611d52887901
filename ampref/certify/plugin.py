"""A pytest plugin for ``ampref certify``: records, for every test item, the spec clauses
its ``clause`` marker cites and its outcome (passed, failed, skipped with the reason),
into the JSON file named by ``AMPREF_EVIDENCE_OUT`` (specs/certify.md CRT-RPT-003).

Loaded with ``python -m pytest -p ampref.certify.plugin``; without the variable it does
nothing.
"""

from __future__ import annotations

import json
import os
from typing import Any

__all__ = ["pytest_runtest_logreport", "pytest_collection_modifyitems", "pytest_sessionfinish"]

_ITEMS: dict[str, dict[str, Any]] = {}


def pytest_collection_modifyitems(session: Any, config: Any, items: list[Any]) -> None:
    for item in items:
        ids = [c for m in item.iter_markers("clause") for c in m.args]
        _ITEMS[item.nodeid] = {"clauses": ids, "outcome": "not run", "reason": ""}


def pytest_runtest_logreport(report: Any) -> None:
    rec = _ITEMS.setdefault(report.nodeid, {"clauses": [], "outcome": "not run", "reason": ""})
    if report.failed:  # a failure in setup, call or teardown fails the test
        rec["outcome"] = "failed"
        rec["reason"] = str(report.longreprtext)[-600:]
    elif report.skipped and rec["outcome"] != "failed":
        rec["outcome"] = "skipped"
        lr = report.longrepr
        rec["reason"] = str(lr[2] if isinstance(lr, tuple) and len(lr) == 3 else lr)[-300:]
    elif report.when == "call" and report.passed and rec["outcome"] == "not run":
        rec["outcome"] = "passed"


def pytest_sessionfinish(session: Any, exitstatus: int) -> None:
    path = os.environ.get("AMPREF_EVIDENCE_OUT")
    if path:
        with open(path, "w", encoding="utf-8") as f:
            json.dump({"exitstatus": int(exitstatus), "items": _ITEMS}, f, indent=1)
