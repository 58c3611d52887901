"""The device backend's one-launch kernels and when they apply (``specs/backends.md``
BKD-MM-005, BKD-RED-001/002, BKD-OPT-001, BKD-STA-001).

Each method returns the result of one kernel launch (plus the operand copies it needs),
or None where the kernel does not apply: the kernel set lacks it, the kernel switch
(:mod:`ampref.kernels.switch`) says ``numpy``, a dtype is not the kernel's, or the work
exceeds :data:`FUSED_EXACT_LIMITS`. On None the caller runs the specification's array
operations on the device, with the same bits: the fused kernels are fast paths proven
equal to it (``tests/backends/test_device_exact.py``, ``_optim.py``, ``_stats.py``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

import numpy as np

from ampref.accumulation import certified as _cert
from ampref.kernels.switch import compiled as compiled_kernels

__all__ = ["FUSED_EXACT_LIMITS", "ExactKernels", "FusedOps", "OptimKernels", "StatKernels"]

#: where the fused exact kernels (one thread per output element, BKD-MM-005) stop and
#: the specification's phases (float64 cuBLAS GEMM + certification, about a hundred
#: launches) take over: products per GEMM, and elements per summed row. Below them the
#: launches dominate (a training step's GEMMs are 10^4..10^7 products); above, one
#: thread's serial float64 loop would lose to cuBLAS's DGEMM. Estimates, not measured
#: on a GPU yet: benchmarks/bench_device.py times both paths across the crossover.
FUSED_EXACT_LIMITS = {"gemm": 1 << 24, "sum": 1 << 12}


@runtime_checkable
class ExactKernels(Protocol):
    """A kernel set with the fused exact GEMM, row sums and segment sums."""

    def exact_gemm(self, A: Any, B: Any, T: int, sa: int, sb: int) -> Any: ...

    def exact_rows(self, x: Any) -> Any: ...

    def exact_segments(self, x: Any, starts: Any) -> Any: ...


@runtime_checkable
class OptimKernels(Protocol):
    """A kernel set with the fused Adam/AdamW update (BKD-OPT-001)."""

    def adam(self, w: Any, g: Any, m: Any, v: Any, k: np.ndarray, decoupled: bool,
             decay: bool) -> tuple[Any, ...]: ...


@runtime_checkable
class StatKernels(Protocol):
    """A kernel set that counts the training statistics on the device (BKD-STA-001)."""

    def rounding_counts(self, raw: Any, rounded: Any) -> Any: ...

    def grad_counts(self, g: Any, scale: float) -> Any: ...


class FusedOps:
    """The one-launch kernels of a device backend (its array module, kernel set and
    device-to-host copy)."""

    def __init__(self, xp: Any, kernels: Any, to_numpy: Callable[[Any], Any]) -> None:
        self.xp = xp
        self.kernels = kernels
        self.to_numpy = to_numpy

    def _exact_ok(self, kind: str, work: int, *arrays: Any) -> bool:
        """float32 operands, the kernel switch ``compiled`` and ``work`` (products for
        ``kind`` "gemm", row length for "sum") within :data:`FUSED_EXACT_LIMITS`."""
        return (isinstance(self.kernels, ExactKernels) and compiled_kernels()
                and all(x.dtype == self.xp.float32 for x in arrays)
                and work <= FUSED_EXACT_LIMITS[kind])

    # -- exact GEMM and sums -------------------------------------------------------------
    def matmul(self, a: Any, b: Any) -> Any | None:
        """fl32(exact a @ b) in one launch: operands made C-contiguous float64 (T, M, K)
        and (T, K, N), widened once (the kernel would otherwise convert each operand
        element once per product it enters); an operand without batch dimensions gets a
        batch stride of 0."""
        xp = self.xp
        lead = tuple(np.broadcast_shapes(tuple(a.shape[:-2]), tuple(b.shape[:-2])))
        T = math.prod(lead)
        M, K = a.shape[-2:]
        N = b.shape[-1]
        if not self._exact_ok("gemm", T * M * K * N, a, b):
            return None
        if T * M * N == 0:
            return xp.zeros(lead + (M, N), dtype=xp.float32)

        def batch(x: Any, rows: int, cols: int) -> tuple[Any, int]:
            if math.prod(x.shape[:-2]) == 1:  # one matrix for every batch
                return xp.ascontiguousarray(x, dtype=xp.float64).reshape(rows, cols), 0
            full = xp.broadcast_to(x, lead + (rows, cols))
            return (xp.ascontiguousarray(full, dtype=xp.float64).reshape(T, rows, cols),
                    rows * cols)

        A, sa = batch(a, M, K)
        B, sb = batch(b, K, N)
        return self.kernels.exact_gemm(A, B, T, sa, sb).reshape(lead + (M, N))

    def sum(self, x: Any, axis: Any, keepdims: bool) -> Any | None:
        """fl32(exact sum) over ``axis``: the reduced axes moved last and flattened, one
        row each. None also for a sum over no axis (x itself, where -0 stays -0)."""
        xp = self.xp
        axes = _cert.reduced_axes(x.ndim, axis)
        if not axes or not self._exact_ok("sum", math.prod(x.shape[ax] for ax in axes), x):
            return None
        kept = [ax for ax in range(x.ndim) if ax not in axes]
        moved = xp.moveaxis(x, axes, tuple(range(len(kept), x.ndim)))
        rows = xp.ascontiguousarray(moved, dtype=xp.float64).reshape(
            math.prod(x.shape[ax] for ax in kept), math.prod(x.shape[ax] for ax in axes))
        out = self.kernels.exact_rows(rows)
        shape = [1 if ax in axes else x.shape[ax] for ax in range(x.ndim)] if keepdims \
            else [x.shape[ax] for ax in kept]
        return out.reshape(shape)

    def segment_sum(self, x: Any, starts: Any) -> Any | None:
        """Exact segment sums of the rows of ``x``; the starts are checked on the host
        (host starts, as the engine's embedding passes them, cost no transfer; device
        starts one). None for starts the specification must name (or rows past the
        limit)."""
        xp = self.xp
        host = starts if isinstance(starts, np.ndarray) else None
        starts = xp.asarray(starts)
        n = x.shape[0] if x.ndim else 0
        # n bounds the longest segment: no row sum is longer than the rows
        if (x.ndim < 1 or starts.ndim != 1 or starts.dtype.kind not in "iu"
                or not 0 < starts.size <= n or not self._exact_ok("sum", n, x)
                or not _segments_ok(host if host is not None else self.to_numpy(starts), n)):
            return None
        rows = xp.ascontiguousarray(x, dtype=xp.float64).reshape(n, -1)
        out = self.kernels.exact_segments(rows, xp.ascontiguousarray(starts, dtype=xp.int64))
        return out.reshape((starts.size,) + tuple(x.shape[1:]))

    # -- optimizer and statistics --------------------------------------------------------
    def adam_update(self, w: Any, g: Any, m: Any, v: Any, constants: tuple[Any, ...], *,
                    decoupled: bool, decay: bool) -> tuple[Any, Any, Any] | None:
        """(new w, m, v) of one Adam/AdamW step; ``constants``: the nine of
        ``ampref.kernels.optim_numba.adam_update``, in the parameter's dtype. None also
        where the four arrays' dtypes differ."""
        xp = self.xp
        if (not isinstance(self.kernels, OptimKernels) or not compiled_kernels()
                or w.dtype not in (xp.float32, xp.float64)
                or any(a.dtype != w.dtype for a in (g, m, v))):
            return None
        k = np.array(constants, dtype=np.dtype(w.dtype.name))
        w1, g1, m1, v1 = (xp.ascontiguousarray(a).reshape(-1) for a in (w, g, m, v))
        new, m_new, v_new = self.kernels.adam(w1, g1, m1, v1, k, decoupled, decay)
        return new.reshape(w.shape), m_new.reshape(w.shape), v_new.reshape(w.shape)

    def rounding_counts(self, raw: Any, rounded: Any) -> Any | None:
        """Device int64 [underflow, overflow] of float32 gradient values ``raw`` rounded
        to ``rounded``."""
        xp = self.xp
        if not (isinstance(self.kernels, StatKernels) and compiled_kernels()
                and raw.dtype == xp.float32 and rounded.dtype == xp.float32):
            return None
        return self.kernels.rounding_counts(xp.ascontiguousarray(raw).reshape(-1),
                                            xp.ascontiguousarray(rounded).reshape(-1))

    def grad_counts(self, g: Any, scale: float) -> Any | None:
        """Device int64 [nonzero, nonzero with fl32(|g| fl32(scale)) < 2^-25] of a
        float32 gradient."""
        xp = self.xp
        if not (isinstance(self.kernels, StatKernels) and compiled_kernels()
                and g.dtype == xp.float32):
            return None
        return self.kernels.grad_counts(xp.ascontiguousarray(g).reshape(-1), scale)


def _segments_ok(starts: np.ndarray, n: int) -> bool:
    """Host starts: starts[0] == 0 and strictly increasing below n."""
    s = np.asarray(starts).astype(np.int64)
    return bool(s[0] == 0 and np.all(np.diff(np.append(s, n)) >= 1))
