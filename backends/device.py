"""The device backend: the engine on an NVIDIA GPU through CuPy (``specs/backends.md``).

Numerics (what agrees with the NumPy reference, and how):

* ``quantize``: the CUDA kernels of ``backends/cuda`` (integer recipes on bit patterns,
  stochastic bits from the same counter-based hash): bitwise equal to
  :func:`ampref.quantize` for every format, rounding mode, ``saturate`` and
  ``subnormals`` setting (BKD-QNT-001).
* bfloat16 (and float16) operands: CuPy has no bfloat16 dtype, so low-precision values
  live, as in the reference, in float32 arrays holding format values; the matmuls get
  them as uint16 *codes* produced by the encode kernel and reinterpret them as
  ``__nv_bfloat16``/``__half`` (kernels) or ``CUDA_R_16BF``/``CUDA_R_16F`` (cuBLAS)
  (BKD-BF16-001).
* ``matmul(accumulation="exact")`` and ``sum``: one launch of the fused exact kernel
  (``exact_dot.cuh``: a float64 sum certified per element, the rest summed in a
  fixed-point accumulator, BKD-MM-005), or under the ``numpy`` kernel switch the exactly
  rounded algorithm of :mod:`ampref.accumulation.certified` run with CuPy arrays (float64
  cuBLAS GEMMs plus the certification passes); either way the reference's bits
  (BKD-MM-001, BKD-RED-001).
* ``matmul(accumulation="cublas")``: fp16/bf16 codes through ``cublasGemmEx`` with
  ``CUBLAS_COMPUTE_32F`` on Tensor Cores (not CuPy's batched matmul, which runs fp16 in
  float32). Not bit-exact: within the bound of BKD-MM-002.
* ``matmul(accumulation="tensorcore:h100"|"tensorcore:h200")`` with fp16/bf16 inputs:
  the WMMA chain kernel (``mma_chain.cu``) with a fixed ascending k order, which the
  block-FMA model predicts bit for bit (BKD-MM-003); the same kernel serves
  ``cublas:h100``/``cublas:h200`` for fp16/bf16 inputs (the library GEMM is that chain in
  float32, ACC-LIB-001). Other accumulation models are computed by the reference on the
  host (one copy each way). Names are parsed by the registry
  (:mod:`ampref.accumulation.registry`).
* Loss scaling: gradients are unscaled and checked by one kernel per tensor that raises
  a flag in the scaler's device row; one kernel applies the transition of
  :func:`ampref.scaling.machine.transition`, and one read of that row per step is the step's
  decision (BKD-SCL-001..002).

:class:`DeviceBackend` takes its array module and kernel set as arguments: with CuPy and
:class:`~ampref.backends.cuda_kernels.CudaKernels` it is the GPU backend; the test-suite
runs the same class with NumPy and the host build of the same kernels
(:class:`ampref.backends.hostbuild.HostKernels`).
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import numpy as np

from ampref.accumulation.registry import resolve
from ampref.accumulation import certified as _cert
from ampref.formats.table import Format, get_format
from ampref.formats.rounding import get_rounding
from ampref.scaling.machine import ScalerConfig, ScalerState
from ampref.kernels.srhash import keys, check_seed

from .fused import FusedOps
from .kernelsrc import (
    ST_FOUND,
    TILE,
    format_params,
    rounding_index,
    scaler_arrays,
    state_from_row,
    state_row,
    stochastic_keys,
)

__all__ = ["MMA_GPUS", "DeviceBackend", "KernelSet", "TensorCoreKernels"]

#: tensor-core models the chain kernel reproduces (the Hopper parts this backend targets)
MMA_GPUS = ("h100", "h200")
_MMA_FORMATS = ("float16", "bfloat16")


class KernelSet(Protocol):
    """What :class:`DeviceBackend` asks of its kernels (device arrays in and out): the CUDA
    kernels through CuPy (:class:`ampref.backends.cuda_kernels.CudaKernels`) or their host
    build driven with emulated device arrays in the tests."""

    name: str

    def quantize(self, x: Any, params: np.ndarray, rnd: int, sat: bool, subnormals: bool,
                 k1: int, k2: int, start: int = 0) -> Any: ...

    def encode16(self, x: Any, params: np.ndarray) -> Any: ...

    def random_bits(self, k1: int, k2: int, start: int, count: int) -> Any: ...

    def unscale_(self, g: Any, row: Any) -> None: ...

    def scaler_update(self, row: Any, cfg_d: np.ndarray, cfg_i: np.ndarray) -> None: ...

    def erfc(self, x: Any) -> Any: ...


@runtime_checkable
class TensorCoreKernels(Protocol):
    """A kernel set that also has the WMMA chain kernel and cuBLAS (a real GPU)."""

    def mma_chain(self, A: Any, B: Any, fmt_name: str) -> Any: ...

    def gemm_ex(self, A: Any, B: Any, fmt_name: str) -> Any: ...


class DeviceBackend:
    """The backend seam on a device array module (``xp``) and a kernel set."""

    def __init__(self, xp: Any, kernels: KernelSet, name: str = "cupy") -> None:
        self.xp = xp
        self.kernels = kernels
        self.name = name
        self.fused = FusedOps(xp, kernels, self.to_numpy)
        self._params: dict[str, np.ndarray] = {}

    # -- arrays ------------------------------------------------------------------------
    def asarray(self, x: Any, dtype: Any = None) -> Any:
        return self.xp.asarray(x, dtype=dtype)

    def to_numpy(self, x: Any) -> Any:
        return self.xp.asnumpy(x) if hasattr(self.xp, "asnumpy") else np.asarray(x)

    def device_name(self) -> str:
        """What runs the kernels: the GPU's name, or the kernel set's (a host build)."""
        name = getattr(self.kernels, "device_name", None)
        return str(name()) if callable(name) else f"{self.kernels.name} kernels"

    def device_ok(self) -> bool:
        check = getattr(self.kernels, "device_ok", None)
        return bool(check()) if callable(check) else True

    def _fmt_params(self, f: Format) -> np.ndarray:
        if f.name not in self._params:
            self._params[f.name] = format_params(f)
        return self._params[f.name]

    # -- quantize ------------------------------------------------------------------------
    def quantize(self, x: Any, fmt: Any, rounding: str = "nearest_even", *,
                 saturate: bool = False, subnormals: bool = True,
                 seed: int | None = None, start: int = 0) -> Any:
        """:func:`ampref.quantize` on the device: same arguments, same bits (BKD-QNT-001).
        ``start``: the flat index of the first element, whose stochastic words are those
        of indices start, start + 1, ... (a piece of a larger array rounds as it would
        in place).

        Raises:
            TypeError: ``x`` is not a float16/float32/float64 array.
            ValueError: unknown format or mode; stochastic rounding without a seed; a
                negative ``start``.
        """
        if isinstance(start, bool) or not isinstance(start, int) or start < 0:
            raise ValueError(f"start must be an int >= 0 (the flat index of the first "
                             f"element), got {start!r}")
        f = get_format(fmt)
        rnd = get_rounding(rounding)
        arr = self.xp.asarray(x)
        if arr.dtype == self.xp.float16:
            arr = arr.astype(self.xp.float32)  # exact widening
        if arr.dtype not in (self.xp.float32, self.xp.float64):
            raise TypeError(f"quantize expects a float16/float32/float64 array on the "
                            f"{self.name} backend, got dtype {arr.dtype}")
        k1, k2 = stochastic_keys(rnd, seed)
        if not f.kernel:
            return arr.copy()  # float64 holds every float32/float64 value exactly
        src = self.xp.ascontiguousarray(arr)
        out = self.kernels.quantize(src.reshape(-1), self._fmt_params(f), rounding_index(rnd),
                                    bool(saturate), bool(subnormals), k1, k2, start)
        return out.reshape(arr.shape)

    def random_bits(self, seed: int, start: int, count: int) -> Any:
        """srhash words for flat indices start..start+count-1 (BKD-QNT-002)."""
        k1, k2 = keys(check_seed(seed))
        if int(start) < 0 or int(count) < 0 or int(start) + int(count) > 2**63:
            raise ValueError(f"random_bits needs start and count >= 0 with start + count <= 2**63, "
                             f"got start={start}, count={count}")
        return self.kernels.random_bits(k1, k2, int(start), int(count))

    def encode16(self, x: Any, fmt: str | Format) -> Any:
        """uint16 codes of float32 values of a 16-bit format (nearest-even)."""
        f = get_format(fmt)
        if f.bits != 16:
            raise ValueError(f"encode16 needs a 16-bit format (float16, bfloat16), got {f.name}")
        src = self.xp.ascontiguousarray(self.xp.asarray(x, dtype=self.xp.float32))
        return self.kernels.encode16(src.reshape(-1), self._fmt_params(f)).reshape(src.shape)

    # -- matmul ----------------------------------------------------------------------------
    def matmul(self, a: Any, b: Any, accumulation: str = "exact", input_format: Any = None) -> Any:
        """float32 (..., M, K) @ (..., K, N) under an accumulation model (module docstring).

        Raises:
            ValueError: unknown model; ``cublas`` or a tensor-core kernel with inputs it
                does not take.
        """
        xp = self.xp
        if a.dtype == xp.float64 or b.dtype == xp.float64:
            return xp.matmul(xp.asarray(a, xp.float64), xp.asarray(b, xp.float64))
        fin = get_format(input_format) if input_format is not None else get_format("float32")
        model = resolve(accumulation)  # the registry: one parse of every name
        if model.kernel == "exact":
            fused = self.fused.matmul(a, b)
            return fused if fused is not None else \
                _cert.matmul_f32(a, b, fin.precision_bits, xp=xp)
        if model.kernel == "cublas":
            return self._batched(a, b, lambda A, B: self._gemm_ex(A, B, fin))
        # the chain kernel computes tensorcore:<gpu>, and cublas:<gpu> for 16-bit inputs
        # (the library GEMM is that chain in float32: ACC-LIB-001)
        # (one slice: a split-K library model runs on the host reference)
        if (model.kernel in ("tensorcore", "library") and model.gpu in MMA_GPUS
                and model.split_k == 1
                and fin.name in _MMA_FORMATS and isinstance(self.kernels, TensorCoreKernels)):
            return self._batched(a, b, lambda A, B: self._mma(A, B, fin))
        # every other model: the reference on the host (one copy each way)
        from .numpy_backend import BACKEND as REF

        host = REF.matmul(self.to_numpy(a), self.to_numpy(b), accumulation, input_format)
        return xp.asarray(host)

    def _batched(self, a: Any, b: Any, two_d: Any) -> Any:
        xp = self.xp
        lead = tuple(np.broadcast_shapes(tuple(a.shape[:-2]), tuple(b.shape[:-2])))
        if not lead:  # one GEMM: its own output, not a copy into another (M x N x 4 bytes)
            return two_d(a, b)
        A = xp.broadcast_to(a, lead + tuple(a.shape[-2:]))
        B = xp.broadcast_to(b, lead + tuple(b.shape[-2:]))
        out = xp.empty(lead + (a.shape[-2], b.shape[-1]), dtype=xp.float32)
        for ix in np.ndindex(*lead):
            out[ix] = two_d(A[ix], B[ix])
        return out

    def _padded_codes(self, x: Any, rows: int, cols: int, fmt: Format) -> Any:
        xp = self.xp
        codes = xp.zeros((rows, cols), dtype=xp.uint16)  # code 0 is +0 in fp16 and bf16
        codes[:x.shape[0], :x.shape[1]] = self.encode16(x, fmt)
        return codes

    def _mma(self, a: Any, b: Any, fmt: Format) -> Any:
        """The tensor-core chain kernel on zero-padded codes (BKD-MM-003)."""
        M, K = a.shape
        N = b.shape[1]

        def up(n: int) -> int:  # the next multiple of the tile, at least one tile
            return max(TILE, -(-n // TILE) * TILE)

        kernels = self.kernels
        assert isinstance(kernels, TensorCoreKernels)  # matmul routes here only then
        A = self._padded_codes(a, up(M), up(K), fmt)
        B = self._padded_codes(b, up(K), up(N), fmt)
        # contiguous (a copy only where padding was cut off), as a GEMM result elsewhere
        return self.xp.ascontiguousarray(kernels.mma_chain(A, B, fmt.name)[:M, :N])

    def _gemm_ex(self, a: Any, b: Any, fmt: Format) -> Any:
        if fmt.name not in _MMA_FORMATS:
            raise ValueError(f"accumulation='cublas' takes float16 or bfloat16 inputs, got "
                             f"{fmt.name}")
        if not isinstance(self.kernels, TensorCoreKernels):
            raise ValueError(f"accumulation='cublas' needs cuBLAS: the {self.kernels.name!r} "
                             "kernel set has none")
        return self.kernels.gemm_ex(self.encode16(a, fmt), self.encode16(b, fmt), fmt.name)

    def adam_update(self, w: Any, g: Any, m: Any, v: Any, constants: tuple[Any, ...], *,
                    decoupled: bool, decay: bool) -> tuple[Any, Any, Any] | None:
        """(new w, m, v) of one Adam/AdamW step in one launch (BKD-OPT-001), or None: the
        caller then runs the specification's operations (:class:`~.fused.FusedOps`)."""
        return self.fused.adam_update(w, g, m, v, constants, decoupled=decoupled, decay=decay)

    def rounding_counts(self, raw: Any, rounded: Any) -> Any | None:
        """Device int64 [underflow, overflow] of rounded gradients in one launch
        (BKD-STA-001), or None: the caller counts with array operations."""
        return self.fused.rounding_counts(raw, rounded)

    def grad_counts(self, g: Any, scale: float) -> Any | None:
        """Device int64 [nonzero, nonzero below 2^-25 once scaled] in one launch, or None."""
        return self.fused.grad_counts(g, scale)

    def erfc(self, x: Any) -> Any:
        """erfc of a float64 device array, by the kernel set (cupyx on a GPU)."""
        return self.kernels.erfc(x)

    # -- reductions ---------------------------------------------------------------------------
    def sum(self, x: Any, axis: Any = None, keepdims: bool = False) -> Any:
        """Exactly rounded sums (order-free, BKD-RED-001); float64 sums in float64."""
        xp = self.xp
        if x.dtype == xp.float64:
            return xp.sum(x, axis=axis, keepdims=keepdims)
        fused = self.fused.sum(x, axis, keepdims)
        return fused if fused is not None else _cert.sum_f32(x, axis, keepdims, xp=xp)

    def segment_sum(self, x: Any, starts: Any) -> Any:
        """Exactly rounded segment sums (``add.reduceat``, CuPy >= 12; BKD-RED-002);
        float64 in float64."""
        xp = self.xp
        if x.dtype == xp.float64:
            return xp.add.reduceat(x, xp.asarray(starts), axis=0)
        fused = self.fused.segment_sum(x, starts)
        # the specification also names bad starts
        return fused if fused is not None else \
            _cert.segment_sum_f32(x, xp.asarray(starts), xp=xp)

    # -- loss scaling ------------------------------------------------------------------------
    def scaler_row(self, state: ScalerState) -> Any:
        """A device copy of the scaler state (found flag cleared) for one step."""
        return self.xp.asarray(state_row(state))

    def unscale_(self, grads: list[Any], row: Any) -> None:
        """Unscale every gradient in place; non-finite values raise the row's flag.

        No value comes back to the host (BKD-SCL-001)."""
        xp = self.xp
        for g in grads:
            if g is None:
                continue
            if g.dtype == xp.float32 and g.flags.c_contiguous:
                self.kernels.unscale_(g.reshape(-1), row)
            else:  # float64 gradients: torch's rule in float64, flag set without a sync
                # inv = float32(1 / float64(scale)), as the float32 kernel (and torch)
                inv = (1.0 / row[:1].view(xp.float64)).astype(xp.float32).astype(g.dtype)
                bad = xp.logical_not(xp.isfinite(g)).any()
                g *= inv
                row[ST_FOUND:ST_FOUND + 1] |= bad.astype(xp.int64)

    def set_found(self, row: Any) -> None:
        self.xp.asarray(row)[ST_FOUND:ST_FOUND + 1] = 1

    def scaler_update(self, row: Any, config: ScalerConfig) -> tuple[ScalerState, bool, str]:
        """Run the transition on the device, then read the row once (BKD-SCL-002)."""
        cfg_d, cfg_i = scaler_arrays(config)
        self.kernels.scaler_update(row, cfg_d, cfg_i)
        return state_from_row(self.to_numpy(row))

    def read_found(self, row: Any) -> bool:
        return bool(self.to_numpy(row)[ST_FOUND])

    def __repr__(self) -> str:
        return f"DeviceBackend({self.name!r}, kernels={getattr(self.kernels, 'name', '?')!r})"
