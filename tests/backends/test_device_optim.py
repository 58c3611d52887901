"""The device backend's one-launch Adam/AdamW update (BKD-OPT-001, ENG-OPT-006): the
kernel of ``backends/cuda/optim.cuh``, run as its host build on strict device arrays,
against the NumPy specification (``Adam._update`` under ``use_kernels("numpy")``)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import strictxp
from strict_kernels import StrictHostKernels

import ampref
from ampref import backends, optim
from ampref.backends import hostbuild
from ampref.backends.device import DeviceBackend
from ampref.backends.fused import OptimKernels

pytestmark = pytest.mark.skipif(hostbuild.host_compiler() is None,
                                reason="no C++ compiler for the host build of the kernels")


@pytest.fixture(scope="module")
def device() -> DeviceBackend:
    be = DeviceBackend(strictxp, StrictHostKernels(hostbuild.HostKernels()), "cupy-host-optim")
    backends.register("cupy-host-optim", be)
    return be


def _values(dtype: Any, n: int, seed: int) -> np.ndarray:
    """Normal values over a wide range, with zeros, subnormals, +-inf and NaN among them."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(n) * 2.0 ** rng.integers(-30, 30, n)
    x[:8] = [0.0, -0.0, 1e-40, -1e-45, np.inf, -np.inf, np.nan, 3e38]
    return x.astype(dtype)


def _steps(backend: str, cls: Any, kw: dict[str, Any], dtype: Any, kernels: str) -> list[Any]:
    """Three optimizer steps on one parameter (gradients with specials) on ``backend``."""
    be = backends.get(backend)
    w0 = _values(dtype, 300, 1)
    w0[:8] = 1.0  # the weights finite; the gradients carry the specials
    p = ampref.tensor(w0, "float32" if dtype == np.float32 else "float64", requires_grad=True,
                      backend=backend)
    opt = cls([p], lr=1e-2, **kw)
    out = []
    with ampref.use_kernels(kernels):
        for s in range(3):
            p.grad = be.asarray(_values(dtype, 300, 10 + s))
            opt.step()
            st = opt.state[0]
            out += [be.to_numpy(x) for x in (p.data, st["exp_avg"], st["exp_avg_sq"])]
    return out


@pytest.mark.clause("BKD-OPT-001", "ENG-OPT-006")
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("cls,kw", [(optim.AdamW, {}), (optim.AdamW, {"weight_decay": 0.0}),
                                    (optim.Adam, {"weight_decay": 0.1}), (optim.Adam, {})])
def test_the_one_launch_adam_update_equals_the_specification_bit_for_bit(
        device: DeviceBackend, dtype: Any, cls: Any, kw: dict[str, Any]) -> None:
    """Inputs: three Adam/AdamW steps (decoupled or not, with and without weight decay)
    on a float32 and a float64 parameter of 300 wide-range values whose gradients hold
    0, -0, subnormals, +-inf, NaN and 3e38. Expected: weights, exp_avg and exp_avg_sq of
    the NumPy specification's operations on the host. Pass: bitwise equal (NaN where the
    specification has NaN)."""
    assert isinstance(device.kernels, OptimKernels)
    want = _steps("numpy", cls, kw, dtype, "numpy")
    got = _steps("cupy-host-optim", cls, kw, dtype, "compiled")
    u = np.uint32 if dtype == np.float32 else np.uint64
    for k, (g, w) in enumerate(zip(got, want, strict=True)):
        assert g.dtype == w.dtype
        nan = np.isnan(w)
        assert np.array_equal(np.isnan(g), nan), f"array {k}: NaN positions differ"
        bad = np.flatnonzero(g.view(u)[~nan] != w.view(u)[~nan])
        width = 2 * g.itemsize
        assert not bad.size, (f"array {k}: {bad.size} differ, first got "
                              f"{int(g.view(u)[~nan][bad[0]]):0{width}x}, want "
                              f"{int(w.view(u)[~nan][bad[0]]):0{width}x}")


@pytest.mark.clause("BKD-OPT-001")
def test_the_kernel_switch_and_mixed_dtypes_run_the_specifications_operations(
        device: DeviceBackend, monkeypatch: pytest.MonkeyPatch) -> None:
    """Inputs: an AdamW step on the device with the fused kernel made to fail, under
    ``use_kernels("numpy")``, and ``adam_update`` called with a float64 gradient for
    float32 weights. Expected: the step runs (specification's operations); the mixed
    call returns None; under ``compiled`` the kernel is called. Pass: all three."""
    def boom(*args: Any) -> Any:
        raise RuntimeError("fused adam called")
    monkeypatch.setattr(device.kernels, "adam", boom)
    _steps("cupy-host-optim", optim.AdamW, {}, np.float32, "numpy")
    w = strictxp.asarray(np.ones(3, np.float32))
    g64 = strictxp.asarray(np.ones(3, np.float64))
    with ampref.use_kernels("compiled"):
        assert device.adam_update(w, g64, w, w, (np.float32(1),) * 9, decoupled=True,
                                  decay=True) is None
        with pytest.raises(RuntimeError, match="fused adam"):
            _steps("cupy-host-optim", optim.AdamW, {}, np.float32, "compiled")
