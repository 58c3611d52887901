"""Traceability: spec clauses (specs/*.md) against the tests that cite them.

    python scripts/trace.py [--root .]     # clause -> tests, uncovered clauses; exit 1 on a gap

It reads the repository (``specs/`` and ``tests/``), not the installed package, so it
lives with the scripts. A root without spec clauses or without tests is an error (exit
2), never an empty success.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from ampref.certify import evidence

CLAUSE = evidence.CLAUSE


def spec_clauses(root: Path) -> dict[str, str]:
    """Clause ID -> spec file, for every ID in specs/*.md (the parser ampref certify uses)."""
    return {c["id"]: c["file"] for c in evidence.spec_clauses(root)}


def cited_clauses(root: Path) -> dict[str, list[str]]:
    """Clause ID -> test functions whose clause marker cites it."""
    cites: dict[str, list[str]] = {}
    for py in sorted((root / "tests").rglob("test_*.py")):
        pending: list[str] = []
        for line in py.read_text(encoding="utf-8").splitlines():
            if "mark.clause(" in line or (pending and line.lstrip().startswith('"')):
                pending += CLAUSE.findall(line)
            m = re.match(r"\s*def (test_\w+)", line)
            if m:
                current = f"{py.name}::{m.group(1)}"
                for cid in pending:
                    cites.setdefault(cid, []).append(current)
                pending = []
    return cites


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="spec clause -> test traceability matrix")
    ap.add_argument("--root", default=str(Path(__file__).resolve().parents[1]),
                    help="repository root holding specs/ and tests/ (default: this checkout)")
    root = Path(ap.parse_args(argv).root)
    clauses, cites = spec_clauses(root), cited_clauses(root)
    if not clauses or not cites:
        print(f"trace: error: no spec clauses in {root / 'specs'} or no clause-citing tests in "
              f"{root / 'tests'}; give --root a repository checkout", file=sys.stderr)
        return 2
    for cid in sorted(clauses):
        tests = cites.get(cid, [])
        print(f"{cid:14} {clauses[cid]:18} {len(tests):3} test(s)  {', '.join(tests[:3])}")
    missing = sorted(set(clauses) - set(cites))
    unknown = sorted(set(cites) - set(clauses))
    print(f"\n{len(clauses)} clauses, {len(clauses) - len(missing)} cited by tests; "
          f"uncited: {missing or 'none'}; cited but undefined: {unknown or 'none'}")
    return 1 if missing or unknown else 0


if __name__ == "__main__":
    raise SystemExit(main())
