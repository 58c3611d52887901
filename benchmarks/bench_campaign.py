"""Verification campaign throughput on Dask: chunks per second with 1 and 2 worker
processes on this machine, and the projected wall time of the full matrix.

    python benchmarks/bench_campaign.py [--stride 256]

The sample is one cell per format (nearest_even, no saturation, subnormals kept) at
``--stride``; the projection scales the measured time per pattern to every pattern of
all 336 cells (12 formats x 7 modes x saturate x subnormals), assuming the other modes
cost what nearest_even costs (stochastic rounding costs more: a lower bound).
"""

from __future__ import annotations

import argparse
import os
import platform
import tempfile
import time

from ampref.certify import campaign as C


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--stride", type=int, default=256)
    args = ap.parse_args()
    from distributed import Client, LocalCluster
    cells = [c for c in C.matrix("all", stride=args.stride)
             if c.rounding == "nearest_even" and not c.saturate and c.subnormals]
    n_chunks = len(cells) * 64
    print(f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores; "
          f"{len(cells)} cells x 64 chunks at stride {args.stride}")
    rates = {}
    for workers in (1, 2):
        with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                          dashboard_address=None) as lc, Client(lc) as client, \
                tempfile.TemporaryDirectory() as d:
            client.run(lambda: __import__("ampref.verify"))  # warm the workers
            t0 = time.perf_counter()
            C.run_campaign(cells, d, scheduler=client, progress=False)
            wall = time.perf_counter() - t0
            rates[workers] = n_chunks / wall
            print(f"{workers} worker(s): {wall:7.1f} s, {rates[workers]:6.2f} chunks/s")
    print(f"scaling 1 -> 2 workers: {rates[2] / rates[1]:.2f}x")
    per_cell_full = (n_chunks / rates[1]) / len(cells) * args.stride  # seconds, 1 worker
    full = per_cell_full * 336
    print(f"projected --level full (336 cells, all 2^32 inputs): {full / 3600:.1f} h on 1 "
          f"worker; {full / 3600 / 64:.2f} h on 64 workers (linear scaling assumed)")


if __name__ == "__main__":
    main()
