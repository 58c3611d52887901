"""The evidence pack as qualification data (CRT-QUA-*): its sections and anchors, markdown
rendered (never raw), the configuration index, the deviation parser on planted texts, the
PDF (pages, header identity, page numbers, read back with pypdf), reproducible JSON and
``--diff``, and the levels' strides. One pack is built from a toy source and shared."""

from __future__ import annotations

import json
import os
import re
import shutil
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from ampref.certify import evidence, qualification
from ampref.cli import main

pytest.importorskip("jinja2")
pytest.importorskip("markdown_it")

SPEC = """# Toy spec

**TOY-ONE-001 (passes).** One plus `one` is *two*; see **TOY-TWO-001**.

**TOY-TWO-001 (also passes).** Two is `1 + 1`. Paragraphs marked *Deviation (x):* in the
middle of a sentence are not deviations.
*Deviation (a peer):* the peer writes `2` as *two*.
*Impact:* compare numbers, not words.
"""
TESTS = '''"""Toy cases: inputs are small integers; the oracle is Python's `+`."""
import pytest


@pytest.mark.clause("{one}")
@pytest.mark.parametrize("k", [1, 2, 3])
def test_one_plus_k_is_k_plus_one(k: int) -> None:
    """Adds `k` to one and compares with *k + 1*."""
    assert 1 + k == k + 1


@pytest.mark.clause("{two}")
def test_two() -> None:
    assert 1 + 1 == 2
'''


def _source(root: Path) -> Path:
    (root / "specs").mkdir(parents=True)
    (root / "tests" / "data").mkdir(parents=True)
    (root / "specs" / "toy.md").write_text(SPEC)
    # the IDs are filled in here so that scripts/trace.py does not read the template as
    # citations of clauses that ampref's specs do not define
    (root / "tests" / "test_toy.py").write_text(TESTS.replace("{one}", "TOY-ONE-001")
                                                .replace("{two}", "TOY-TWO-001"))
    (root / "tests" / "data" / "v.json").write_text("[1]")
    (root / "pyproject.toml").write_text(
        '[tool.pytest.ini_options]\nmarkers = ["clause(*ids): spec clauses"]\n')
    return root


@pytest.fixture(scope="module")
def packs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, dict[str, Any]]:
    from ampref.certify import report

    tmp = tmp_path_factory.mktemp("qual")
    src = _source(tmp / "src")
    pdf = shutil.which("chromium") is not None or shutil.which("chromium-browser") is not None
    doc = report.certify(tmp / "a", source=src, stride=1 << 30, pdf=pdf)
    report.certify(tmp / "b", source=src, stride=1 << 30)
    return tmp / "a", tmp / "b", doc


class _Text(HTMLParser):
    """The visible text of an HTML page outside <code> and <style> elements."""

    def __init__(self) -> None:
        super().__init__()
        self.skip, self.parts = 0, []  # type: tuple[int, list[str]]

    def handle_starttag(self, tag: str, attrs: Any) -> None:
        self.skip += tag in ("code", "style")

    def handle_endtag(self, tag: str) -> None:
        self.skip -= tag in ("code", "style")

    def handle_data(self, data: str) -> None:
        if not self.skip:
            self.parts.append(data)


@pytest.mark.clause("CRT-RPT-001", "CRT-QUA-001")
def test_the_pack_has_every_qualification_item_with_a_contents_and_stable_anchors(
        packs: tuple[Path, Path, dict[str, Any]]) -> None:
    """Inputs: a quick pack of a toy source tree (tests with docstrings and a module
    statement). Expected: the thirteen sections in order, anchors and contents links, a
    clause row anchor, sign-off fields and DO-330; the toy case's name, outcomes, procedure
    and context as written; PASSED with no reports. Pass: all."""
    html = (packs[0] / "certify.html").read_text()
    heads = ["1. Accomplishment summary", "2. Configuration index",
             "3. Tool operational requirements", "4. Verification cases and procedures",
             "5. Verification results", "6. Problem reports",
             "7. Known deviations and their impact", "8. Determinism evidence",
             "9. Limitations of this pack",
             "10. Tool qualification plan (to complete by the applicant)",
             "Appendix A: certificates (exhaustive and sampled: strides in section 1)",
             "Appendix B: recorded vector sets (conformance with real systems)",
             "Appendix C: installed files"]
    pos = [html.index(f">{h}</h2>") for h in heads]
    assert pos == sorted(pos)
    first = qualification.case_id("tests/test_toy.py::test_one_plus_k_is_k_plus_one")
    for anchor in ("summary", "configuration", "requirements", "cases", "results",
                   "problem-reports", "deviations", "limitations", "plan", "req-TOY-ONE-001",
                   first):
        assert f'id="{anchor}"' in html and f'href="#{anchor}"' in html, anchor
    assert 'id="TOY-TWO-001"' in html  # the clause's result row, for links from outside
    assert "prepared by" in html and "approved by" in html and "DO-330" in html
    doc = packs[2]
    (case,) = [c for c in doc["cases"] if "one_plus" in c["id"]]
    assert case["name"] == "one plus k is k plus one" and case["outcomes"] == {"passed": 3}
    assert case["procedure"] == "Adds `k` to one and compares with *k + 1*."
    assert case["context"] == "Toy cases: inputs are small integers; the oracle is Python's `+`."
    assert f'title="{case["id"]}"' in html  # the full node ID on hover
    assert doc["status"] == "PASSED" and doc["reports"] == []


