"""The certificate matrix on a device backend (CRT-DEV-001), run here on the host build of
the CUDA kernels with the strict CuPy stand-in: the same chunks and counts as the host
campaign, records that name the backend and device, no reuse across backends, the
stochastic cells a device cannot stride verified on the host, bad arguments refused
before anything runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import strictxp
from strict_kernels import StrictHostKernels

from ampref import backends
from ampref.backends import hostbuild
from ampref.backends.device import DeviceBackend
from ampref.certify import campaign
from ampref.certify.device_campaign import device_backend, run_device
from ampref.cli import main

pytestmark = pytest.mark.skipif(hostbuild.host_compiler() is None,
                                reason="no C++ compiler for the host build of the kernels")

#: a coarse stride (about 64 patterns per chunk) over a spread of formats and modes
CELLS = (campaign.matrix(["float16", "float8_e4m3fn"], stride=(1 << 20) + 1,
                         roundings=["nearest_even", "toward_zero"], saturate=False)
         + campaign.matrix(["bfloat16"], stride=(1 << 20) + 1, roundings=["stochastic"],
                           saturate=True, subnormals=True))


@pytest.fixture(scope="module")
def device() -> DeviceBackend:
    be = DeviceBackend(strictxp, StrictHostKernels(hostbuild.HostKernels()), "cupy-campaign")
    backends.register("cupy-campaign", be)
    return be


def _records(folder: Path) -> dict[str, dict]:
    return {str(p.relative_to(folder)): json.loads(p.read_text())
            for p in sorted(folder.glob("*/chunk_*.json"))}


@pytest.mark.clause("CRT-DEV-001", "FMT-VER-004")
def test_the_device_matrix_checks_the_host_campaigns_chunks_and_names_its_backend(
        device: DeviceBackend, tmp_path: Path) -> None:
    """Input: 9 cells (float16 and e4m3fn x nearest-even and toward-zero x subnormals on
    and off, and a stochastic bfloat16 cell) at a stride of 2^20 + 1, on the emulated
    device and on the host campaign. Expected: the same 576 chunk files with equal
    pattern ranges, checked counts and 0 mismatches; device records carry env.backend
    "cupy-campaign" and env.device, the stochastic cell's records env.backend "numpy"
    (a device cannot stride stochastic rounding); every certificate complete and ok.
    Pass: all."""
    dev, host = tmp_path / "device", tmp_path / "host"
    assert run_device(CELLS, dev, "cupy-campaign") == len(CELLS) * 64
    campaign.run_serial(CELLS, host)
    d, h = _records(dev), _records(host)
    assert d.keys() == h.keys() and len(d) == len(CELLS) * 64
    for k, rec in d.items():
        ref = h[k]
        assert (rec["start"], rec["stop"], rec["checked"], rec["mismatches"]) == \
            (ref["start"], ref["stop"], ref["checked"], 0), k
        want = "numpy" if "stochastic" in k else "cupy-campaign"
        assert rec["env"].get("backend", "numpy") == want, k
        if want != "numpy":
            assert rec["env"]["device"] == "host-strict kernels" and rec["peer"] == "none"
    certs = campaign.certificates(dev)
    assert len(certs) == len(CELLS) and all(c["ok"] for c in certs)
    assert sum(c["checked"] for c in certs) == sum(c["checked"] for c in
                                                   campaign.certificates(host))


@pytest.mark.clause("CRT-DEV-001")
def test_a_stride_past_the_chunk_size_leaves_empty_chunks_that_check_nothing_on_the_device(
        device: DeviceBackend, tmp_path: Path) -> None:
    """Input: one float16 nearest-even cell at a stride of 2^27 + 3, wider than a chunk
    (2^26 patterns), on the emulated device and on the host campaign. Expected: the same
    64 chunk files; each chunk checks exactly the multiples of the stride in its range
    (counted here from the bounds: 0 or 1, so about half the chunks are empty and check
    nothing), the device's counts equal the host's, and the cell's certificate counts
    ceil(2^32 / stride) = 32 patterns. Pass: all."""
    stride = (1 << 27) + 3
    cell = campaign.matrix(["float16"], stride=stride, roundings=["nearest_even"],
                           saturate=False, subnormals=True)
    dev, host = tmp_path / "device", tmp_path / "host"
    run_device(cell, dev, "cupy-campaign")
    campaign.run_serial(cell, host)
    d, h = _records(dev), _records(host)
    assert d.keys() == h.keys() and len(d) == 64
    empty = 0
    for k, rec in d.items():
        lo, hi = rec["chunk"] << 26, (rec["chunk"] + 1) << 26
        want = len(range(-(-lo // stride) * stride, hi, stride))
        assert (rec["checked"], h[k]["checked"], rec["mismatches"]) == (want, want, 0), k
        empty += want == 0
    assert empty >= 30
    certs = campaign.certificates(dev)
    assert [c["checked"] for c in certs] == [-(-(1 << 32) // stride)] == [32]


@pytest.mark.clause("CRT-DEV-001", "CRT-BND-002")
def test_chunks_are_reused_on_their_own_backend_only(device: DeviceBackend,
                                                     tmp_path: Path) -> None:
    """Input: one deterministic cell computed by the host campaign, then by the device
    twice in the same folder, then by the host again. Expected: the device computes all
    64 chunks the first time (a host chunk certifies another implementation) and none
    the second; the host then recomputes all 64. Pass: 64, 0, 64."""
    cells = CELLS[:1]
    assert campaign.run_serial(cells, tmp_path) == 64
    assert run_device(cells, tmp_path, "cupy-campaign") == 64
    assert run_device(cells, tmp_path, "cupy-campaign") == 0
    assert campaign.run_serial(cells, tmp_path) == 64


@pytest.mark.clause("CRT-DEV-001", "CRT-CLI-001")
@pytest.mark.parametrize("argv,needle", [
    (["--backend", "numpy"], "is the host's"),
    (["--backend", "nope"], "unknown backend 'nope'"),
    (["--backend", "cupy-campaign", "--scheduler", "local"], "--scheduler belongs to host"),
])
def test_certify_refuses_a_bad_backend_before_running_anything(
        device: DeviceBackend, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        argv: list[str], needle: str) -> None:
    """Input: ``ampref certify`` with --backend numpy (a host backend), an unknown name,
    and a device backend with a Dask scheduler. Expected: exit 2 with one line naming
    the problem, and no output folder written. Pass: all."""
    out = tmp_path / "pack"
    assert main(["certify", "--out", str(out), *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert needle in err and len(err.splitlines()) == 1
    assert not out.exists()


def test_device_backend_refuses_a_device_backend_without_a_device(
        monkeypatch: pytest.MonkeyPatch, device: DeviceBackend) -> None:
    """Input: the emulated device backend reported unavailable. Expected: ValueError
    naming the missing device. Pass: raised."""
    monkeypatch.setattr(backends, "available", lambda name: False)
    with pytest.raises(ValueError, match="no device available"):
        device_backend("cupy-campaign")
