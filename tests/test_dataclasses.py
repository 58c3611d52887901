"""API-ARC-002: every dataclass of the package is keyword-only and frozen, except the
records that accumulate a run (listed here with the reason each must change)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from paths import ROOT

#: the mutable dataclasses and why each must change after it is made
MUTABLE = {
    "RunState": "the training loop appends each step's history to it",
    "QuantState": "the delayed-scaling state a quantized layer updates every step",
    "VerifyResult": "counts that chunks of a verification run merge into",
    "OpRecord": "a report's per-op counts, incremented as ops run",
}


def _flags(paths: list[Path], root: Path) -> dict[str, tuple[str, bool, bool]]:
    """Class name -> (where, frozen, kw_only) for every ``@dataclass`` in ``paths``."""
    found: dict[str, tuple[str, bool, bool]] = {}
    for p in paths:
        for node in ast.walk(ast.parse(p.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.ClassDef):
                continue
            for deco in node.decorator_list:
                call = deco if isinstance(deco, ast.Call) else None
                target = call.func if call else deco
                name = target.attr if isinstance(target, ast.Attribute) else \
                    getattr(target, "id", "")
                if name != "dataclass":
                    continue
                kw = {k.arg: k.value for k in (call.keywords if call else [])}
                on = {k: isinstance(v, ast.Constant) and v.value is True for k, v in kw.items()}
                found[node.name] = (f"{p.relative_to(root)}:{node.lineno}",
                                    on.get("frozen", False), on.get("kw_only", False))
    return found


def _violations(paths: list[Path], root: Path) -> list[str]:
    bad = []
    for name, (where, frozen, kw_only) in sorted(_flags(paths, root).items()):
        if not kw_only:
            bad.append(f"{where} {name}: not kw_only")
        if not frozen and name not in MUTABLE:
            bad.append(f"{where} {name}: not frozen")
    return bad


def _sources() -> list[Path]:
    return sorted((ROOT / "ampref").rglob("*.py")) + sorted((ROOT / "backends").glob("*.py"))


@pytest.mark.clause("API-ARC-002")
def test_every_dataclass_is_keyword_only_and_frozen_unless_it_accumulates_a_run() -> None:
    """API-ARC-002. Inputs: the source of every module of ampref/ and backends/. Expected:
    each @dataclass has kw_only=True, and frozen=True unless MUTABLE names it. Pass: no
    violation listed."""
    assert _violations(_sources(), ROOT) == []


@pytest.mark.clause("API-ARC-002")
def test_the_mutable_list_names_only_dataclasses_that_exist_and_are_mutable() -> None:
    """API-ARC-002. Inputs: MUTABLE and the scanned flags. Expected: each listed name is a
    dataclass of the package that is not frozen (a stale entry would excuse a future class
    of that name). Pass: equality of the two sets."""
    flags = _flags(_sources(), ROOT)
    assert {n for n, (_, frozen, _) in flags.items() if not frozen} == set(MUTABLE)


@pytest.mark.clause("API-ARC-002")
def test_the_checker_sees_a_mutable_row_and_a_positional_one(tmp_path: Path) -> None:
    """API-ARC-002. Inputs: a module with a plain @dataclass, a frozen positional one, a
    frozen keyword-only one and a mutable listed one. Expected: the first two reported
    (the plain one twice), the others accepted. Pass: the exact list."""
    (tmp_path / "m.py").write_text(
        "from dataclasses import dataclass\nimport dataclasses\n\n"
        "@dataclass\nclass Row:\n    a: int\n\n"
        "@dataclasses.dataclass(frozen=True)\nclass Pos:\n    a: int\n\n"
        "@dataclass(frozen=True, kw_only=True)\nclass Ok:\n    a: int\n\n"
        "@dataclass(kw_only=True)\nclass RunState:\n    a: int\n")
    assert _violations([tmp_path / "m.py"], tmp_path) == [
        "m.py:9 Pos: not kw_only", "m.py:5 Row: not kw_only", "m.py:5 Row: not frozen"]
