"""Every spec clause is cited by a test, and every cited clause exists (scripts/trace.py)."""

from __future__ import annotations

import importlib.util
import re
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


def test_every_clause_id_is_defined_exactly_once(tmp_path: Path) -> None:
    """Inputs: the checkout's specs; a copy of one spec with a second definition of one
    of its IDs. Expected: the checkout's parse without error; the copy raises ValueError
    naming the ID and both files (a second definition would make one clause's evidence
    count for another). Pass: both."""
    from ampref.certify import evidence

    assert len(evidence.spec_clauses(ROOT)) > 50
    (tmp_path / "specs").mkdir()
    text = (ROOT / "specs" / "torch.md").read_text()
    (tmp_path / "specs" / "torch.md").write_text(text + "\n- **TRC-NN-001** again.\n")
    with pytest.raises(ValueError, match="TRC-NN-001 is defined twice: in torch.md and "
                                         "torch.md"):
        evidence.spec_clauses(tmp_path)


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


def _undocumented() -> list[str]:
    import ast

    out = []
    for path in sorted((ROOT / "tests").rglob("test_*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef) and node.name.startswith("test") and \
                    any("clause" in ast.unparse(d) for d in node.decorator_list) and \
                    not (ast.get_docstring(node) or "").strip():
                out.append(f"{path.relative_to(ROOT)}::{node.name}")
    return out


@pytest.mark.clause("CRT-CAS-001")
def test_every_clause_citing_test_has_a_docstring() -> None:
    """Input: every test function that cites a clause. Expected: each has a docstring
    (its inputs, expected result and pass criterion: the procedure column of the
    evidence pack). Pass: none without one."""
    missing = _undocumented()
    assert not missing, (f"{len(missing)} clause-citing tests without a docstring: "
                         f"{missing[:10]}")


_ID = re.compile(r"\b[A-Z]{2,4}-[A-Z0-9]{2,4}-[0-9]{3}\b")
#: a definition: the ID in bold (a clause's heading) or first in a table row (profiles)
_DEFINED = re.compile(r"\*\*([A-Z]{2,4}-[A-Z0-9]{2,4}-[0-9]{3})\b|^\| ([A-Z]{2,4}-[A-Z0-9]{2,4}-"
                      r"[0-9]{3}) \|", re.M)


def test_specs_sources_docs_and_readme_name_only_clauses_the_specs_define() -> None:
    """Inputs: every clause-shaped ID (AAA-BBB-123) in specs/*.md, the package and backend
    sources, scripts, benchmarks, examples, docs/*.md and README.md. Expected: each is
    defined in a spec (in bold, or first in a profile table's row): a reference to an ID
    no spec defines (a registry row's `source`, a docstring, the README's examples) sends
    a certification reader nowhere. Pass: no undefined ID, else each listed with a file
    naming it."""
    specs = sorted((ROOT / "specs").glob("*.md"))
    defined = {a or b for md in specs for a, b in _DEFINED.findall(md.read_text())}
    assert len(defined) > 300
    files = [*specs, *ROOT.glob("ampref/**/*.py"), *ROOT.glob("backends/*.py"),
             *ROOT.glob("scripts/*.py"), *ROOT.glob("benchmarks/*.py"),
             *ROOT.glob("examples/*.py"), *ROOT.glob("docs/*.md"), ROOT / "README.md"]
    undefined: dict[str, str] = {}
    for f in files:
        for found in _ID.findall(f.read_text(encoding="utf-8")):
            if found not in defined:
                undefined.setdefault(found, str(f.relative_to(ROOT)))
    assert undefined == {}
