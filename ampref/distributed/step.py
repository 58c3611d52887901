"""One data-parallel gradient step, emulated deterministically in one process
(``specs/distributed.md`` DPL-LAY-*, DPL-DIV-*, DPL-INF-*): N ranks' local gradients are
laid out as the framework lays them out, averaged across ranks in the stated order and
dtype, and checked for overflow the way each rank checks; the ranks then agree on
``found_inf`` as the framework's collective does.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from ampref.accumulation.certified import sum_f32
from ampref.common.checks import check_count, check_flag, check_instance

from .collectives import REDUCE_DTYPES, all_reduce, to_reduce_dtype
from .semantics import DataParallel, fsdp_predivide

__all__ = ["DPStep", "buckets", "data_parallel_step", "divide_factors"]

Grads = Sequence[npt.NDArray[Any]]


@dataclass(frozen=True, kw_only=True)
class DPStep:
    """What one data-parallel step produced.

    ``reduced``: the averaged gradients (float32, one per parameter, every rank's copy);
    ``local_nonfinite``: per rank, whether its own gradient held inf/NaN before the
    reduction (who planted the overflow); ``flags``: per rank, what its check found;
    ``found_inf``: per rank, the value its scaler acts on after the agreement (a count
    under ``agree=sum``); ``skip``: whether the optimizer step is skipped (found_inf > 0).
    """

    reduced: list[npt.NDArray[np.float32]]
    local_nonfinite: tuple[bool, ...]
    flags: tuple[bool, ...]
    found_inf: tuple[float, ...]
    skip: bool

    @property
    def triggered_by(self) -> list[int]:
        """Ranks whose own gradient was non-finite (empty when only the sum overflowed)."""
        return [r for r, bad in enumerate(self.local_nonfinite) if bad]

    @property
    def flagged_by(self) -> list[int]:
        """Ranks whose overflow check fired."""
        return [r for r, f in enumerate(self.flags) if f]


def buckets(sizes: Sequence[int], caps: Sequence[int], *, rebuilt: bool = True,
            itemsize: int = 4) -> list[list[int]]:
    """DDP's gradient buckets (parameter indices in layout order).

    DDP's first iteration lays parameters out in registration order, cut into buckets
    once a bucket's bytes reach the current cap (the first cap for the first bucket,
    then the last cap: ``_DEFAULT_FIRST_BUCKET_BYTES`` 1 MiB, ``bucket_cap_mb`` 25 MiB);
    from the second iteration on the buckets are rebuilt in the order gradients became
    ready, which for a model run front to back is reverse registration order.

    Raises:
        ValueError / TypeError: no caps, or a size or cap that is not a positive int.
    """
    if not caps:
        raise ValueError("buckets needs at least one byte cap, got none")
    for c in caps:
        check_count("bucket cap", c)
    for v in sizes:
        check_count("parameter size", v, lo=0)
    rebuilt, itemsize = check_flag("rebuilt", rebuilt), check_count("itemsize", itemsize)
    order = list(reversed(range(len(sizes)))) if rebuilt else list(range(len(sizes)))
    out: list[list[int]] = [[]]
    used = 0
    for i in order:
        out[-1].append(i)
        used += sizes[i] * itemsize
        if used >= caps[min(len(out) - 1, len(caps) - 1)]:
            out.append([])
            used = 0
    return [b for b in out if b]


def divide_factors(dp: DataParallel, ranks: int, dtype: str) -> tuple[float, float]:
    """(pre, post) divisors of the average for ``ranks`` ranks reducing in ``dtype``.

    Raises:
        TypeError / ValueError: ``dp`` not a :class:`DataParallel` row, ``ranks`` not an
            int >= 1, an unknown ``dtype``.
    """
    check_instance("dp", dp, DataParallel, "divide_factors")
    check_count("ranks", ranks)
    if dtype not in REDUCE_DTYPES:
        raise ValueError(f"unknown reduce dtype {dtype!r}; choose one of "
                         f"{', '.join(REDUCE_DTYPES)}")
    if dp.divide == "pre":
        return float(ranks), 1.0
    if dp.divide == "post":
        return 1.0, float(ranks)
    if dp.divide == "fsdp2" and dtype != "float16":
        return 1.0, float(ranks)  # ReduceOp.AVG: the sum, then one division by N
    f = fsdp_predivide(ranks)
    return float(f), ranks / f


def _divide(x: npt.NDArray[Any], by: float, op: str, dtype: str) -> npt.NDArray[Any]:
    # times float32(1/by) (mul) or an IEEE division (div), in float32, rounded to dtype
    if by == 1.0:
        return x
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        wide = x.astype(np.float32)
        q = wide * np.float32(1.0 / by) if op == "mul" else wide / np.float32(by)
    return to_reduce_dtype(q, dtype)


def _groups(dp: DataParallel, sizes: list[int], ranks: int, first: bool
            ) -> list[tuple[list[int], int]]:
    """(parameter indices, padded length) of each reduced buffer."""
    if dp.layout == "buckets":
        return [(b, sum(sizes[i] for i in b))
                for b in buckets(sizes, dp.bucket_caps, rebuilt=not first)]
    n = sum(sizes)
    return [(list(range(len(sizes))), -(-n // ranks) * ranks)]


def _reduce_group(per_rank: list[Grads], idx: list[int], length: int, dp: DataParallel,
                  dtype: str) -> npt.NDArray[np.float32]:
    ranks = len(per_rank)
    stack = np.zeros((ranks, length), dtype=np.float32)
    for r, grads in enumerate(per_rank):
        flat = np.concatenate([np.asarray(grads[i], np.float32).reshape(-1) for i in idx])
        stack[r, :flat.size] = flat
    pre, post = divide_factors(dp, ranks, dtype)
    low = _divide(to_reduce_dtype(stack, dtype), pre, dp.divide_op, dtype)
    total = all_reduce(low, order=dp.order, dtype=dtype)
    return np.asarray(_divide(total, post, dp.divide_op, dtype), dtype=np.float32)


def _fires(pieces: list[npt.NDArray[np.float32]], detect: str) -> bool:
    if detect == "nonfinite":
        return any(not bool(np.isfinite(p).all()) for p in pieces)
    # DeepSpeed: float(x.float().sum()) is inf or NaN, per tensor (exactly rounded sum)
    with np.errstate(over="ignore", invalid="ignore"):
        return any(p.size and not np.isfinite(float(sum_f32(p))) for p in pieces)


def _shard_pieces(flat_idx: list[int], sizes: list[int], reduced: list[npt.NDArray[np.float32]],
                  lo: int, hi: int) -> list[npt.NDArray[np.float32]]:
    # the parts of each parameter that fall into the flat range [lo, hi)
    pieces, start = [], 0
    for i in flat_idx:
        a, b = max(lo, start), min(hi, start + sizes[i])
        if a < b:
            pieces.append(reduced[i].reshape(-1)[a - start:b - start])
        start += sizes[i]
    return pieces


def _flags(dp: DataParallel, reduced: list[npt.NDArray[np.float32]], sizes: list[int],
           ranks: int) -> tuple[bool, ...]:
    if dp.check == "full":
        fired = _fires([g.reshape(-1) for g in reduced], dp.detect)
        return (fired,) * ranks
    shard = -(-sum(sizes) // ranks)
    order = list(range(len(sizes)))
    return tuple(_fires(_shard_pieces(order, sizes, reduced, r * shard, (r + 1) * shard),
                        dp.detect) for r in range(ranks))


def _agree(flags: tuple[bool, ...], agree: str) -> tuple[float, ...]:
    if agree == "none":
        return tuple(float(f) for f in flags)
    value = float(sum(flags)) if agree == "sum" else float(any(flags))
    return (value,) * len(flags)


def data_parallel_step(per_rank: Sequence[Grads], dp: DataParallel, *,
                       reduce_dtype: str = "float32", first_iteration: bool = False) -> DPStep:
    """Average ``per_rank[r][i]`` (rank r's gradient of parameter i, float32) across ranks
    under ``dp`` and decide the step.

    ``first_iteration``: DDP's first iteration, before its buckets are rebuilt (see
    :func:`buckets`); other layouts ignore it.

    NaN and inf in a rank's gradient propagate through the sum (inf + -inf is NaN); a
    finite sum beyond the reduce dtype's range becomes ±inf and is flagged like a planted
    inf; subnormal values survive a float32 reduction, and a float16/bfloat16 reduction
    rounds (and may flush) them.

    Raises:
        ValueError: no ranks, ranks with different parameter lists or shapes, or an
            unknown reduce dtype.
    """
    if reduce_dtype not in REDUCE_DTYPES:
        raise ValueError(f"unknown reduce dtype {reduce_dtype!r}; choose one of "
                         f"{', '.join(REDUCE_DTYPES)}")
    ranks = len(per_rank)
    if ranks < 1:
        raise ValueError("data_parallel_step needs the gradients of at least one rank")
    shapes = [tuple(np.shape(g)) for g in per_rank[0]]
    for r, grads in enumerate(per_rank):
        if [tuple(np.shape(g)) for g in grads] != shapes:
            raise ValueError(f"rank {r}'s gradients have shapes "
                             f"{[tuple(np.shape(g)) for g in grads]}, rank 0's {shapes}")
    sizes = [int(np.prod(s)) for s in shapes]
    reduced: list[npt.NDArray[np.float32]] = [np.empty(0, np.float32)] * len(sizes)
    for idx, length in _groups(dp, sizes, ranks, first_iteration):
        flat, start = _reduce_group(list(per_rank), idx, length, dp, reduce_dtype), 0
        for i in idx:
            reduced[i] = flat[start:start + sizes[i]].reshape(shapes[i])
            start += sizes[i]
    local = tuple(any(not bool(np.isfinite(np.asarray(g)).all()) for g in grads)
                  for grads in per_rank)
    flags = _flags(dp, reduced, sizes, ranks)
    found = _agree(flags, dp.agree)
    return DPStep(reduced=reduced, local_nonfinite=local, flags=flags, found_inf=found,
                  skip=found[0] > 0)