@pytest.mark.clause("CRT-QUA-001")
def test_markdown_is_rendered_so_no_raw_backticks_or_asterisks_remain(
        packs: tuple[Path, Path, dict[str, Any]]) -> None:
    """Inputs: the toy pack's HTML. Expected: code, emphasis and strong rendered as tags;
    no backtick, asterisk or ** in the visible text. Pass: all."""
    html = (packs[0] / "certify.html").read_text()
    assert "<code>one</code>" in html and "<em>two</em>" in html
    assert "<strong>TOY-TWO-001</strong>" in html
    text = _Text()
    text.feed(html)
    visible = "".join(text.parts)
    assert "`" not in visible and "*" not in visible.replace("**", "")
    assert "**" not in visible


@pytest.mark.clause("CRT-QUA-002")
def test_the_configuration_index_names_commit_state_digests_and_versions(
        packs: tuple[Path, Path, dict[str, Any]]) -> None:
    """Inputs: the toy pack's configuration; the checkout's own configuration when run from
    git. Expected: schema ampref-certify/3, 'not a git checkout', four SHA-256 digests,
    every named package version; a 40-hex commit and clean/dirty for the checkout. Pass:
    all."""
    cfg = packs[2]["config"]
    assert cfg["schema"] == "ampref-certify/3"
    assert cfg["commit"] == "not a git checkout" and cfg["working_tree"] == "n/a"
    assert set(cfg["sha256"]) == {"package", "specs", "tests", "vectors"}
    assert all(re.fullmatch(r"[0-9a-f]{64}", v) for v in cfg["sha256"].values())
    for name in ("python", "numpy", "ml_dtypes", "scipy", "hypothesis", "pytest", "torch",
                 "jinja2", "markdown-it-py"):
        assert name in cfg["versions"]
    root = Path(__file__).resolve().parents[2]
    if (root / ".git").exists() and not os.environ.get("AMPREF_TEST_INSTALLED"):
        here = qualification.configuration(root, evidence.PACKAGE)
        assert re.fullmatch(r"[0-9a-f]{40}", here["commit"])
        assert here["working_tree"] in ("clean", "dirty")


@pytest.mark.clause("CRT-QUA-003")
def test_only_real_deviation_blocks_are_deviations_and_each_carries_its_impact(
        tmp_path: Path) -> None:
    """Inputs: a spec with one sentence mentioning deviations, two real deviation blocks
    and one without impact; the checkout's specs. Expected: exactly the three blocks with
    clause, source, text and impact; every shipped deviation states its impact. Pass: both."""
    (tmp_path / "specs").mkdir()
    (tmp_path / "specs" / "a.md").write_text(
        "**AAA-ONE-001 (x).** Text that says paragraphs marked *Deviation (y):* exist.\n\n"
        "*Deviation (peer P):* P rounds up.\n*Impact:* use profile `p`.\n\n"
        "**AAA-TWO-001 (z).** More.\n*Known lib deviation:* lib flushes.\n\n"
        "*Deviation (no impact):* stated without one.\n")
    got = qualification.deviations(tmp_path)
    assert [(d["clause"], d["source"], d["text"], d["impact"]) for d in got] == [
        ("AAA-ONE-001", "peer P", "P rounds up.", "use profile `p`."),
        ("AAA-TWO-001", "lib", "lib flushes.", ""),
        ("AAA-TWO-001", "no impact", "stated without one.", "")]
    shipped = qualification.deviations(Path(__file__).resolve().parents[2])
    if shipped:  # the checkout's specs: every deviation states its impact
        assert all(d["impact"] for d in shipped), [d for d in shipped if not d["impact"]]


