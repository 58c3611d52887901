"""``scripts/mutants.py``, mutation testing on demand: its areas name files that exist,
and its site finder plants exactly the documented one-token mutants (never in comments,
strings or a signature's bare ``*``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from paths import ROOT, script


@pytest.mark.parametrize("area", sorted(script("mutants").AREAS))
def test_every_area_names_sources_and_tests_that_exist(area: str) -> None:
    """Inputs: each area's source files and test paths. Expected: each exists in the
    checkout (a renamed module would silently drop out of the sample). Pass: none
    missing."""
    sources, tests = script("mutants").AREAS[area]
    assert [p for p in (*sources, *tests) if not (ROOT / p).exists()] == []


def test_sites_are_the_documented_tokens_and_apply_writes_one_at_its_column(
        tmp_path: Path) -> None:
    """Inputs: a module with a comparison, arithmetic, an int, a bool, ``and``, a bare
    ``*`` in a signature, a comment and a string holding operators. Expected: mutants
    for < (to <=), + (to -), 2 (to 3), * (to /), 4 (to 5), True (to False), and (to or),
    in source order, and none from the comment, the string, the bare ``*`` or the float
    0.5; applying the int mutant changes that token only. Pass: the exact lists and the
    line."""
    mod = script("mutants")
    (tmp_path / "m.py").write_text(
        "def f(a, *, b):  # a < b + 1\n"
        "    s = 'x < y + 2'\n"
        "    return a < b + 2 * 4 if True and a else 0.5\n")
    found = [(m.line, m.old, m.new) for m in mod.sites("toy", "m.py", tmp_path)]
    assert found == [(3, "<", "<="), (3, "+", "-"), (3, "2", "3"), (3, "*", "/"),
                     (3, "4", "5"), (3, "True", "False"), (3, "and", "or")]  # 0.5: no
    two = next(m for m in mod.sites("toy", "m.py", tmp_path) if m.old == "2")
    original, line = mod.apply(tmp_path, two)
    assert line == "    return a < b + 3 * 4 if True and a else 0.5"
    assert original.count("b + 2 * 4") == 1
