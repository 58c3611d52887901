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
from functools import cache
from typing import Any

__all__ = ["ENV_THREADS", "MIN_PARALLEL", "run_blocks", "threads"]

#: the environment variable that caps a process's kernel threads (worker processes that
#: share the cores with siblings set it to 1)
ENV_THREADS = "AMPREF_KERNEL_THREADS"

#: below this many elements one thread is faster than handing blocks to others (waking a
#: pool thread costs tens of microseconds on a busy machine)
MIN_PARALLEL = 1 << 18

_POOL: list[ThreadPoolExecutor] = []


@cache
def threads() -> int:
    """Threads a kernel call may use: ``AMPREF_KERNEL_THREADS`` if set (a positive int),
    else the machine's cores."""
    env = os.environ.get(ENV_THREADS, "")
    if env.isdigit() and int(env) > 0:
        return int(env)
    return max(1, os.cpu_count() or 1)


def run_blocks(kernel: Callable[..., None], n: int, *args: Any,
               min_parallel: int = MIN_PARALLEL) -> None:
    """Call ``kernel(*args, lo, hi)`` on contiguous blocks covering ``0..n``: inline when
    ``n`` is small or the machine has one core, else one block per thread, the calling
    thread taking the first block itself."""
    k = threads()
    if n < min_parallel or k == 1:
        kernel(*args, 0, n)
        return
    if not _POOL:
        _POOL.append(ThreadPoolExecutor(k - 1, thread_name_prefix="ampref-kernel"))
    step = -(-n // k)
    futures = [_POOL[0].submit(kernel, *args, lo, min(n, lo + step))
               for lo in range(step, n, step)]
    kernel(*args, 0, min(n, step))
    for f in futures:
        f.result()