@pytest.mark.clause("CRT-QUA-004")
def test_the_pdf_is_paginated_with_the_configuration_and_page_numbers_on_every_page(
        packs: tuple[Path, Path, dict[str, Any]]) -> None:
    """Inputs: the toy pack's PDF (skipped without Chromium). Expected: 3-60 pages, each
    with the configuration header and 'i/n'; bookmarks for sections, and the contents
    naming each section's page. Pass: all."""
    pdf = packs[0] / "certify.pdf"
    if not pdf.exists():
        pytest.skip("no Chromium on this machine (CI installs Debian's chromium)")
    pypdf = pytest.importorskip("pypdf")
    pages = pypdf.PdfReader(pdf).pages
    assert 3 <= len(pages) <= 60
    for i, page in enumerate(pages, 1):
        text = page.extract_text()
        assert "evidence, quick level, commit not a git checkout (n/a): PASSED" in text, i
        assert f"{i}/{len(pages)}" in text, i
    assert "Accomplishment summary" in pages[0].extract_text()
    # bookmarks per section, and the contents list names each section's page
    from ampref.certify.pdf import section_pages

    marks = section_pages(pdf)
    assert {"2. Configuration index", "9. Limitations of this pack"} <= set(marks)
    first = pages[0].extract_text()
    assert f"Configuration index p. {marks['2. Configuration index']}" in first.replace(
        "Conﬁguration", "Configuration")


