"""Evidence bound to what produced it (CRT-BND-*, CRT-CLI-001, CRT-GPU-001): a tampered,
foreign or incomplete stored chunk is computed again, never relabelled; imported chunks
of another package are a problem; ``--check`` finds an edited pack; bad arguments are
refused before anything runs; a GPU run's JUnit results count as evidence."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from ampref.certify import binding, campaign
from ampref.cli import main

pytest.importorskip("jinja2")
pytest.importorskip("markdown_it")

from test_certify import _source  # noqa: E402  (the toy source tree)

CELLS = campaign.matrix(["e4m3"], stride=1 << 30, roundings=["nearest_even"], saturate=False,
                        subnormals=True)


def _chunk(folder: Path, index: int = 3) -> Path:
    return folder / CELLS[0].key / f"chunk_{index:03d}.json"


@pytest.mark.clause("CRT-BND-001", "CRT-BND-002")
@pytest.mark.parametrize("edit", ["version-and-host", "package", "incomplete"])
def test_a_stored_chunk_that_is_not_this_packages_is_computed_again(edit: str,
                                                                   tmp_path: Path) -> None:
    """Input: a campaign folder, then one chunk edited: claiming ampref 0.0.1-old on
    another host; another package digest; a result field removed. Expected: that chunk
    (only) is pending again, a rerun computes it (1 chunk) and rewrites it with this
    package's digest and version. Pass: pending == [it], run 1, the file's env is ours."""
    assert campaign.run_serial(CELLS, tmp_path) == 64
    p = _chunk(tmp_path)
    rec = json.loads(p.read_text())
    assert rec["env"]["package"] == binding.package_digest()
    if edit == "version-and-host":
        rec["env"]["ampref"], rec["env"]["host"] = "0.0.1-old", "elsewhere"
    elif edit == "package":
        rec["env"]["package"] = "0" * 64
    else:
        del rec["checked"]
    p.write_text(json.dumps(rec))
    assert [ch.index for ch in campaign.pending(CELLS, tmp_path)] == [3]
    assert campaign.run_serial(CELLS, tmp_path) == 1
    env = json.loads(p.read_text())["env"]
    assert env == campaign.fingerprint()


@pytest.fixture(scope="module")
def pack(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """A toy pack with one imported folder (a campaign of this package) and one GPU run
    folder whose JUnit passes the toy's skipped test."""
    from ampref.certify import report

    tmp = tmp_path_factory.mktemp("bind")
    src = _source(tmp / "src", failing=False, complete=False)
    imported = tmp / "imported"
    campaign.run_serial(CELLS, imported)
    gpu = tmp / "gpu"
    gpu.mkdir()
    (gpu / "gpu_tests.xml").write_text(
        '<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest">'
        '<testcase classname="tests.test_toy" name="test_skip" time="0.1"/>'
        '</testsuite></testsuites>')
    (gpu / "device.txt").write_text("NVIDIA H100 80GB HBM3, 580.159.04, 81559 MiB\n")
    doc = report.certify(tmp / "pack", source=src, stride=1 << 30,
                         imports=[str(imported), str(gpu)])
    return tmp, doc


@pytest.mark.clause("CRT-GPU-001")
def test_a_gpu_runs_junit_results_count_for_the_tests_skipped_here(
        pack: tuple[Path, dict[str, Any]]) -> None:
    """Input: a toy whose clause TOY-SKP-001 is only cited by a test skipped here, and an
    imported gpu_check folder whose JUnit says that test passed. Expected: the clause is
    verified, its test marked as imported from that folder, the run listed with its
    device.txt; the configuration index names it. Pass: as stated."""
    tmp, doc = pack
    status = {c["id"]: c["status"] for c in doc["clauses"]}
    assert status["TOY-SKP-001"] == "verified"
    item = doc["tests"]["items"]["tests/test_toy.py::test_skip"]
    assert item["outcome"] == "passed" and item["imported_from"] == str((tmp / "gpu").resolve())
    (run,) = doc["gpu_runs"]
    assert run["passed"] == 1 and "H100" in run["environment"]
    html = (tmp / "pack" / "certify.html").read_text()
    assert "imported run" in html and "NVIDIA H100 80GB HBM3" in html


@pytest.mark.clause("CRT-GPU-001")
def test_an_imported_error_or_failure_is_a_failure_and_own_results_are_never_replaced(
        tmp_path: Path) -> None:
    """Input: a JUnit file with cases that passed, failed, errored (setup error, as pytest
    writes it) and were skipped, for tests this run skipped; one passed case each for a
    test this run passed and one it failed; a case this run does not know and one outside
    tests/. Expected: passed, failed, failed, and the skipped one left skipped; this run's
    own passed and failed kept; the run record counts 1 passed and 2 failed. Pass: the
    outcomes and counts."""
    from ampref.certify.imported import import_runs

    cases = {"test_ok": "", "test_bad": '<failure message="assert 0"/>',
             "test_err": '<error message="fixture failed"/>',
             "test_skip": '<skipped message="no gpu"/>', "test_mine_ok": "",
             "test_mine_bad": "", "test_unknown": ""}
    xml = "".join(f'<testcase classname="tests.test_toy" name="{n}">{body}</testcase>'
                  for n, body in cases.items())
    xml += '<testcase classname="other.mod" name="test_ok"/>'
    (tmp_path / "gpu_tests.xml").write_text(
        f'<?xml version="1.0"?><testsuites><testsuite name="pytest">{xml}</testsuite>'
        '</testsuites>')
    mine = {"test_mine_ok": "passed", "test_mine_bad": "failed"}
    items = {f"tests/test_toy.py::{n}": {"outcome": mine.get(n, "skipped"), "reason": "r"}
             for n in cases if n != "test_unknown"}
    (run,) = import_runs([tmp_path], items)
    got = {k.split("::")[1]: v["outcome"] for k, v in items.items()}
    assert got == {"test_ok": "passed", "test_bad": "failed", "test_err": "failed",
                   "test_skip": "skipped", "test_mine_ok": "passed",
                   "test_mine_bad": "failed"}
    assert "imported_from" not in items["tests/test_toy.py::test_mine_bad"]
    assert (run["passed"], run["failed"], run["environment"]) == (1, 2, "no device.txt")


