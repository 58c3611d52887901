"""Every spec clause is cited by a test, and every cited clause exists."""

from __future__ import annotations

from pathlib import Path

from ampref.trace import spec_clauses, cited_clauses

ROOT = Path(__file__).parents[1]


def test_every_spec_clause_is_verified_by_at_least_one_test() -> None:
    clauses, cites = spec_clauses(ROOT), cited_clauses(ROOT)
    assert len(clauses) > 50
    assert sorted(set(clauses) - set(cites)) == []


def test_tests_cite_only_clauses_that_the_specs_define() -> None:
    assert sorted(set(cited_clauses(ROOT)) - set(spec_clauses(ROOT))) == []
