"""Every spec clause is cited by a test, and every cited clause exists (scripts/trace.py)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest
from paths import ROOT



def _trace() -> ModuleType:
    spec = importlib.util.spec_from_file_location("ampref_trace_script",
                                                  ROOT / "scripts" / "trace.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_every_spec_clause_is_verified_by_at_least_one_test() -> None:
    t = _trace()
    clauses, cites = t.spec_clauses(ROOT), t.cited_clauses(ROOT)
    assert len(clauses) > 50
    assert sorted(set(clauses) - set(cites)) == []


def test_tests_cite_only_clauses_that_the_specs_define() -> None:
    t = _trace()
    assert sorted(set(t.cited_clauses(ROOT)) - set(t.spec_clauses(ROOT))) == []


def test_trace_exits_0_on_this_checkout(capsys: pytest.CaptureFixture[str]) -> None:
    assert _trace().main(["--root", str(ROOT)]) == 0
    assert "clauses," in capsys.readouterr().out


def test_trace_refuses_a_folder_without_specs_instead_of_reporting_zero_clauses(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _trace().main(["--root", str(tmp_path)]) == 2
    assert "no spec clauses" in capsys.readouterr().err
