"""The certificate matrix on a device backend (``ampref certify --backend cupy``,
``specs/certify.md`` CRT-DEV-001).

Every pending chunk of the matrix is verified by :func:`~.verify_device.verify_device`:
the backend's CUDA rounding kernel against the float64 oracle, both on the device, one
chunk (2^26 patterns at the cell's stride) per call, in this process (one GPU). Records
have the host campaign's form, with ``env.backend`` and ``env.device`` naming what ran
them, so a pack shows which implementation each certificate covers and a run on one
backend never reuses another's chunks. Cells a device cannot run, stochastic rounding at
a stride other than 1 (the kernel's counter is the pattern itself), are verified on the
host in the same run, and their records say so (``env.backend`` "numpy").
"""

from __future__ import annotations

import os
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from ampref.formats.rounding import RoundingMode, get_rounding
from .campaign import Cell, Chunk, fingerprint, pending, run_chunk, write_result
from .verify_device import verify_device

__all__ = ["device_backend", "run_device", "run_device_chunk"]


def device_backend(name: str) -> Any:
    """The registered device backend ``name``, checked before any work.

    Raises:
        ValueError: an unknown backend (the registered ones named), a host backend, or a
            device backend whose device is not available here.
    """
    from ampref import backends

    be = backends.resolve(name)
    if not hasattr(be.xp, "asnumpy"):
        raise ValueError(f"--backend {name} is the host's; the device matrix needs a device "
                         f"backend (cupy), the host's runs without --backend")
    if not backends.available(name):
        raise ValueError(f"--backend {name}: no device available here (CuPy with a CUDA GPU)")
    return be


def _on_host(cell: Cell) -> bool:
    return get_rounding(cell.rounding) is RoundingMode.STOCHASTIC and cell.stride != 1


def run_device_chunk(chunk: Chunk, backend: Any) -> dict[str, Any]:
    """One chunk verified on ``backend``: a record as :func:`~.campaign.run_chunk`'s,
    with no peer (NumPy's and ml_dtypes' casts have no device twin)."""
    c = chunk.cell
    start, stop = chunk.bounds
    t0 = time.perf_counter()
    checked, mismatches, first = 0, 0, []
    if start < stop:
        res = verify_device(c.fmt, c.rounding, backend=backend, stride=c.stride,
                            saturate=c.saturate, subnormals=c.subnormals, seed=c.seed,
                            span=(start, stop))
        checked, mismatches, first = res.checked, res.mismatches, [list(f) for f in res.first]
    describe = getattr(backend, "device_name", None)
    env = {**fingerprint(), "backend": backend.name,
           "device": describe() if callable(describe) else backend.name}
    return {"cell": asdict(c), "chunk": chunk.index, "start": start, "stop": stop,
            "checked": checked, "mismatches": mismatches, "peer": "none", "peer_checked": 0,
            "peer_mismatches": 0, "peer_excluded": 0, "first": first,
            "seconds": time.perf_counter() - t0, "env": env, "pid": os.getpid()}


def run_device(cells: list[Cell], results: str | Path, backend: str) -> int:
    """Every pending chunk of ``cells`` on the device backend ``backend`` (the cells it
    cannot run on the host), one result file each. Returns the chunks run."""
    be = device_backend(backend)
    out = Path(results)
    run = 0
    host = [c for c in cells if _on_host(c)]
    for ch in pending(host, out):
        write_result(out, ch, run_chunk(ch))
        run += 1
    for ch in pending([c for c in cells if not _on_host(c)], out, backend=be.name):
        write_result(out, ch, run_device_chunk(ch, be))
        run += 1
    return run
