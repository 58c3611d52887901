"""The device backend's routes to the GPU-only GEMM kernels (BKD-MM-002/003), on the
host: the chain kernel and cuBLAS are replaced by a stand-in that decodes the codes it
is given and multiplies them with the NumPy specification's model, so the device code
around them (encoding, zero padding to 16 x 16 tiles, cropping, batching with broadcast
leading dims, the float64 route and the float64 gradient unscale) is checked on every
machine. The kernels themselves are checked on a GPU (test_device_backend.py)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import strictxp
from strict_kernels import StrictHostKernels

from ampref import get_format
from ampref.backends import hostbuild
from ampref.backends.device import DeviceBackend, TensorCoreKernels
from ampref.backends.kernelsrc import ST_FOUND
from ampref.backends.numpy_backend import BACKEND as REF
from ampref.formats.cast import value_table
from ampref.scaling.machine import ScalerConfig, initial_state
from ampref.scaling.scaler import LossScaler

pytestmark = pytest.mark.skipif(hostbuild.host_compiler() is None,
                                reason="no C++ compiler for the host build of the kernels")


class ModelKernels(StrictHostKernels):
    """The host build plus GEMM stand-ins computing the specification's models."""

    def __init__(self, k: hostbuild.HostKernels) -> None:
        super().__init__(k)
        self.calls: list[tuple[str, tuple[int, ...], tuple[int, ...]]] = []

    def _gemm(self, A: Any, B: Any, fmt_name: str, model: str) -> Any:
        table = value_table(fmt_name)
        a, b = table[A._a.astype(np.int64)], table[B._a.astype(np.int64)]
        self.calls.append((model, a.shape, b.shape))
        return strictxp.DeviceArray(REF.matmul(a, b, model, get_format(fmt_name)))

    def mma_chain(self, A: Any, B: Any, fmt_name: str) -> Any:
        return self._gemm(A, B, fmt_name, "tensorcore:h100")

    def gemm_ex(self, A: Any, B: Any, fmt_name: str) -> Any:
        return self._gemm(A, B, fmt_name, "cublas:h100")


@pytest.fixture(scope="module")
def device() -> DeviceBackend:
    be = DeviceBackend(strictxp, ModelKernels(hostbuild.HostKernels()), "cupy-model")
    assert isinstance(be.kernels, TensorCoreKernels)
    return be


def _bits(x: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(x).view(np.uint32 if x.dtype == np.float32 else np.uint64)


@pytest.mark.clause("BKD-MM-002", "BKD-MM-003")
@pytest.mark.parametrize("fmt", ["float16", "bfloat16"])
@pytest.mark.parametrize("accumulation", ["tensorcore:h100", "cublas"])
@pytest.mark.parametrize(("ashape", "bshape"), [((5, 40), (40, 7)),
                                                ((3, 1, 4, 40), (2, 40, 5)),
                                                ((2, 17, 33), (33, 18))])
def test_device_gemm_routes_give_the_models_result_for_every_shape_and_batch(
        device: DeviceBackend, fmt: str, accumulation: str, ashape: tuple[int, ...],
        bshape: tuple[int, ...]) -> None:
    """Inputs: seeded operands on the format's grid, 2-D, batched with broadcast leading
    dims, and sizes that are not multiples of 16 (K = 33: padding), through the device
    backend's tensorcore:h100 and cublas routes. Expected: the NumPy specification's
    tensorcore:h100 result (the cublas stand-in computes cublas:h100, which for 16-bit
    inputs is that chain: ACC-LIB-001) in the broadcast shape; each kernel call on
    operands padded to multiples of 16. Pass: bit patterns and the padded shapes."""
    rng = np.random.default_rng(11)
    a = value_table(fmt)[rng.integers(0, 0x3C00, ashape)].astype(np.float32)
    b = value_table(fmt)[rng.integers(0, 0x3C00, bshape)].astype(np.float32)
    a[np.isnan(a)], b[np.isnan(b)] = 0, 0
    kernels = device.kernels
    assert isinstance(kernels, ModelKernels)
    kernels.calls.clear()
    got = device.to_numpy(device.matmul(device.asarray(a), device.asarray(b), accumulation,
                                        get_format(fmt)))
    want = REF.matmul(a, b, "tensorcore:h100", get_format(fmt))
    assert got.shape == want.shape == np.broadcast_shapes(ashape[:-2], bshape[:-2]) + \
        (ashape[-2], bshape[-1])
    assert np.array_equal(_bits(got), _bits(want))
    if accumulation == "tensorcore:h100":
        assert all(s[0] % 16 == 0 and s[1] % 16 == 0 for _, sa, sb in kernels.calls
                   for s in (sa, sb))
    assert len(kernels.calls) == int(np.prod(got.shape[:-2]))


@pytest.mark.clause("BKD-MM-001")
def test_float64_operands_take_the_float64_product(device: DeviceBackend) -> None:
    """Inputs: float64 (3, 4) @ (4, 2) on the device backend under every route.
    Expected: NumPy's float64 matmul (the engine's float64 rule), float64. Pass: bits."""
    rng = np.random.default_rng(2)
    a, b = rng.standard_normal((3, 4)), rng.standard_normal((4, 2))
    got = device.to_numpy(device.matmul(device.asarray(a), device.asarray(b)))
    assert got.dtype == np.float64 and np.array_equal(_bits(got), _bits(a @ b))


@pytest.mark.clause("BKD-SCL-001")
def test_float64_gradients_are_unscaled_by_the_float32_reciprocal_as_torch(
        device: DeviceBackend) -> None:
    """Inputs: float64 and float32 gradients (one with an inf) unscaled on the device by
    scale 3 (1/3 is not a float32). Expected: the reference unscale's values: g times
    float32(1/3) widened (torch multiplies by the float32 reciprocal), and the found
    flag raised by the inf. Pass: bit patterns and the flag."""
    rng = np.random.default_rng(4)
    g64 = rng.standard_normal(9)
    g32 = rng.standard_normal(9).astype(np.float32)
    g32[3] = np.inf
    scaler = LossScaler(init_scale=3.0, arith="f64")
    (want64, want32), found = scaler.unscale([g64.copy(), g32.copy()])
    got = [device.asarray(g64.copy()), device.asarray(g32.copy())]
    row = device.scaler_row(initial_state(ScalerConfig(init_scale=3.0, arith="f64")))
    device.unscale_(got, row)
    assert np.array_equal(_bits(device.to_numpy(got[0])), _bits(want64))
    assert np.array_equal(_bits(device.to_numpy(got[1])), _bits(want32))
    assert found and int(device.to_numpy(row)[ST_FOUND]) == 1
