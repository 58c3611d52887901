"""Data-parallel AMP numerics: N ranks emulated deterministically in one process.

``collectives`` (sums across ranks rounded per addition in gloo's ring order, rank
order, a tree, or exactly), ``semantics`` (each framework's gradient layout, average,
overflow check and ``found_inf`` agreement as a data row of ``DP_PROFILES``) and ``step``
(one data-parallel gradient step: ``data_parallel_step``). Spec: ``specs/distributed.md``.

Imports: ``ampref.common``, ``ampref.formats`` and ``ampref.accumulation``.
"""

from .collectives import ORDERS, REDUCE_DTYPES, all_reduce, ring_chunks, to_reduce_dtype
from .semantics import DEFAULT_DP, DP_PROFILES, DataParallel, fsdp_predivide, get_dp
from .step import DPStep, buckets, data_parallel_step, divide_factors

__all__ = ["DEFAULT_DP", "DP_PROFILES", "DPStep", "DataParallel", "ORDERS", "REDUCE_DTYPES",
           "all_reduce", "buckets", "data_parallel_step", "divide_factors", "fsdp_predivide",
           "get_dp", "ring_chunks", "to_reduce_dtype"]
