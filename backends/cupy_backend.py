"""``ampref.backends.get("cupy")``: :class:`ampref.backends.device.DeviceBackend` on CuPy and CUDA.

Importing this module needs CuPy (``ampref.backends.get`` turns the ImportError into a
ValueError that names the cause); whether a device is present is checked by
``ampref.backends.available("cupy")``. Everything else lives in :mod:`ampref.backends.device`.
"""

from __future__ import annotations

import cupy

from .cuda_kernels import CudaKernels
from .device import DeviceBackend

BACKEND = DeviceBackend(cupy, CudaKernels(), "cupy")
