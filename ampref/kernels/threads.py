"""Splitting a compiled kernel's index range over threads.

The compiled kernels release the GIL (``nogil``), so plain Python threads run them in
parallel. A pool of ``os.cpu_count()`` threads (created on first use, idle threads wait
on a lock and use no CPU) takes one contiguous block each. This is used instead of
numba's ``parallel=True`` on purpose: OpenMP worker threads spin after each parallel
region and, between many small kernel calls, take the cores BLAS needs for the GEMMs
in between (measured: a 40-step ``ampref train`` run took 10.2 s with numba's OpenMP
layer and 5.1 s without it). Blocks write disjoint slices, so the result does not depend
on the number of threads.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

__all__ = ["MIN_PARALLEL", "run_blocks", "threads"]

#: below this many elements one thread is faster than handing blocks to others
MIN_PARALLEL = 1 << 17

_POOL: list[ThreadPoolExecutor] = []


def threads() -> int:
    """Threads a kernel call may use (the machine's cores)."""
    return max(1, os.cpu_count() or 1)


def run_blocks(kernel: Callable[..., None], n: int, *args: Any,
               min_parallel: int = MIN_PARALLEL) -> None:
    """Call ``kernel(*args, lo, hi)`` on contiguous blocks covering ``0..n``: inline when
    ``n`` is small or the machine has one core, else one block per thread."""
    k = threads()
    if n < min_parallel or k == 1:
        kernel(*args, 0, n)
        return
    if not _POOL:
        _POOL.append(ThreadPoolExecutor(k, thread_name_prefix="ampref-kernel"))
    step = -(-n // k)
    futures = [_POOL[0].submit(kernel, *args, lo, min(n, lo + step))
               for lo in range(0, n, step)]
    for f in futures:
        f.result()
