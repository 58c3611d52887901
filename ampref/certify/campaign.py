"""Verification campaigns: the certificate matrix (format x rounding x saturate x
subnormals) cut into deterministic chunks of the float32 input range, run on Dask
``distributed`` (a local cluster or a real one), one result file per finished chunk so
that a killed campaign resumes where it stopped (specs/certify.md CRT-CMP-*).

A chunk's result is a pure function of (cell, chunk index): the same inputs and seeds
whatever the number of workers, the scheduler, or how often a task was retried.
"""

from __future__ import annotations

import json
import os
import platform
import time
from dataclasses import asdict, dataclass
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from ampref.common.atomicio import atomic_write
from ampref.common.checks import check_count, check_flag
from ampref.kernels.srhash import check_seed
from ampref.formats.table import FORMATS, get_format
from ampref.formats.rounding import RoundingMode, get_rounding
from .binding import package_digest, reusable
from .verify import VerifyResult, verify_block

__all__ = ["Cell", "Chunk", "CHUNK_BITS", "matrix", "chunks", "run_chunk", "pending",
           "run_campaign", "run_serial", "certificates", "fingerprint", "check_scheduler",
           "write_result"]

#: a chunk covers 2^26 consecutive float32 bit patterns (64 chunks per cell)
CHUNK_BITS = 26


@dataclass(frozen=True, kw_only=True)
class Cell:
    """One certificate of the matrix (CRT-CMP-001)."""

    fmt: str
    rounding: str
    saturate: bool
    subnormals: bool
    stride: int = 1
    seed: int = 0

    @property
    def key(self) -> str:
        return (f"{self.fmt}.{self.rounding}.sat{int(self.saturate)}.sub{int(self.subnormals)}"
                f".stride{self.stride}")


