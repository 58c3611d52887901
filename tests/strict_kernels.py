"""The host build of the CUDA kernels driven with the strict CuPy stand-in's arrays
(what ``CudaKernels`` does with CuPy arrays): the device backend on a machine without a
GPU, for the device backend's and the device verifier's tests."""

from __future__ import annotations

from typing import Any

import numpy as np
import strictxp

from ampref import backends
from ampref.backends import hostbuild
from ampref.backends.device import DeviceBackend


class StrictHostKernels:
    """The host build driven with strictxp arrays (what CudaKernels does with CuPy ones)."""

    name = "host-strict"

    def __init__(self, k: hostbuild.HostKernels) -> None:
        self.k = k

    def quantize(self, x: Any, *args: Any) -> Any:
        return strictxp.DeviceArray(self.k.quantize(x._a, *args))

    def encode16(self, x: Any, params: np.ndarray) -> Any:
        return strictxp.DeviceArray(self.k.encode16(x._a, params))

    def random_bits(self, *args: Any) -> Any:
        return strictxp.DeviceArray(self.k.random_bits(*args))

    def unscale_(self, g: Any, row: Any) -> None:
        self.k.unscale_(g._a, row._a)

    def exact_gemm(self, A: Any, B: Any, T: int, sa: int, sb: int) -> Any:
        return strictxp.DeviceArray(self.k.exact_gemm(A._a, B._a, T, sa, sb))

    def exact_rows(self, x: Any) -> Any:
        return strictxp.DeviceArray(self.k.exact_rows(x._a))

    def exact_segments(self, x: Any, starts: Any) -> Any:
        return strictxp.DeviceArray(self.k.exact_segments(x._a, starts._a))

    def adam(self, w: Any, g: Any, m: Any, v: Any, k: np.ndarray, decoupled: bool,
             decay: bool) -> tuple[Any, ...]:
        outs = self.k.adam(w._a, g._a, m._a, v._a, k, decoupled, decay)
        return tuple(strictxp.DeviceArray(o) for o in outs)

    def rounding_counts(self, raw: Any, rounded: Any) -> Any:
        return strictxp.DeviceArray(self.k.rounding_counts(raw._a, rounded._a))

    def grad_counts(self, g: Any, scale: float) -> Any:
        return strictxp.DeviceArray(self.k.grad_counts(g._a, scale))

    def erfc(self, x: Any) -> Any:
        return strictxp.DeviceArray(self.k.erfc(x._a))

    def scaler_update(self, row: Any, cfg_d: np.ndarray, cfg_i: np.ndarray) -> None:
        self.k.scaler_update(row._a, cfg_d, cfg_i)


def strict_device(name: str) -> DeviceBackend:
    """The device backend on the strict stand-in with a fresh host build of the kernels,
    registered under ``name`` (a test module's own name keeps its state apart)."""
    be = DeviceBackend(strictxp, StrictHostKernels(hostbuild.HostKernels()), name)
    backends.register(name, be)
    return be
