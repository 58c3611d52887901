"""ampref verify: the float64 oracle against the exact oracle, strided certificates, CLI."""

from __future__ import annotations

import numpy as np
import pytest

import ampref
from ampref.cli import main
from ampref.formats.rounding import RoundingMode
from ampref.certify.verify import reference_quantize, verify, verify_block

import oracle

FORMATS = list(ampref.FORMATS.values())


@pytest.mark.clause("FMT-VER-001")
@pytest.mark.parametrize("fmt", [f for f in FORMATS if f.bits <= 16], ids=lambda f: f.name)
def test_float64_oracle_agrees_with_the_exact_rational_oracle(fmt: ampref.Format) -> None:
    """Inputs: 3000 random float32 patterns plus landmarks, every format of at most 16
    bits, every mode (fixed words). Expected: the float64 oracle's values equal the
    rational oracle's, sign of zero and NaN included. Pass: each element."""
    rng = np.random.default_rng(5)
    pats = rng.integers(0, 2**32, 3000, dtype=np.uint64).astype(np.uint32)
    x = pats.view(np.float32)
    x = np.concatenate([x, np.array([0.0, -0.0, fmt.max, fmt.tiny, 1.5], np.float32)])
    for rnd in RoundingMode:
        rb = np.arange(x.size, dtype=np.uint32) * np.uint32(2654435761)
        ref = reference_quantize(x, fmt, rnd, rbits=rb)
        for i, v in enumerate(x):
            code = oracle.round_scalar(float(v), fmt, rnd.value, rbits=int(rb[i]))
            if code is None:
                assert np.isnan(ref[i])
                continue
            want = oracle.decode_scalar(code, fmt)
            got = float(ref[i])
            if isinstance(want, float) and np.isnan(want):
                assert np.isnan(got), (fmt.name, rnd, v)
            else:
                assert got == float(want) and np.signbit(got) == np.signbit(float(want)), (
                    fmt.name, rnd.value, hex(int(pats[i])) if i < pats.size else v, got, want)


@pytest.mark.clause("FMT-VER-001")
@pytest.mark.parametrize("fmt", ["float16", "bfloat16", "e4m3", "e5m2fnuz", "e2m1", "e8m0", "tf32"])
def test_strided_certificate_passes_for_every_mode(fmt: str) -> None:
    """Inputs: every 100,003rd float32 pattern, seven formats, every mode. Expected: a
    passing certificate over exactly that many patterns. Pass: both."""
    for rnd in RoundingMode:
        res = verify(fmt, rnd.value, stride=100_003, workers=1, progress=False)
        assert res.ok, (fmt, rnd, res.first)
        assert res.checked == len(range(0, 2**32, 100_003))


@pytest.mark.clause("FMT-VER-001")
def test_certificate_covers_flags_and_reports_the_peer() -> None:
    """Inputs: a 100,000-pattern fp16 block; e4m3 blocks with saturation and with flushing.
    Expected: passing certificates, NumPy named as fp16's peer with 100,000 checked. Pass:
    all."""
    res = verify_block(0x30000000, 0x30000000 + 100_000, 1, "float16", "nearest_even", False, True,
                       0)
    assert res.ok and res.peer == "numpy" and res.peer_checked == 100_000
    for sat, sub in ((True, True), (False, False)):
        assert verify_block(0x7F000000, 0x7F000000 + 50_000, 1, "e4m3", "toward_positive",
                            sat, sub, 0).ok


def test_cli_verify_prints_a_summary_and_exits_zero(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["verify", "--format", "e4m3", "--stride", "1000003", "--workers", "1", "--quiet"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "format=float8_e4m3fn" in out and "mismatches: 0" in out and "PASS" in out


def test_cli_rejects_unknown_format_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["verify", "--format", "fp12"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("ampref verify: error: unknown format 'fp12'") and err.count("\n") == 1
    assert main(["verify", "--stride", "0", "--quiet"]) == 2


@pytest.mark.clause("FMT-VER-001")
def test_cli_bounds_the_worker_count_instead_of_starting_thousands(
        capsys: pytest.CaptureFixture[str]) -> None:
    """Inputs: ampref verify --workers 100000. Expected: exit 2 and one line naming the
    allowed range. Pass: both."""
    assert main(["verify", "--workers", "100000", "--stride", "1000003", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "workers must be an int in [1, " in err and err.count("\n") == 1


def test_help_states_defaults_and_the_runtime_of_an_exhaustive_run() -> None:
    import subprocess
    import sys

    train_help = subprocess.run([sys.executable, "-m", "ampref", "train", "--help"],
                                capture_output=True, text=True, check=True).stdout
    for text in ("(default 160)", "(default 16)", "(default torch)", "only --out"):
        assert text in " ".join(train_help.split()), text
    verify_help = subprocess.run([sys.executable, "-m", "ampref", "verify", "--help"],
                                 capture_output=True, text=True, check=True).stdout
    assert "about 4 minutes" in " ".join(verify_help.split())


@pytest.mark.clause("FMT-VER-001")
@pytest.mark.parametrize("fmt,peer", [("float16", "numpy"), ("bfloat16", "ml_dtypes"),
                                      ("float8_e4m3fn", "ml_dtypes"), ("float32", "none")])
def test_a_whole_run_names_the_peer_its_blocks_compared_with(fmt: str, peer: str) -> None:
    """Inputs: verify() over every 1,000,003rd pattern (5 blocks merged), nearest-even,
    for formats with and without a peer cast, and toward zero (no peer rounds that way).
    Expected: the merged result names NumPy / ml_dtypes / none, and the peer saw every
    checked pattern but the excluded ones (a merge that dropped the blocks' peer name
    would file a certificate saying no peer was compared); toward zero names none.
    Pass: equal."""
    res = verify(fmt, "nearest_even", stride=1_000_003, workers=1, progress=False)
    assert res.ok and res.peer == peer
    assert res.peer_checked + res.peer_excluded == (res.checked if peer != "none" else 0)
    other = verify(fmt, "toward_zero", stride=1_000_003, workers=1, progress=False)
    assert other.peer == "none" and other.peer_checked == 0


@pytest.mark.clause("FMT-VER-001")
def test_the_summary_prints_the_peer_line_only_when_a_peer_was_checked() -> None:
    """FMT-VER-001. Inputs: a VerifyResult with peer ml_dtypes (1,000 codes checked, 7
    excluded, 2 mismatches, one first mismatch) and the same counts with peer "none".
    Expected: the first summary has the line "codes checked against ml_dtypes: 1,000
    (excluded documented deviations: 7); mismatches: 2" and the mismatch in hex and
    ends FAIL; the second has no peer line. Pass: both."""
    from ampref.certify.verify import VerifyResult, summary

    res = VerifyResult(fmt="float16", rounding="nearest_even", checked=4096, peer="ml_dtypes",
                       peer_checked=1000, peer_excluded=7, peer_mismatches=2,
                       first=[("ml_dtypes", "0x3f800001", "0x3c00", "0x3c01")])
    text = summary(res)
    assert ("codes checked against ml_dtypes: 1,000 (excluded documented deviations: 7); "
            "mismatches: 2") in text
    assert "input 0x3f800001 ampref 0x3c00 reference 0x3c01" in text
    assert text.endswith("result: FAIL")
    alone = summary(VerifyResult(fmt="float16", rounding="nearest_even", checked=4096))
    assert "codes checked against" not in alone and alone.endswith("result: PASS")