@pytest.mark.clause("CRT-QUA-005")
def test_two_runs_give_the_same_json_apart_from_timestamps_and_durations_and_diff_says_so(
        packs: tuple[Path, Path, dict[str, Any]], tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Inputs: two toy packs; a copy with a changed status, version and a removed test; a
    malformed pack. Expected: equal stable JSON and 'no differences' (exit 0); exit 1
    listing the three changes; exit 2 for the malformed one. Pass: all."""
    a, b = (json.loads((p / "certify.json").read_text()) for p in packs[:2])
    assert a["generated"] != b["generated"] or a["seconds"] != b["seconds"]
    assert qualification.stable(a) == qualification.stable(b)
    assert main(["certify", "--diff", str(packs[0] / "certify.json"),
                 str(packs[1] / "certify.json")]) == 0
    assert "no differences" in capsys.readouterr().out
    b["clauses"][0]["status"] = "FAILED"
    b["config"]["versions"]["numpy"] = "0.0"
    b["tests"]["items"].popitem()
    (tmp_path / "new.json").write_text(json.dumps(b))
    assert main(["certify", "--diff", str(packs[0] / "certify.json"),
                 str(tmp_path / "new.json")]) == 1
    out = capsys.readouterr().out
    assert "clause TOY-ONE-001 status: verified -> FAILED" in out
    assert "config versions.numpy:" in out and "test removed: tests/test_toy.py::test_two" in out
    (tmp_path / "bad.json").write_text("[]")
    assert main(["certify", "--diff", str(tmp_path / "bad.json"), str(tmp_path / "new.json")]) == 2


@pytest.mark.clause("CRT-QUA-005")
def test_diff_shows_a_changed_text_whole_up_to_60_characters_and_cut_to_60_past_that() -> None:
    """Inputs: two packs whose one clause text changes from 60 'a's to 61 'b's. Expected:
    one line, the old text whole (60 characters), the new one as its first 57 characters
    and '...' (60). Pass: the exact line."""
    old = {"clauses": [{"id": "TOY-ONE-001", "status": "verified", "text": "a" * 60}]}
    new = {"clauses": [{"id": "TOY-ONE-001", "status": "verified", "text": "b" * 61}]}
    assert qualification.diff(old, new) == [
        f"clause TOY-ONE-001 text: {'a' * 60} -> {'b' * 57}..."]


@pytest.mark.clause("CRT-QUA-006")
def test_the_full_level_covers_fp16_and_bf16_exhaustively_and_strides_the_rest(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Inputs: the full level's certificate cells (campaign runner stubbed). Expected:
    strides 1 for float16 and bfloat16, 257 for the rest; 336 cells, 56 exhaustive. Pass:
    all."""
    from ampref.certify import campaign, report

    assert report.LEVELS["full"] == {"float16": 1, "bfloat16": 1, "default": 257}
    seen: list[Any] = []
    def record(cells: list[Any], out: Path) -> int:
        seen.extend(cells)
        return len(cells)
    monkeypatch.setattr(campaign, "run_serial", record)
    evidence.level_certificates(tmp_path, report.LEVELS["full"], None)
    strides = {(c.fmt, c.stride) for c in seen}
    assert ("float16", 1) in strides and ("bfloat16", 1) in strides
    assert {s for f, s in strides if f not in ("float16", "bfloat16")} == {257}
    assert len(seen) == 336 and sum(c.stride == 1 for c in seen) == 56


@pytest.mark.clause("CRT-RPT-001")
def test_pack_files_get_the_usual_file_mode_not_0600(
        packs: tuple[Path, Path, dict[str, Any]]) -> None:
    """Inputs: the toy pack's certify.json and certify.html. Expected: mode 0666 minus the
    umask. Pass: equal."""
    mask = os.umask(0)
    os.umask(mask)
    for name in ("certify.json", "certify.html"):
        assert (packs[0] / name).stat().st_mode & 0o777 == 0o666 & ~mask, name


@pytest.mark.clause("CRT-CAS-001")
def test_case_ids_do_not_change_when_other_tests_are_added_or_reordered(tmp_path: Path) -> None:
    """Input: the toy's cases, then the same source with a new test inserted before them
    and the file's functions reordered. Expected: each old case keeps its ID (VC- and 8
    hex digits of its node ID's hash); the new test gets a new one. Pass: the ID map of
    the old cases is unchanged."""
    items = {"tests/test_toy.py::test_one_plus_k_is_k_plus_one[1]":
             {"clauses": ["TOY-ONE-001"], "outcome": "passed", "reason": ""},
             "tests/test_toy.py::test_two": {"clauses": ["TOY-TWO-001"], "outcome": "passed",
                                             "reason": ""}}
    src = _source(tmp_path / "src")
    before = {c["id"]: c["case"] for c in qualification.cases(src, items)}
    more = {"tests/test_toy.py::test_aaa_new": {"clauses": [], "outcome": "passed",
                                                "reason": ""},
            **dict(reversed(list(items.items())))}
    after = {c["id"]: c["case"] for c in qualification.cases(src, more)}
    assert {k: after[k] for k in before} == before
    assert after["tests/test_toy.py::test_aaa_new"] not in before.values()
    assert all(re.fullmatch(r"VC-[0-9a-f]{8}", v) for v in after.values())


@pytest.mark.clause("CRT-LIM-001", "CRT-TQP-001")
def test_the_limitations_and_the_plan_are_in_the_pack(
        packs: tuple[Path, Path, dict[str, Any]]) -> None:
    """Input: the toy pack (sampled certificates, one case without a docstring).
    Expected: limitation rows for GPU, live comparisons, certificates (sampled at the
    stride), versions, procedures (1 of 2 cases undocumented) and scope; the plan's six
    sections with empty entries. Pass: each fact as stated."""
    doc = packs[2]
    rows = {r["topic"]: r for r in doc["limitations"]}
    assert set(rows) == {"GPU", "live comparisons", "certificates", "versions", "procedures",
                         "scope"}
    assert f"every {1 << 30}th input" in rows["certificates"]["fact"]
    assert rows["procedures"]["fact"].startswith("1 of 2 cases have no docstring")
    assert [p["section"] for p in doc["plan"]] == [
        "Intended use", "Interfaces", "Operational environment", "Qualification activities",
        "Configuration management", "Independence"]


@pytest.mark.clause("CRT-QUA-004")
def test_the_title_names_the_commit_by_its_12_digit_short_id() -> None:
    """Inputs: a pack's fields with a 40-digit commit, then with "not a git checkout".
    Expected: the title "ampref 1.2 evidence, quick level, commit <first 12 hex digits>
    (clean): PASSED", and the whole text where there is no commit id. Pass: equal
    strings."""
    from ampref.certify.report import pack_title

    sha = "0123456789abcdef0123456789abcdef01234567"
    doc: dict[str, Any] = {"config": {"commit": sha, "working_tree": "clean"},
                           "ident": {"ampref": "1.2"}, "status": "PASSED"}
    assert pack_title(doc, "quick") == ("ampref 1.2 evidence, quick level, commit "
                                        "0123456789ab (clean): PASSED")
    doc["config"]["commit"] = "not a git checkout"
    assert pack_title(doc, "smoke").endswith("commit not a git checkout (clean): PASSED")
