"""Shared timer for the benchmarks: minimum wall time over repeats after one warm-up."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def best_time(fn: Callable[[], Any], repeat: int) -> float:
    fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)