@pytest.mark.clause("CRT-BND-003")
def test_check_finds_an_edited_chunk_and_an_edited_status(
        pack: tuple[Path, dict[str, Any]], tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Input: the pack as made, then a copy with one stored chunk's mismatch count
    edited, then one with its status edited to PASSED. Expected: --check says 'pack
    intact' (exit 0) first, then names the chunk (exit 1), then the status (exit 1).
    Pass: exit codes and messages."""
    import shutil

    tmp, doc = pack
    assert main(["certify", "--check", str(tmp / "pack")]) == 0
    assert "pack intact" in capsys.readouterr().out
    copy = tmp_path / "copy"
    shutil.copytree(tmp / "pack", copy)
    p = _chunk(copy / "certificates", 5)
    rec = json.loads(p.read_text())
    rec["mismatches"] = 0 if rec["mismatches"] else 1
    p.write_text(json.dumps(rec))
    assert main(["certify", "--check", str(copy)]) == 1
    out = capsys.readouterr().out
    assert f"0/{CELLS[0].key}/chunk_005.json: changed" in out
    copy2 = tmp_path / "copy2"
    shutil.copytree(tmp / "pack", copy2)
    saved = json.loads((copy2 / "certify.json").read_text())
    saved["status"] = "PASSED"  # the toy is INCOMPLETE (an uncovered clause)
    (copy2 / "certify.json").write_text(json.dumps(saved))
    assert main(["certify", "--check", str(copy2)]) == 1
    assert "status: the pack says PASSED" in capsys.readouterr().out


@pytest.mark.clause("CRT-BND-002")
def test_imported_chunks_of_another_package_are_a_problem(tmp_path: Path) -> None:
    """Input: an imported campaign folder whose chunks name another package digest.
    Expected: the pack is FAILED with a problem naming the certificate and both digests'
    prefixes. Pass: as stated."""
    from ampref.certify import report

    src = _source(tmp_path / "src", failing=False, complete=True)
    foreign = tmp_path / "foreign"
    campaign.run_serial(CELLS, foreign)
    for p in (foreign / CELLS[0].key).glob("chunk_*.json"):
        rec = json.loads(p.read_text())
        rec["env"]["package"] = "f" * 64
        p.write_text(json.dumps(rec))
    doc = report.certify(tmp_path / "pack", source=src, stride=1 << 30, imports=[str(foreign)])
    assert doc["status"] == "FAILED"
    assert any(CELLS[0].key in p and "another package (ffffffffffff" in p
               for p in doc["problems"])


BAD = [
    (["--stride", "0"], "--stride must be an int >= 1, got 0"),
    (["--scheduler", "udp://x:1"], "scheduler must be 'local' or a tcp://HOST:PORT"),
    (["--import-results", "/no/such/folder"], "no such folder '/no/such/folder'"),
    (["--source", "/tmp"], "holds no specs/ and tests/"),
]


@pytest.mark.clause("CRT-CLI-001")
@pytest.mark.parametrize(("argv", "words"), BAD, ids=[a[0] for a, _ in BAD])
def test_bad_certify_arguments_are_refused_before_anything_runs(
        argv: list[str], words: str, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Input: one bad argument. Expected: exit 2 with one stderr line naming it, within
    a few seconds (the suite, 15-25 minutes, never starts) and no output folder made.
    Pass: all three."""
    t0 = time.perf_counter()
    assert main(["certify", "--out", str(tmp_path / "out"), *argv]) == 2
    assert time.perf_counter() - t0 < 10
    err = capsys.readouterr().err
    assert words in err and err.count("\n") == 1
    assert not (tmp_path / "out").exists()


@pytest.mark.clause("CRT-CLI-001")
def test_diff_refuses_malformed_packs_and_other_schemas_with_exit_2(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Input: --diff with a well-formed but wrong pack ({"clauses": [{}]}), a pack of
    another schema. Expected: exit 2 and one line naming the file and the fault (not a
    traceback, not exit 1). Pass: as stated."""
    from ampref.certify.qualification import SCHEMA

    good = {"schema": SCHEMA, "clauses": [], "tests": {"items": {}}}
    (tmp_path / "good.json").write_text(json.dumps(good))
    (tmp_path / "wrong.json").write_text(json.dumps({"schema": SCHEMA, "clauses": [{}],
                                                     "tests": {}}))
    (tmp_path / "old.json").write_text(json.dumps({**good, "schema": "ampref-certify/2"}))
    for bad, words in (("wrong.json", "well-formed"), ("old.json", "schema 'ampref-certify/2'")):
        assert main(["certify", "--diff", str(tmp_path / "good.json"),
                     str(tmp_path / bad)]) == 2
        err = capsys.readouterr().err
        assert words in err and err.count("\n") == 1 and "Traceback" not in err
