"""Bad command lines get one line on stderr naming the flag and exit 2, before any worker
starts (API-ERR-001, CRT-CMP-004, issue 28); list flags take one syntax everywhere."""

from __future__ import annotations

from importlib.util import find_spec
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
    ("verify --matrix e4m3 --scheduler udp://x:1 --results {tmp}",
     "scheduler must be 'local' or a tcp://HOST:PORT address"),
    ("verify --backend cupy --matrix e4m3 --results {tmp}",
     "--matrix campaigns run on host workers"),
    ("verify --backend cupy --rounding stochastic --stride 7", "needs stride=1"),
    # one cell: the seed is checked before the workers start (a terminal saw the progress
    # bar first) and before the device backend is imported (cupy's absence was named)
    ("verify --rounding stochastic --seed 18446744073709551616 --stride 4099",
     "seed must be in [0, 2**64), got 18446744073709551616"),
    ("verify --backend cupy --rounding stochastic --seed -1", "seed must be in [0, 2**64)"),
    ("certify --out=", "--out is empty"),
    ("train --compare ,,", "--compare needs names separated by commas"),
    ("train --compare fp32,nope", "unknown precision mode(s) nope"),
]


@pytest.mark.clause("API-ERR-001", "CRT-CMP-004")
@pytest.mark.parametrize(("argv", "words"), BAD, ids=[a for a, _ in BAD])
def test_a_bad_command_line_prints_one_line_naming_the_problem_and_exits_2(
        argv: str, words: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Inputs: each bad command line of the table. Expected: exit 2, one stderr line with
    the listed words, no traceback, nothing written to the results folder. Pass: all."""
    assert main(argv.format(tmp=tmp_path / "r").split()) == 2
    err = capsys.readouterr().err
    assert words in err and err.count("\n") == 1 and "Traceback" not in err, err
    assert not (tmp_path / "r").exists() or not any((tmp_path / "r").iterdir())


#: the campaign extra (Dask): without it a well-formed campaign is refused by naming the
#: extra, after every value has been checked
NEEDS_DASK = pytest.mark.skipif(find_spec("distributed") is None,
                                reason="campaigns run on Dask: pip install 'ampref[campaign]'")


@NEEDS_DASK
@pytest.mark.clause("API-ERR-001", "CRT-CMP-004")
def test_an_unreachable_scheduler_is_named_in_one_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Input: a campaign with scheduler tcp://:::1 (no such host). Expected: exit 2, one
    stderr line naming the address. Pass: both hold and no result file is written."""
    argv = f"verify --matrix e4m3 --scheduler tcp://:::1 --results {tmp_path / 'r'}"
    assert main(argv.split()) == 2
    err = capsys.readouterr().err
    assert "scheduler 'tcp://:::1' cannot be reached" in err and err.count("\n") == 1, err
    assert not (tmp_path / "r").exists() or not any((tmp_path / "r").iterdir())


@pytest.mark.skipif(find_spec("distributed") is not None, reason="needs an environment "
                    "without the campaign extra")
@pytest.mark.clause("API-ERR-001")
def test_without_dask_a_well_formed_campaign_names_the_missing_extra(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Input: a valid campaign command line where Dask is not installed. Expected: exit
    2 and one line naming the extra ``ampref[campaign]``. Pass: both hold."""
    argv = f"verify --matrix e4m3 --stride {2**30} --quiet --results {tmp_path / 'r'}"
    assert main(argv.split()) == 2
    err = capsys.readouterr().err
    assert "pip install 'ampref[campaign]'" in err and err.count("\n") == 1, err


@pytest.mark.clause("CRT-CMP-004")
def test_rounding_saturate_and_subnormal_flags_narrow_a_campaign_matrix() -> None:
    """Inputs: matrix(['e4m3']), with toward_zero and saturate for two formats, and with
    subnormals=False. Expected: 28 cells; only the asked mode and saturation with both
    subnormal settings; 14 cells all without subnormals. Pass: each."""
    assert len(matrix(["e4m3"])) == 7 * 2 * 2
    cells = matrix(["e4m3", "bf16"], roundings=["toward_zero"], saturate=True)
    assert {(c.fmt, c.rounding, c.saturate) for c in cells} == {
        ("float8_e4m3fn", "toward_zero", True), ("bfloat16", "toward_zero", True)}
    assert {c.subnormals for c in cells} == {True, False}
    assert [c.subnormals for c in matrix(["e4m3"], subnormals=False)] == [False] * 14


@NEEDS_DASK
@pytest.mark.clause("CRT-CMP-004")
def test_commas_and_spaces_mean_the_same_list(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    """Inputs: verify --matrix 'e4m3,bf16', 'e4m3 bf16', and 'e4m3,' 'bf16' (Dask needed).
    Expected: two certificates for the first two; exit 2 for the empty item. Pass: each."""
    common = ["--rounding", "toward_zero", "--saturate", "--no-subnormals", "--stride",
              str(2**30), "--quiet", "--workers", "1", "--scheduler", "local"]
    for name, fmts in (("a", ["e4m3,bf16"]), ("b", ["e4m3", "bf16"]), ("c", ["e4m3,", "bf16"])):
        code = main(["verify", "--matrix", *fmts, *common, "--results", str(tmp_path / name)])
        out = capsys.readouterr().out
        if name == "c":
            assert code == 2
        else:
            assert code == 0 and "2 certificates" in out, out