@dataclass(frozen=True, kw_only=True)
class Chunk:
    cell: Cell
    index: int

    @property
    def bounds(self) -> tuple[int, int]:
        """[start, stop) of the patterns, start aligned up to a multiple of the stride so
        that the chunks of a strided cell check exactly the patterns 0, s, 2s, ..."""
        lo, hi = self.index << CHUNK_BITS, (self.index + 1) << CHUNK_BITS
        s = self.cell.stride
        return -(-lo // s) * s, hi


def matrix_formats() -> list[str]:
    """Every format with codes, in the table's order (the matrix's "all")."""
    return [f for f in FORMATS if get_format(f).kernel]


def matrix(formats: str | list[str] = "all", *, stride: int = 1, seed: int = 0,
           roundings: list[str] | None = None, saturate: bool | None = None,
           subnormals: bool | None = None) -> list[Cell]:
    """The cells for ``formats`` ("all": every format with codes) x every rounding mode x
    saturate x subnormals; ``roundings``, ``saturate`` and ``subnormals`` narrow the
    product to the values given (None: all).

    Everything a worker would check is checked here, before any worker starts.

    Raises:
        ValueError: an unknown format or a format without codes (float64), an unknown
            mode, a stride < 1 or a seed outside [0, 2^64) (the value and choices named).
    """
    if isinstance(stride, bool) or not isinstance(stride, int) or stride < 1:
        raise ValueError(f"stride must be a positive int, got {stride!r}")
    check_seed(seed)
    coded = matrix_formats()
    names = coded if formats == "all" else [get_format(f).name for f in formats]
    for n in names:
        if n not in coded:
            raise ValueError(f"{n} has no codes to certify (storage only); the matrix takes "
                             f"{', '.join(coded)}")
    modes = [get_rounding(r).value for r in roundings] if roundings else \
        [r.value for r in RoundingMode]
    sats = (False, True) if saturate is None else (check_flag("saturate", saturate),)
    subs = (True, False) if subnormals is None else (check_flag("subnormals", subnormals),)
    return [Cell(fmt=f, rounding=r, saturate=sat, subnormals=sub, stride=stride, seed=seed)
            for f in names for r in modes for sat in sats for sub in subs]


def chunks(cell: Cell) -> list[Chunk]:
    return [Chunk(cell=cell, index=i) for i in range(1 << (32 - CHUNK_BITS))]


@cache
def fingerprint() -> dict[str, str]:
    """Where a result was computed: the package's digest (CRT-BND-001), host, OS, CPU,
    Python and library versions (once per process)."""
    from importlib.metadata import PackageNotFoundError, version

    import ml_dtypes
    try:
        ours = version("ampref")
    except PackageNotFoundError:  # a checkout on sys.path without an install
        ours = "not installed"
    return {"ampref": ours, "package": package_digest(), "python": platform.python_version(),
            "numpy": np.__version__, "ml_dtypes": ml_dtypes.__version__,
            "os": platform.platform(), "cpu": platform.processor() or platform.machine(),
            "host": platform.node()}


def run_chunk(chunk: Chunk) -> dict[str, Any]:
    """Verify one chunk (on whichever worker runs it) and return its result record."""
    c = chunk.cell
    start, stop = chunk.bounds
    t0 = time.perf_counter()
    res = VerifyResult(fmt=get_format(c.fmt).name, rounding=c.rounding)
    if start < stop:
        res = verify_block(start, stop, c.stride, c.fmt, c.rounding, c.saturate, c.subnormals,
                           c.seed)
    return {"cell": asdict(c), "chunk": chunk.index, "start": start, "stop": stop,
            "checked": res.checked, "mismatches": res.mismatches,
            "peer": res.peer, "peer_checked": res.peer_checked,
            "peer_mismatches": res.peer_mismatches, "peer_excluded": res.peer_excluded,
            "first": [list(f) for f in res.first], "seconds": time.perf_counter() - t0,
            "env": dict(fingerprint()), "pid": os.getpid()}


def _path(results: Path, chunk: Chunk) -> Path:
    return results / chunk.cell.key / f"chunk_{chunk.index:03d}.json"


def pending(cells: list[Cell], results: Path, backend: str = "numpy") -> list[Chunk]:
    """The chunks of ``cells`` to compute: no result file in ``results``, or one this
    package may not reuse (another package digest or version, another backend's
    implementation under test, edited or incomplete: computed again, never relabelled;
    CRT-CMP-002, CRT-BND-002)."""
    version = fingerprint()["ampref"]
    return [ch for c in cells for ch in chunks(c)
            if not _reusable(_path(results, ch), version, backend)]


def _reusable(path: Path, version: str, backend: str) -> bool:
    if not path.exists():
        return False
    try:
        rec = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError, UnicodeDecodeError):
        return False
    return isinstance(rec, dict) and reusable(rec, version) \
        and rec["env"].get("backend", "numpy") == backend


def write_result(results: Path, chunk: Chunk, rec: dict[str, Any]) -> None:
    """Store one chunk's record (atomically: a failed write keeps the old file)."""
    p = _path(results, chunk)
    p.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(str(p), json.dumps(rec, indent=1) + "\n")


def run_serial(cells: list[Cell], results: str | Path) -> int:
    """Every pending chunk of ``cells`` in this process (no Dask), one result file each;
    the reference that a distributed campaign must equal. Returns the chunks run."""
    out = Path(results)
    todo = pending(cells, out)
    for ch in todo:
        write_result(out, ch, run_chunk(ch))
    return len(todo)


def check_scheduler(scheduler: Any, workers: Any = None) -> str:
    """``scheduler`` ("local" or tcp://HOST:PORT) and ``workers`` (None or an int >= 1)
    checked without importing Dask, so a bad value is named before the missing extra
    is (CRT-CMP-004).

    Raises:
        TypeError: a scheduler that is not a str, workers that are not an int.
        ValueError: an empty scheduler, another scheme, workers < 1.
    """
    if workers is not None:
        check_count("workers", workers)
    if not isinstance(scheduler, str):
        raise TypeError(f"scheduler must be a str ('local' or tcp://HOST:PORT), got "
                        f"{type(scheduler).__name__}: {scheduler!r}")
    if not scheduler.strip():
        raise ValueError("--scheduler is empty: give local or tcp://HOST:PORT")
    if scheduler != "local" and (not scheduler.startswith("tcp://")
                                 or len(scheduler) <= len("tcp://")):
        raise ValueError(f"scheduler must be 'local' or a tcp://HOST:PORT address, got "
                         f"{scheduler!r}")
    return scheduler


