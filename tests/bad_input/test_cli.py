"""Bad command lines get one line on stderr naming the flag and exit 2, before any worker
starts (API-ERR-001, CRT-CMP-004, issue 28); list flags take one syntax everywhere."""

from __future__ import annotations

from pathlib import Path

import pytest

from ampref.certify.campaign import matrix
from ampref.cli import main

#: (arguments, words the one-line error must contain); {tmp} is a fresh folder
BAD = [
    ("verify --matrix e4m3 --workers 0 --results {tmp}", "workers must be an int >= 1, got 0"),
    ("verify --matrix e4m3 --scheduler= --results {tmp}", "--scheduler is empty"),
    ("verify --matrix float64 --results {tmp}", "float64 has no codes to certify"),
    ("verify --matrix e4m3 --seed -1 --results {tmp}", "seed must be in [0, 2**64), got -1"),
    ("verify --matrix e4m3,, --results {tmp}", "--matrix needs names separated by commas"),
    ("verify --matrix nope --results {tmp}", "unknown format 'nope'"),
    ("verify --matrix e4m3 --scheduler tcp://:::1 --results {tmp}",
     "scheduler 'tcp://:::1' cannot be reached"),
    ("verify --matrix e4m3 --scheduler udp://x:1 --results {tmp}",
     "scheduler must be 'local' or a tcp://HOST:PORT address"),
    ("certify --out=", "--out is empty"),
    ("train --compare ,,", "--compare needs names separated by commas"),
    ("train --compare fp32,nope", "unknown precision mode(s) nope"),
]


@pytest.mark.clause("API-ERR-001", "CRT-CMP-004")
@pytest.mark.parametrize(("argv", "words"), BAD, ids=[a for a, _ in BAD])
def test_a_bad_command_line_prints_one_line_naming_the_problem_and_exits_2(
        argv: str, words: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv.format(tmp=tmp_path / "r").split()) == 2
    err = capsys.readouterr().err
    assert words in err and err.count("\n") == 1 and "Traceback" not in err, err
    assert not (tmp_path / "r").exists() or not any((tmp_path / "r").iterdir())


@pytest.mark.clause("CRT-CMP-004")
def test_rounding_saturate_and_subnormal_flags_narrow_a_campaign_matrix() -> None:
    assert len(matrix(["e4m3"])) == 7 * 2 * 2
    cells = matrix(["e4m3", "bf16"], roundings=["toward_zero"], saturate=True)
    assert {(c.fmt, c.rounding, c.saturate) for c in cells} == {
        ("float8_e4m3fn", "toward_zero", True), ("bfloat16", "toward_zero", True)}
    assert {c.subnormals for c in cells} == {True, False}
    assert [c.subnormals for c in matrix(["e4m3"], subnormals=False)] == [False] * 14


@pytest.mark.clause("CRT-CMP-004")
def test_commas_and_spaces_mean_the_same_list(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    common = ["--rounding", "toward_zero", "--saturate", "--no-subnormals", "--stride",
              str(2**30), "--quiet", "--workers", "1", "--scheduler", "local"]
    for name, fmts in (("a", ["e4m3,bf16"]), ("b", ["e4m3", "bf16"]), ("c", ["e4m3,", "bf16"])):
        code = main(["verify", "--matrix", *fmts, *common, "--results", str(tmp_path / name)])
        out = capsys.readouterr().out
        if name == "c":
            assert code == 2
        else:
            assert code == 0 and "2 certificates" in out, out
