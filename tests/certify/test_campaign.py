"""Verification campaigns on Dask: deterministic chunks, one result file per chunk,
resume, a real TCP scheduler with two worker processes, and a worker killed mid-run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from ampref.certify import campaign as C

distributed = pytest.importorskip("distributed")

STRIDE = 1_000_003  # a prime: every chunk holds ~67 patterns, a cell ~4295


def _content(results: Path) -> dict[str, dict[str, object]]:
    """Every chunk's result without the fields that say where and how fast it ran."""
    out = {}
    for f in sorted(results.rglob("chunk_*.json")):
        r = json.loads(f.read_text())
        for k in ("seconds", "env", "pid"):
            r.pop(k)
        out[str(f.relative_to(results))] = r
    return out


@pytest.mark.clause("CRT-CMP-001")
def test_the_matrix_and_its_chunks_cover_every_strided_pattern_once() -> None:
    """Inputs: the full matrix; e4m3's chunks at the test stride; format 'fp7'. Expected:
    12 x 7 x 2 x 2 unique cells; chunks covering every strided pattern once, aligned to the
    stride; ValueError for fp7. Pass: all."""
    cells = C.matrix("all")
    assert len(cells) == 12 * 7 * 2 * 2 and len({c.key for c in cells}) == len(cells)
    cell = C.matrix(["e4m3"], stride=STRIDE)[0]
    counts = [len(range(*ch.bounds, STRIDE)) for ch in C.chunks(cell)]
    assert sum(counts) == len(range(0, 1 << 32, STRIDE))
    assert all(ch.bounds[0] % STRIDE == 0 for ch in C.chunks(cell))
    with pytest.raises(ValueError, match="unknown format 'fp7'"):
        C.matrix(["fp7"])


@pytest.fixture(scope="module")
def cluster() -> Any:
    """A real scheduler and two worker processes talking TCP on localhost."""
    lc = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  protocol="tcp", dashboard_address=None)
    client = distributed.Client(lc)
    assert lc.scheduler_address.startswith("tcp://")
    yield client
    client.close()
    lc.close()


@pytest.mark.clause("CRT-CMP-002", "CRT-CMP-003")
def test_a_campaign_on_two_tcp_workers_equals_one_process_and_resumes(
        tmp_path: Path, cluster: Any) -> None:
    """Inputs: four bf16 cells on a two-worker TCP Dask cluster and serially; seven chunk
    files removed, then resumed. Expected: identical chunk contents; exactly the seven
    rerun; four passing certificates covering every strided pattern. Pass: all."""
    cells = C.matrix(["bf16"], stride=STRIDE)[:4]
    counts = C.run_campaign(cells, tmp_path / "dask", scheduler=cluster, progress=False)
    assert counts == {"total": 4 * 64, "already_done": 0, "run": 4 * 64}
    serial = tmp_path / "serial"
    assert C.run_serial(cells, serial) == 4 * 64
    assert _content(tmp_path / "dask") == _content(serial)
    for f in list((tmp_path / "dask").rglob("chunk_01*.json"))[:7]:
        f.unlink()  # a killed campaign: resuming runs exactly the missing chunks
    again = C.run_campaign(cells, tmp_path / "dask", scheduler=cluster, progress=False)
    assert again["run"] == 7 and again["already_done"] == 4 * 64 - 7
    assert _content(tmp_path / "dask") == _content(serial)
    certs = C.certificates(tmp_path / "dask")
    assert [c["ok"] for c in certs] == [True] * 4
    assert sum(c["checked"] for c in certs) == 4 * len(range(0, 1 << 32, STRIDE))


@pytest.mark.clause("CRT-CMP-002")
def test_a_campaign_survives_a_worker_killed_mid_run(tmp_path: Path) -> None:
    """Inputs: six fp16 cells on two Dask worker processes, one killed with SIGKILL mid-
    run. Expected: every chunk completed, passing certificates, contents equal to a serial
    run. Pass: all."""
    lc = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  protocol="tcp", dashboard_address=None)
    client = distributed.Client(lc)
    try:
        cells = C.matrix(["fp16"], stride=65537)[:6]  # ~65,536 patterns per cell
        box: dict[str, object] = {}
        t = threading.Thread(target=lambda: box.update(
            counts=C.run_campaign(cells, tmp_path / "r", scheduler=client, progress=False)))
        t.start()
        deadline = time.time() + 60
        while len(list((tmp_path / "r").rglob("chunk_*.json"))) < 10 and time.time() < deadline:
            time.sleep(0.02)
        before = len(list((tmp_path / "r").rglob("chunk_*.json")))
        victim = next(iter(client.run(os.getpid).values()))
        os.kill(victim, signal.SIGKILL)
        assert 10 <= before < 6 * 64  # killed mid-campaign
        t.join(timeout=300)
        assert box["counts"] == {"total": 6 * 64, "already_done": 0, "run": 6 * 64}
        done = len(list((tmp_path / "r").rglob("chunk_*.json")))
        assert done == 6 * 64
        assert all(c["ok"] and c["complete"] for c in C.certificates(tmp_path / "r"))
    finally:
        client.close()
        lc.close()
    ref = tmp_path / "ref"
    C.run_serial(cells, ref)
    assert _content(tmp_path / "r") == _content(ref)


@pytest.mark.clause("CRT-CMP-004")
def test_the_cli_runs_a_campaign_and_refuses_one_without_results(tmp_path: Path) -> None:
    """Inputs: ampref verify --matrix e5m2 with two workers, without and with --results.
    Expected: exit 2 asking for --results; then 28 certificates, 1792 chunks, none
    mismatching. Pass: both."""
    cmd = [sys.executable, "-m", "ampref", "verify", "--matrix", "e5m2", "--stride",
           str(STRIDE * 97), "--workers", "2", "--quiet"]
    bad = subprocess.run(cmd, capture_output=True, text=True)
    assert bad.returncode == 2 and "a campaign needs --results DIR" in bad.stderr
    ok = subprocess.run(cmd + ["--results", str(tmp_path)], capture_output=True, text=True,
                        timeout=600)
    assert ok.returncode == 0, ok.stderr[-2000:]
    assert "28 certificates, 1792 chunks run now, 0 already done; mismatching or " \
           "incomplete: 0" in ok.stdout