def _client(scheduler: str, workers: int | None) -> Any:
    check_scheduler(scheduler, workers)
    try:
        from distributed import Client, LocalCluster
    except ImportError as e:  # the campaign extra
        raise ValueError("campaigns need Dask: pip install 'ampref[campaign]'") from e
    if scheduler == "local":
        n = workers or (os.cpu_count() or 1)
        cluster = LocalCluster(n_workers=n, threads_per_worker=1, processes=True,
                               dashboard_address=None)
        return Client(cluster)
    try:
        return Client(scheduler, timeout=30)
    except (ValueError, OSError, TimeoutError) as e:
        raise ValueError(f"scheduler {scheduler!r} cannot be reached: {e}") from None


def run_campaign(cells: list[Cell], results: str | Path, *, scheduler: str | Any = "local",
                 workers: int | None = None, progress: bool = True) -> dict[str, int]:
    """Run every pending chunk of ``cells`` on Dask and write each result file as it
    arrives (atomically). ``scheduler`` is "local", a tcp:// address or a ready
    ``distributed.Client``. Returns counts: chunks done before, run now, total.
    """
    if isinstance(scheduler, str):
        check_scheduler(scheduler, workers)
    out = Path(results)
    todo = pending(cells, out)
    total = sum(len(chunks(c)) for c in cells)
    counts = {"total": total, "already_done": total - len(todo), "run": 0}
    if not todo:
        return counts
    own = isinstance(scheduler, str)
    client: Any = _client(scheduler, workers) if own else scheduler
    try:
        from distributed import as_completed
        bar = _bar(len(todo), progress)
        futures = client.map(run_chunk, todo, pure=False, retries=3)
        index = {f.key: ch for f, ch in zip(futures, todo, strict=True)}
        for fut in as_completed(futures):
            write_result(out, index[fut.key], fut.result())
            counts["run"] += 1
            bar.update(1)
        bar.close()
    finally:
        if own:
            _close(client)
    return counts


def _close(client: Any) -> None:
    """Close a client and the local cluster it owns in order: workers leave first (they
    unregister while the scheduler still listens; closing the scheduler under them made
    a worker's heartbeat log a CommClosedError traceback after a successful campaign),
    then the client, then the scheduler."""
    cluster = getattr(client, "cluster", None)
    if cluster is not None:
        cluster.scale(0)
        deadline = time.monotonic() + 10.0
        while client.scheduler_info().get("workers") and time.monotonic() < deadline:
            time.sleep(0.05)
    client.close()
    if cluster is not None:
        cluster.close()


def _bar(n: int, enabled: bool) -> Any:
    from tqdm import tqdm
    return tqdm(total=n, desc="campaign", unit="chunk", disable=not enabled)


def certificates(results: str | Path) -> list[dict[str, Any]]:
    """One merged certificate per cell found in ``results`` (CRT-CMP-003): inputs
    checked, mismatches (first ones in hex), the oracles, chunks present of 64, compute
    seconds, the environments that computed it."""
    out = []
    for d in sorted(p for p in Path(results).iterdir() if p.is_dir()):
        recs = [json.loads(f.read_text()) for f in sorted(d.glob("chunk_*.json"))]
        if not recs:
            continue
        merged: dict[str, Any] = {"cell": recs[0]["cell"], "key": d.name,
                                  "chunks": len(recs), "chunks_total": 1 << (32 - CHUNK_BITS)}
        for k in ("checked", "mismatches", "peer_checked", "peer_mismatches", "peer_excluded",
                  "seconds"):
            merged[k] = sum(r[k] for r in recs)
        merged["peer"] = next((r["peer"] for r in recs if r["peer"] != "none"), "none")
        merged["first"] = [f for r in recs for f in r["first"]][:10]
        merged["complete"] = merged["chunks"] == merged["chunks_total"]
        merged["ok"] = merged["complete"] and merged["mismatches"] == 0 \
            and merged["peer_mismatches"] == 0
        merged["environments"] = sorted({json.dumps(r["env"], sort_keys=True) for r in recs})
        out.append(merged)
    return out
